"""Fusion pass: merge ``Add -> ReLU`` into one step.

Matches ``Add -> ReLU / Activation(relu|relu6)`` (float32, plain calls, the sum read by nothing else)
that the residual pass left. Produces ``modelgraph/AddActivation`` under the Add's name: it sums and
activates chunk by chunk, in place into an input that is a fresh conv/Dense output read by nothing
else (``overwrite``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType

from modelgraph.graph import Layer, ModelGraph, Node, TensorRef
from modelgraph.runner.fast.fused import ADD_ACTIVATION
from modelgraph.runner.passes._graph import (
    Readers,
    drop,
    fresh_output,
    is_float32,
    plain_add,
    plain_call,
    relu_name,
)


def merge_add_activations(graph: ModelGraph) -> ModelGraph:
    """Merge ``Add`` -> ``ReLU``/``relu6`` into one step that sums and activates chunk by chunk, in
    place into an input that is a fresh conv/dense output read by nothing else."""
    readers = Readers.of(graph)
    layers = {lyr.name: lyr for lyr in graph.layers}
    removed: dict[str, TensorRef] = {}
    for node in graph.nodes:
        add = layers[node.layer]
        if not plain_add(add, node):
            continue
        follower = readers.single(node.key)
        if follower is None or not plain_call(follower):
            continue
        name = relu_name(layers[follower.layer])
        if name is None:
            continue
        config = {
            "activation": name,
            "overwrite": _dying_fresh_input(readers, node, layers),
        }
        layers[add.name] = replace(add, class_name=ADD_ACTIVATION, config=MappingProxyType(config))
        removed[follower.layer] = TensorRef(add.name, node.index, 0)
    if not removed:
        return graph
    return drop(graph, layers, removed)


def _dying_fresh_input(readers: Readers, node: Node, layers: Mapping[str, Layer]) -> int | None:
    """The index of an input the sum may overwrite: a float32 conv/dense output, read only by this
    node (once), no model output. None when there is none."""
    refs = list(node.args[0])
    for i, ref in enumerate(refs):
        producer = layers.get(ref.layer)
        if producer is None or not fresh_output(producer) or producer.node_count != 1:
            continue
        if sum(r == ref for r in refs) != 1 or not readers.only(node, ref):
            continue
        if producer.config.get("data_format", "channels_last") not in (None, "channels_last"):
            continue
        if is_float32(producer):
            return i
    return None
