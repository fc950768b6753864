"""Dense convolutions as GEMMs: im2col patches read through strided views, and a blocked 2-D conv
whose im2col blocks, GEMMs and epilogues run while each block is in cache, spread over threads."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from modelgraph.runner.fast import blocks, packed
from modelgraph.runner.fast.blocks import (
    padded_out_sizes,
    row_blocks,
    scratch,
    slab,
    spread_parts,
    window_rows,
)
from modelgraph.runner.fast.epilogue import Epilogue, element_work
from modelgraph.runner.fast.gemm_ir import conv_applies, conv_rows, matmul
from modelgraph.runner.fast.packed import PackedWeights
from modelgraph.runner.kernels.conv_utils import Pads, out_sizes, taps
from modelgraph.runner.parallel import for_each

# Output pixels a thread needs before the IR conv loops spread over threads (they pack nothing, so
# far fewer than a BLAS GEMM's GEMM_MIN_ROWS).
DIRECT_MIN_ROWS = 64


def strided_view(base: np.ndarray, shape: Sequence[int], strides: Sequence[int]) -> np.ndarray:
    """A read-only view of ``base``'s memory from its first element, with ``shape`` and byte
    ``strides`` (windows, patches). Over a C-contiguous ``base`` the ndarray constructor makes it:
    it refuses a view reaching past ``base`` (``as_strided`` would read whatever lies there) and
    costs about a fifth of ``as_strided``'s set-up (0.7 vs 3.2 us, paid per block). Other bases,
    e.g. a band of rows of several images, go through ``as_strided``."""
    if base.flags.c_contiguous:
        view = np.ndarray(tuple(shape), base.dtype, buffer=base, strides=tuple(strides))
        view.flags.writeable = False
        return view
    return np.lib.stride_tricks.as_strided(base, tuple(shape), tuple(strides), writeable=False)


def effective_strides(x: np.ndarray) -> tuple[int, ...]:
    """``x``'s byte strides, with the stride a C-ordered array would have on every axis of length 1:
    NumPy leaves those arbitrary (an array moved from channels_first with one channel is C-contiguous
    with a last-axis stride of a whole image), and they are never stepped along."""
    if 1 not in x.shape:
        return x.strides
    canonical = x.itemsize
    strides = list(x.strides)
    for axis in range(x.ndim - 1, -1, -1):
        if x.shape[axis] == 1:
            strides[axis] = canonical
        canonical = strides[axis] * x.shape[axis] if x.shape[axis] != 1 else canonical
    return tuple(strides)


def row_patches(
    x: np.ndarray, out: Sequence[int], kernel: Sequence[int], strides: Sequence[int], dilation: Sequence[int]
) -> np.ndarray:
    """The im2col patches of a padded channels-last ``x`` as one read-only strided view
    ``(B, *out, *kernel[:-1], kernel[-1] * C)`` (no dilation along the last axis): its last two axes
    are contiguous (any strides before them), so each leading tap of an output position is one run
    of ``kernel[-1] * C`` values, and one copy of the view is the whole im2col matrix. (A copy per
    leading tap took 1.3-1.7x as long: more calls, each writing a strided destination.)"""
    rank = len(kernel)
    if dilation[-1] != 1:
        raise ValueError("row_patches needs no dilation along the last axis")
    st = effective_strides(x)
    if st[-1] != x.itemsize or st[-2] != x.shape[-1] * x.itemsize:
        # Rows that are not contiguous (a transposed or sliced array): a C-ordered copy.
        x = np.array(x, order="C")
        st = effective_strides(x)
    return strided_view(
        x,
        (x.shape[0], *out, *kernel[:-1], kernel[-1] * x.shape[-1]),
        (
            st[0],
            *(st[i + 1] * strides[i] for i in range(rank)),
            *(st[i + 1] * dilation[i] for i in range(rank - 1)),
            st[-1],
        ),
    )


def im2col(
    x: np.ndarray, kernel: Sequence[int], strides: Sequence[int], dilation: Sequence[int], groups: int = 1
) -> np.ndarray:
    """Patches of a padded channels-last array.

    groups == 1: ``(N, prod(kernel) * C)`` with columns ordered (taps..., channel), N = batch*prod(out).
    groups > 1: ``(groups, N, prod(kernel) * C/groups)``.
    """
    rank = len(kernel)
    batch, sizes, channels = x.shape[0], x.shape[1:-1], x.shape[-1]
    out = out_sizes(sizes, kernel, strides, dilation)
    n = batch * math.prod(out)
    ktot = math.prod(kernel)
    if groups == 1 and dilation[-1] == 1:
        view = row_patches(np.ascontiguousarray(x), out, kernel, strides, dilation)
        return np.ascontiguousarray(view).reshape(n, ktot * channels)
    if groups == 1:
        cols = np.empty((batch, *out, ktot, channels), dtype=x.dtype)
        for i, (_, sl) in enumerate(taps(kernel, strides, dilation, out)):
            cols[(slice(None),) * (rank + 1) + (i,)] = x[(slice(None), *sl)]
        return cols.reshape(n, ktot * channels)
    cg = channels // groups
    cols = np.empty((groups, batch, *out, ktot, cg), dtype=x.dtype)
    for i, (_, sl) in enumerate(taps(kernel, strides, dilation, out)):
        patch = x[(slice(None), *sl)].reshape(batch, *out, groups, cg)
        cols[(slice(None),) * (rank + 2) + (i,)] = np.moveaxis(patch, -2, 0)
    return cols.reshape(groups, n, ktot * cg)


def is_pointwise(kernel: Sequence[int], strides: Sequence[int], pads: Pads) -> bool:
    """Whether a 2-D conv is a plain product of its input's pixels: 1x1, stride 1, no padding."""
    return tuple(kernel) == (1, 1) and tuple(strides) == (1, 1) and not any(b or a for b, a in pads)


