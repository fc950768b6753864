"""Compiled loops for the NumPy runner, used by :mod:`modelgraph.runner.fast.depthwise`,
:mod:`modelgraph.runner.fast.pooling` and :mod:`modelgraph.runner.fast.conv` when the optional ``jit``
extra is installed (``pip install modelgraph[jit]``): padding with a clamp, 2-D average pooling (Numba
loops) and depthwise convolutions (LLVM IR with explicit vectors, compiled with llvmlite, which Numba
brings: :mod:`modelgraph.runner.fast.depthwise_ir`; the narrow GEMMs of
:mod:`modelgraph.runner.fast.gemm_ir` are written the same way). ``available()`` answers for all of
them.

A depthwise conv does 9-49 multiply-adds per output value and no reuse across channels: NumPy can only
express it as whole-array passes (one ``einsum`` over strided views, about 7-8 GFLOP/s on one core of
the first machine, 5-7% of the float32 matmul peak). Loops written for Numba's vectorizer reached
30-42 GFLOP/s on one core of an AVX-512 machine (a stretch of an output row as the accumulator, one
load of it, of the input and of a tiled weight per product); the IR loops keep a tile of output
pixels in registers and reach 45-125.

Numba is the well-kept way to compile such loops from Python; it is optional because it is a large
dependency and compiles on first use (cached on disk after that).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import numpy as np

# The depthwise loops: IR compiled with llvmlite, not Numba, but part of the same extra.
from modelgraph.runner.fast.depthwise_ir import depthwise as depthwise

# MODELGRAPH_JIT=0 turns the compiled loops off (the NumPy einsum path runs).
ENV = "MODELGRAPH_JIT"

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
