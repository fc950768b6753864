"""Inference fusion: rewrite the graph the runner executes so that fewer passes go over memory.

A rewrite of the :class:`ModelGraph` the runner executes (the loaded graph is not changed): nested
models first, then these passes in order, each a module of :mod:`modelgraph.runner.passes` that says
what it matches and what it produces:

1. ``shared_layers``: calls of a pooling (any shareable class) of the same config on the same tensor
   as one.
2. ``fold_batchnorm``: ``Conv*/DepthwiseConv*/Dense (linear) -> BatchNormalization -> ReLU`` folded
   into the producer's weights and activation.
3. ``bottleneck``: ``[1x1 expand ->] [pad ->] depthwise -> 1x1 project`` as one inverted-bottleneck step
   run band by band in cache.
4. ``squeeze_excite``: ``Multiply([a, s]) -> Conv2D 1x1`` as one step that scales the kernel's rows per
   image instead of the tensor.
5. ``separable_input``: ``[ReLU ->] [ZeroPadding2D ->] SeparableConv2D`` as one step that activates and
   pads the depthwise conv's row slabs.
6. ``residual``: ``Add(a, b) [-> ReLU]`` merged into the linear Conv2D or inverted bottleneck producing
   ``a`` (the sum and activation run in its epilogue).
7. ``zero_padding``: ``ZeroPadding2D -> Conv2D / DepthwiseConv2D / MaxPooling2D / AveragePooling2D``
   as one step that pads as it reads (into every reader, when all of them can).
8. ``add_activation``: any other ``Add -> ReLU`` as one chunked step.
9. ``shared_activation``: several ``ReLU`` layers of the same tensor as one.

A link is fused only when nothing else can observe the intermediate tensor: the producer and the
consumer each have one call, the intermediate feeds exactly that one consumer and is no model
output, the normalised axis is the last (channel) axis, every layer computes in float32 in
channels-last layout, and no call forces ``training=True`` or passes a mask. Callers that want
intermediates run the unfused graph; ``Runner(reference=True)`` never fuses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from modelgraph.graph import ModelGraph
from modelgraph.runner.passes.add_activation import merge_add_activations
from modelgraph.runner.passes.bottleneck import merge_bottlenecks
from modelgraph.runner.passes.fold_batchnorm import fold_batchnorms
from modelgraph.runner.passes.residual import merge_residual_sums
from modelgraph.runner.passes.separable_input import merge_separable_inputs
from modelgraph.runner.passes.shared_activation import merge_shared_activations
from modelgraph.runner.passes.shared_layers import merge_shared_layers
from modelgraph.runner.passes.squeeze_excite import merge_scaled_convs
from modelgraph.runner.passes.zero_padding import fold_zero_paddings

PASSES: tuple[Callable[[ModelGraph], ModelGraph], ...] = (
    merge_shared_layers,
    fold_batchnorms,
    merge_bottlenecks,
    merge_scaled_convs,
    merge_separable_inputs,
    merge_residual_sums,
    fold_zero_paddings,
    merge_add_activations,
    merge_shared_activations,
)


def fuse(graph: ModelGraph, passes: tuple[Callable[[ModelGraph], ModelGraph], ...] = PASSES) -> ModelGraph:
    """``graph`` with its nested models fused, then every pass of ``passes`` applied in order (the
    ONNX exporter applies ``fold_batchnorms`` only: the other passes make the plan's merged steps)."""
    if any(layer.subgraph is not None for layer in graph.layers):
        graph = replace(
            graph,
            layers=tuple(
                layer if layer.subgraph is None else replace(layer, subgraph=fuse(layer.subgraph, passes))
                for layer in graph.layers
            ),
        )
    for fusion_pass in passes:
        graph = fusion_pass(graph)
    return graph
