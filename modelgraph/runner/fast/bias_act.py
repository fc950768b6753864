"""A conv's float32 epilogue (bias, merged residual, relu / relu6) as one compiled pass over each
output block (the optional Numba of the ``jit`` extra).

NumPy spends one pass per operation: the bias row (``rowwise.apply``), the residual, the ``clip``.
Over a block larger than the L2 cache each pass streams it through memory again, and each costs a few
microseconds of call overhead, which at batch 1 is a visible share of a small layer. One compiled loop
reads the block once: on one core, 784x256 with bias, residual and relu 31 us against 123 us for the
three NumPy passes, 3136x256 118 against 517, 49x2048 20 against 73 (bias and relu only: 3136x256 118
against 314).

Results equal NumPy's element for element: ``(x + bias) + residual`` rounded to float32 after each
add, in that order (no fast-math), and the clamp as compare-and-select, so NaN stays NaN and relu
keeps the sign of a zero, as ``clip`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np

from modelgraph.runner.fast import jit

# The activations the pass clamps to: (lowest, highest) value.
BOUNDS = {"relu": (0.0, np.inf), "relu6": (0.0, 6.0)}
_LINEAR = (-np.inf, np.inf)


def _bias_loop(block: np.ndarray, bias: np.ndarray, lo: np.float32, hi: np.float32) -> None:
    """``block = clamp(block + bias)`` in place, ``block`` ``(rows, C)``, ``bias`` ``(C,)``."""
    rows, width = block.shape
    for i in range(rows):
        row = block[i]
        for j in range(width):
            v = row[j] + bias[j]
            v = lo if v < lo else v
            row[j] = hi if v > hi else v


def _residual_loop(
    block: np.ndarray, bias: np.ndarray, residual: np.ndarray, lo: np.float32, hi: np.float32
) -> None:
    """``block = clamp((block + bias) + residual)`` in place, ``residual`` of ``block``'s shape."""
    rows, width = block.shape
    for i in range(rows):
        row = block[i]
        other = residual[i]
        for j in range(width):
            v = row[j] + bias[j]
            v = v + other[j]
            v = lo if v < lo else v
            row[j] = hi if v > hi else v


@cache
def _compiled() -> tuple[Callable[..., None], Callable[..., None]]:
    import numba

    jit_ = numba.njit(nogil=True, cache=True, boundscheck=False)
    return jit_(_bias_loop), jit_(_residual_loop)


def bounds(activation: str | None) -> tuple[float, float] | None:
    """The clamp the pass applies for ``activation`` (None or ``linear``: none), None when the pass
    cannot apply it."""
    if activation in (None, "linear"):
        return _LINEAR
    return BOUNDS.get(activation)


def apply(
    block: np.ndarray,
    bias: np.ndarray,
    residual: np.ndarray | None,
    clamp: tuple[float, float],
) -> bool:
    """``block = clamp(block + bias [+ residual])`` in place with the compiled pass, when it is
    available and ``block`` (and ``residual``, of its shape) are C-ordered float32 with a last axis
    of ``bias``'s length; False (nothing done) otherwise."""
    width = bias.shape[0]
    if (
        block.dtype != np.float32
        or bias.dtype != np.float32
        or not block.flags.c_contiguous
        or block.ndim < 1
        or block.shape[-1] != width
        or not jit.available()
    ):
        return False
    if residual is not None and (
        residual.dtype != np.float32 or not residual.flags.c_contiguous or residual.size != block.size
    ):
        return False
    lo, hi = np.float32(clamp[0]), np.float32(clamp[1])
    rows = block.reshape(-1, width)
    bias_pass, residual_pass = _compiled()
    if residual is None:
        bias_pass(rows, bias, lo, hi)
    else:
        residual_pass(rows, bias, residual.reshape(-1, width), lo, hi)
    return True
