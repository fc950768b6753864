"""Reshaping layers: Flatten, Reshape, Permute, RepeatVector, ZeroPadding, Cropping, UpSampling (nearest).

Semantics: ``modelgraph/runner/kernels/reshaping.py``. Flatten and Reshape work on Keras's layout
(a channels-first stored tensor is transposed back first, so the element order is Keras's);
ZeroPadding and Cropping act on whatever layout the input is stored in.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from modelgraph.layer_params import check_keys, data_format, int_tuple, pair_tuple
from modelgraph.saving.onnx.emitter import Value
from modelgraph.saving.onnx.mappings._spatial import physical_pads
from modelgraph.saving.onnx.registry import MapContext, register


@register("Flatten")
def flatten(ctx: MapContext, x: Value) -> Value:
    check_keys(ctx.spec, ("data_format",))
    fmt = data_format(ctx.spec)
    rank = x.rank if x.rank is not None else ctx.rank()
    e = ctx.e
    if fmt == "channels_first" and rank > 2:
        n = e.in_layout(x, (0, *range(2, rank), 1))
    else:
        n = e.logical(x)
    return Value(e.op("Flatten", [n], "flatten", axis=1), 2, None, x.dtype)


@register("Reshape")
def reshape(ctx: MapContext, x: Value) -> Value:
    check_keys(ctx.spec, ("target_shape",))
    target = ctx.get("target_shape")
    if not isinstance(target, (list, tuple)) or not all(
        isinstance(v, int) and not isinstance(v, bool) and (v > 0 or v == -1) for v in target
    ):
        raise ctx.unsupported("target_shape", target)
    return Value(reshape_batch(ctx, ctx.e.logical(x), list(target)), len(target) + 1, None, x.dtype)


def reshape_batch(ctx: MapContext, n: str, target: list[int]) -> str:
    """Reshape to (batch, *target): ONNX's 0 copies the batch dimension."""
    return ctx.e.op("Reshape", [n, ctx.e.ints([0, *target], "shape")], "reshape")


@register("Permute")
def permute(ctx: MapContext, x: Value) -> Value:
    check_keys(ctx.spec, ("dims",))
    dims = ctx.get("dims")
    if not isinstance(dims, (list, tuple)) or sorted(dims) != list(range(1, len(dims) + 1)):
        raise ctx.unsupported("dims", dims)
    perm = (0, *(int(d) for d in dims))
    return Value(
        ctx.e.op("Transpose", [ctx.e.logical(x)], "permute", perm=list(perm)), len(perm), None, x.dtype
    )


@register("RepeatVector")
def repeat_vector(ctx: MapContext, x: Value) -> Value:
    check_keys(ctx.spec, ("n",))
    n = ctx.get("n")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ctx.unsupported("n", n)
    e = ctx.e
    u = e.op("Unsqueeze", [e.logical(x), e.ints([1], "axes")])
    return Value(e.op("Tile", [u, e.ints([1, n, 1], "repeats")], "repeat"), 3, None, x.dtype)


def _spatial_axes(fmt: str, rank: int) -> list[int]:
    return list(range(2, rank + 2)) if fmt == "channels_first" else list(range(1, rank + 1))


def _zero_padding(ctx: MapContext, x: Value, rank: int) -> Value:
    check_keys(ctx.spec, ("padding", "data_format"))
    fmt = data_format(ctx.spec)
    pads = pair_tuple(ctx.spec, "padding", rank, 1)
    if any(v < 0 for p in pads for v in p):
        raise ctx.unsupported("padding", ctx.get("padding"))
    per_axis = [(0, 0)] * (rank + 2)
    for a, p in zip(_spatial_axes(fmt, rank), pads, strict=True):
        per_axis[a] = p
    perm = None if x.is_logical else x.perm
    e = ctx.e
    y = e.op("Pad", [x.name, e.ints(physical_pads(e, per_axis, perm), "pads")], "pad")
    return Value(y, rank + 2, perm, x.dtype)


