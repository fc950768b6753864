"""Fusion pass: read zero padding as part of the op that follows it.

Matches ``ZeroPadding2D -> Conv2D (groups 1) | DepthwiseConv2D | MaxPooling2D (valid, pads narrower
than the pool)``, channels-last float32, the padded tensor read by nothing else. The catalogue entries
decide: ``fusion.zero_padding`` (the pad), ``fusion.takes_zero_padding`` and ``padded_kernel`` (the op). Produces
``modelgraph/ZeroPadded`` under the op's name, reading the padding's input: the padded copy of the
tensor is never made.
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
    """Merge ``ZeroPadding2D`` into the one Conv2D (groups 1), DepthwiseConv2D or valid MaxPooling2D
    (pads narrower than its pool) reading it: that op pads as it reads (``fused.zero_padded``), and
    the padded copy of the tensor is never made. The merged step keeps the op's name and place."""
    rewrite = Rewrite.of(graph)
    for node in graph.nodes:
        pads = zero_pads(rewrite.layer(node.layer))
        reader = rewrite.reader(node) if pads is not None and plain_call(node) else None
        if pads is None or reader is None:
            continue
        op = rewrite.layer(reader.layer)
        if not (single_call_float32(op) and _pads_into(op, pads)):
            continue
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
