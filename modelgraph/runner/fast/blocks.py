"""The blocking machinery of the fast kernels: per-thread scratch arenas, output row blocks spread
over threads, padded row slabs, and tap loops that reduce a block while it is in cache.

Kernels here work on channels-last arrays ``(batch, *spatial, channels)``. The block sizes are read
from this module when a kernel runs (``blocks.GEMM_MIN_ROWS``), so a test can shrink them in one place
to cut every layer into many blocks.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
from collections.abc import Callable, Sequence

import numpy as np

from modelgraph.runner.kernels.conv_utils import Pads, out_sizes
from modelgraph.runner.parallel import thread_count, threads_for

_LOCAL = threading.local()


def _blas_threads() -> int:
    """The thread count OpenBLAS / OpenMP will use, from the usual variables (else every CPU)."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(var, "").split(",")[0].strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return os.cpu_count() or 1


# Bytes of an im2col block (rows x kernel-taps*channels) and of an element-wise block: big enough for
# long BLAS / ufunc calls, small enough to stay in the L2 cache while it is filled and consumed.
# A multi-threaded BLAS wakes and joins its threads on every call, so it gets fewer, larger blocks.
# Measured with 2 OpenBLAS threads on an idle 2-core machine (3x3 convs at batch 8, 56x56x64 to
# 7x7x512): 4 MiB blocks ran at 128-176 GFLOP/s (65-88% of sgemm peak), 1 MiB at 88-148 and
# 16 MiB at 68-171; on a heavily loaded machine larger blocks did better still.
GEMM_BLOCK_BYTES = 1 << 20 if _blas_threads() == 1 else 1 << 22
# A block spread to a thread of its own runs on single-threaded BLAS: it gets the one-thread size.
SPREAD_BLOCK_BYTES = 1 << 20
GEMM_MIN_ROWS = 512
EW_BLOCK_BYTES = 1 << 18
DW_BLOCK_BYTES = 1 << 19


def serial_block_bytes(output_bytes: int) -> int:
    """Scratch bytes per block for a kernel whose blocks run in turn (each GEMM on all of BLAS's
    threads): ``GEMM_BLOCK_BYTES``, but no more than its output (at least ``SPREAD_BLOCK_BYTES``), so
    what a small call keeps for the next ones stays in proportion to its activations."""
    return min(GEMM_BLOCK_BYTES, max(SPREAD_BLOCK_BYTES, output_bytes))


