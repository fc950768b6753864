"""Normalization: BatchNormalization, LayerNormalization, UnitNormalization, LayerScale.

Semantics: ``modelgraph/runner/kernels/normalization.py``. Inference BatchNormalization is folded (in
float64, as the runner does) into one multiply and one add along its axis, emitted in the stored
layout of its input so a convolution chain stays channels-first (onnxruntime folds them into the
preceding Conv).
"""

from __future__ import annotations

import numpy as np

from modelgraph.runner.kernels.core import axes_list, check_keys, flag, number, require
from modelgraph.saving.onnx.emitter import Value
from modelgraph.saving.onnx.mappings.core import as_float, logical_axes
from modelgraph.saving.onnx.registry import MapContext, register


def param_shape(param: np.ndarray, axes: list[int], rank: int, perm: tuple[int, ...] | None) -> np.ndarray:
    """A per-axis parameter reshaped to broadcast over a tensor of ``rank`` stored in ``perm``."""
    if param.ndim == rank and perm is None:
        return param
    logical = [1] * rank
    flat = param.reshape([param.shape[i] for i in range(param.ndim)]) if param.ndim == len(axes) else param
    if flat.ndim == len(axes):
        for a, n in zip(sorted(axes), flat.shape, strict=True):
            logical[a] = n
        full = flat.reshape(logical)
    else:
        full = flat
    if perm is not None:
        full = np.transpose(full, perm)
    return np.ascontiguousarray(full)


def _positive(axes: list[int], rank: int) -> list[int]:
    return [a + rank if a < 0 else a for a in axes]


@register("BatchNormalization")
def batch_normalization(ctx: MapContext, x: Value, mask: object = None) -> Value:
    check_keys(
        ctx.spec,
        {"axis", "epsilon", "center", "scale", "momentum", "synchronized", "renorm", "renorm_clipping",
         "renorm_momentum", "fused", "virtual_batch_size", "adjustment"},
    )  # fmt: skip
    axes = axes_list(ctx.spec, "axis", -1)
    epsilon = number(ctx.spec, "epsilon", 1e-3)
    require(ctx.spec, "virtual_batch_size", ctx.get("virtual_batch_size") is None)
    require(ctx.spec, "adjustment", ctx.get("adjustment") is None)
    mean = ctx.spec.weight("moving_mean").astype(np.float64)
    var = ctx.spec.weight("moving_variance").astype(np.float64)
    inv = 1.0 / np.sqrt(var + epsilon)
    if flag(ctx.spec, "scale", True):
        inv = inv * ctx.spec.weight("gamma").astype(np.float64)
    shift = -mean * inv
    if flag(ctx.spec, "center", True):
        shift = shift + ctx.spec.weight("beta").astype(np.float64)
    x = as_float(ctx, x)
    rank = x.rank if x.rank is not None else ctx.rank()
    pos = _positive(axes, rank)
    perm = None if x.is_logical else x.perm
    mul = param_shape(inv.astype(np.float32), pos, rank, perm)
    add = param_shape(shift.astype(np.float32), pos, rank, perm)
    e = ctx.e
    y = e.op(
        "Add", [e.op("Mul", [x.name, ctx.const(mul, "bn_scale")], "bn"), ctx.const(add, "bn_shift")], "bn"
    )
    return Value(y, rank, perm)


@register("LayerNormalization")
def layer_normalization(ctx: MapContext, x: Value) -> Value:
    check_keys(ctx.spec, {"axis", "epsilon", "center", "scale", "rms_scaling"})
    epsilon = number(ctx.spec, "epsilon", 1e-3)
    center = flag(ctx.spec, "center", True)
    scale = flag(ctx.spec, "scale", True)
    rms = flag(ctx.spec, "rms_scaling", False)
    gamma = ctx.weight("gamma") if scale or rms else None
    beta = ctx.weight("beta") if center and not rms else None
    n, pos, rank = logical_axes(ctx, x)
    pos = sorted(pos)
    e = ctx.e
    mean = e.reduce("ReduceMean", n, pos, 1)
    diff = e.op("Sub", [n, mean])
    var = e.reduce("ReduceMean", e.op("Mul", [diff, diff]), pos, 1)
    inv = e.op("Reciprocal", [e.op("Sqrt", [e.op("Add", [var, e.const(np.float32(epsilon), "eps")])])])
    if rms:
        y = e.op("Mul", [n, inv])
        if gamma is not None:
            y = e.op("Mul", [y, ctx.const(param_shape(gamma, pos, rank, None), "gamma")])
        return Value(y, rank)
    if gamma is not None:
        inv = e.op("Mul", [inv, ctx.const(param_shape(gamma, pos, rank, None), "gamma")])
    res = e.op("Neg", [e.op("Mul", [mean, inv])])
    if beta is not None:
        res = e.op("Add", [res, ctx.const(param_shape(beta, pos, rank, None), "beta")])
    return Value(e.op("Add", [e.op("Mul", [n, inv]), res], "layer_norm"), rank)


