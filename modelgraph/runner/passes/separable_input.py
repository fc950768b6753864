"""Fusion pass: apply a ReLU and zero padding as part of the SeparableConv2D that reads them.

Matches ``[ReLU / relu6 ->] [ZeroPadding2D ->] SeparableConv2D`` with at least one of the two
(NASNet's branches: ``Activation("relu") -> [ZeroPadding2D ->] SeparableConv2D``), channels-last,
float32, plain calls, each intermediate read by nothing else. Produces
``modelgraph/PreparedSeparable`` under the conv's name and at its place, reading the chain's input:
the activation and the padding are applied to the depthwise conv's row slabs while they are in
cache, and neither the activated nor the padded tensor is written.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from modelgraph.errors import UnsupportedLayerError
from modelgraph.graph import Layer, ModelGraph, Node, TensorRef
from modelgraph.runner.fast.fused import PREPARED_SEPARABLE
from modelgraph.runner.kernels import conv as reference_conv
from modelgraph.runner.passes._graph import (
    Readers,
    drop,
    plain_call,
    relu_name,
    single_call_float32,
    zero_pads,
)
from modelgraph.runner.registry import get_kernel


def merge_separable_inputs(graph: ModelGraph) -> ModelGraph:
    """Merge the ReLU and / or ZeroPadding2D before a SeparableConv2D into it (see the module
    docstring)."""
    readers = Readers.of(graph)
    layers = {lyr.name: lyr for lyr in graph.layers}
    producers = {node.layer: node for node in graph.nodes}
    removed: dict[str, TensorRef | None] = {}
    calls: dict[str, Node] = {}
    for node in graph.nodes:
        conv = layers[node.layer]
        if not (_separable_2d(conv) and plain_call(node)):
            continue
        source = node
        pads = None
        merged: list[str] = []
        before = _sole_producer(node, layers, producers, readers, removed)
        if before is not None:
            pads = zero_pads(layers[before.layer])
            if pads is not None:
                merged.append(before.layer)
                source = before
                before = _sole_producer(before, layers, producers, readers, removed)
        activation = None
        if before is not None:
            activation = relu_name(layers[before.layer])
            if activation is not None:
                merged.append(before.layer)
                source = before
        if not merged:
            continue
        config = {"activation": activation, "pads": pads, "layer": conv.config}
        weights = tuple(replace(w, name=f"layer/{w.name}") for w in conv.weights)
        layers[conv.name] = replace(
            conv, class_name=PREPARED_SEPARABLE, config=MappingProxyType(config), weights=weights
        )
        calls[conv.name] = replace(node, args=source.args, inputs=source.inputs)
        for name in merged:
            removed[name] = None
    if not removed:
        return graph
    return drop(graph, layers, removed, calls)


def _sole_producer(
    node: Node,
    layers: dict[str, Layer],
    producers: dict[str, Node],
    readers: Readers,
    removed: dict[str, TensorRef | None],
) -> Node | None:
    """The plain single-call float32 node producing ``node``'s one input, when ``node`` is its only
    reader and no earlier merge took it."""
    if len(node.inputs) != 1:
        return None
    ref = node.inputs[0]
    producer = producers.get(ref.layer)
    if producer is None or ref.layer in removed or ref.node_index != 0 or ref.tensor_index != 0:
        return None
    if not (single_call_float32(layers[ref.layer]) and plain_call(producer)):
        return None
    return producer if readers.single(producer.key) == node else None


def _separable_2d(layer: Layer) -> bool:
    """A channels-last float32 SeparableConv2D (the layer the 2-D separable kernel computes) called once."""
    try:
        computed = get_kernel(layer.class_name, layer.name) is reference_conv.separable_conv2d
    except UnsupportedLayerError:
        return False
    return (
        computed
        and single_call_float32(layer)
        and layer.config.get("data_format", "channels_last") in (None, "channels_last")
    )