def scratch(slot: int, shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """A reusable per-thread buffer of ``shape`` (uninitialised, C-ordered).

    Every kernel running on one thread shares the same few slots (a kernel uses distinct slots for
    buffers alive at the same time and never returns one), so the memory held is the largest block
    any layer asked for, not a copy per layer. :func:`scratch_bytes` reports it.
    """
    arenas: dict[int, np.ndarray] | None = getattr(_LOCAL, "arenas", None)
    if arenas is None:
        arenas = _LOCAL.arenas = {}
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    buf = arenas.get(slot)
    if buf is None or buf.nbytes < nbytes:
        buf = arenas[slot] = np.empty(max(nbytes, 64), dtype=np.uint8)
    return buf[:nbytes].view(dtype).reshape(tuple(shape))


def scratch_bytes() -> int:
    """Bytes held by this thread's scratch buffers."""
    return sum(b.nbytes for b in getattr(_LOCAL, "arenas", {}).values())


def row_blocks(
    batch: int, rows: int, per_row: int, target: int, parts: int = 1
) -> list[tuple[int, int, int, int]]:
    """Split ``batch`` images of ``rows`` output rows (``per_row`` units each) into blocks of about
    ``target`` units: ``(n0, n1, r0, r1)``, whole images together when an image is smaller.

    ``parts`` > 1: the blocks are spread over that many threads (:func:`spread_parts`). Their count
    is then a multiple of ``parts`` where the rows and images allow it, and their sizes differ by at
    most one row or image, so no thread waits while another runs an odd last block (MobileNetV2 at
    batch 8 split its 14x14 layers into blocks of 3, 3 and 2 images: 1.3-1.6 of 2 cores busy)."""
    per_image = rows * per_row
    if per_image >= target:
        step = max(1, target // per_row)
        if parts <= 1:
            return [(b, b + 1, r0, min(rows, r0 + step)) for b in range(batch) for r0 in range(0, rows, step)]
        bands = -(-rows // step)
        while (batch * bands) % parts and bands < rows:
            bands += 1
        return [(b, b + 1, r0, r1) for b in range(batch) for r0, r1 in _even(rows, bands)]
    images = max(1, target // per_image)
    if parts <= 1:
        return [(b0, min(batch, b0 + images), 0, rows) for b0 in range(0, batch, images)]
    count = -(-batch // images)  # blocks of `images` images
    count = min(batch, -(-count // parts) * parts)
    return [(n0, n1, 0, rows) for n0, n1 in _even(batch, count)]


def _even(total: int, count: int) -> list[tuple[int, int]]:
    """``count`` consecutive ranges covering ``range(total)``, their lengths differing by at most 1."""
    return [(i * total // count, (i + 1) * total // count) for i in range(count)]


def spread_parts(work: float) -> int:
    """The threads :func:`for_each` spreads the blocks of a kernel doing ``work`` over (1: serial),
    to pass to :func:`row_blocks` as ``parts``."""
    return threads_for(thread_count(), work)


def slab(
    x: np.ndarray,
    n0: int,
    n1: int,
    r0: int,
    r1: int,
    pads: Pads,
    value: float,
    slot: int,
    fill: Callable[[np.ndarray, int, int], None] | None = None,
    channels: int | None = None,
) -> np.ndarray:
    """Rows ``r0:r1`` (padded coordinates) of images ``n0:n1`` of a ``(B, H, W, C)`` array padded by
    ``pads`` with ``value``: a view when there is no padding, else a scratch copy.

    ``fill(dst, a, b)``, when given, writes unpadded rows ``a:b`` of the band's images into ``dst``
    (the slab's interior, or the whole slab when there is no padding) in place of copying
    ``x[n0:n1, a:b]``: a stage computed on the fly, e.g. an expansion GEMM, with ``channels``
    channels; ``x`` then only gives the height and width."""
    (top, bottom), (left, right) = pads
    height, width = x.shape[1:3]
    channels = x.shape[3] if channels is None else channels
    if not (top or bottom or left or right):
        if fill is None:
            return x[n0:n1, r0:r1]
        whole = scratch(slot, (n1 - n0, r1 - r0, width, channels), x.dtype)
        fill(whole, r0, r1)
        return whole
    buf = scratch(slot, (n1 - n0, r1 - r0, width + left + right, channels), x.dtype)
    a, b = max(r0 - top, 0), min(r1 - top, height)
    if b <= a:
        buf.fill(value)
        return buf
    above, below = a + top - r0, b + top - r0
    if above:
        buf[:, :above] = value
    if below < r1 - r0:
        buf[:, below:] = value
    if left:
        buf[:, above:below, :left] = value
    if right:
        buf[:, above:below, left + width :] = value
    interior = buf[:, above:below, left : left + width]
    if fill is None:
        interior[...] = x[n0:n1, a:b]
    else:
        fill(interior, a, b)
    return buf


def window_rows(r0: int, r1: int, kernel: int, stride: int, dilation: int) -> tuple[int, int]:
    """The padded input rows output rows ``r0:r1`` read."""
    return r0 * stride, (r1 - 1) * stride + (kernel - 1) * dilation + 1


def padded_out_sizes(
    x: np.ndarray, pads: Pads, kernel: Sequence[int], strides: Sequence[int], dilation: Sequence[int]
) -> tuple[int, ...]:
    """Output sizes of a 2-D window op over ``(B, H, W, C)`` ``x`` padded by ``pads``."""
    padded = [n + b + a for n, (b, a) in zip(x.shape[1:3], pads, strict=True)]
    return out_sizes(padded, kernel, strides, dilation)


# Output elements per block in tap loops: small enough that the block and one tap's operand stay in
# cache while all taps are accumulated into it.
BLOCK = 1 << 17


def tap_reduce(
    x: np.ndarray,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilation: Sequence[int],
    channels: int,
    first: Callable[[np.ndarray, np.ndarray, tuple[int, ...]], None],
    step: Callable[[np.ndarray, np.ndarray, tuple[int, ...]], None],
) -> np.ndarray:
    """Reduce over kernel taps of a padded channels-last array, block by block.

    ``first(dst, src, tap)`` initialises an output block from the first tap's input window, ``step``
    folds in every further tap. ``src`` has the input's channel count, ``dst`` has ``channels``.
    """
    batch = x.shape[0]
    out = out_sizes(x.shape[1:-1], kernel, strides, dilation)
    acc = np.empty((batch, *out, channels), dtype=x.dtype)
    per_image = math.prod(out) * channels
    row = per_image // out[0]
    if per_image >= BLOCK:
        rows = max(1, BLOCK // row)
        blocks = [
            (b, b + 1, r0, min(out[0], r0 + rows)) for b in range(batch) for r0 in range(0, out[0], rows)
        ]
    else:
        images = max(1, BLOCK // per_image)
        blocks = [(b0, min(batch, b0 + images), 0, out[0]) for b0 in range(0, batch, images)]
    all_taps = list(itertools.product(*(range(k) for k in kernel)))
    for b0, b1, r0, r1 in blocks:
        dst = acc[b0:b1, r0:r1]
        for i, tap in enumerate(all_taps):
            start = tap[0] * dilation[0] + r0 * strides[0]
            sl = (
                slice(b0, b1),
                slice(start, start + (r1 - r0 - 1) * strides[0] + 1, strides[0]),
                *(
                    slice(t * d, t * d + (o - 1) * s + 1, s)
                    for t, d, o, s in zip(tap[1:], dilation[1:], out[1:], strides[1:], strict=True)
                ),
            )
            (first if i == 0 else step)(dst, x[sl], tap)
    return acc


def window2d(
    x: np.ndarray,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilation: Sequence[int],
    pads: Pads,
    pad_value: float,
    first: Callable[[np.ndarray, np.ndarray, int], None],
    step: Callable[[np.ndarray, np.ndarray, np.ndarray, int], None],
    finish: Callable[[np.ndarray, int, int], None] | None = None,
    repeat: int = 1,
) -> np.ndarray:
    """Reduce over the kernel taps of a padded ``(B, H, W, C)`` array, one output block at a time.

    Per block the padded input rows go to a scratch slab (channels repeated ``repeat`` times, for
    depth multipliers), ``first(dst, src, tap)`` initialises the output block from the first tap's
    strided window, ``step(dst, src, tmp, tap)`` folds in each further tap (``tmp``: a scratch block of
    ``dst``'s shape), and ``finish(dst, h0, h1)`` runs while the block is in cache.
    """
    batch, channels = x.shape[0], x.shape[3] * repeat
    kh, kw = kernel
    oh, ow = padded_out_sizes(x, pads, kernel, strides, dilation)
    out = np.empty((batch, oh, ow, channels), dtype=x.dtype)
    target = max(1, EW_BLOCK_BYTES // (channels * x.itemsize))
    all_taps = [(i * kw + j, i * dilation[0], j * dilation[1]) for i in range(kh) for j in range(kw)]
    sh, sw = strides
    for n0, n1, h0, h1 in row_blocks(batch, oh, ow, target):
        r0, r1 = window_rows(h0, h1, kh, sh, dilation[0])
        src = slab(x, n0, n1, r0, r1, pads, pad_value, 0)
        if repeat > 1:
            src = np.repeat(src, repeat, axis=-1)
        dst = out[n0:n1, h0:h1]
        hb = h1 - h0
        tmp = scratch(1, dst.shape, x.dtype)
        for t, a, b in all_taps:
            window = src[:, a : a + (hb - 1) * sh + 1 : sh, b : b + (ow - 1) * sw + 1 : sw]
            if t == 0:
                first(dst, window, t)
            else:
                step(dst, window, tmp, t)
        if finish is not None:
            finish(dst, h0, h1)
    return out
