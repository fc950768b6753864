"""Winograd F(2x2, 3x3) for dense 3x3 stride-1 float32 2-D convolutions.

Each 2x2 output tile is computed from the 4x4 input tile around it (tiles step by 2): the input tile
is transformed to ``V = B^T d B``, each of its 16 entries is multiplied by the matching entry of the
transformed kernel ``U = G g G^T`` and summed over input channels (16 GEMMs, one batched
``np.matmul``), and ``Y = A^T M A`` maps the 16 products back to the 2x2 outputs. The GEMMs do 16
multiply-adds per tile and channel pair where the direct conv does 36; the transforms are additions
and subtractions only.

Memory: ``U`` is 16/9 of the kernel. A layer keeps it from its first Winograd call (see
:func:`winograd_kernel`); called without it, the conv computes it per call (in float64, rounded once),
a chunk of output channels at a time when it is large. Every buffer (the padded input rows, input
tiles ``V``, kernel chunk ``U``, products ``M``, outputs ``Y``, temporaries) is carved from one
per-thread scratch arena in :func:`conv2d_gemm`'s im2col slot (never alive at the same time): the
tile buffers get as much as an im2col block, and a large ``U`` at most one block more (see
:func:`default_budget`). With all output channels in one chunk, ``M`` is written over ``V`` as the
16 products are made, one plane behind (see :func:`_offsets`), so the two take little more than
``V`` alone.

Speed: the GEMMs run at about the direct conv's rate, so the gain is what the transforms leave.
They are element-wise NumPy passes over strided views; NumPy 2 copies such operands through its
ufunc buffer when their contiguous runs are shorter than about a third of it (8192 elements), which
halves their speed, so the input transform runs with a buffer no longer than its runs, and the
padded input rows are stored with even and odd columns apart so that every tile column it reads is
a run of a whole tile row. The output transform is one small GEMM.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from modelgraph.runner.fast.blocks import GEMM_BLOCK_BYTES, scratch
from modelgraph.runner.fast.epilogue import Epilogue
from modelgraph.runner.fast.gemm_ir import matmul
from modelgraph.runner.kernels.conv_utils import Pads
from modelgraph.runner.parallel import for_each

# The kernel transform G (4x3) and output transform A^T (2x4) of F(2x2, 3x3). kron(G, G) maps the 9
# taps (i*3 + j) to the 16 entries of U (a*4 + b), kron(A^T, A^T) the 16 products of a tile (i*4 + j)
# to its 4 outputs (a*2 + b): one GEMM each.
_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])
_GG = np.kron(_G, _G)
# U's corners (a, b in {0, 3}) are single taps; the other entries are sums.
_CORNERS, _CORNER_TAPS = [0, 3, 12, 15], [0, 2, 6, 8]
_SUMS = [e for e in range(16) if e not in _CORNERS]
_GG_SUMS = np.ascontiguousarray(_GG[_SUMS])
_AT = np.array([[1.0, 1.0, 1.0, 0.0], [0.0, 1.0, -1.0, -1.0]])
_AA = np.kron(_AT, _AT).astype(np.float32)

# The arena lives in conv2d_gemm's im2col slot (the two are never alive at the same time).
_ARENA_SLOT = 1
_ALIGN = 64
# Kernel elements per band of the kernel transform (672 KiB of float64 temporaries).
_KERNEL_BAND = 4096

# Dispatch (see use_winograd), measured against conv2d_gemm with 2 OpenBLAS threads on 3x3 layers
# of 32 to 512 channels and 16 to 6272 tiles (medians of interleaved runs on an otherwise idle
# machine). The gain grows with tiles x channels: 784 tiles at 64 channels (ResNet50's 56x56x64 at
# batch 1) gained 1.1-1.2x, 392 at 64 lost (0.8-1.06x), 6272 at 64 gained 1.15-1.2x; at 32-48
# channels Winograd always lost.
MIN_CHANNELS = 64
MIN_WORK = 784 * 64  # tiles x min(C, K)
# The kernel transform costs about what this many tiles save, per 256 x 256 channels (196 tiles at
# 256 channels gained 1.0-1.09x, 392 gained 1.1-1.25x; 7x7x512 at batch 8, 128 tiles, lost 2x).
KERNEL_TILES = 392
# Kernels of fewer input x output channels are transformed per call rather than kept: their transform
# takes under 0.1 ms (64 x 64: 0.09 ms; 128 x 128: 0.23 ms, 256 x 256: 0.9 ms, 512 x 512: 4.8 ms).
KEEP_KERNEL_CHANNELS = 128 * 128


def tile_count(batch: int, oh: int, ow: int) -> int:
    """Number of 2x2 output tiles of a ``(batch, oh, ow)`` output."""
    return batch * (-(-oh // 2)) * (-(-ow // 2))


def winograd_eligible(
    kernel: tuple[int, ...], strides: tuple[int, ...], dilation: tuple[int, ...], dtype: np.dtype
) -> bool:
    """Whether a 2-D conv's configuration suits F(2x2, 3x3): 3x3, stride 1, no dilation, float32."""
    return (
        tuple(kernel) == (3, 3)
        and tuple(strides) == (1, 1)
        and tuple(dilation) == (1, 1)
        and np.dtype(dtype) == np.float32
    )


