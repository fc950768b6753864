"""Fusion pass: fold a squeeze-and-excitation scale into the 1x1 conv that reads the scaled tensor.

Matches ``Multiply([a, s]) -> Conv2D 1x1`` (stride 1, no dilation, groups 1, channels-last, float32,
plain calls, the product read by nothing else; the classes by their catalogue entries'
``fusion.multiplies`` and ``fusion.bottleneck == "pointwise"``): EfficientNet's and MobileNetV3's excitation followed
by the block's projection. Produces ``modelgraph/ScaledConv`` under the conv's name and at its place,
reading ``a`` and ``s``. When one input holds one value per image and channel (``(B, 1, 1, C)``), the
conv of the product is the conv of the other input with the kernel's rows scaled per image
(``conv(a * s) = a @ (s * K)``), so the product tensor is never written; any other shapes multiply
first, as ``Multiply`` would (``fast/scaled.py``).
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from modelgraph.graph import Layer, ModelGraph, Node, TensorRef
from modelgraph.runner.fast.fused import SCALED_CONV
from modelgraph.runner.passes._graph import (
    Rewrite,
    fusion,
    inert_kwargs,
    ints,
    single_call_float32,
)


def merge_scaled_convs(graph: ModelGraph) -> ModelGraph:
    """Merge a two-input ``Multiply`` into the one 1x1 Conv2D reading it (see the module docstring)."""
    rewrite = Rewrite.of(graph)
    for node in graph.nodes:
        refs = _two_factors(rewrite.layer(node.layer), node)
        reader = rewrite.reader(node) if refs is not None else None
        if refs is None or reader is None:
            continue
        conv = rewrite.layer(reader.layer)
        if not _pointwise_conv(conv):
            continue
        weights = tuple(replace(w, name=f"conv/{w.name}") for w in conv.weights)
        config = MappingProxyType({"conv": conv.config})
        rewrite.replace_layer(
            replace(conv, class_name=SCALED_CONV, config=config, weights=weights),
            call=replace(reader, args=refs, kwargs=MappingProxyType({}), inputs=refs),
        )
        rewrite.remove(node.layer)
    return rewrite.result()


def _two_factors(layer: Layer, node: Node) -> tuple[TensorRef, TensorRef] | None:
    """The two tensors a plain float32 layer multiplying its inputs (its entry's
    ``fusion.multiplies``: Multiply) multiplies when called once, else None."""
    if not (fusion(layer).multiplies and single_call_float32(layer) and inert_kwargs(node)):
        return None
    if len(node.args) != 1 or not isinstance(node.args[0], list | tuple) or len(node.args[0]) != 2:
        return None
    a, b = node.args[0]
    if not (isinstance(a, TensorRef) and isinstance(b, TensorRef)) or a == b:
        return None
    return a, b


def _pointwise_conv(layer: Layer) -> bool:
    """A channels-last float32 Conv2D-like layer (its entry's ``fusion.bottleneck`` is
    ``"pointwise"``) with a 1x1 kernel, stride 1, no dilation and groups 1, called once."""
    config = layer.config
    return (
        fusion(layer).bottleneck == "pointwise"
        and single_call_float32(layer)
        and config.get("data_format", "channels_last") in (None, "channels_last")
        and (config.get("groups") or 1) == 1
        and ints(config.get("kernel_size")) in ((1,), (1, 1))
        and ints(config.get("strides", 1)) in ((1,), (1, 1))
        and ints(config.get("dilation_rate", 1)) in ((1,), (1, 1))
        and {w.name for w in layer.weights} >= {"kernel"}
    )