def runs_direct(
    x: np.ndarray,
    weights: np.ndarray | PackedWeights,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilation: Sequence[int],
    pads: Pads,
) -> bool:
    """Whether :func:`conv2d_gemm` runs this conv by the IR conv loops, with no im2col copy (plain
    weights only: :func:`modelgraph.runner.fast.gemm_ir.conv_applies`)."""
    if not isinstance(weights, np.ndarray) or is_pointwise(kernel, strides, pads):
        return False
    ow = padded_out_sizes(x, pads, kernel, strides, dilation)[1]
    return conv_applies(x.dtype, weights.shape[1], weights.nbytes, ow, dilation[1])


def worth_packing(
    x: np.ndarray,
    weights: np.ndarray | PackedWeights,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilation: Sequence[int],
    pads: Pads,
) -> bool:
    """Whether a conv's plain weights should be packed (:class:`PackedWeights`) for the GEMMs
    :func:`conv2d_gemm` runs: not run by the IR conv loops (they read the plain layout), at least
    :data:`packed.PACK_MIN_MACS` multiply-adds per image, float32 with the ``jit`` extra and a
    spinning Numba threading layer (asked last: the first ask starts it)."""
    if not isinstance(weights, np.ndarray) or runs_direct(x, weights, kernel, strides, dilation, pads):
        return False
    pixels = math.prod(padded_out_sizes(x, pads, kernel, strides, dilation))
    return pixels * weights.shape[0] * weights.shape[1] >= packed.PACK_MIN_MACS and packed.can_pack(x.dtype)


