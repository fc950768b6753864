"""Fusion pass: merge a residual sum into the step producing one of its terms.

Matches ``Add(a, b) [-> ReLU / relu6]`` where ``a`` comes from a linear channels-last float32 Conv2D
(groups 1) or an inverted bottleneck without a residual yet, read by nothing else. Produces, under the
Add's name and at its place, ``modelgraph/ConvResidual`` (or the bottleneck with ``residual`` set)
reading the producer's input and ``b``: the sum and activation run in its epilogue, block by block.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from modelgraph.graph import Layer, ModelGraph, Node, TensorRef
from modelgraph.runner.activations import activation_name
from modelgraph.runner.fast.fused import CONV_RESIDUAL, INVERTED_BOTTLENECK
from modelgraph.runner.passes._graph import (
    Rewrite,
    fusion,
    plain_add,
    plain_call,
    relu_name,
    single_call_float32,
)


def merge_residual_sums(graph: ModelGraph) -> ModelGraph:
    """Merge ``Add(a, b)`` [-> ReLU / relu6] into the step producing ``a`` when that is a linear
    channels-last Conv2D or an inverted bottleneck whose output nothing else reads: the sum (and the
    activation) then run in its epilogue, block by block (see ``fused.conv_residual``).

    The merged step takes the Add's name and place in the graph (after both of its inputs, whatever
    the node order), reads the producer's input and ``b``, and carries the producer's weights."""
    rewrite = Rewrite.of(graph)
    for node in graph.nodes:
        add = rewrite.layer(node.layer)
        if not plain_add(add, node) or len(node.args[0]) != 2:
            continue
        refs = list(node.args[0])
        for i, ref in enumerate(refs):
            source, other = rewrite.producer(ref.layer), refs[1 - i]
            if source is None or other == ref or rewrite.removed(ref.layer):
                continue
            producer = rewrite.layer(ref.layer)
            if not _residual_producer(producer, source) or not rewrite.readers.only(node, ref):
                continue
            follower = rewrite.reader(node)
            relu = relu_name(rewrite.layer(follower.layer)) if follower is not None else None
            merged = _merged_residual(producer, relu or "linear")
            inputs = (source.args[0], other)
            rewrite.replace_layer(
                replace(add, class_name=merged.class_name, config=merged.config, weights=merged.weights),
                call=replace(node, args=inputs, kwargs=MappingProxyType({}), inputs=inputs),
            )
            rewrite.remove(producer.name)
            if relu is not None and follower is not None:
                rewrite.remove(follower.layer, TensorRef(add.name, node.index, 0))
            break
    return rewrite.result()


def _residual_producer(layer: Layer, node: Node) -> bool:
    """A step whose epilogue can take a residual sum: a linear channels-last float32 Conv2D (its
    entry's ``fusion.residual``; groups 1) or an inverted bottleneck without one yet, called once,
    plainly."""
    if not (single_call_float32(layer) and plain_call(node)):
        return False
    if layer.class_name == INVERTED_BOTTLENECK:
        return layer.config.get("residual") is None
    return (
        fusion(layer).residual
        and layer.config.get("data_format", "channels_last") in (None, "channels_last")
        and activation_name(layer.config.get("activation")) == "linear"
        and (layer.config.get("groups") or 1) == 1
        and {w.name for w in layer.weights} >= {"kernel"}
    )


def _merged_residual(producer: Layer, activation: str) -> Layer:
    """The producer as a step that also adds a residual and applies ``activation``."""
    if producer.class_name == INVERTED_BOTTLENECK:
        config = {**producer.config, "residual": activation}
        return replace(producer, config=MappingProxyType(config))
    weights = tuple(replace(w, name=f"conv/{w.name}") for w in producer.weights)
    config = {"conv": producer.config, "activation": activation}
    return replace(producer, class_name=CONV_RESIDUAL, config=MappingProxyType(config), weights=weights)
