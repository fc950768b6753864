"""Fusion pass: read zero padding as part of the op that follows it.

Matches ``ZeroPadding2D -> Conv2D (groups 1) | DepthwiseConv2D | MaxPooling2D | AveragePooling2D
(pools: valid, pads narrower than the pool)``, channels-last float32, every reader of the padded tensor
one of those (NASNetMobile's reduction cells pad once for two max pools and an average pool). The
catalogue entries decide: ``fusion.zero_padding`` (the pad), ``fusion.takes_zero_padding`` and
``padded_kernel`` (the op). Produces ``modelgraph/ZeroPadded`` under each op's name, reading the
padding's input: the padded copy of the tensor is never made.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from modelgraph import catalogue
from modelgraph.graph import Layer, ModelGraph
from modelgraph.runner.fast.fused import ZERO_PADDED
from modelgraph.runner.passes._graph import (
    Rewrite,
    plain_call,
    single_call_float32,
    zero_pads,
)


def fold_zero_paddings(graph: ModelGraph) -> ModelGraph:
    """Merge ``ZeroPadding2D`` into the Conv2D (groups 1), DepthwiseConv2D and valid pooling layers
    (pads narrower than the pool) reading it, when every reader is one: each pads as it reads
    (``fused.zero_padded``), and the padded copy of the tensor is never made. Each merged step keeps
    its op's name and place."""
    rewrite = Rewrite.of(graph)
    for node in graph.nodes:
        pads = zero_pads(rewrite.layer(node.layer))
        readers = rewrite.all_readers(node) if pads is not None and plain_call(node) else None
        if pads is None or readers is None:
            continue
        ops = [rewrite.layer(reader.layer) for reader in readers]
        if not all(single_call_float32(op) and _pads_into(op, pads) for op in ops):
            continue
        for op, reader in zip(ops, readers, strict=True):
            config = {"pads": pads, "class_name": op.class_name, "layer": op.config}
            weights = tuple(replace(w, name=f"layer/{w.name}") for w in op.weights)
            merged = replace(op, class_name=ZERO_PADDED, config=MappingProxyType(config), weights=weights)
            rewrite.replace_layer(merged, call=replace(reader, args=node.args, inputs=node.inputs))
        rewrite.remove(node.layer)
    return rewrite.result()


def _pads_into(layer: Layer, pads: list[list[int]]) -> bool:
    """Whether ``layer`` can take explicit zero padding ``pads`` into its own reading of the input:
    channels-last, and its entry both accepts them (``fusion.takes_zero_padding``) and has a kernel
    that reads them (``padded_kernel``)."""
    if layer.config.get("data_format", "channels_last") not in (None, "channels_last"):
        return False
    spec = catalogue.spec_for(layer.key)
    takes = spec.fusion.takes_zero_padding if spec is not None and spec.fusion is not None else None
    return takes is not None and callable(spec.padded_kernel) and bool(takes(layer.config, pads))
