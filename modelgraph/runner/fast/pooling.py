"""Fast kernels of the pooling family, chosen at plan time in place of the reference kernels of
``modelgraph/runner/kernels/pooling.py`` (see ``modelgraph/runner/fast/__init__.py``). They compute
what the reference kernels compute; ``tests/runner/test_fast_vs_reference.py`` checks that over
random shapes, pool sizes, strides, paddings, dtypes, both data formats and non-contiguous inputs.

Speed: 1-D and 2-D pooling run a block of output rows at a time, spread over threads (separably,
over the pool's rows then its columns, never building the padded input; average pooling divides by
the per-position count of unpadded cells while the block is in cache); 3-D pooling folds the pool's taps into one output block at a time.
Non-overlapping windows take the same paths: one reshape and one reduction over the window axes
(NumPy reducing over two or three strided axes at once) was slower in most cases measured
single-threaded (2x2 and 2x2x2 pools, batch 1 and 8): 1.5-5x for max pooling and 3-D average
pooling, about even to 1.7x for 2-D average pooling.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from modelgraph.runner.fast import blocks, jit
from modelgraph.runner.fast.blocks import row_blocks, scratch, spread_parts, tap_reduce
from modelgraph.runner.kernels import pooling as reference_pooling
from modelgraph.runner.kernels.conv_utils import (
    Pads,
    WindowParams,
    float_dtype,
    from_last,
    out_sizes,
    pad_spatial,
    ranked_factory,
)
from modelgraph.runner.kernels.pooling import RANKS, pool_params
from modelgraph.runner.parallel import for_each
from modelgraph.runner.registry import Kernel, KernelSpec


def _pool_2d(x: np.ndarray, p: WindowParams, kind: str, pads: Pads) -> np.ndarray:
    """1-D or 2-D pooling of a channels-last ``x`` as a C-ordered ``(B, H, W, C)`` problem (a 1-D
    input gets a height of 1)."""
    flat = p.rank == 1
    x2 = np.ascontiguousarray(x[:, None] if flat else x)
    pads2 = [(0, 0), *pads] if flat else pads
    pool2, strides2 = ((1, *p.kernel_size), (1, *p.strides)) if flat else (p.kernel_size, p.strides)
    if kind == "max":
        out = max_pool2d(x2, pool2, strides2, pads2)
    elif jit.available() and x2.dtype == np.float32:
        out = _compiled_avg_pool2d(x2, pool2, strides2, pads2)
    else:
        counts = valid_counts(x2.shape[1:3], pool2, strides2, pads2, x.dtype)
        out = avg_pool2d(x2, pool2, strides2, pads2, counts)
    return out[:, 0] if flat else out


def _compiled_avg_pool2d(
    x: np.ndarray, pool: tuple[int, ...], strides: tuple[int, ...], pads: Pads, count_padding: bool = False
) -> np.ndarray:
    """Average pooling of a C-ordered float32 ``(B, H, W, C)`` array with the compiled loops (the
    ``jit`` extra): the window's rows summed into one row, then its columns, in cache (NASNetMobile's
    3x3 pools of 7x7 to 28x28 inputs at batch 1: the separable NumPy passes cost 0.2-0.3 ms each,
    mostly per-call overhead), images spread over threads when the call is big enough. Divided by
    each window's count of unpadded cells, or with ``count_padding`` by the pool's area."""
    batch, height, width, channels = x.shape
    oh, ow = out_sizes([height + sum(pads[0]), width + sum(pads[1])], pool, strides, (1, 1))
    out = np.empty((batch, oh, ow, channels), dtype=x.dtype)
    before = (pads[0][0], pads[1][0])

    def image(n: int) -> None:
        jit.avg_pool2d(x[n : n + 1], out[n : n + 1], pool, strides, before, count_padding)

    for_each(image, range(batch), out.size * pool[0] * pool[1])
    return out


def _pool_3d(x: np.ndarray, p: WindowParams, kind: str, pads: Pads) -> np.ndarray:
    """3-D pooling: the pool's taps folded into each output block in turn."""
    ones = (1,) * p.rank
    padded = pad_spatial(x, pads, -np.inf if kind == "max" else 0.0)
    combine = np.maximum if kind == "max" else np.add

    def first(dst: np.ndarray, src: np.ndarray, tap: tuple[int, ...]) -> None:
        np.copyto(dst, src)

    def step(dst: np.ndarray, src: np.ndarray, tap: tuple[int, ...]) -> None:
        combine(dst, src, out=dst)

    acc = tap_reduce(padded, p.kernel_size, p.strides, ones, x.shape[-1], first, step)
    if kind == "avg":
        acc /= valid_counts(x.shape[1:-1], p.kernel_size, p.strides, pads, x.dtype)[..., None]
    return acc


def _make_pool(spec: KernelSpec, rank: int, kind: str) -> Kernel:
    p = pool_params(spec, rank)

    def run(inputs: Any) -> np.ndarray:
        x = p.channels_last_input(inputs)
        pads = p.pads(x)
        if rank <= 2:
            out = _pool_2d(x, p, kind, pads)
        else:
            out = _pool_3d(x, p, kind, pads)
        return from_last(out, p.fmt)

    return run


