"""Fusion pass: one ReLU per tensor.

Matches two or more ``ReLU / Activation(relu|relu6)`` layers (float32, plain calls, called once) that
activate the same tensor the same way, none a model output. Keeps the first in graph order; the
others' readers read its output. Keras's NASNetMobile activates every cell's output twice, once for
the next cell and once for the cell after it (15 tensors, up to 0.8 MiB each at batch 1).

Runs after the passes that merge a ReLU into the one layer reading it (a separable conv activates its
own row slabs): only the ReLUs those left are shared.
"""

from __future__ import annotations

from collections.abc import Hashable

from modelgraph.graph import Layer, ModelGraph, Node
from modelgraph.runner.passes._graph import relu_name, share_calls


def merge_shared_activations(graph: ModelGraph) -> ModelGraph:
    """Keep one of the ReLU / relu6 layers activating the same tensor; the others' readers read it."""
    return share_calls(graph, _activation)


def _activation(layer: Layer, node: Node) -> Hashable | None:
    """The input and the activation of a ReLU / relu6 layer called once (None for anything else)."""
    name = relu_name(layer)
    return None if name is None else (node.args[0], name)