def conv2d_gemm(
    x: np.ndarray,
    weights: np.ndarray | PackedWeights,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilation: Sequence[int],
    pads: Pads,
    epilogue: Epilogue,
) -> np.ndarray:
    """A dense 2-D conv of a C-ordered ``(B, H, W, C)`` array, ``weights`` ``(kh*kw*C, F)`` (plain or
    packed).

    Output rows are done a block at a time: the block's padded input rows are copied to a scratch slab,
    its im2col patches (columns ordered kh, kw, c) to a scratch block of about ``GEMM_BLOCK_BYTES``,
    one GEMM writes the block of the output, and ``epilogue`` (bias, activation) runs on it while it
    is still in cache. A 1x1 stride-1 unpadded conv skips the copies.
    """
    batch, channels = x.shape[0], x.shape[3]
    kh, kw = kernel
    oh, ow = padded_out_sizes(x, pads, kernel, strides, dilation)
    depth = kh * kw * channels
    filters = weights.shape[1]
    out = np.empty((batch, oh, ow, filters), dtype=x.dtype)
    flat_out = out.reshape(-1, filters)
    pointwise = is_pointwise(kernel, strides, pads)
    # No im2col copy: the IR loops read each kernel row's taps straight from the slab.
    direct = runs_direct(x, weights, kernel, strides, dilation, pads)
    per_pixel = max(depth, filters)
    target = max(blocks.GEMM_MIN_ROWS, blocks.serial_block_bytes(out.nbytes) // (per_pixel * x.itemsize))

    def block_of(rows: tuple[int, int, int, int]) -> None:
        n0, n1, h0, h1 = rows
        m0, m1 = (n0 * oh + h0) * ow, ((n1 - 1) * oh + h1) * ow
        block = flat_out[m0:m1]
        region = (slice(n0, n1), slice(h0, h1))
        if pointwise:
            matmul(x[n0:n1, h0:h1].reshape(-1, channels), weights, block)
            epilogue(block, region)
            return
        r0, r1 = window_rows(h0, h1, kh, strides[0], dilation[0])
        src = slab(x, n0, n1, r0, r1, pads, 0.0, 0)
        nb, hb = n1 - n0, h1 - h0
        if direct:
            shaped = weights.reshape(kh, kw * channels, filters)
            conv_rows(src, shaped, block.reshape(nb, hb, ow, filters), (strides[0], strides[1]), dilation[0])
            epilogue(block, region)
            return
        if dilation[1] == 1:
            # The kw taps of one output pixel are kw*C contiguous values of a row: one copy.
            cols = scratch(1, (nb, hb, ow, kh, kw * channels), x.dtype)
            cols[...] = row_patches(src, (hb, ow), kernel, strides, dilation)
        else:
            cols = scratch(1, (nb, hb, ow, kh * kw, channels), x.dtype)
            for i, (ti, tj) in enumerate(itertools.product(range(kh), range(kw))):
                a, b = ti * dilation[0], tj * dilation[1]
                cols[:, :, :, i] = src[
                    :,
                    a : a + (hb - 1) * strides[0] + 1 : strides[0],
                    b : b + (ow - 1) * strides[1] + 1 : strides[1],
                ]
        matmul(cols.reshape(m1 - m0, depth), weights, block)
        epilogue(block, region)

    # Blocks are independent (each writes its own output rows): when the conv is big enough and every
    # thread can get at least GEMM_MIN_ROWS rows (DIRECT_MIN_ROWS for the IR conv loops), they are
    # spread over the cores (im2col copies and epilogues too, not only the GEMMs), cut into a multiple
    # of the thread count of equal blocks no bigger than the target. Otherwise they run in turn, each
    # GEMM on all of BLAS's threads (the IR conv loops on this one).
    rows = batch * oh * ow
    work = rows * (depth * filters + filters * element_work(epilogue))
    threads = spread_parts(work)
    least = DIRECT_MIN_ROWS if direct else blocks.GEMM_MIN_ROWS
    if threads > 1 and rows >= threads * least:
        share = max(least, blocks.SPREAD_BLOCK_BYTES // (per_pixel * x.itemsize))
        count = threads * -(-rows // (threads * share))
        for_each(block_of, row_blocks(batch, oh, ow, -(-rows // count), threads))
    else:
        for block in row_blocks(batch, oh, ow, target):
            block_of(block)
    return out