def _reduce_along(
    dst: np.ndarray,
    src: np.ndarray,
    axis: int,
    k: int,
    s: int,
    pad: int,
    lo: int,
    hi: int,
    combine: np.ufunc = np.maximum,
) -> None:
    """``dst[o - lo] = combine over taps i of src[o*s - pad + i]`` along ``axis`` for outputs ``lo:hi``
    (``np.maximum``: the max; ``np.add``: the sum), taps outside ``src`` skipped (the same as -inf /
    zero padding, without a padded copy)."""
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
    # With TF's padding some tap is inside the input for every output (the padding is narrower than
    # half the window). A merged ZeroPadding2D can pad more on one side (each side narrower than the
    # window): every output still has a tap inside, but maybe no tap index is inside for all of them.
    if len(full) >= 2:
        combine(full[0][2], full[1][2], out=dst)
        rest = full[2:] + partial
    elif full:
        np.copyto(dst, full[0][2])
        rest = partial
    else:
        dst.fill(-np.inf if combine is np.maximum else 0.0)
        rest = partial
    for a, b, view in rest:
        part = dst[(*lead, slice(a - lo, b - lo))]
        combine(part, view, out=part)


def max_pool2d(x: np.ndarray, pool: tuple[int, ...], strides: tuple[int, ...], pads: Pads) -> np.ndarray:
    """Max pooling of a C-ordered ``(B, H, W, C)`` array, separably and a block of output rows at a time:
    first over the pool's rows (whole contiguous input rows per op), into a scratch block, then over
    its columns. Max is exact, so the order does not matter; padding is never materialised."""
    return _separable_pool2d(x, pool, strides, pads, np.maximum, None)


def avg_pool2d(
    x: np.ndarray, pool: tuple[int, ...], strides: tuple[int, ...], pads: Pads, counts: np.ndarray
) -> np.ndarray:
    """Average pooling of a C-ordered ``(B, H, W, C)`` array, separably like :func:`max_pool2d`: window
    sums over the pool's rows, then its columns (``ph + pw - 2`` adds per output instead of ``ph * pw -
    1``; NASNetMobile's 3x3 pools: 4 passes instead of 8), divided by ``counts`` (per output position,
    see :func:`valid_counts`) while the block is in cache. The sums are those of the window's cells in
    another order (rows first), equal up to float rounding."""
    return _separable_pool2d(x, pool, strides, pads, np.add, counts[..., None])


