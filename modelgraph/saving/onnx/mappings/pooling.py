"""Pooling: Max/AveragePooling1D/2D/3D and the global poolings.

Semantics: ``modelgraph/runner/kernels/pooling.py``. TF's ``same`` pooling puts the extra cell after
(pads computed like convolutions); max pooling ignores padded cells and average pooling divides by
the valid ones (ONNX ``count_include_pad=0``). Global poolings reduce the spatial axes of whatever
layout the input is stored in; a masked GlobalAveragePooling1D is ``sum(x * m) / sum(m)`` over time.
"""

from __future__ import annotations

from typing import Any

from modelgraph.layer_params import check_keys, data_format, int_tuple, padding_mode
from modelgraph.saving.onnx.emitter import Value
from modelgraph.saving.onnx.mappings._spatial import (
    channels_first_perm,
    out_value,
    spatial_sizes,
    window_pads,
)
from modelgraph.saving.onnx.mappings.core import as_float
from modelgraph.saving.onnx.registry import MapContext, register


def _pool(ctx: MapContext, x: Value, rank: int, kind: str) -> Value:
    check_keys(ctx.spec, ("pool_size", "strides", "padding", "data_format"))
    fmt = data_format(ctx.spec)
    pool = int_tuple(ctx.spec, "pool_size", rank, 2)
    strides = pool if ctx.get("strides") is None else int_tuple(ctx.spec, "strides", rank, None)
    mode = padding_mode(ctx.spec, ("valid", "same"))
    perm = channels_first_perm(fmt, rank)
    xin = ctx.e.in_layout(as_float(ctx, x), perm)
    pads, auto_pad = window_pads(mode, spatial_sizes(ctx, fmt), pool, strides, (1,) * rank)
    if kind == "max":
        y = ctx.e.op("MaxPool", [xin], "max_pool", kernel_shape=list(pool), strides=list(strides), pads=pads,
                     auto_pad=auto_pad)  # fmt: skip
    else:
        y = ctx.e.op("AveragePool", [xin], "avg_pool", kernel_shape=list(pool), strides=list(strides), pads=pads,
                     auto_pad=auto_pad, count_include_pad=0)  # fmt: skip
    return out_value(y, rank + 2, perm)


def _global(ctx: MapContext, x: Value, rank: int, kind: str, mask: Any = None) -> Value:
    check_keys(ctx.spec, ("data_format", "keepdims"))
    fmt = data_format(ctx.spec)
    keepdims = ctx.get("keepdims", False)
    if keepdims not in (True, False, None):
        raise ctx.unsupported("keepdims", keepdims)
    keep = 1 if keepdims else 0
    e = ctx.e
    x = as_float(ctx, x)
    logical_axes = list(range(2, rank + 2)) if fmt == "channels_first" else list(range(1, rank + 1))
    if mask is not None:
        if kind != "avg" or rank != 1:
            raise ctx.unsupported("mask", "<mask>")
        t_axis = logical_axes[0]
        n = e.logical(x)
        m = e.cast(e.logical(mask), "float32")
        m = e.op("Unsqueeze", [m, e.ints([2 if fmt == "channels_last" else 1], "axes")])
        total = e.reduce("ReduceSum", e.op("Mul", [n, m]), [t_axis], keep)
        count = e.reduce("ReduceSum", m, [t_axis], keep)
        return Value(e.op("Div", [total, count], "masked_mean"), rank + 2 if keep else 2)
    op = "ReduceMax" if kind == "max" else "ReduceMean"
    if x.is_logical:
        return Value(e.reduce(op, x.name, logical_axes, keep, "global_pool"), rank + 2 if keep else 2)
    perm = x.perm
    assert perm is not None
    if fmt == "channels_last" and perm == channels_first_perm("channels_last", rank):
        # a channels_last pooling of a tensor stored channels-first, as after a convolution: ONNX's
        # global pooling (which onnxruntime runs in its blocked layout), then (N, C) or the kept
        # (N, C, 1...) in the same layout. (A channels_first pooling of it reduces other axes.)
        pooled = e.op("GlobalMaxPool" if kind == "max" else "GlobalAveragePool", [x.name], "global_pool")
        if keep:
            return Value(pooled, rank + 2, perm)
        return Value(e.op("Flatten", [pooled], "global_pool", axis=1), 2)
    stored_axes = sorted(perm.index(a) for a in logical_axes)
    y = e.reduce(op, x.name, stored_axes, keep, "global_pool")
    if keep:
        return Value(y, rank + 2, perm)
    # the remaining axes keep their stored order; for (N, C) that is Keras's layout
    remaining = [a for a in perm if a not in logical_axes]
    if remaining == sorted(remaining):
        return Value(y, 2)
    raise ctx.unsupported("layout", str(perm))


for _rank in (1, 2, 3):

    def _make_pool(rank: int, kind: str):
        def fn(ctx: MapContext, x: Value) -> Value:
            return _pool(ctx, x, rank, kind)

        return fn

    def _make_global(rank: int, kind: str):
        def fn(ctx: MapContext, x: Value, mask: Any = None) -> Value:
            return _global(ctx, x, rank, kind, mask)

        return fn

    register(f"MaxPooling{_rank}D", f"MaxPool{_rank}D")(_make_pool(_rank, "max"))
    register(f"AveragePooling{_rank}D", f"AvgPool{_rank}D")(_make_pool(_rank, "avg"))
    register(f"GlobalMaxPooling{_rank}D", f"GlobalMaxPool{_rank}D")(_make_global(_rank, "max"))
    register(f"GlobalAveragePooling{_rank}D", f"GlobalAvgPool{_rank}D")(_make_global(_rank, "avg"))
