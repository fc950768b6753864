"""Fusion pass: fold BatchNormalization and ReLU (or swish) into the conv or Dense before them.

Matches ``Conv1D/2D/3D | DepthwiseConv1D/2D | SeparableConv1D/2D | Dense`` (any class whose catalogue
entry sets ``fusion.channel_axis``; linear, channels-last, float32, one plain call) ``-> BatchNormalization`` (inference, on the channel axis) ``-> ReLU /
Activation(relu|relu6|swish|silu)``, each link read by nothing else. Produces the producer layer with
weights ``kernel * s`` (a separable conv's ``pointwise_kernel * s``) and ``(bias - mean) * s + beta`` (``s = gamma / sqrt(moving_variance + epsilon)``, computed in float64, rounded once
to float32) and the activation as its fused activation; the BatchNormalization and activation layers
are dropped. This is what Keras's backends do at inference; it saves two passes over each activation,
and the fast kernels apply the activation to each output block while it is in cache (EfficientNet's
swish after every conv: the tensor is not streamed through memory once more).
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import Any

import numpy as np

from modelgraph.graph import Layer, ModelGraph, Node, TensorRef, Weight
from modelgraph.runner.activations import activation_name
from modelgraph.runner.passes._graph import (
    FUSABLE_ACTIVATIONS,
    Rewrite,
    fusion,
    is_float32,
    number,
    plain_call,
    producer_axis,
    relu_name,
    single_call_float32,
)

# Activations folded into the producer (its kernel's epilogue applies them block by block): ReLU's,
# and EfficientNet's Conv -> BatchNormalization -> Activation("swish").
FOLDED_ACTIVATIONS = FUSABLE_ACTIVATIONS | {"swish", "silu"}


def fold_batchnorms(graph: ModelGraph) -> ModelGraph:
    """``graph`` with every fusable Conv/Dense -> BatchNormalization -> ReLU chain folded (this level)."""
    rewrite = Rewrite.of(graph)
    for node in graph.nodes:
        producer = rewrite.layer(node.layer)
        if not _can_produce(producer, node):
            continue
        current = producer
        output = TensorRef(producer.name, node.index, 0)  # stands for every layer folded away
        follower = rewrite.reader(node)
        if follower is not None and fusion(rewrite.layer(follower.layer)).batchnorm:
            folded = _fold_batchnorm(current, rewrite.layer(follower.layer), _rank(current))
            if folded is not None:
                current = folded
                rewrite.remove(follower.layer, output)
                follower = rewrite.reader(follower)
        if follower is not None:
            name = relu_name(rewrite.layer(follower.layer), FOLDED_ACTIVATIONS)
            if name is not None and activation_name(current.config.get("activation")) == "linear":
                current = replace(current, config=MappingProxyType({**current.config, "activation": name}))
                rewrite.remove(follower.layer, output)
        if current is not producer:
            rewrite.replace_layer(current)
    return rewrite.result()


def _can_produce(layer: Layer, node: Node) -> bool:
    return (
        producer_axis(layer) is not None
        and single_call_float32(layer)
        and layer.config.get("data_format", "channels_last") == "channels_last"
        and activation_name(layer.config.get("activation")) == "linear"
        and bool({w.name for w in layer.weights} & {"kernel", "pointwise_kernel"})
        and plain_call(node)
    )


def _scaled_kernel(names: set[str] | dict[str, Weight]) -> str:
    """The weight that makes the output channels: a separable conv's ``pointwise_kernel``, else ``kernel``."""
    return "pointwise_kernel" if "pointwise_kernel" in names else "kernel"


def _rank(layer: Layer) -> int | None:
    if not layer.weights:
        return None
    return len(layer.weight(_scaled_kernel({w.name for w in layer.weights})).shape)


def _fold_batchnorm(producer: Layer, bn: Layer, kernel_rank: int | None) -> Layer | None:
    """The producer with the BatchNormalization folded into its weights, or None when it cannot be."""
    if bn.node_count != 1 or not is_float32(bn) or kernel_rank is None:
        return None
    if bn.config.get("mode") is not None:
        return None  # Keras 1's sample-wise modes (mode 0 is read as today's layer): its kernel refuses them
    axis = bn.config.get("axis", -1)
    if isinstance(axis, list | tuple):
        if len(axis) != 1:
            return None
        axis = axis[0]
    if not isinstance(axis, int) or axis not in (-1, producer_axis(producer)):
        return None
    names = {w.name for w in bn.weights}
    if not {"moving_mean", "moving_variance"} <= names:
        return None
    eps = number(bn.config.get("epsilon", 1e-3))
    if eps is None:
        return None  # a malformed epsilon: left to the BatchNormalization kernel, which refuses it
    weights = {w.name: w for w in producer.weights}
    scaled = _scaled_kernel(weights)
    kernel_w = weights[scaled]
    if not str(kernel_w.dtype).startswith(("float", "bfloat")):
        return None  # a quantized kernel: its own kernel refuses it, folding must not hide that
    depthwise = fusion(producer).depthwise
    out_channels = int(kernel_w.shape[-2] * kernel_w.shape[-1]) if depthwise else int(kernel_w.shape[-1])
    if bn.weight("moving_mean").shape != (out_channels,):
        return None

    def folded() -> tuple[np.ndarray, np.ndarray]:
        mean = bn.weight("moving_mean").read().astype(np.float64)
        var = bn.weight("moving_variance").read().astype(np.float64)
        gamma = bn.weight("gamma").read().astype(np.float64) if "gamma" in names else np.ones_like(mean)
        beta = bn.weight("beta").read().astype(np.float64) if "beta" in names else np.zeros_like(mean)
        scale = gamma / np.sqrt(var + eps)
        kernel = kernel_w.read().astype(np.float64)
        # In place: the same products without a second float64 copy of the kernel.
        kernel *= scale.reshape(kernel.shape[-2], kernel.shape[-1]) if depthwise else scale
        bias = weights["bias"].read().astype(np.float64) if "bias" in weights else np.zeros_like(mean)
        return kernel.astype(np.float32), ((bias - mean) * scale + beta).astype(np.float32)

    # The folded pair is computed once for the reads of its two parts, then let go (a later read
    # folds again): a kernel that keeps its weights in a form of its own (packed panels) must not
    # have the folded kernel held beside them for the plan's life.
    pending: dict[str, Any] = {}

    def part(index: int) -> np.ndarray:
        if "pair" not in pending:
            pending["pair"], pending["unread"] = folded(), {0, 1}
        value = pending["pair"][index]
        pending["unread"].discard(index)
        if not pending["unread"]:
            pending.clear()
        return value

    location = f"{kernel_w.location} (BatchNormalization '{bn.name}' folded in)"
    kept = tuple(w for w in producer.weights if w.name not in (scaled, "bias"))  # a separable's depthwise
    new_weights = (
        *kept,
        Weight(scaled, kernel_w.shape, "float32", location, lambda: part(0)),
        Weight("bias", (out_channels,), "float32", location, lambda: part(1)),
    )
    config = dict(producer.config)
    config["use_bias"] = True
    return replace(producer, config=MappingProxyType(config), weights=new_weights)
