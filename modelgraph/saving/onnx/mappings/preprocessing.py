"""Preprocessing and keras.applications helper layers: Rescaling, Normalization, LayerScale.

Semantics: ``modelgraph/runner/kernels/preprocessing.py`` and ``applications.py``.
"""

from __future__ import annotations

import numpy as np

from modelgraph.layer_params import config_numbers
from modelgraph.runner.kernels.core import check_keys, flag
from modelgraph.saving.onnx.emitter import Value
from modelgraph.saving.onnx.mappings.core import as_float
from modelgraph.saving.onnx.registry import MapContext, register


@register("Rescaling")
def rescaling(ctx: MapContext, x: Value) -> Value:
    check_keys(ctx.spec, {"scale", "offset"})
    scale = config_numbers(ctx.spec, "scale", 1.0)
    offset = config_numbers(ctx.spec, "offset", 0.0)
    if scale is None or offset is None:
        raise ctx.unsupported("scale" if scale is None else "offset", None)
    x = as_float(ctx, x)
    e = ctx.e
    # a list scale/offset broadcasts over the last axis: Keras's layout
    n = x.name if scale.ndim == 0 and offset.ndim == 0 else e.logical(x)
    perm = x.perm if n == x.name else None
    y = e.op("Add", [e.op("Mul", [n, ctx.const(scale, "scale")]), ctx.const(offset, "offset")], "rescale")
    return Value(y, x.rank, perm)


@register("Normalization")
def normalization(ctx: MapContext, x: Value) -> Value:
    check_keys(ctx.spec, {"axis", "mean", "variance", "invert"})
    axis = ctx.get("axis", -1)
    if axis is None:
        axes: tuple[int, ...] = ()
    elif isinstance(axis, int) and not isinstance(axis, bool):
        axes = (axis,)
    elif isinstance(axis, (list, tuple)) and all(
        isinstance(a, int) and not isinstance(a, bool) for a in axis
    ):
        axes = tuple(axis)
    else:
        raise ctx.unsupported("axis", axis)
    invert = flag(ctx.spec, "invert", False)
    mean = config_numbers(ctx.spec, "mean", None)
    var = config_numbers(ctx.spec, "variance", None)
    if (mean is None) != (var is None):
        raise ctx.unsupported("mean" if mean is None else "variance", None)
    if mean is None:
        mean = ctx.spec.weight("mean").astype(np.float64)
        var = ctx.spec.weight("variance").astype(np.float64)
    assert var is not None
    rank = ctx.rank()
    keep = sorted(a + rank if a < 0 else a for a in axes)
    shape = [1] * rank
    if mean.ndim:
        for i in range(1, mean.ndim + 1):
            shape[keep[-i]] = mean.shape[-i]
        mean, var = mean.reshape(shape), var.reshape(shape)
    denom = np.maximum(np.sqrt(var), 1e-7)
    m, d = mean.astype(np.float32), denom.astype(np.float32)
    e = ctx.e
    n = e.logical(as_float(ctx, x))
    if invert:
        y = e.op("Add", [ctx.const(m, "mean"), e.op("Mul", [n, ctx.const(d, "std")])], "denormalize")
    else:
        y = e.op("Div", [e.op("Sub", [n, ctx.const(m, "mean")]), ctx.const(d, "std")], "normalize")
    return Value(y, rank)


@register("LayerScale")
def layer_scale(ctx: MapContext, x: Value) -> Value:
    check_keys(ctx.spec, {"init_values", "projection_dim"})
    names = list(ctx.spec.weights)
    gamma = ctx.weight("gamma" if "gamma" in names or len(names) != 1 else names[0])
    e = ctx.e
    return Value(e.op("Mul", [e.logical(as_float(ctx, x)), ctx.const(gamma, "gamma")], "layer_scale"), x.rank)


@register("CustomScaleLayer")
def custom_scale_layer(ctx: MapContext, *args: Value) -> Value:
    """InceptionResNetV2: ``inputs[0] + inputs[1] * scale``."""
    check_keys(ctx.spec, {"scale"})
    scale = ctx.get("scale")
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise ctx.unsupported("scale", scale)
    items = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else list(args)
    if len(items) != 2:
        raise ValueError(f"CustomScaleLayer takes 2 inputs; got {len(items)}")
    e = ctx.e
    x, up = (e.logical(v) for v in items)
    return Value(
        e.op("Add", [x, e.op("Mul", [up, e.const(np.float32(scale), "scale")])], "custom_scale"),
        items[0].rank,
    )
