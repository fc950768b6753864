"""Compiled depthwise convolution and average pooling loops (Numba), used by
:mod:`modelgraph.runner.fast.depthwise` and :mod:`modelgraph.runner.fast.pooling` when the optional
``jit`` extra is installed (``pip install modelgraph[jit]``).

A depthwise conv does 9-49 multiply-adds per output value and no reuse across channels: NumPy can only
express it as whole-array passes (one ``einsum`` over strided views, about 7-8 GFLOP/s on one core of
this machine, 5-7% of the float32 matmul peak). Two compiled loops keep the sums in L1 instead:

* **Row loops** (:func:`depthwise` without column dilation): the accumulator is a stretch of one
  output row, ``(pixels, channels)`` flattened, and each tap adds one contiguous run of the input row
  times the kernel tiled along the stretch, so the inner loop is long and unit-stride whatever the
  channel count; a kernel row's taps are added in one pass, three at a time (one load and store of the
  accumulator per three taps), and for kernels 3, 5 or 7 wide a whole kernel row a pass (loops
  generated for those widths, :mod:`modelgraph.runner.fast.depthwise_rows`: 1.05-1.5x faster on
  one core, the same sums in the same order). A strided layer's slab is first split into column phases (pixels
  ``p, p + s, ...``) so every tap still reads a contiguous run. Measured on one core against the
  pixel loops (stride 1): 11 channels 7x7 17.5 against 1.8-3.5 GFLOP/s, 44 channels 5x5 19.6 against
  6-11, 144-672 channels 19-21 against 16-19. Every stretch starts on a pixel, so the kernel tiled
  over one stretch (at most ``kh * kw * depthwise_rows.ROW_STRETCH`` values, made on each call, in
  L1/L2) serves the whole row: a kernel tiled over whole rows and kept per layer was 13.7 MiB for NASNetMobile at
  224x224 (more than two thirds of its weights), read from memory on every run (whole model 0.97x
  at batch 1; EfficientNetB0 0.93x at batch 1, MobileNetV2 0.94x at batch 8).
* **Pixel loops**: per output pixel, every tap over the channels into a local accumulator. Used for
  column dilation and for strided layers of at least ``STRIDED_ROWS_BELOW_CHANNELS`` channels, where
  splitting the slab into phases costs more than it saves (stride 2, 3x3: 96 channels 0.37 ms against
  0.85 ms with phases; 44 channels 7x7: 0.55 against 0.29).

Numba is the well-kept way to compile such loops from Python; it is optional because it is a large
dependency and compiles on first use (cached on disk after that).

Taps are added row by row, then column by column, each product rounded to float32 and added to a
float32 sum in that order (no fast-math reassociation): both loops give identical results, which
differ from the einsum path's only by its summation order, within float32 rounding.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import numpy as np

from modelgraph.runner.fast.blocks import scratch

# MODELGRAPH_JIT=0 turns the compiled loops off (the NumPy einsum path runs).
ENV = "MODELGRAPH_JIT"

# Strided depthwise layers narrower than this run the row loops (on a phase-split copy of the slab),
# wider ones the pixel loops; unit-stride layers always run the row loops when given a tiled kernel.
STRIDED_ROWS_BELOW_CHANNELS = 64

# The scratch slot of a strided slab's phase-split copy (the NumPy path's phase copies use it too, never
# in the same call).
SPLIT_SLOT = 3


# The answer of available() fixed for the model run in progress (None: no run, read the environment).
_for_run: bool | None = None


def available() -> bool:
    """Whether Numba is installed and not turned off with ``MODELGRAPH_JIT=0`` (read once per model
    run, see :func:`fixed_for_run`; outside a run, on every call)."""
    if _for_run is not None:
        return _for_run
    return _enabled()


def _enabled() -> bool:
    if os.environ.get(ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    return _installed()


@contextmanager
def fixed_for_run() -> Iterator[bool]:
    """Run the block as one model run: :func:`available` answers what the environment says at its
    start, without reading it again (an unset variable costs 2 us per read, and a NASNetMobile run
    asks about 400 times). Runs nest (the inner keeps the outer's answer)."""
    global _for_run
    if _for_run is not None:
        yield _for_run
        return
    _for_run = _enabled()
    try:
        yield _for_run
    finally:
        _for_run = None


@cache
def _installed() -> bool:
    return importlib.util.find_spec("numba") is not None


def _depthwise_loops(src: Any, kernel: Any, dst: Any, sh: int, sw: int, dh: int, dw: int) -> None:
    """The loops Numba compiles (plain Python otherwise, and far too slow to call uncompiled)."""
    # Per output pixel, every tap over the channels into a local accumulator: LLVM vectorizes the
    # channel loop only when it can tell the sum apart from the input (summing into dst directly,
    # or along whole output rows as the einsum path does, ran 3-4x slower).
    nb, hb, ow, width = dst.shape
    kh, kw = kernel.shape[0], kernel.shape[1]
    acc = np.empty(width, dtype=dst.dtype)
    for n in range(nb):
        for y in range(hb):
            for x in range(ow):
                for c in range(width):
                    acc[c] = 0.0
                for i in range(kh):
                    for j in range(kw):
                        pixel = src[n, y * sh + i * dh, x * sw + j * dw]
                        w = kernel[i, j]
                        for c in range(width):
                            acc[c] += pixel[c] * w[c]
                out = dst[n, y, x]
                for c in range(width):
                    out[c] = acc[c]


@cache
def _kernel() -> Callable[..., None]:
    import numba

    # cache=True: compiled once per machine (about 2 s), then loaded from __pycache__ (or Numba's
    # per-user cache directory when the package's is read-only).
    return numba.njit(nogil=True, cache=True, boundscheck=False)(_depthwise_loops)


def _phase_split_loops(src: Any, phased: Any, sw: int) -> None:
    """Copy the slab ``src`` (``(nb, rows, Wp, width)``) into ``phased`` (``(nb, rows, sw, pixels *
    width)``), column ``x`` to phase ``x % sw``, pixel ``x // sw``."""
    nb, rows, wp, width = src.shape
    for n in range(nb):
        for r in range(rows):
            line = src[n, r]
            for p in range(sw):
                dst = phased[n, r, p]
                k = 0
                for x in range(p, wp, sw):
                    got = line[x]
                    out = dst[k : k + width]
                    for c in range(width):
                        out[c] = got[c]
                    k += width


@cache
def _row_kernels() -> tuple[Callable[..., None], Callable[..., None]]:
    import numba

    from modelgraph.runner.fast import depthwise_rows

    jit = numba.njit(nogil=True, cache=True, boundscheck=False)
    return jit(depthwise_rows.rows_any), jit(_phase_split_loops)


@cache
def _fixed_width_rows() -> dict[int, Callable[..., None]]:
    """Row loops for the kernel widths :mod:`modelgraph.runner.fast.depthwise_rows` has (a whole
    kernel row a pass instead of three taps), compiled on first use."""
    import numba

    from modelgraph.runner.fast import depthwise_rows

    jit = numba.njit(nogil=True, cache=True, boundscheck=False)
    return {kw: jit(fn) for kw, fn in depthwise_rows.BY_WIDTH.items()}


def depthwise(
    src: np.ndarray,
    kernel: np.ndarray,
    dst: np.ndarray,
    strides: tuple[int, int],
    dilation: tuple[int, int],
) -> None:
    """``dst`` (``(nb, hb, ow, width)``) = the depthwise conv of the padded slab ``src``, kernel
    ``(kh, kw, width)``, any strides and dilation: the row loops without column dilation, else the
    pixel loops (and for wide strided layers; see the module's docstring)."""
    sh, sw = strides
    width = dst.shape[-1]
    if dilation[1] != 1 or (sw > 1 and width >= STRIDED_ROWS_BELOW_CHANNELS):
        _kernel()(src, kernel, dst, sh, sw, dilation[0], dilation[1])
        return
    rows_loops, split_loops = _row_kernels()
    rows_loops = _fixed_width_rows().get(kernel.shape[1], rows_loops)
    nb, rows, wp = src.shape[:3]
    if sw == 1:
        phased = np.ascontiguousarray(src).reshape(nb, rows, 1, wp * width)
    else:
        phased = scratch(SPLIT_SLOT, (nb, rows, sw, -(-wp // sw) * width), src.dtype)
        split_loops(src, phased, sw)
    rows_loops(phased, kernel, dst, sh, sw, dilation[0], dilation[1])


def _pad_clamp_loops(x: Any, buf: Any, top: int, left: int, lo: Any, hi: Any) -> None:
    """``buf`` (``(B, Hp, Wp, C)``) = ``x`` (``(B, H, W, C)``) with ``top`` zero rows and ``left`` zero
    columns in front and zeros after, each value of ``x`` clamped to ``[lo, hi]`` on the way (a ReLU
    merged before a conv: padding after it gives the same zeros)."""
    nb, height, width, channels = x.shape
    rows, columns = buf.shape[1], buf.shape[2]
    for n in range(nb):
        for r in range(rows):
            line = buf[n, r]
            y = r - top
            if y < 0 or y >= height:
                for p in range(columns):
                    cell = line[p]
                    for c in range(channels):
                        cell[c] = 0.0
                continue
            src = x[n, y]
            for p in range(columns):
                cell = line[p]
                q = p - left
                if q < 0 or q >= width:
                    for c in range(channels):
                        cell[c] = 0.0
                    continue
                got = src[q]
                for c in range(channels):
                    v = got[c]
                    v = lo if v < lo else v
                    cell[c] = hi if v > hi else v


@cache
def _pad_kernel() -> Callable[..., None]:
    import numba

    return numba.njit(nogil=True, cache=True, boundscheck=False)(_pad_clamp_loops)


def pad_clamp(x: np.ndarray, buf: np.ndarray, top: int, left: int, clamp: tuple[float, float]) -> None:
    """``buf`` = the C-ordered float32 ``x`` zero-padded by ``top`` rows and ``left`` columns in front
    (and whatever ``buf``'s size leaves after), every value of ``x`` clamped to ``clamp`` (one pass:
    NumPy's takes a fill per border, a copy and the clamp's pass)."""
    _pad_kernel()(x, buf, top, left, np.float32(clamp[0]), np.float32(clamp[1]))


def _avg_pool_loops(
    x: Any, out: Any, ph: int, pw: int, sh: int, sw: int, top: int, left: int, area: int
) -> None:
    """2-D average pooling of a C-ordered channels-last ``x`` into ``out``, padding ``top`` / ``left``
    before the first row / column, each window's sum divided by its count of unpadded cells, or by
    ``area`` when it is positive (the padding counted, as zeros: a pool over a zero-padded input).

    Row by row: the window's input rows are summed into one row ``v`` (``W * C`` values, unit-stride
    loops), then each output pixel sums its ``pw`` columns of ``v``. With unit column stride the
    pixels whose window lies inside the row are done as one stretch: the output row is ``v`` shifted
    by each tap, added tap by tap over the whole stretch, then divided. The edges, and strided
    columns, sum per pixel over the channels. (Per pixel over all ``ph * pw`` taps, the channel loops
    were too short to pay: NASNetMobile's 3x3 pools of 11-176 channels ran at 5 GFLOP/s.)"""
    nb, height, width, channels = x.shape
    oh, ow = out.shape[1], out.shape[2]
    v = np.empty(width * channels, dtype=out.dtype)
    # Columns whose window lies inside the row (unit stride): ox - left >= 0, ox - left + pw <= width.
    inner0 = min(max(left, 0), ow)
    inner1 = max(inner0, min(ow, width - pw + left + 1))
    for n in range(nb):
        for oy in range(oh):
            y0 = oy * sh - top
            ya, yb = max(y0, 0), min(y0 + ph, height)
            rows = yb - ya
            if rows > 0:
                first = x[n, ya].reshape(width * channels)
                for t in range(width * channels):
                    v[t] = first[t]
                for yy in range(ya + 1, yb):
                    line = x[n, yy].reshape(width * channels)
                    for t in range(width * channels):
                        v[t] += line[t]
            dst = out[n, oy].reshape(ow * channels)
            for ox in range(ow):
                if sw == 1 and inner0 <= ox < inner1:
                    continue
                x0 = ox * sw - left
                xa, xb = max(x0, 0), min(x0 + pw, width)
                count = out.dtype.type(area if area > 0 else max(rows, 0) * max(xb - xa, 0))
                cell = dst[ox * channels : (ox + 1) * channels]
                for c in range(channels):
                    cell[c] = 0.0
                if rows > 0:
                    for xx in range(xa, xb):
                        col = v[xx * channels : (xx + 1) * channels]
                        for c in range(channels):
                            cell[c] += col[c]
                for c in range(channels):
                    cell[c] = cell[c] / count
            if sw == 1 and inner1 > inner0:
                span = dst[inner0 * channels : inner1 * channels]
                m = (inner1 - inner0) * channels
                base = (inner0 - left) * channels
                count = out.dtype.type(area if area > 0 else max(rows, 0) * pw)
                if rows <= 0:
                    for t in range(m):
                        span[t] = 0.0
                else:
                    src = v[base : base + m]
                    for t in range(m):
                        span[t] = src[t]
                    for j in range(1, pw):
                        src = v[base + j * channels : base + j * channels + m]
                        for t in range(m):
                            span[t] += src[t]
                for t in range(m):
                    span[t] = span[t] / count


@cache
def _avg_pool_kernel() -> Callable[..., None]:
    import numba

    return numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")(_avg_pool_loops)


def avg_pool2d(
    x: np.ndarray,
    out: np.ndarray,
    pool: tuple[int, ...],
    strides: tuple[int, ...],
    before: tuple[int, int],
    count_padding: bool = False,
) -> None:
    """``out`` (``(B, oh, ow, C)``) = the average pooling of ``x`` (``(B, H, W, C)``, float32) over
    ``pool`` windows at ``strides``, ``before`` padded rows / columns in front, the divisor the count
    of unpadded cells in each window (Keras's ``same`` average pooling), or with ``count_padding`` the
    pool's area (a valid pooling of the input zero-padded)."""
    area = pool[0] * pool[1] if count_padding else 0
    _avg_pool_kernel()(x, out, pool[0], pool[1], strides[0], strides[1], before[0], before[1], area)