@register("RMSNormalization")
def rms_normalization(ctx: MapContext, x: Value) -> Value:
    """Keras 3 RMSNormalization: ``x / sqrt(mean(x**2 over axis) + epsilon) * scale``."""
    check_keys(ctx.spec, {"axis", "epsilon"})
    epsilon = number(ctx.spec, "epsilon", 1e-6)
    scale = ctx.weight("scale")
    n, pos, rank = logical_axes(ctx, x)
    pos = sorted(pos)
    e = ctx.e
    mean_square = e.reduce("ReduceMean", e.op("Mul", [n, n]), pos, 1)
    inv = e.op(
        "Reciprocal", [e.op("Sqrt", [e.op("Add", [mean_square, e.const(np.float32(epsilon), "eps")])])]
    )
    y = e.op(
        "Mul", [e.op("Mul", [n, inv]), ctx.const(param_shape(scale, pos, rank, None), "scale")], "rms_norm"
    )
    return Value(y, rank)


@register("UnitNormalization")
def unit_normalization(ctx: MapContext, x: Value) -> Value:
    check_keys(ctx.spec, {"axis"})
    n, pos, rank = logical_axes(ctx, x)
    e = ctx.e
    sq = e.reduce("ReduceSum", e.op("Mul", [n, n]), pos, 1)
    if ctx.spec.keras_version[0] >= 3:
        inv = e.op("Min", [e.op("Reciprocal", [e.op("Sqrt", [sq])]), e.const(np.float32(1e12), "c")])
    else:
        inv = e.op("Reciprocal", [e.op("Sqrt", [e.op("Max", [sq, e.const(np.float32(1e-12), "c")])])])
    return Value(e.op("Mul", [n, inv], "unit_norm"), rank)


@register("GroupNormalization")
def group_normalization(ctx: MapContext, x: Value) -> Value:
    check_keys(ctx.spec, {"groups", "axis", "epsilon", "center", "scale"})
    groups = ctx.get("groups", 32)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups == 0 or groups < -1:
        raise ctx.unsupported("groups", groups)
    axis = ctx.get("axis", -1)
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise ctx.unsupported("axis", axis)
    epsilon = number(ctx.spec, "epsilon", 1e-3)
    shape = ctx.in_shapes[0] if ctx.in_shapes else None
    if shape is None or any(d is None for d in shape[1:]):
        raise ctx.unsupported("input shape", shape)
    rank = len(shape)
    ax = axis + rank if axis < 0 else axis
    channels = shape[ax]
    g = channels if groups == -1 else groups
    if channels % g:
        raise ValueError(f"GroupNormalization: {channels} channels, {g} groups")
    e = ctx.e
    n = e.logical(as_float(ctx, x))
    grouped_shape = [-1, *shape[1:ax], g, channels // g, *shape[ax + 1 :]]
    grouped = e.op("Reshape", [n, e.ints(grouped_shape, "shape")], "group")
    red = [i for i in range(1, rank + 1) if i != ax]
    mean = e.reduce("ReduceMean", grouped, red, 1)
    diff = e.op("Sub", [grouped, mean])
    var = e.reduce("ReduceMean", e.op("Mul", [diff, diff]), red, 1)
    inv = e.op("Reciprocal", [e.op("Sqrt", [e.op("Add", [var, e.const(np.float32(epsilon), "eps")])])])
    pshape = [1] * (rank + 1)
    pshape[ax : ax + 2] = [g, channels // g]
    if flag(ctx.spec, "scale", True):
        inv = e.op("Mul", [inv, ctx.const(ctx.weight("gamma").reshape(pshape), "gamma")])
    res = e.op("Neg", [e.op("Mul", [mean, inv])])
    if flag(ctx.spec, "center", True):
        res = e.op("Add", [res, ctx.const(ctx.weight("beta").reshape(pshape), "beta")])
    y = e.op("Add", [e.op("Mul", [grouped, inv]), res])
    return Value(e.op("Reshape", [y, e.ints([-1, *shape[1:]], "shape")], "group_norm"), rank)