def _separable_pool2d(
    x: np.ndarray,
    pool: tuple[int, ...],
    strides: tuple[int, ...],
    pads: Pads,
    combine: np.ufunc,
    divisor: np.ndarray | None,
) -> np.ndarray:
    """``combine`` over each window, a block of output rows at a time, then divided by ``divisor``
    (``(oh, ow, 1)``; None: nothing)."""
    batch, height, width, channels = x.shape
    (ph, pw), (sh, sw) = pool, strides
    (pt, _), (pl, _) = pads
    oh, ow = out_sizes([height + sum(pads[0]), width + sum(pads[1])], pool, strides, (1, 1))
    out = np.empty((batch, oh, ow, channels), dtype=x.dtype)
    target = max(1, blocks.EW_BLOCK_BYTES // (channels * x.itemsize))

    def block(bounds: tuple[int, int, int, int]) -> None:
        n0, n1, h0, h1 = bounds
        if ph == sh == 1 and pt == 0:
            rows = x[n0:n1, h0:h1]
        else:
            rows = scratch(0, (n1 - n0, h1 - h0, width, channels), x.dtype)
            _reduce_along(rows, x[n0:n1], 1, ph, sh, pt, h0, h1, combine)
        dst = out[n0:n1, h0:h1]
        _reduce_along(dst, rows, 2, pw, sw, pl, 0, ow, combine)
        if divisor is not None:
            np.divide(dst, divisor[h0:h1], out=dst)

    # Blocks write disjoint output rows (the scratch rows are per thread): spread them when big enough.
    work = batch * oh * ow * channels * ph * pw
    for_each(block, row_blocks(batch, oh, width, target, spread_parts(work)), work)
    return out


def valid_counts(
    sizes: tuple[int, ...], pool: tuple[int, ...], strides: tuple[int, ...], pads: Pads, dtype: np.dtype
) -> np.ndarray:
    """How many unpadded cells each output window of an input of ``sizes`` padded by ``pads``
    covers: the outer product of the per-axis counts."""
    padded = [n + b + a for n, (b, a) in zip(sizes, pads, strict=True)]
    out = out_sizes(padded, pool, strides, (1,) * len(pool))
    counts = np.ones((), dtype=dtype)
    for n, k, s, (before, _), o in zip(sizes, pool, strides, pads, out, strict=True):
        start = np.arange(o) * s - before
        per_axis = (np.minimum(start + k, n) - np.maximum(start, 0)).astype(dtype)
        counts = np.multiply.outer(counts, per_axis)
    return counts


def _zero_padded_pool(spec: KernelSpec, pads: Pads) -> WindowParams:
    """The parameters of a 2-D pooling that reads explicit zero ``pads`` itself: channels-last, valid,
    each pad narrower than the pool (so no window lies in the padding alone)."""
    p = pool_params(spec, 2)
    if p.fmt != "channels_last":
        raise spec.unsupported("data_format", spec.get("data_format"))
    if p.mode != "valid":
        raise spec.unsupported("padding", spec.get("padding"))
    if any(a >= k or b >= k or a < 0 or b < 0 for (a, b), k in zip(pads, p.kernel_size, strict=True)):
        raise spec.unsupported("pads", pads)
    return p


def padded_max_pool2d(spec: KernelSpec, pads: Pads) -> Kernel:
    """A valid-padded channels-last MaxPooling2D whose input is first zero-padded by ``pads`` (a
    merged ZeroPadding2D, each side narrower than the pool): the max over the window's input cells,
    then at least 0 where the window reaches into the padding. The padded input is never built."""
    p = _zero_padded_pool(spec, pads)

    def run(inputs: Any) -> np.ndarray:
        x = np.ascontiguousarray(p.channels_last_input(inputs))
        out = max_pool2d(x, p.kernel_size, p.strides, pads)
        zero = out.dtype.type(0)
        for axis, ((before, _), k, s, n) in enumerate(
            zip(pads, p.kernel_size, p.strides, x.shape[1:3], strict=True)
        ):
            # Output o reads padded cells o*s .. o*s + k - 1; cells < before or >= before + n are zeros.
            touching = [o for o in range(out.shape[axis + 1]) if o * s < before or o * s + k > before + n]
            for o in touching:
                index = (slice(None), o) if axis == 0 else (slice(None), slice(None), o)
                np.maximum(out[index], zero, out=out[index])
        return out

    return run


def padded_avg_pool2d(spec: KernelSpec, pads: Pads) -> Kernel:
    """A valid-padded channels-last AveragePooling2D whose input is first zero-padded by ``pads`` (a
    merged ZeroPadding2D, each side narrower than the pool): each window's sum over its input cells
    divided by the pool's area, the padding counting as zeros. The padded input is never built."""
    p = _zero_padded_pool(spec, pads)
    area = p.kernel_size[0] * p.kernel_size[1]

    def run(inputs: Any) -> np.ndarray:
        x = np.ascontiguousarray(p.channels_last_input(inputs))
        if jit.available() and x.dtype == np.float32:
            return _compiled_avg_pool2d(x, p.kernel_size, p.strides, pads, count_padding=True)
        padded = [n + a + b for n, (a, b) in zip(x.shape[1:3], pads, strict=True)]
        counts = np.full(out_sizes(padded, p.kernel_size, p.strides, (1, 1)), area, dtype=x.dtype)
        return avg_pool2d(x, p.kernel_size, p.strides, pads, counts)

    return run


# (kind, rank) -> the fast kernel replacing ``kernels.pooling.POOLING[kind, rank]``.
POOLING = {
    (kind, rank): ranked_factory(_make_pool, rank, kind, name=f"{kind}_pooling{rank}d")
    for kind in ("max", "avg")
    for rank in RANKS
}


def _make_global_avg(spec: KernelSpec, rank: int) -> Kernel:
    """Global average pooling of channels-last float32 inputs as one matrix-vector product per image
    (``(1/N) * ones(N) @ x[b].reshape(N, C)``, N the spatial size): BLAS's vectorised dot products
    instead of NumPy's reduction over the spatial axes, which runs row by row of C values
    (EfficientNetB0's excitations at batch 1, one core: 2-9x faster; float32 error against float64
    1.3e-8-5.7e-8, NumPy's mean 3.8e-8-1.8e-7). Anything else (channels_first, a mask, other
    dtypes) runs the reference kernel."""
    reference = reference_pooling.GLOBAL_POOLING["avg", rank](spec)
    if (
        spec.get("data_format", "channels_last") not in (None, "channels_last")
        or float_dtype(spec) != np.float32
    ):
        return reference
    keepdims = bool(spec.get("keepdims", False))

    def run(inputs: Any, mask: Any = None) -> np.ndarray:
        x = np.asarray(inputs)
        if mask is not None or x.dtype != np.float32 or x.ndim != rank + 2 or x.size == 0:
            return reference(inputs, mask)
        batch, channels = x.shape[0], x.shape[-1]
        pixels = x.size // (batch * channels)
        weights = np.full(pixels, 1.0 / pixels, dtype=np.float32)
        out = np.empty((batch, channels), dtype=np.float32)
        for b in range(batch):
            np.dot(weights, x[b].reshape(pixels, channels), out=out[b])
        return out.reshape(batch, *(1,) * rank, channels) if keepdims else out

    return run


# rank -> the fast kernel replacing ``kernels.pooling.GLOBAL_POOLING["avg", rank]``.
GLOBAL_AVG = {
    rank: ranked_factory(_make_global_avg, rank, name=f"global_avg_pooling{rank}d") for rank in RANKS
}
