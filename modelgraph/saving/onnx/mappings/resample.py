"""Image resampling: Resizing, CenterCrop and UpSampling2D's interpolations, for static sizes.

Semantics: ``modelgraph/runner/kernels/reshaping.py`` and ``resampling.py``. Every
``tf.image.resize`` method is linear and separable, so a resize is two constant matrices applied
rows first (as TensorFlow does): ``einsum("oh,bhwc->bowc")`` then ``einsum("pw,bowc->bopc")``. The
matrices are the runner's own (``resampling.method_matrices``); nearest and plain bilinear, which the
runner computes by indexing, are written as the equivalent one-hot and two-tap matrices with the
same half-pixel source positions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from modelgraph.layer_params import check_keys, data_format
from modelgraph.runner.kernels.resampling import method_matrices
from modelgraph.runner.kernels.reshaping import (
    aspect_pad,
    crop_box,
    half_pixel,
    lerp_axis,
    resizing_options,
)
from modelgraph.saving.onnx.emitter import Value
from modelgraph.saving.onnx.mappings.core import as_float
from modelgraph.saving.onnx.registry import MapContext, register


def _nearest(in_size: int, out_size: int) -> np.ndarray:
    src = np.minimum(np.floor(half_pixel(in_size, out_size)), in_size - 1).astype(np.intp)
    m = np.zeros((out_size, in_size), np.float32)
    m[np.arange(out_size), src] = 1
    return m


def _bilinear(in_size: int, out_size: int) -> np.ndarray:
    lower, upper, frac = lerp_axis(in_size, out_size)
    m = np.zeros((out_size, in_size), np.float32)
    rows = np.arange(out_size)
    np.add.at(m, (rows, lower), 1 - frac)
    np.add.at(m, (rows, upper), frac)
    return m


def matrices(method: str, antialias: bool) -> Any:
    """``(in_size, out_size) -> (out_size, in_size)`` resampling matrix of a tf.image.resize method."""
    fn = method_matrices(method, antialias)
    if fn is not None:
        return fn
    return _nearest if method == "nearest" else _bilinear


def resize_nhwc(
    ctx: MapContext, n: str, h: int, w: int, height: int, width: int, method: str, antialias: bool
) -> str:
    """A (B, H, W, C) tensor resized to (B, height, width, C)."""
    make = matrices(method, antialias)
    e = ctx.e
    rows = ctx.const(make(h, height), "resize_rows")
    cols = ctx.const(make(w, width), "resize_cols")
    tall = e.op("Einsum", [rows, n], "resize", equation="oh,bhwc->bowc")
    return e.op("Einsum", [cols, tall], "resize", equation="pw,bowc->bopc")


def _static_hw(ctx: MapContext, fmt: str) -> tuple[int, int, int]:
    shape = ctx.in_shapes[0] if ctx.in_shapes else None
    if shape is None or len(shape) not in (3, 4):
        raise ctx.unsupported("input shape", shape)
    rank = len(shape)
    sizes = shape[-3:-1] if fmt == "channels_last" else shape[-2:]
    if any(not isinstance(s, int) for s in sizes):
        raise ctx.unsupported("input shape", shape)
    return int(sizes[0]), int(sizes[1]), rank


def _to_nhwc(ctx: MapContext, x: Value, fmt: str, rank: int) -> str:
    e = ctx.e
    n = e.logical(as_float(ctx, x))
    if rank == 3:
        n = e.op("Unsqueeze", [n, e.ints([0], "axes")])
    if fmt == "channels_first":
        n = e.op("Transpose", [n], perm=[0, 2, 3, 1])
    return n


def _from_nhwc(ctx: MapContext, n: str, fmt: str, rank: int) -> Value:
    e = ctx.e
    if fmt == "channels_first":
        n = e.op("Transpose", [n], perm=[0, 3, 1, 2])
    if rank == 3:
        n = e.op("Squeeze", [n, e.ints([0], "axes")])
    return Value(n, rank)


def _crop(ctx: MapContext, n: str, top: int, left: int, ch: int, cw: int) -> str:
    e = ctx.e
    return e.op(
        "Slice",
        [n, e.ints([top, left], "starts"), e.ints([top + ch, left + cw], "ends"), e.ints([1, 2], "axes")],
        "crop",
    )


@register("Resizing")
def resizing(ctx: MapContext, x: Value) -> Value:
    o = resizing_options(ctx.spec)
    fmt, height, width, method, antialias = o.fmt, o.height, o.width, o.interpolation, o.antialias
    crop, pad, fill_value = o.crop, o.pad, o.fill_value
    if x.dtype not in ("float32", "float16", "float64"):
        raise ctx.unsupported("input dtype", x.dtype)  # integer images are rounded back by Keras
    h, w, rank = _static_hw(ctx, fmt)
    e = ctx.e
    n = _to_nhwc(ctx, x, fmt, rank)
    if crop:
        top, left, ch, cw = crop_box(h, w, height, width, np.float32)
        n, h, w = _crop(ctx, n, top, left, ch, cw), ch, cw
    elif pad:
        top, left = aspect_pad(h, w, height, width)
        pads = e.ints([0, top, left, 0, 0, top, left, 0], "pads")
        n = e.op("Pad", [n, pads, e.const(np.float32(fill_value), "fill")], "pad")
        h, w = h + 2 * top, w + 2 * left
    return _from_nhwc(ctx, resize_nhwc(ctx, n, h, w, height, width, method, antialias), fmt, rank)


@register("CenterCrop")
def center_crop(ctx: MapContext, x: Value) -> Value:
    check_keys(ctx.spec, ("height", "width", "data_format", "bounding_box_format"))
    fmt = data_format(ctx.spec)
    height, width = ctx.get("height"), ctx.get("width")
    for key, value in (("height", height), ("width", width)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ctx.unsupported(key, value)
    h, w, rank = _static_hw(ctx, fmt)
    n = _to_nhwc(ctx, x, fmt, rank)
    if h >= height and w >= width:
        out = _crop(ctx, n, (h - height) // 2, (w - width) // 2, height, width)
    else:  # smaller than the target: Keras's smart_resize (aspect crop, then bilinear)
        top, left, ch, cw = crop_box(h, w, height, width)
        out = resize_nhwc(ctx, _crop(ctx, n, top, left, ch, cw), ch, cw, height, width, "bilinear", False)
    return _from_nhwc(ctx, out, fmt, rank)