def _cropping(ctx: MapContext, x: Value, rank: int) -> Value:
    check_keys(ctx.spec, ("cropping", "data_format"))
    fmt = data_format(ctx.spec)
    crops = pair_tuple(ctx.spec, "cropping", rank, 1 if rank == 1 else 0)
    axes = _spatial_axes(fmt, rank)
    perm = None if x.is_logical else x.perm
    stored = [perm.index(a) if perm is not None else a for a in axes]
    big = np.iinfo(np.int64).max
    starts = [b for b, _ in crops]
    ends = [-a if a else big for _, a in crops]
    e = ctx.e
    y = e.op(
        "Slice", [x.name, e.ints(starts, "starts"), e.ints(ends, "ends"), e.ints(stored, "axes")], "crop"
    )
    return Value(y, rank + 2, perm, x.dtype)


def _upsampling(ctx: MapContext, x: Value, rank: int) -> Value:
    check_keys(ctx.spec, ("size", "data_format", "interpolation") if rank == 2 else ("size", "data_format"))
    fmt = data_format(ctx.spec)
    size = int_tuple(ctx.spec, "size", rank, 2)
    interpolation = ctx.get("interpolation", "nearest") if rank == 2 else "nearest"
    e = ctx.e
    n = e.logical(x)
    if interpolation != "nearest" and rank == 2:
        from modelgraph.saving.onnx.mappings.resample import resize_nhwc

        shape = ctx.in_shapes[0] if ctx.in_shapes else None
        if shape is None or any(not isinstance(d, int) for d in shape[1:]):
            raise ctx.unsupported("input shape", shape)
        # Keras resizes to the multiplied size with tf.image.resize (no antialiasing).
        nhwc = n if fmt == "channels_last" else e.op("Transpose", [n], perm=[0, 2, 3, 1])
        h, w = (shape[1], shape[2]) if fmt == "channels_last" else (shape[2], shape[3])
        y = resize_nhwc(ctx, nhwc, h, w, h * size[0], w * size[1], interpolation, False)
        y = y if fmt == "channels_last" else e.op("Transpose", [y], perm=[0, 3, 1, 2])
        return Value(y, 4, None, "float32")
    if interpolation != "nearest":
        raise ctx.unsupported("interpolation", interpolation)
    out = n
    for axis, s in zip(_spatial_axes(fmt, rank), size, strict=True):
        if s != 1:
            reps = [1] * (rank + 3)
            reps[axis + 1] = s
            u = e.op("Unsqueeze", [out, e.ints([axis + 1], "axes")])
            out = _merge_axes(ctx, e.op("Tile", [u, e.ints(reps, "reps")]), axis, rank + 3)
    return Value(out, rank + 2, None, x.dtype)


def _merge_axes(ctx: MapContext, n: str, axis: int, rank: int) -> str:
    """Reshape merging axes ``axis`` and ``axis + 1`` of a rank-``rank`` tensor."""
    e = ctx.e
    shape = e.op("Shape", [n])
    before = e.op("Slice", [shape, e.ints([0], "s"), e.ints([axis], "e")])
    merged = e.ints([-1], "m")
    after = e.op("Slice", [shape, e.ints([axis + 2], "s"), e.ints([rank], "e")])
    return e.op("Reshape", [n, e.op("Concat", [before, merged, after], axis=0)], "upsample")


for _rank in (1, 2, 3):

    def _bind(fn: Any, rank: int):
        def mapping(ctx: MapContext, x: Value) -> Value:
            return fn(ctx, x, rank)

        return mapping

    register(f"ZeroPadding{_rank}D")(_bind(_zero_padding, _rank))
    register(f"Cropping{_rank}D")(_bind(_cropping, _rank))
    register(f"UpSampling{_rank}D")(_bind(_upsampling, _rank))