def use_winograd(shape: tuple[int, ...], pads: Pads, filters: int) -> bool:
    """Whether Winograd beats :func:`conv2d_gemm` for an eligible conv of a ``(B, H, W, C)`` input
    padded by ``pads`` (False when the window does not fit).

    Its GEMMs save 20 of 36 multiply-adds per tile and channel pair, but the transforms cost passes
    over every tile's channels (input) and filters (output), and the kernel transform passes over
    C x K: there must be enough tiles times channels for the savings to win, and enough tiles to
    amortise the kernel transform.
    """
    batch, height, width, channels = shape
    (top, bottom), (left, right) = pads
    oh, ow = height + top + bottom - 2, width + left + right - 2
    small = min(channels, filters)
    if oh < 1 or ow < 1 or small < MIN_CHANNELS:
        return False
    tiles = tile_count(batch, oh, ow)
    return tiles * small >= MIN_WORK and tiles * (256 * 256) >= KERNEL_TILES * channels * filters


# --- memory layout -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Layout:
    """How one call is cut: ``kc`` output channels per kernel chunk, ``blocks`` of tiles
    ``(n0, n1, t0, t1)`` (images, tile rows), and the arena byte offsets of the buffers. ``x`` holds
    the padded input rows and the row transform, later the outputs Y; during a kernel transform,
    ``temps`` to ``end`` holds its float64 temporaries."""

    kc: int
    blocks: list[tuple[int, int, int, int]]
    v: int
    u: int
    m: int
    x: int
    temps: int
    end: int


