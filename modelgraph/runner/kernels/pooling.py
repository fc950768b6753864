"""Kernels: pooling family (see modelgraph/runner/registry.py for the contract).

TF semantics (docs/formats.md, "Convolution and pooling numerics"): ``same`` padding puts the extra cell after; max pooling pads with
-inf; average pooling with ``same`` divides by the number of valid (unpadded) cells. ``strides``
defaults to ``pool_size``. Non-overlapping valid pooling is a reshape + reduce; everything else loops
over the pool taps only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from modelgraph.runner.kernels._conv_utils import (
    EW_BLOCK_BYTES,
    Pads,
    check_keys,
    data_format,
    float_dtype,
    from_last,
    int_tuple,
    out_sizes,
    pad_spatial,
    padding_mode,
    row_blocks,
    scratch,
    spread_parts,
    tap_reduce,
    to_last,
    window2d,
    window_pads,
)
from modelgraph.runner.parallel import for_each
from modelgraph.runner.registry import Kernel, KernelSpec, register


def _make_pool(spec: KernelSpec, rank: int, kind: str) -> Kernel:
    check_keys(spec, ("pool_size", "strides", "padding", "data_format"))
    dtype = float_dtype(spec)
    fmt = data_format(spec)
    pool = int_tuple(spec, "pool_size", rank, 2)
    strides = pool if spec.get("strides") is None else int_tuple(spec, "strides", rank, None)
    mode = padding_mode(spec, ("valid", "same"))
    ones = (1,) * rank
    reduce_fn = np.max if kind == "max" else np.mean

    def run(inputs: Any) -> np.ndarray:
        x = to_last(np.asarray(inputs, dtype=dtype), fmt)
        if x.ndim != rank + 2:
            raise ValueError(f"expected a rank-{rank + 2} input, got shape {x.shape}")
        batch, sizes, channels = x.shape[0], x.shape[1:-1], x.shape[-1]
        pads = window_pads(mode, sizes, pool, strides, ones)
        if strides == pool and not any(b or a for b, a in pads):
            out = out_sizes(sizes, pool, strides, ones)
            cropped = x[(slice(None), *(slice(0, o * p) for o, p in zip(out, pool, strict=True)))]
            shape = [batch]
            for o, p in zip(out, pool, strict=True):
                shape += [o, p]
            blocks = cropped.reshape(*shape, channels)
            return from_last(reduce_fn(blocks, axis=tuple(range(2, 2 * rank + 1, 2))), fmt)
        if rank <= 2:
            x2 = np.ascontiguousarray(x if rank == 2 else x[:, None])
            pads2 = pads if rank == 2 else [(0, 0), *pads]
            pool2, strides2 = (pool, strides) if rank == 2 else ((1, *pool), (1, *strides))
            if kind == "max":
                out = max_pool2d(x2, pool2, strides2, pads2)
            else:
                padded = [n + b + a for n, (b, a) in zip(sizes, pads, strict=True)]
                counts = _valid_counts(
                    sizes, pool, strides, pads, out_sizes(padded, pool, strides, ones), dtype
                )
                out = avg_pool2d(x2, pool2, strides2, pads2, counts if rank == 2 else counts[None])
            return from_last(out if rank == 2 else out[:, 0], fmt)
        if kind == "max":
            xp = pad_spatial(x, pads, -np.inf)
        else:
            xp = pad_spatial(x, pads, 0.0)
        out = out_sizes(xp.shape[1:-1], pool, strides, ones)
        combine = np.maximum if kind == "max" else np.add

        def first(dst: np.ndarray, src: np.ndarray, tap: tuple[int, ...]) -> None:
            np.copyto(dst, src)

        def step(dst: np.ndarray, src: np.ndarray, tap: tuple[int, ...]) -> None:
            combine(dst, src, out=dst)

        acc = tap_reduce(xp, pool, strides, ones, channels, first, step)
        if kind == "avg":
            acc /= _valid_counts(sizes, pool, strides, pads, out, dtype)[..., None]
        return from_last(acc, fmt)

    return run


def _max_along(
    dst: np.ndarray, src: np.ndarray, axis: int, k: int, s: int, pad: int, lo: int, hi: int
) -> None:
    """``dst[o - lo] = max over taps i of src[o*s - pad + i]`` along ``axis`` for outputs ``lo:hi``,
    taps outside ``src`` skipped (the same as -inf padding, without a padded copy)."""
    n = src.shape[axis]
    lead = (slice(None),) * axis
    full, partial = [], []
    for i in range(k):
        a = max(lo, -(-(pad - i) // s))
        b = min(hi, (n - 1 + pad - i) // s + 1)
        if b <= a:
            continue
        start = a * s - pad + i
        view = src[(*lead, slice(start, start + (b - a - 1) * s + 1, s))]
        (full if (a, b) == (lo, hi) else partial).append((a, b, view))
    # Every output has at least one tap fully inside (TF's padding never exceeds the window).
    if len(full) >= 2:
        np.maximum(full[0][2], full[1][2], out=dst)
        rest = full[2:] + partial
    else:
        np.copyto(dst, full[0][2])
        rest = full[1:] + partial
    for a, b, view in rest:
        part = dst[(*lead, slice(a - lo, b - lo))]
        np.maximum(part, view, out=part)


def max_pool2d(x: np.ndarray, pool: tuple[int, ...], strides: tuple[int, ...], pads: Pads) -> np.ndarray:
    """Max pooling of a C-ordered ``(B, H, W, C)`` array, separably and a block of output rows at a time:
    first over the pool's rows (whole contiguous input rows per op), into a scratch block, then over
    its columns. Max is exact, so the order does not matter; padding is never materialised."""
    batch, height, width, channels = x.shape
    (ph, pw), (sh, sw) = pool, strides
    (pt, _), (pl, _) = pads
    oh, ow = out_sizes([height + sum(pads[0]), width + sum(pads[1])], pool, strides, (1, 1))
    out = np.empty((batch, oh, ow, channels), dtype=x.dtype)
    target = max(1, EW_BLOCK_BYTES // (channels * x.itemsize))

    def block(bounds: tuple[int, int, int, int]) -> None:
        n0, n1, h0, h1 = bounds
        if ph == sh == 1 and pt == 0:
            rows = x[n0:n1, h0:h1]
        else:
            rows = scratch(0, (n1 - n0, h1 - h0, width, channels), x.dtype)
            _max_along(rows, x[n0:n1], 1, ph, sh, pt, h0, h1)
        _max_along(out[n0:n1, h0:h1], rows, 2, pw, sw, pl, 0, ow)

    # Blocks write disjoint output rows (the scratch rows are per thread): spread them when big enough.
    work = batch * oh * ow * channels * ph * pw
    for_each(block, row_blocks(batch, oh, width, target, spread_parts(work)), work)
    return out


def padded_max_pool2d(spec: KernelSpec, pads: Pads) -> Kernel:
    """A valid-padded channels-last MaxPooling2D whose input is first zero-padded by ``pads`` (a
    merged ZeroPadding2D, each side narrower than the pool): the max over the window's input cells,
    then at least 0 where the window reaches into the padding. The padded input is never built."""
    check_keys(spec, ("pool_size", "strides", "padding", "data_format"))
    if data_format(spec) != "channels_last":
        raise spec.unsupported("data_format", spec.get("data_format"))
    if padding_mode(spec, ("valid", "same")) != "valid":
        raise spec.unsupported("padding", spec.get("padding"))
    pool = int_tuple(spec, "pool_size", 2, 2)
    strides = pool if spec.get("strides") is None else int_tuple(spec, "strides", 2, None)
    if any(a >= k or b >= k or a < 0 or b < 0 for (a, b), k in zip(pads, pool, strict=True)):
        raise spec.unsupported("pads", pads)
    dtype = float_dtype(spec)

    def run(inputs: Any) -> np.ndarray:
        x = np.ascontiguousarray(inputs, dtype=dtype)
        if x.ndim != 4:
            raise ValueError(f"expected a rank-4 input, got shape {x.shape}")
        out = max_pool2d(x, pool, strides, pads)
        zero = out.dtype.type(0)
        for axis, ((before, _), k, s, n) in enumerate(zip(pads, pool, strides, x.shape[1:3], strict=True)):
            # Output o reads padded cells o*s .. o*s + k - 1; cells < before or >= before + n are zeros.
            touching = [o for o in range(out.shape[axis + 1]) if o * s < before or o * s + k > before + n]
            for o in touching:
                index = (slice(None), o) if axis == 0 else (slice(None), slice(None), o)
                np.maximum(out[index], zero, out=out[index])
        return out

    return run


def avg_pool2d(
    x: np.ndarray, pool: tuple[int, ...], strides: tuple[int, ...], pads: Pads, counts: np.ndarray
) -> np.ndarray:
    """Average pooling of a C-ordered ``(B, H, W, C)`` array: window sums tap by tap (row-major, as
    before) a block at a time, divided by the per-position count of unpadded cells."""
    counts = counts[..., None]

    def first(dst: np.ndarray, src: np.ndarray, tap: int) -> None:
        np.copyto(dst, src)

    def step(dst: np.ndarray, src: np.ndarray, tmp: np.ndarray, tap: int) -> None:
        np.add(dst, src, out=dst)

    def finish(dst: np.ndarray, h0: int, h1: int) -> None:
        np.divide(dst, counts[h0:h1], out=dst)

    return window2d(x, pool, strides, (1, 1), pads, 0.0, first, step, finish)


def _valid_counts(
    sizes: tuple[int, ...],
    pool: tuple[int, ...],
    strides: tuple[int, ...],
    pads: list[tuple[int, int]],
    out: tuple[int, ...],
    dtype: np.dtype,
) -> np.ndarray:
    """How many unpadded cells each output window covers (outer product of per-axis counts)."""
    counts = np.ones((), dtype=dtype)
    for n, p, s, (before, _), o in zip(sizes, pool, strides, pads, out, strict=True):
        start = np.arange(o) * s - before
        per_axis = (np.minimum(start + p, n) - np.maximum(start, 0)).astype(dtype)
        counts = np.multiply.outer(counts, per_axis)
    return counts


def _pool_factory(rank: int, kind: str):
    def factory(spec: KernelSpec) -> Kernel:
        return _make_pool(spec, rank, kind)

    factory.__name__ = f"{kind}_pooling{rank}d"
    return factory


for _rank in (1, 2, 3):
    register(f"MaxPooling{_rank}D", f"MaxPool{_rank}D")(_pool_factory(_rank, "max"))
    register(f"AveragePooling{_rank}D", f"AvgPool{_rank}D")(_pool_factory(_rank, "avg"))


# --- global pooling --------------------------------------------------------------------------


def _make_global(spec: KernelSpec, rank: int, kind: str) -> Kernel:
    check_keys(spec, ("data_format", "keepdims"))
    dtype = float_dtype(spec)
    fmt = data_format(spec)
    keepdims = spec.get("keepdims", False)
    if keepdims not in (True, False, None):
        raise spec.unsupported("keepdims", keepdims)
    keepdims = bool(keepdims)
    axes = tuple(range(2, rank + 2)) if fmt == "channels_first" else tuple(range(1, rank + 1))
    masked = kind == "avg" and rank == 1

    def run(inputs: Any, mask: Any = None) -> np.ndarray:
        x = np.asarray(inputs, dtype=dtype)
        if x.ndim != rank + 2:
            raise ValueError(f"expected a rank-{rank + 2} input, got shape {x.shape}")
        if mask is not None:
            if not masked:
                raise TypeError(f"{spec.class_name} takes no mask")
            m = np.expand_dims(np.asarray(mask).astype(bool), 2 if fmt == "channels_last" else 1)
            total = np.sum(
                np.where(m, x, dtype.type(0)), axis=1 if fmt == "channels_last" else 2, keepdims=keepdims
            )
            count = np.sum(m.astype(dtype), axis=1 if fmt == "channels_last" else 2, keepdims=keepdims)
            # A fully masked row gives 0 / 0 = NaN, as in Keras; that is the answer, not a warning.
            with np.errstate(invalid="ignore", divide="ignore"):
                return total / count
        if kind == "max":
            return np.max(x, axis=axes, keepdims=keepdims)
        return np.mean(x, axis=axes, keepdims=keepdims)

    return run


def _global_factory(rank: int, kind: str):
    def factory(spec: KernelSpec) -> Kernel:
        return _make_global(spec, rank, kind)

    factory.__name__ = f"global_{kind}_pooling{rank}d"
    return factory


for _rank in (1, 2, 3):
    register(f"GlobalMaxPooling{_rank}D", f"GlobalMaxPool{_rank}D")(_global_factory(_rank, "max"))
    register(f"GlobalAveragePooling{_rank}D", f"GlobalAvgPool{_rank}D")(_global_factory(_rank, "avg"))
