"""Fusion pass: apply a ReLU and zero padding as part of the SeparableConv2D that reads them.

Matches ``[ReLU / relu6 ->] [ZeroPadding2D ->] SeparableConv2D`` with at least one of the two
(NASNet's branches: ``Activation("relu") -> [ZeroPadding2D ->] SeparableConv2D``), channels-last,
float32, plain calls, each intermediate read by nothing else (the classes by their catalogue
entries' ``fusion.activation``, ``fusion.zero_padding`` and ``fusion.separable``). Produces
``modelgraph/PreparedSeparable`` under the conv's name and at its place, reading the chain's input:
the activation and the padding are applied to the depthwise conv's row slabs while they are in
cache, and neither the activated nor the padded tensor is written.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from modelgraph.graph import Layer, ModelGraph, Node
from modelgraph.runner.fast.fused import PREPARED_SEPARABLE
from modelgraph.runner.passes._graph import (
    Rewrite,
    fusion,
    plain_call,
    relu_name,
    single_call_float32,
    zero_pads,
)


def merge_separable_inputs(graph: ModelGraph) -> ModelGraph:
    """Merge the ReLU and / or ZeroPadding2D before a SeparableConv2D into it (see the module
    docstring)."""
    rewrite = Rewrite.of(graph)
    for node in graph.nodes:
        conv = rewrite.layer(node.layer)
        if not (_separable_2d(conv) and plain_call(node)):
            continue
        source = node
        merged: list[str] = []
        before = _sole_producer(rewrite, node)
        pads = zero_pads(rewrite.layer(before.layer)) if before is not None else None
        if before is not None and pads is not None:
            merged.append(before.layer)
            source = before
            before = _sole_producer(rewrite, before)
        activation = relu_name(rewrite.layer(before.layer)) if before is not None else None
        if before is not None and activation is not None:
            merged.append(before.layer)
            source = before
        if not merged:
            continue
        config = MappingProxyType({"activation": activation, "pads": pads, "layer": conv.config})
        weights = tuple(replace(w, name=f"layer/{w.name}") for w in conv.weights)
        rewrite.replace_layer(
            replace(conv, class_name=PREPARED_SEPARABLE, config=config, weights=weights),
            call=replace(node, args=source.args, inputs=source.inputs),
        )
        for name in merged:
            rewrite.remove(name)
    return rewrite.result()


def _sole_producer(rewrite: Rewrite, node: Node) -> Node | None:
    """The plain single-call float32 node producing ``node``'s one input, when ``node`` is its only
    reader and no earlier merge took it."""
    if len(node.inputs) != 1:
        return None
    ref = node.inputs[0]
    producer = rewrite.producer(ref.layer)
    if producer is None or rewrite.removed(ref.layer) or ref.node_index != 0 or ref.tensor_index != 0:
        return None
    if not (single_call_float32(rewrite.layer(ref.layer)) and plain_call(producer)):
        return None
    return producer if rewrite.readers.single(producer.key) == node else None


def _separable_2d(layer: Layer) -> bool:
    """A channels-last float32 SeparableConv2D-like layer (its entry's ``fusion.separable``) called once."""
    return (
        fusion(layer).separable
        and single_call_float32(layer)
        and layer.config.get("data_format", "channels_last") in (None, "channels_last")
    )
