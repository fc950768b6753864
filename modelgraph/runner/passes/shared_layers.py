"""Fusion pass: one call per computation.

Matches two or more calls of layers whose entries say their output depends on nothing but their
input and config (``fusion.shareable``: the poolings), of the same class and config (the name
aside), on the same tensor, each layer called once and plainly, none a model output. Keeps the first
in graph order; the others' readers read its output. Keras's NASNetMobile pools the same tensor the
same way twice in every cell: 12 average poolings of its normal cells and 4 max poolings of its
reduction cells compute a tensor already computed.

Runs first, before the zero paddings merge into the poolings that read them (each merged step then
carries its pooling's own config, name included).
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping
from typing import Any

from modelgraph.graph import Layer, ModelGraph, Node
from modelgraph.runner.passes._graph import fusion, share_calls


def merge_shared_layers(graph: ModelGraph) -> ModelGraph:
    """Keep one of the calls computing the same tensor the same way; the others' readers read it."""
    return share_calls(graph, _computation)


def _computation(layer: Layer, node: Node) -> Hashable | None:
    """What a weightless layer of a shareable class called once computes: its class, input and config
    without the name (None for any other layer)."""
    if not (
        fusion(layer).shareable
        and layer.kind == "layer"
        and layer.subgraph is None
        and not layer.weights
        and layer.node_count == 1
    ):
        return None
    return (layer.key, node.args[0], _config_text(layer.config))


def _config_text(config: Mapping[str, Any]) -> str:
    """The config without the layer's name, as canonical text (configs hold lists and dicts)."""
    return json.dumps({k: v for k, v in config.items() if k != "name"}, sort_keys=True, default=repr)
