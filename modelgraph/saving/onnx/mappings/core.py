"""Core layers: Dense, EinsumDense, activation layers, identities at inference, Embedding, Masking.

Semantics: ``modelgraph/runner/kernels/core.py`` (the reference kernels).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from modelgraph.runner.kernels.core import (
    axes_list,
    check_keys,
    dense_weights,
    einsum_dense_weights,
    embedding_table,
    number,
)
from modelgraph.saving.onnx.emitter import Value
from modelgraph.saving.onnx.mappings import _act
from modelgraph.saving.onnx.registry import MapContext, register


def as_float(ctx: MapContext, x: Value) -> Value:
    """Integer or bool inputs cast to float32 (Keras casts them to the compute dtype)."""
    if x.dtype in ("float32",):
        return x
    return Value(ctx.e.cast(x.name, "float32"), x.rank, x.perm, "float32")


def logical_axes(ctx: MapContext, x: Value, key: str = "axis") -> tuple[str, list[int], int]:
    """The float input in Keras's layout, the config's ``key`` axes (default -1) made non-negative,
    and the input's rank: the start of every mapping that works along configured axes."""
    axes = axes_list(ctx.spec, key, -1)
    n = ctx.e.logical(as_float(ctx, x))
    rank = ctx.rank()
    return n, [a + rank if a < 0 else a for a in axes], rank


def activation_of(ctx: MapContext, x: Value, key: str = "activation") -> Value:
    return _act.apply(ctx.e, ctx.get(key), x, ctx.spec.keras_version, ctx.class_name, ctx.spec.name)


def matmul_bias(ctx: MapContext, x: str, kernel: np.ndarray, bias: np.ndarray | None) -> str:
    """``x @ kernel + bias`` (a Gemm for 2-D inputs)."""
    e = ctx.e
    w = ctx.const(kernel, "kernel")
    if (
        bias is not None
        and len(ctx.in_shapes)
        and ctx.in_shapes[0] is not None
        and len(ctx.in_shapes[0]) == 2
    ):
        return e.op("Gemm", [x, w, ctx.const(bias, "bias")], "dense")
    y = e.op("MatMul", [x, w], "matmul")
    if bias is not None:
        y = e.op("Add", [y, ctx.const(bias, "bias")], "bias_add")
    return y


@register("Dense")
def dense(ctx: MapContext, x: Value) -> Value:
    kernel, bias = dense_weights(ctx.spec)
    x = as_float(ctx, x)
    y = matmul_bias(ctx, ctx.e.logical(x), kernel, bias)
    return activation_of(ctx, Value(y, x.rank))


@register("EinsumDense")
def einsum_dense(ctx: MapContext, x: Value) -> Value:
    equation, kernel, bias = einsum_dense_weights(ctx.spec)
    x = as_float(ctx, x)
    y = einsum_bias(ctx, ctx.e.logical(x), equation, kernel, bias)
    return activation_of(ctx, Value(y, ctx.out_rank()))


def einsum_bias(ctx: MapContext, x: str, equation: str, kernel: np.ndarray, bias: np.ndarray | None) -> str:
    y = ctx.e.op("Einsum", [x, ctx.const(kernel, "kernel")], "einsum", equation=equation.replace(" ", ""))
    if bias is not None:
        y = ctx.e.op("Add", [y, ctx.const(bias, "bias")], "bias_add")
    return y


@register("Activation")
def activation(ctx: MapContext, x: Value) -> Value:
    check_keys(ctx.spec, {"activation"})
    return activation_of(ctx, as_float(ctx, x))


def _f(ctx: MapContext, v: float) -> str:
    return ctx.e.const(np.float32(v), "c")


@register("ReLU")
def relu(ctx: MapContext, x: Value) -> Value:
    check_keys(ctx.spec, {"max_value", "negative_slope", "threshold", "alpha"})
    slope_key = "negative_slope" if "negative_slope" in ctx.config else "alpha"
    slope = number(ctx.spec, slope_key, 0.0)
    max_value = number(ctx.spec, "max_value", None, allow_none=True)
    threshold = number(ctx.spec, "threshold", 0.0)
    x = as_float(ctx, x)
    e, n = ctx.e, x.name
    if slope == 0.0 and threshold == 0.0:
        y = (
            e.op("Relu", [n], "relu")
            if max_value is None
            else e.op("Clip", [n, _f(ctx, 0.0), _f(ctx, max_value)], "relu")
        )
        return Value(y, x.rank, x.perm)
    if max_value is None and threshold == 0.0:
        return Value(e.op("LeakyRelu", [n], "relu", alpha=slope), x.rank, x.perm)
    # general form, in Keras's order of operations
    zero = _f(ctx, 0.0)
    y = (
        e.op("Where", [e.op("Greater", [n, _f(ctx, threshold)]), n, zero])
        if threshold != 0
        else e.op("Relu", [n])
    )
    if max_value is not None:
        y = e.op("Clip", [y, zero, _f(ctx, max_value)])
    if slope != 0.0:
        neg = e.op("Relu", [e.op("Sub", [_f(ctx, threshold), n])])
        y = e.op("Sub", [y, e.op("Mul", [neg, _f(ctx, slope)])])
    return Value(y, x.rank, x.perm)