def _align(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def default_budget(channels: int, filters: int) -> int:
    """Scratch bytes for a layer: the tile buffers get as much as :func:`conv2d_gemm`'s largest
    im2col block (``GEMM_BLOCK_BYTES``), U gets room of its own on top (up to another block) unless
    it is small enough to share."""
    u_bytes = 64 * channels * filters
    if u_bytes <= GEMM_BLOCK_BYTES // 8:
        return GEMM_BLOCK_BYTES
    return GEMM_BLOCK_BYTES + min(u_bytes, GEMM_BLOCK_BYTES)


def _channel_chunk(channels: int, filters: int, budget: int) -> int:
    """Output channels per kernel chunk: all when U fits half of ``budget`` (one kernel transform
    per call), else as many as fit there, a multiple of 16."""
    if 64 * channels * filters <= budget // 2:
        return filters
    return min(filters, max(16, (budget // 2) // (64 * channels) // 16 * 16))


def _tile_blocks(batch: int, th: int, tw: int, target: int) -> list[tuple[int, int, int, int]]:
    """Blocks ``(n0, n1, t0, t1)`` of at most about ``target`` tiles, all of one size (so no small
    GEMMs for a remainder): whole images together when an image has fewer tiles, else equal bands of
    tile rows."""
    per_image = th * tw
    if per_image <= target:
        count = -(-batch // max(1, target // per_image))
        step = -(-batch // count)
        return [(n0, min(batch, n0 + step), 0, th) for n0 in range(0, batch, step)]
    count = -(-per_image // target)
    step = -(-th // count)
    return [(n, n + 1, t0, min(th, t0 + step)) for n in range(batch) for t0 in range(0, th, step)]


def _offsets(
    blocks: list[tuple[int, int, int, int]],
    tw: int,
    channels: int,
    kc: int,
    kernel_in_arena: bool = True,
    one_chunk: bool = False,
) -> tuple[int, int, int, int, int, int]:
    """Arena offsets ``(v, u, m, x, temps, end)`` for these blocks (see :class:`_Layout`); without
    ``kernel_in_arena`` (U given by the caller) U and the kernel transform's temporaries get none.

    With ``one_chunk`` (V is not needed after its one product), M overlaps V: plane ``i`` of M
    (``pm`` bytes) is written while plane ``i`` of V (``pv`` bytes) is read and must not reach a
    plane of V not yet read, ``(i + 1) pm <= lead + i pv`` for every ``i``: V starts ``lead`` bytes
    after M, one plane of M (plus 15 times what a plane of M outgrows one of V). A smaller block
    (fewer tiles) shrinks both sides, so the bound of the largest holds for all.
    """
    row = 8 * (tw + 1) * channels  # bytes of one padded row, split: 2 x (tw+1) x C float32
    tiles = max((n1 - n0) * (t1 - t0) for n0, n1, t0, t1 in blocks) * tw
    rows_in = max(
        _align((n1 - n0) * (2 * (t1 - t0) + 2) * row) + _align((n1 - n0) * (t1 - t0) * row)
        for n0, n1, t0, t1 in blocks
    )
    pv, pm = 4 * tiles * channels, 4 * tiles * kc
    u_bytes = _align(64 * channels * kc) if kernel_in_arena else 0
    kernel_temps = 8 * _kernel_temps(channels, kc) if kernel_in_arena else 0
    outputs = 16 * tiles * kc  # Y: 4 outputs per tile and channel
    if one_chunk:
        m, v = 0, _align(pm + 15 * max(0, pm - pv))
        u = _align(max(v + 16 * pv, 16 * pm))
        x = u + u_bytes
        return v, u, m, x, x, x + _align(max(rows_in, outputs, kernel_temps))
    u = _align(16 * pv)
    m = u + u_bytes
    x = m + _align(16 * pm)
    return 0, u, m, x, m, max(x + _align(max(rows_in, outputs)), m + kernel_temps)


def _layout(
    batch: int, th: int, tw: int, channels: int, filters: int, budget: int, kernel_in_arena: bool = True
) -> _Layout:
    """Split ``budget`` bytes between V (tiles x C), U (C x kc), M (tiles x kc) and the padded rows
    / outputs; the tiles get what U leaves, as many as fit, so the GEMMs are long and few. A block
    is at least one row of tiles, so a very wide image may overshoot the budget. Without
    ``kernel_in_arena`` (U transformed once and kept by the caller) all filters form one chunk."""
    kc = _channel_chunk(channels, filters, budget) if kernel_in_arena else filters
    u_bytes = 64 * channels * kc if kernel_in_arena else 0
    # Start from the tiles V and M alone would allow, then shrink until the padded rows fit too.
    target = max(1, (budget - u_bytes) // (64 * (channels + kc)))
    while True:
        blocks = _tile_blocks(batch, th, tw, target)
        offsets = _offsets(blocks, tw, channels, kc, kernel_in_arena, kc == filters)
        if offsets[-1] <= budget or target <= tw:
            return _Layout(kc, blocks, *offsets)
        target = max(1, target * 7 // 8)


def _carve(arena: np.ndarray, offset: int, shape: tuple[int, ...], dtype: type = np.float32) -> np.ndarray:
    """A C-ordered array of ``shape`` over ``arena`` bytes from ``offset``."""
    nbytes = math.prod(shape) * np.dtype(dtype).itemsize
    return arena[offset : offset + nbytes].view(dtype).reshape(shape)


@contextmanager
def _ufunc_buffer(run: int) -> Iterator[None]:
    """NumPy's ufunc buffer no longer than ``run`` elements (a multiple of 16 in 16..8192), so
    strided operands with runs of that length are used in place instead of copied through it."""
    old = np.setbufsize(max(16, min(8192, run // 16 * 16)))
    try:
        yield
    finally:
        np.setbufsize(old)


# --- transforms ----------------------------------------------------------------------------------


def _kernel_band(channels: int, kc: int) -> int:
    """Input channels per band of :func:`_transform_kernel`."""
    return max(1, min(channels, _KERNEL_BAND // kc))


def _kernel_temps(channels: int, kc: int) -> int:
    """float64 temporaries :func:`_transform_kernel` needs: 21 per element of a band."""
    return 21 * _kernel_band(channels, kc) * kc


def _transform_kernel(taps: np.ndarray, u: np.ndarray, temps: np.ndarray) -> None:
    """``u`` ``(16, C, kc)`` = ``G g G^T`` of ``taps`` ``(9, C, kc)`` (tap i*3 + j), in float64.

    Each entry is a sum of taps times 1, 1/2 or 1/4: exact in float64, then rounded once to float32.
    The four corner entries are taps themselves (copied); the other twelve come from one float64
    GEMM with their rows of kron(G, G) per band of input channels. ``temps`` holds a band (21 values
    per element), kept small so it stays in cache (and OpenBLAS runs it on one thread: larger bands
    were several times slower with two).
    """
    channels, kc = taps.shape[1:]
    u[_CORNERS] = taps[_CORNER_TAPS]
    band = _kernel_band(channels, kc)
    for c0 in range(0, channels, band):
        c1 = min(channels, c0 + band)
        n = (c1 - c0) * kc
        g = temps[: 9 * n].reshape(9, c1 - c0, kc)
        g[...] = taps[:, c0:c1]
        product = temps[9 * n : 21 * n].reshape(12, n)
        np.matmul(_GG_SUMS, g.reshape(9, n), out=product)
        u[_SUMS, c0:c1] = product.reshape(12, c1 - c0, kc)


def worth_keeping(channels: int, filters: int) -> bool:
    """Whether a layer should keep U between calls (:func:`winograd_kernel`), spending 16/9 of its
    kernel's memory to skip a transform per call."""
    return channels * filters >= KEEP_KERNEL_CHANNELS


def winograd_kernel(flat: np.ndarray) -> np.ndarray:
    """U ``(16, C, K)`` float32 for a ``(9*C, K)`` 3x3 kernel (rows ordered kh, kw, c), to be passed
    to :func:`conv2d_winograd` as ``kernel`` by a caller that runs the layer many times (U is 16/9 of
    the kernel's size)."""
    channels, filters = flat.shape[0] // 9, flat.shape[1]
    u = np.empty((16, channels, filters), dtype=np.float32)
    _transform_kernel(flat.reshape(9, channels, filters), u, np.empty(_kernel_temps(channels, filters)))
    return u


def _fill_rows(x: np.ndarray, n0: int, n1: int, r0: int, pads: Pads, buf: np.ndarray) -> None:
    """``buf`` ``(nb, rows, 2, tw+1, C)``: padded rows ``r0:`` of images ``n0:n1`` with padded column
    ``2s + p`` at ``[:, :, p, s]`` (zeros outside the input)."""
    height, width = x.shape[1:3]
    (top, _), (left, _) = pads
    rows, cols = buf.shape[1], buf.shape[3]
    a, b = max(r0 - top, 0), min(r0 + rows - top, height)
    d0, d1 = a + top - r0, b + top - r0
    if d1 <= d0:
        buf.fill(0.0)
        return
    buf[:, :d0] = 0.0
    buf[:, d1:] = 0.0
    for p in range(2):
        # Padded column 2s + p is input column 2s + p - left.
        s0 = max(0, (left - p + 1) // 2)
        s1 = min(cols, (width - 1 + left - p) // 2 + 1)
        dst = buf[:, d0:d1, p]
        if s1 <= s0:
            dst.fill(0.0)
            continue
        dst[:, :, :s0] = 0.0
        dst[:, :, s1:] = 0.0
        c0 = 2 * s0 + p - left
        dst[:, :, s0:s1] = x[n0:n1, a:b, c0 : c0 + 2 * (s1 - s0) - 1 : 2]


def _transform_input(src: np.ndarray, v: np.ndarray, tmp: np.ndarray) -> None:
    """``v[4r + c]`` ``(16, nb, tb, tw, C)`` = ``(B^T d B)[r, c]`` for the 4x4 tiles of ``src``
    (split padded rows, see :func:`_fill_rows`).

    B^T = [[1,0,-1,0], [0,1,1,0], [0,-1,1,0], [0,1,0,-1]], over rows (one row of results at a time
    in ``tmp`` ``(nb, tb, 2, tw+1, C)``) then over columns: tile column 2s + j is ``[:, :, j % 2,
    s + j // 2]``, a run of a whole tile row.
    """
    tb, tw = v.shape[2], v.shape[3]
    d = [src[:, i : i + 2 * tb - 1 : 2] for i in range(4)]
    c0, c1, c2, c3 = tmp[:, :, 0, :tw], tmp[:, :, 1, :tw], tmp[:, :, 0, 1:], tmp[:, :, 1, 1:]
    rows = ((np.subtract, 0, 2), (np.add, 1, 2), (np.subtract, 2, 1), (np.subtract, 1, 3))
    for r, (op, p, q) in enumerate(rows):
        op(d[p], d[q], out=tmp)
        np.subtract(c0, c2, out=v[4 * r])
        np.add(c1, c2, out=v[4 * r + 1])
        np.subtract(c2, c1, out=v[4 * r + 2])
        np.subtract(c1, c3, out=v[4 * r + 3])


def _transform_output(m: np.ndarray, dst: np.ndarray, y: np.ndarray) -> None:
    """``dst`` (the block's output rows, ``(nb, rows, ow, kc)``) from the products ``m``
    ``(16, nb, tb, tw, kc)``: ``Y = A^T M A`` as one GEMM with kron(A^T, A^T) into ``y``
    ``(4, nb, tb, tw, kc)``, then copied to the output pixels; tiles past an odd output height or
    width are dropped."""
    np.matmul(_AA, m.reshape(16, -1), out=y.reshape(4, -1))
    for a in range(2):
        for b in range(2):
            part = dst[:, a::2, b::2]
            part[...] = y[2 * a + b, :, : part.shape[1], : part.shape[2]]


# --- the conv ------------------------------------------------------------------------------------


def conv2d_winograd(
    x: np.ndarray,
    flat: np.ndarray,
    pads: Pads,
    epilogue: Epilogue,
    budget: int | None = None,
    kernel: np.ndarray | None = None,
) -> np.ndarray:
    """A 3x3 stride-1 conv of a C-ordered float32 ``(B, H, W, C)`` array, ``flat`` ``(9*C, K)``
    (rows ordered kh, kw, c as for :func:`conv2d_gemm`), ``pads`` ``[(top, bottom), (left, right)]``.

    Output channels are done ``kc`` at a time (one kernel transform each); within a chunk, blocks of
    tile rows are transformed, multiplied and transformed back into the output. ``epilogue`` (bias,
    activation) runs on a block once its last channel chunk is written. ``budget`` (bytes of scratch)
    defaults to :func:`default_budget`. ``kernel``: U from :func:`winograd_kernel` of ``flat``, kept
    by the caller (then no kernel transform runs and all channels form one chunk).
    """
    batch, height, width, channels = x.shape
    filters = flat.shape[1]
    (top, bottom), (left, right) = pads
    oh, ow = height + top + bottom - 2, width + left + right - 2
    if oh < 1 or ow < 1:
        raise ValueError(f"window (3, 3) larger than input {(height + top + bottom, width + left + right)}")
    th, tw = -(-oh // 2), -(-ow // 2)
    lay = _layout(
        batch, th, tw, channels, filters, budget or default_budget(channels, filters), kernel is None
    )
    arena = scratch(_ARENA_SLOT, (lay.end,), np.uint8)
    out = np.empty((batch, oh, ow, filters), dtype=np.float32)
    taps = flat.reshape(9, channels, filters)
    hoisted = len(lay.blocks) == 1
    work = 16 * tile_count(batch, oh, ow) * channels * filters
    for k0 in range(0, filters, lay.kc):
        k1 = min(filters, k0 + lay.kc)
        kc = k1 - k0
        if kernel is not None:
            u = kernel
        else:
            u = _carve(arena, lay.u, (16, channels, kc))
            temps = _carve(arena, lay.temps, ((lay.end - lay.temps) // 8,), np.float64)
            _transform_kernel(taps[:, :, k0:k1], u, temps)

        def block(rows: tuple[int, int, int, int], k0: int = k0, k1: int = k1, u: np.ndarray = u) -> None:
            """Tiles of one block: transformed, multiplied by ``u`` and transformed back into ``out``,
            in this thread's own arena (``u`` is read from the caller's)."""
            n0, n1, t0, t1 = rows
            nb, tb, kc = n1 - n0, t1 - t0, k1 - k0
            own = scratch(_ARENA_SLOT, (lay.end,), np.uint8)
            v = _carve(own, lay.v, (16, nb, tb, tw, channels))
            # A single block keeps its transformed tiles for every chunk.
            if k0 == 0 or not hoisted:
                src = _carve(own, lay.x, (nb, 2 * tb + 2, 2, tw + 1, channels))
                tmp = _carve(own, lay.x + _align(src.nbytes), (nb, tb, 2, tw + 1, channels))
                with _ufunc_buffer(tw * channels):
                    _fill_rows(x, n0, n1, 2 * t0, pads, src)
                    _transform_input(src, v, tmp)
            m = _carve(own, lay.m, (16, nb, tb, tw, kc))
            # Plane by plane, in order: M may overlap the planes of V already used (see _offsets).
            for plane in range(16):
                matmul(v[plane].reshape(-1, channels), u[plane], m[plane].reshape(-1, kc))
            region = (slice(n0, n1), slice(2 * t0, min(oh, 2 * t1)))
            dst = out[region]
            _transform_output(m, dst[..., k0:k1], _carve(own, lay.x, (4, nb, tb, tw, kc)))
            if k1 == filters:
                epilogue(dst, region)

        # Blocks write disjoint output rows: spread them over the cores (transforms included) when the
        # conv is big enough, each thread with an arena of its own.
        for_each(block, lay.blocks, work)
    return out
