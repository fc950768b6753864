"""Fusion pass: one ReLU per tensor.

Matches two or more ``ReLU / Activation(relu|relu6)`` layers (float32, plain calls, called once) that
activate the same tensor the same way, none a model output. Keeps the first in graph order; the
others' readers read its output. Keras's NASNetMobile activates every cell's output twice, once for
the next cell and once for the cell after it (15 tensors, up to 0.8 MiB each at batch 1).

Runs after the passes that merge a ReLU into the one layer reading it (a separable conv activates its
own row slabs): only the ReLUs those left are shared.
"""

from __future__ import annotations

from modelgraph.graph import ModelGraph, TensorRef
from modelgraph.runner.passes._graph import Rewrite, plain_call, relu_name


def merge_shared_activations(graph: ModelGraph) -> ModelGraph:
    """Keep one of the ReLU / relu6 layers activating the same tensor; the others' readers read it."""
    rewrite = Rewrite.of(graph)
    kept: dict[tuple[TensorRef, str], str] = {}
    for node in graph.nodes:
        name = relu_name(rewrite.layer(node.layer)) if plain_call(node) else None
        if name is None or node.key in rewrite.readers.outputs:
            continue
        first = kept.setdefault((node.args[0], name), node.layer)
        if first != node.layer:
            rewrite.remove(node.layer, TensorRef(first, 0, 0))
    return rewrite.result()
