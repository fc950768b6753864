"""Compiled depthwise convolution and average pooling loops (Numba), used by
:mod:`modelgraph.runner.fast.depthwise` and :mod:`modelgraph.runner.fast.pooling` when the optional
``jit`` extra is installed (``pip install modelgraph[jit]``).

A depthwise conv does 9-25 multiply-adds per output value and no reuse across channels: NumPy can only
express it as whole-array passes (one ``einsum`` over strided views, about 7-8 GFLOP/s on one core of
this machine, 5-7% of the float32 matmul peak). Compiled loops keep one output row in registers / L1
while every tap is added (2.1x the NumPy path over MobileNetV2's and EfficientNetB0's depthwise layers
at batch 1, one core: 9.0 against 18.9 ms). Numba is
the well-kept way to compile such loops from Python; it is optional because it is a large dependency
and compiles on first use (cached on disk after that).

Taps are added row by row, then column by column, each product rounded to float32 and added to a
float32 sum (no fast-math reassociation): results differ from the einsum path's only by its
summation order, within float32 rounding.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

# MODELGRAPH_JIT=0 turns the compiled loops off (the NumPy einsum path runs).
ENV = "MODELGRAPH_JIT"


def available() -> bool:
    """Whether Numba is installed and not turned off with ``MODELGRAPH_JIT=0``."""
    if os.environ.get(ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    return _installed()


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


def depthwise(
    src: np.ndarray, kernel: np.ndarray, dst: np.ndarray, strides: tuple[int, int], dilation: tuple[int, int]
) -> None:
    """``dst`` (``(nb, hb, ow, width)``) = the depthwise conv of the padded slab ``src``, kernel
    ``(kh, kw, width)``, any strides and dilation."""
    _kernel()(src, kernel, dst, strides[0], strides[1], dilation[0], dilation[1])


def _avg_pool_loops(x: Any, out: Any, ph: int, pw: int, sh: int, sw: int, top: int, left: int) -> None:
    """2-D average pooling of a channels-last ``x`` into ``out``, padding ``top`` / ``left`` before the
    first row / column: each window's unpadded cells summed row by row into a local accumulator,
    divided by their count."""
    nb, height, width, channels = x.shape
    oh, ow = out.shape[1], out.shape[2]
    acc = np.empty(channels, dtype=out.dtype)
    for n in range(nb):
        for oy in range(oh):
            y0 = oy * sh - top
            ya, yb = max(y0, 0), min(y0 + ph, height)
            for ox in range(ow):
                x0 = ox * sw - left
                xa, xb = max(x0, 0), min(x0 + pw, width)
                for c in range(channels):
                    acc[c] = 0.0
                for yy in range(ya, yb):
                    for xx in range(xa, xb):
                        pixel = x[n, yy, xx]
                        for c in range(channels):
                            acc[c] += pixel[c]
                count = out.dtype.type(max(yb - ya, 0) * max(xb - xa, 0))
                dst = out[n, oy, ox]
                for c in range(channels):
                    dst[c] = acc[c] / count


@cache
def _avg_pool_kernel() -> Callable[..., None]:
    import numba

    return numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")(_avg_pool_loops)


def avg_pool2d(
    x: np.ndarray, out: np.ndarray, pool: tuple[int, ...], strides: tuple[int, ...], before: tuple[int, int]
) -> None:
    """``out`` (``(B, oh, ow, C)``) = the average pooling of ``x`` (``(B, H, W, C)``, float32) over
    ``pool`` windows at ``strides``, ``before`` padded rows / columns in front, the divisor the count
    of unpadded cells in each window (Keras's ``same`` average pooling)."""
    _avg_pool_kernel()(x, out, pool[0], pool[1], strides[0], strides[1], before[0], before[1])
