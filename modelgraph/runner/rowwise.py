"""Element-wise passes with a per-channel (or constant) operand, at NumPy's contiguous SIMD speed.

The obvious spellings miss NumPy's fast loops:

* ``x + bias`` with ``bias`` of shape ``(C,)``: the row cannot be merged into one dimension with
  ``x``, so the inner loop is called once per row of ``C`` elements (float32, 512 KiB to 24 MiB:
  1.3-1.7x slower than adding a contiguous operand, 2.5-4x for ``C`` = 16). Here the row is repeated
  into a contiguous run of at least :data:`RUN` elements and a C-ordered ``x`` is viewed as rows of
  that length: one inner-loop call per run, both operands contiguous. The run is built on first use
  and kept with its row (at most 64 KiB per layer: ResNet50 2.4 MB, NASNetMobile about 12 MB).
* ``np.maximum(x, 0)``: NumPy's SIMD loop for maximum covers two contiguous operands, not a scalar
  one, which runs about 3.4x slower (10 GB/s). ``np.clip`` with scalar bounds has a SIMD loop of its
  own, so relu is ``clip(x, 0, inf)`` (one pass, and relu6 ``clip(x, 0, 6)``), called as the ufunc
  itself: ``np.clip``'s Python wrapper cost 5 of the 16 us of a relu on a 34 K-element tensor (a
  NASNetMobile cell's at batch 1, 190 of them per run).

* ``swish``/``silu`` (``x / (1 + exp(-x))``, four passes): on a tensor larger than the cache every
  pass streams it through memory, and NumPy's float32 ``exp`` runs 3x slower per element there than
  on a block in cache (1.2 M elements: 7.6 against 2.3 ns). :func:`silu_` makes the four passes on
  one cache-sized chunk after another.

The results are those of the plain calls, element for element (same operation on the same values;
NaN stays NaN), except that relu keeps the sign of a zero (``-0.0`` stays ``-0.0``, equal to 0).
"""

from __future__ import annotations

import numpy as np

try:  # the clip ufunc np.clip ends in, without its argument checks
    from numpy._core.umath import clip as _clip
except ImportError:  # pragma: no cover - another NumPy layout
    _clip = np.clip

# Elements per contiguous run: past NumPy's ufunc buffer (8192 elements), the length from which the
# passes above reached their contiguous speed (runs of 256-4096 were still 1.6x slower).
RUN = 16384


class Run:
    """A row of ``C`` values, repeated when first used into a contiguous run of at least
    :data:`RUN` elements (a whole number of rows), or of the first tensor's size when that is
    smaller (a longer one is built when a larger tensor needs it)."""

    __slots__ = ("row", "_run")

    def __init__(self, row: np.ndarray) -> None:
        self.row = row
        self._run: np.ndarray | None = None

    def tiled(self, size: int = RUN) -> np.ndarray:
        """The repeated row, at least ``min(size, RUN)`` elements long, built once and kept (at most
        64 KiB of float32 per row: the per-thread cache of the last three runs this replaced rebuilt
        nearly every layer's run in a plan of many layers, 4% of NASNetMobile's time at batch 1)."""
        run = self._run
        want = min(max(size, 1), RUN)
        if run is None or run.size < want:
            rows = max(1, -(-want // max(1, self.row.size)))
            run = self._run = np.tile(self.row, rows)
        return run


def repeat_row(row: np.ndarray) -> Run:
    """The :class:`Run` of a 1-D ``row`` (its dtype kept)."""
    return Run(np.ascontiguousarray(row).reshape(-1))


def apply(ufunc: np.ufunc, x: np.ndarray, operand: Run, out: np.ndarray | None = None) -> np.ndarray:
    """``ufunc(x, row, out=out)`` with ``row`` broadcast along ``x``'s last axis (in place when
    ``out`` is ``x`` or None: ``x`` must then be writable), returning ``out``.

    ``x`` and ``out`` C-ordered, of the run's dtype and (for rows of several values) a last axis of
    the row's length take the fast path; anything else is split along its first axis until the
    pieces qualify, or computed by the plain call.
    """
    if out is None:
        out = x
    row = operand.row
    fits = x.ndim >= 1 and (row.size == 1 or x.shape[-1] == row.size)
    if not fits or x.dtype != row.dtype or out.dtype != row.dtype or out.shape != x.shape:
        return ufunc(x, row, out=out)
    if not (x.flags.c_contiguous and out.flags.c_contiguous):
        if x.ndim <= 2 or x.shape[0] == 0:
            return ufunc(x, row, out=out)
        for i in range(x.shape[0]):
            apply(ufunc, x[i], operand, out[i])
        return out
    src, dst = x.reshape(-1), out.reshape(-1)
    run = operand.tiled(src.size)
    length = run.size
    whole = src.size // length * length
    if whole:
        ufunc(src[:whole].reshape(-1, length), run, out=dst[:whole].reshape(-1, length))
    if whole < src.size:
        # The tail starts on a row boundary (``length`` is a whole number of rows).
        ufunc(src[whole:], run[: src.size - whole], out=dst[whole:])
    return out


def relu_(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``max(x, 0)`` into ``out`` (default: in place, ``x`` must be writable)."""
    out = x if out is None else out
    if x.dtype.kind != "f":
        return np.maximum(x, x.dtype.type(0), out=out)
    return _clip(x, x.dtype.type(0), x.dtype.type(np.inf), out=out)


def relu6_(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``min(max(x, 0), 6)`` into ``out`` (default: in place, ``x`` must be writable)."""
    return _clip(x, x.dtype.type(0), x.dtype.type(6), out=x if out is None else out)


# Elements per chunk of :func:`silu_`: 32-256 Ki elements ran alike (4.5-5.1 ms on a 112x112x96
# float32 tensor against 17 ms unchunked); 4 Ki elements paid for the per-call overhead (6.1 ms).
SILU_CHUNK = 1 << 15


def silu_(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``x * sigmoid(x)`` of a float32/float64 ``x``, computed as ``x / (1 + exp(-x))``, into ``out``
    (default: in place, ``x`` must be writable), one cache-sized chunk at a time when both are
    C-ordered. Below x = -88.7 (float32) ``exp`` overflows and the result is -0 where the true value
    is under 1e-36."""
    out = x if out is None else out
    with np.errstate(over="ignore", invalid="ignore"):  # -inf gives NaN, as x * sigmoid(x) does
        if x.size <= SILU_CHUNK or not (x.flags.c_contiguous and out.flags.c_contiguous):
            d = np.negative(x)
            np.exp(d, out=d)
            d += 1
            return np.divide(x, d, out=out)
        src, dst = x.reshape(-1), out.reshape(-1)
        tmp = np.empty(SILU_CHUNK, dtype=x.dtype)
        for start in range(0, src.size, SILU_CHUNK):
            a = src[start : start + SILU_CHUNK]
            d = tmp[: a.size]
            np.negative(a, out=d)
            np.exp(d, out=d)
            d += 1
            np.divide(a, d, out=dst[start : start + SILU_CHUNK])
    return out
