"""TensorFlow's image resampling as separable weight matrices.

Every ``tf.image.resize`` method past nearest and bilinear is linear and separable: an output row is
a weighted sum of input rows, then an output column a weighted sum of those rows' columns. Here each
method is a function ``(in_size, out_size) -> (out_size, in_size)`` float32 matrix whose weights are
the ones TensorFlow's kernels compute, step for step in float32:

* ``bicubic`` (``ResizeBicubic`` with half-pixel centres, what ``tf.image.resize`` uses without
  antialiasing): Keys' cubic with a = -0.5, its weights read from a 1024-entry table at the rounded
  sub-pixel offset, taps outside the image dropped and the rest renormalised;
* ``area`` (``ResizeArea``): each output pixel averages the input cells it covers, partly covered
  cells weighted by the covered fraction;
* ``lanczos3``, ``lanczos5``, ``gaussian``, ``mitchellcubic`` and, with ``antialias=True``, bilinear
  (``triangle``) and bicubic (``keyscubic``): ``ScaleAndTranslate``, whose kernel is stretched by
  the downscaling factor when antialiasing, with weights renormalised over the input span.

:func:`resize_separable` applies a pair of matrices to a channels-last batch, rows first as
TensorFlow does. Results match TensorFlow up to float32 summation order.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache, partial

import numpy as np

_F = np.float32
_TABLE_SIZE = 1024


def _keys_table(a: float) -> np.ndarray:
    """``ResizeBicubic``'s coefficient table: entry ``2i`` is the cubic at ``i/1024``, entry ``2i+1``
    at ``i/1024 + 1`` (polynomials evaluated in double, stored as float32)."""
    table = np.empty(2 * (_TABLE_SIZE + 1), dtype=_F)
    for i in range(_TABLE_SIZE + 1):
        x = float(_F(i / _TABLE_SIZE))
        table[2 * i] = ((a + 2) * x - (a + 3)) * x * x + 1
        x = float(_F(x + 1.0))
        table[2 * i + 1] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return table


_KEYS_TABLE = _keys_table(-0.5)
# float32's smallest normal number times 1000: TensorFlow renormalises only sums above it.
_TINY_SUM = _F(1000.0) * np.finfo(_F).tiny


def _renormalise(weights: list[_F]) -> list[_F]:
    total = _F(0.0)
    for w in weights:
        total = _F(total + w)
    if abs(total) < _TINY_SUM:
        return weights
    inverse = _F(_F(1.0) / total)
    return [_F(w * inverse) for w in weights]


def _resize_scale(in_size: int, out_size: int) -> _F:
    return _F(_F(in_size) / _F(out_size))


@lru_cache(maxsize=64)
def bicubic_matrix(in_size: int, out_size: int) -> np.ndarray:
    """``ResizeBicubic(half_pixel_centers=True)`` along one axis: ``(out_size, in_size)``."""
    scale = _resize_scale(in_size, out_size)
    matrix = np.zeros((out_size, in_size), dtype=_F)
    for out in range(out_size):
        position = _F(_F(_F(out) + _F(0.5)) * scale - _F(0.5))
        base = math.floor(position)
        offset = int(np.rint(_F(_F(position - _F(base)) * _F(_TABLE_SIZE))))
        taps = [
            _KEYS_TABLE[offset * 2 + 1],
            _KEYS_TABLE[offset * 2],
            _KEYS_TABLE[(_TABLE_SIZE - offset) * 2],
            _KEYS_TABLE[(_TABLE_SIZE - offset) * 2 + 1],
        ]
        sources = [base - 1, base, base + 1, base + 2]
        weights = _renormalise(
            [w if 0 <= s < in_size else _F(0.0) for w, s in zip(taps, sources, strict=True)]
        )
        for source, weight in zip(sources, weights, strict=True):
            if 0 <= source < in_size:
                matrix[out, source] += weight
    return matrix


@lru_cache(maxsize=64)
def area_matrix(in_size: int, out_size: int) -> np.ndarray:
    """``ResizeArea`` along one axis (covered fractions times ``out_size / in_size``)."""
    scale = _resize_scale(in_size, out_size)
    matrix = np.zeros((out_size, in_size), dtype=_F)
    for out in range(out_size):
        start, end = _F(_F(out) * scale), _F(_F(out + 1) * scale)
        for cell in range(math.floor(start), math.ceil(end)):
            if cell < start:
                covered = scale if cell + 1 > end else _F(_F(cell + 1) - start)
            else:
                covered = _F(end - _F(cell)) if cell + 1 > end else _F(1.0)
            matrix[out, min(in_size - 1, max(0, cell))] += covered
    return matrix / scale


def _lanczos(radius: float) -> Callable[[float], float]:
    pi = float(_F(3.14159265359))

    def kernel(x: float) -> float:
        x = abs(x)
        if x > radius:
            return 0.0
        if x <= 1e-3:
            return 1.0
        return float(_F(radius * math.sin(pi * x) * math.sin(pi * x / radius) / (pi * pi * x * x)))

    return kernel


def _keys_cubic(x: float) -> float:
    x = abs(x)
    if x >= 2.0:
        return 0.0
    if x >= 1.0:
        return float(_F(((-0.5 * x + 2.5) * x - 4.0) * x + 2.0))
    return float(_F(((1.5 * x - 2.5) * x) * x + 1.0))


def _mitchell_cubic(x: float) -> float:
    x = abs(x)
    if x >= 2.0:
        return 0.0
    if x >= 1.0:
        return float(_F((((-7.0 / 18.0) * x + 2.0) * x - 10.0 / 3.0) * x + 16.0 / 9.0))
    return float(_F((((7.0 / 6.0) * x - 2.0) * x) * x + 8.0 / 9.0))


def _gaussian(x: float) -> float:
    # Radius 1.5, sigma a third of it.
    sigma = float(_F(1.5 / 3.0))
    x = abs(x)
    return 0.0 if x >= 1.5 else float(_F(math.exp(-x * x / (2.0 * sigma * sigma))))


def _triangle(x: float) -> float:
    x = abs(x)
    return 1.0 - x if x < 1.0 else 0.0


# ScaleAndTranslate's kernels: (function, radius).
SAMPLING_KERNELS: dict[str, tuple[Callable[[float], float], float]] = {
    "lanczos3": (_lanczos(3.0), 3.0),
    "lanczos5": (_lanczos(5.0), 5.0),
    "keyscubic": (_keys_cubic, 2.0),
    "mitchellcubic": (_mitchell_cubic, 2.0),
    "gaussian": (_gaussian, 1.5),
    "triangle": (_triangle, 1.0),
}


@lru_cache(maxsize=64)
def scale_and_translate_matrix(
    kernel_name: str, in_size: int, out_size: int, antialias: bool = False
) -> np.ndarray:
    """``ScaleAndTranslate`` with ``scale = out/in``, no translation, along one axis."""
    kernel, radius = SAMPLING_KERNELS[kernel_name]
    scale = _F(_F(out_size) / _F(in_size))
    inv_scale = _F(1.0 / float(scale))
    kernel_scale = max(inv_scale, _F(1.0)) if antialias else _F(1.0)
    reach = _F(_F(radius) * kernel_scale)
    one_over_kernel_scale = _F(_F(1.0) / kernel_scale)
    matrix = np.zeros((out_size, in_size), dtype=_F)
    for out in range(out_size):
        sample = _F(_F(_F(out) + _F(0.5)) * inv_scale)
        if sample < 0 or sample > in_size:
            continue
        start = min(in_size - 1, max(0, math.ceil(_F(sample - reach - _F(0.5)))))
        end = min(in_size - 1, max(0, math.floor(_F(sample + reach - _F(0.5))))) + 1
        weights = [
            _F(kernel(float(_F(abs(_F(_F(_F(source) + _F(0.5)) - sample)) * one_over_kernel_scale))))
            for source in range(start, end)
        ]
        matrix[out, start:end] = _renormalise(weights)
    return matrix


def resize_separable(x: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """A ``(B, H, W, C)`` float array resampled by ``rows`` ``(out_h, H)`` then ``cols`` ``(out_w, W)``."""
    dtype = x.dtype
    tall = np.einsum("oh,bhwc->bowc", rows.astype(dtype), x)
    return np.einsum("pw,bowc->bopc", cols.astype(dtype), tall)


# Method names Keras may write: Keras 3's six and tf.keras's two more (all ``tf.image.resize`` methods).
METHODS = ("nearest", "bilinear", "bicubic", "area", "lanczos3", "lanczos5", "gaussian", "mitchellcubic")


def method_matrices(method: str, antialias: bool) -> Callable[[int, int], np.ndarray] | None:
    """The per-axis matrix function ``(in_size, out_size) -> matrix`` of a ``tf.image.resize``
    method, or None for nearest and plain bilinear (computed directly by the caller). ``antialias``
    is ignored by nearest and area, as TensorFlow does. KeyError for any other method."""
    if method == "nearest" or (method == "bilinear" and not antialias):
        return None
    if method == "area":
        return area_matrix
    if method == "bicubic" and not antialias:
        return bicubic_matrix
    kernel_name = {"bilinear": "triangle", "bicubic": "keyscubic"}.get(method, method)
    if kernel_name not in SAMPLING_KERNELS:
        raise KeyError(method)
    return partial(scale_and_translate_matrix, kernel_name, antialias=antialias)
