"""Fusion pass: merge ``Add -> ReLU`` into one step.

Matches ``Add -> ReLU / Activation(relu|relu6)`` (float32, plain calls, the sum read by nothing else)
that the residual pass left. Produces ``modelgraph/AddActivation`` under the Add's name: it sums and
activates chunk by chunk, in place into an input that is a fresh conv/Dense output read by nothing
else (``overwrite``).
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from modelgraph.graph import ModelGraph, Node, TensorRef
from modelgraph.runner.fast.fused import ADD_ACTIVATION
from modelgraph.runner.passes._graph import (
    Rewrite,
    fresh_output,
    is_float32,
    plain_add,
    relu_name,
)


def merge_add_activations(graph: ModelGraph) -> ModelGraph:
    """Merge ``Add`` -> ``ReLU``/``relu6`` into one step that sums and activates chunk by chunk, in
    place into an input that is a fresh conv/dense output read by nothing else."""
    rewrite = Rewrite.of(graph)
    for node in graph.nodes:
        add = rewrite.layer(node.layer)
        follower = rewrite.reader(node) if plain_add(add, node) else None
        name = relu_name(rewrite.layer(follower.layer)) if follower is not None else None
        if follower is None or name is None:
            continue
        config = {"activation": name, "overwrite": _dying_fresh_input(rewrite, node)}
        rewrite.replace_layer(replace(add, class_name=ADD_ACTIVATION, config=MappingProxyType(config)))
        rewrite.remove(follower.layer, TensorRef(add.name, node.index, 0))
    return rewrite.result()


def _dying_fresh_input(rewrite: Rewrite, node: Node) -> int | None:
    """The index of an input the sum may overwrite: a float32 conv/dense output, read only by this
    node (once), no model output. None when there is none."""
    refs = list(node.args[0])
    for i, ref in enumerate(refs):
        producer = rewrite.layer(ref.layer)
        if not fresh_output(producer) or producer.node_count != 1:
            continue
        if sum(r == ref for r in refs) != 1 or not rewrite.readers.only(node, ref):
            continue
        if producer.config.get("data_format", "channels_last") not in (None, "channels_last"):
            continue
        if is_float32(producer):
            return i
    return None
