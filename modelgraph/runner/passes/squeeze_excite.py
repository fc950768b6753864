"""Fusion pass: fold a squeeze-and-excitation scale into the 1x1 conv that reads the scaled tensor.

Matches ``Multiply([a, s]) -> Conv2D 1x1`` (stride 1, no dilation, groups 1, channels-last, float32,
plain calls, the product read by nothing else): EfficientNet's and MobileNetV3's excitation followed
by the block's projection. Produces ``modelgraph/ScaledConv`` under the conv's name and at its place,
reading ``a`` and ``s``. When one input holds one value per image and channel (``(B, 1, 1, C)``), the
conv of the product is the conv of the other input with the kernel's rows scaled per image
(``conv(a * s) = a @ (s * K)``), so the product tensor is never written; any other shapes multiply
first, as ``Multiply`` would (``fast/scaled.py``).
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from modelgraph.errors import UnsupportedLayerError
from modelgraph.graph import Layer, ModelGraph, Node, TensorRef
from modelgraph.runner.fast.fused import SCALED_CONV
from modelgraph.runner.kernels import conv as reference_conv
from modelgraph.runner.kernels import merge as reference_merge
from modelgraph.runner.passes._graph import (
    Readers,
    drop,
    inert_kwargs,
    ints,
    plain_call,
    single_call_float32,
)
from modelgraph.runner.registry import KernelFactory, get_kernel


def merge_scaled_convs(graph: ModelGraph) -> ModelGraph:
    """Merge a two-input ``Multiply`` into the one 1x1 Conv2D reading it (see the module docstring)."""
    readers = Readers.of(graph)
    layers = {lyr.name: lyr for lyr in graph.layers}
    removed: dict[str, TensorRef | None] = {}
    calls: dict[str, Node] = {}
    for node in graph.nodes:
        multiply = layers[node.layer]
        refs = _two_factors(multiply, node)
        if refs is None:
            continue
        reader = readers.single(node.key)
        if reader is None or not plain_call(reader):
            continue
        conv = layers[reader.layer]
        if not _pointwise_conv(conv):
            continue
        config = {"conv": conv.config}
        weights = tuple(replace(w, name=f"conv/{w.name}") for w in conv.weights)
        layers[conv.name] = replace(
            conv, class_name=SCALED_CONV, config=MappingProxyType(config), weights=weights
        )
        calls[conv.name] = replace(reader, args=refs, kwargs=MappingProxyType({}), inputs=refs)
        removed[multiply.name] = None
    if not removed:
        return graph
    return drop(graph, layers, removed, calls)


def _computed_by(layer: Layer, factory: KernelFactory) -> bool:
    """Whether the runner computes ``layer`` with the kernel ``factory`` (under any of its class names)."""
    try:
        return get_kernel(layer.class_name, layer.name) is factory
    except UnsupportedLayerError:
        return False


def _two_factors(layer: Layer, node: Node) -> tuple[TensorRef, TensorRef] | None:
    """The two tensors a plain float32 ``Multiply`` called once multiplies, else None."""
    if not (
        _computed_by(layer, reference_merge.multiply) and single_call_float32(layer) and inert_kwargs(node)
    ):
        return None
    if len(node.args) != 1 or not isinstance(node.args[0], list | tuple) or len(node.args[0]) != 2:
        return None
    a, b = node.args[0]
    if not (isinstance(a, TensorRef) and isinstance(b, TensorRef)) or a == b:
        return None
    return a, b


def _pointwise_conv(layer: Layer) -> bool:
    """A channels-last float32 Conv2D with a 1x1 kernel, stride 1, no dilation and groups 1, called once."""
    config = layer.config
    return (
        _computed_by(layer, reference_conv.conv2d)
        and single_call_float32(layer)
        and config.get("data_format", "channels_last") in (None, "channels_last")
        and (config.get("groups") or 1) == 1
        and ints(config.get("kernel_size")) in ((1,), (1, 1))
        and ints(config.get("strides", 1)) in ((1,), (1, 1))
        and ints(config.get("dilation_rate", 1)) in ((1,), (1, 1))
        and {w.name for w in layer.weights} >= {"kernel"}
    )