@register("LeakyReLU")
def leaky_relu(ctx: MapContext, x: Value) -> Value:
    check_keys(ctx.spec, {"negative_slope", "alpha"})
    key = "negative_slope" if "negative_slope" in ctx.config else "alpha"
    slope = number(ctx.spec, key, 0.3)
    x = as_float(ctx, x)
    return Value(ctx.e.op("LeakyRelu", [x.name], "leaky_relu", alpha=slope), x.rank, x.perm)


@register("PReLU")
def prelu(ctx: MapContext, x: Value) -> Value:
    check_keys(ctx.spec, {"shared_axes"})
    x = as_float(ctx, x)
    alpha = ctx.weight("alpha")
    e = ctx.e
    n = e.logical(x)
    pos = e.op("Relu", [n])
    neg = e.op("Relu", [e.op("Neg", [n])])
    return Value(e.op("Sub", [pos, e.op("Mul", [ctx.const(alpha, "alpha"), neg])], "prelu"), x.rank)


@register("ELU")
def elu(ctx: MapContext, x: Value) -> Value:
    check_keys(ctx.spec, {"alpha"})
    x = as_float(ctx, x)
    return Value(ctx.e.op("Elu", [x.name], "elu", alpha=number(ctx.spec, "alpha", 1.0)), x.rank, x.perm)


@register("ThresholdedReLU")
def thresholded_relu(ctx: MapContext, x: Value) -> Value:
    check_keys(ctx.spec, {"theta"})
    x = as_float(ctx, x)
    return Value(
        ctx.e.op("ThresholdedRelu", [x.name], "thresholded_relu", alpha=number(ctx.spec, "theta", 1.0)),
        x.rank,
        x.perm,
    )


@register("Softmax")
def softmax(ctx: MapContext, x: Value, mask: Any = None) -> Value:
    check_keys(ctx.spec, {"axis"})
    n, axes, rank = logical_axes(ctx, x)
    e = ctx.e
    if mask is not None:
        m = e.logical(mask)
        if ctx.spec.keras_version[0] >= 3:
            keep = m if mask.dtype == "bool" else e.op("Greater", [m, _f(ctx, 0.5)])
            n = e.op("Where", [keep, n, _f(ctx, -1e9)])
            y = _softmax_axes(ctx, n, axes, rank)
            return Value(e.op("Where", [keep, y, _f(ctx, 0.0)], "softmax"), rank)
        mf = e.cast(m, "float32")
        n = e.op("Add", [n, e.op("Mul", [e.op("Sub", [_f(ctx, 1.0), mf]), _f(ctx, -1e9)])])
    return Value(_softmax_axes(ctx, n, axes, rank), rank)


def _softmax_axes(ctx: MapContext, n: str, axes: list[int], rank: int) -> str:
    e = ctx.e
    if len(axes) == 1:
        return e.op("Softmax", [n], "softmax", axis=axes[0])
    shifted = e.op("Sub", [n, e.reduce("ReduceMax", n, axes)])
    ex = e.op("Exp", [shifted])
    return e.op("Div", [ex, e.reduce("ReduceSum", ex, axes)], "softmax")


def _identity(keys: set[str]) -> Callable[..., Value]:
    """A layer that does nothing at inference (its config may set ``keys``): the tensor passes
    through in its stored layout."""

    def identity(ctx: MapContext, x: Value, **_: Any) -> Value:
        check_keys(ctx.spec, keys)
        return x

    return identity


register("Dropout")(_identity({"rate", "noise_shape", "seed"}))
register("SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D")(
    _identity({"rate", "noise_shape", "seed", "data_format"})
)
register("GaussianNoise")(_identity({"stddev", "seed"}))
register("GaussianDropout")(_identity({"rate", "seed"}))
register("AlphaDropout")(_identity({"rate", "noise_shape", "seed"}))
register("ActivityRegularization")(_identity({"l1", "l2"}))
register("Identity")(_identity(set()))


@register("Embedding")
def embedding(ctx: MapContext, x: Value) -> Value:
    table = embedding_table(ctx.spec)
    return Value(
        ctx.e.op("Gather", [ctx.const(table, "embeddings"), ids(ctx, x)], "embedding", axis=0),
        (x.rank or 0) + 1,
    )


def ids(ctx: MapContext, x: Value) -> str:
    """Token ids as int64 (floats truncated as Keras casts them)."""
    n = ctx.e.logical(x)
    if x.dtype == "int64":
        return n
    return ctx.e.cast(n if not x.dtype.startswith("float") else ctx.e.cast(n, "int32"), "int64")


@register("Masking")
def masking(ctx: MapContext, x: Value) -> Value:
    check_keys(ctx.spec, {"mask_value"})
    value = number(ctx.spec, "mask_value", 0.0)
    e = ctx.e
    n = e.logical(x)
    keep = any_not_equal(ctx, n, value)
    return Value(e.op("Mul", [n, e.cast(keep, "float32")], "masking"), x.rank)


def any_not_equal(ctx: MapContext, n: str, value: float, keepdims: int = 1) -> str:
    """``any(x != value, axis=-1)`` as bool."""
    e = ctx.e
    ne = e.cast(e.op("Not", [e.op("Equal", [n, _f(ctx, value)])]), "float32")
    return e.cast(e.reduce("ReduceMax", ne, [-1], keepdims=keepdims), "bool")
