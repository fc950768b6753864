"""Weight matrices packed for the IR product loops (:func:`modelgraph.runner.fast.gemm_ir.packed_source`)
and their products, spread over the cores by Numba's threads.

A conv's GEMM multiplies its patches (rows: output pixels) by the same ``(K, N)`` weights every run.
Stored as panels a tile wide (``(P, K, 64)`` with 16-float vectors, the last panel's spare columns
zero), a tile reads its weights from consecutive memory and the loops take the depth in blocks that
stay in L2 cache: the packing BLAS does on every call is done once and replaces the plain matrix
(no second copy is kept). On one core of an AVX-512 machine these loops ran at 241-258 GFLOP/s
where OpenBLAS ran at 169-238, on every ResNet50 shape tried.

Split over the threads, with few rows (ResNet50's 7x7 and 14x14 layers at batch 1: 49 and 196) each
thread takes its own panels, reading only its part of the weights; with more, each takes rows. The
shares start on Numba's threading layer (OpenMP where it is installed), whose threads wait for
work spinning: about 2 us a call, where handing shares to Python threads costs about 55 us (a tenth
of a 0.4 ms GEMM) and OpenBLAS splits products this small poorly (0.58-0.94x its time, 14 shapes).
"""

from __future__ import annotations

import threading
from functools import cache

import numpy as np

from modelgraph.runner import parallel
from modelgraph.runner.fast import jit
from modelgraph.runner.fast.gemm_ir import ROW_BLOCK, packed_address, panel_width
from modelgraph.runner.fast.ir import callers, host_target

# Convs are packed when an image's product has at least this many multiply-adds (ResNet50's every
# 1x1 and 3x3 layer: 51M or 116M). With fewer, a product spread over Numba's threads gains little
# over BLAS's: those threads sleep between sparse calls, and waking one took 25-77 us (MobileNetV2's
# last conv, 20M: 217 us in the model, as with BLAS; 472 us right after a BLAS call whose workers
# still spun).
PACK_MIN_MACS = 1 << 25
# Products with fewer multiply-adds than this run on the calling thread alone.
SPREAD_MIN_MACS = 1 << 22


def can_pack(dtype: np.dtype) -> bool:
    """Whether a conv's weights of ``dtype`` can be packed: float32, with the ``jit`` extra and a
    Numba threading layer whose threads wait for work spinning (:func:`pool_spins`)."""
    return np.dtype(dtype) == np.float32 and jit.available() and pool_spins()


@cache
def pool_spins() -> bool:
    """Whether Numba's threading layer is OpenMP or TBB, whose threads wait for work spinning. Its
    fallback, workqueue (Numba picks it where libgomp and TBB are missing), wakes them for every
    call: ResNet50 at batch 1 took 51.7 ms with packed products on it, against 39.4 on OpenMP in the
    same minute; so without one of those two, convs stay on BLAS. (Starts the layer: about 0.1 s
    once a process, after ``GOMP_SPINCOUNT`` is set.)"""
    parallel.shorten_openmp_spin()
    return callers().threading_layer() in ("omp", "tbb")


class PackedWeights:
    """A ``(K, N)`` float32 weight matrix as panels (see the module docstring): ``shape``, ``dtype``
    and ``nbytes`` as the matrix's; :meth:`matrix` unpacks a copy, :meth:`product` multiplies."""

    def __init__(self, matrix: np.ndarray) -> None:
        depth, columns = matrix.shape
        width = panel_width(host_target())
        count = -(-columns // width)
        panels = np.zeros((count, depth, width), dtype=np.float32)
        for j in range(count):
            part = matrix[:, j * width : (j + 1) * width]
            panels[j, :, : part.shape[1]] = part
        self.panels = panels
        self.shape = (depth, columns)
        self.dtype = np.dtype(np.float32)
        self.nbytes = panels.nbytes
        self._address = packed_address(host_target(), columns % width)

    def matrix(self) -> np.ndarray:
        """The plain ``(K, N)`` matrix (a new array)."""
        count, depth, width = self.panels.shape
        flat = self.panels.transpose(1, 0, 2).reshape(depth, count * width)
        return np.ascontiguousarray(flat[:, : self.shape[1]])

    def product(self, a: np.ndarray, out: np.ndarray) -> None:
        """``out`` = ``a @`` the matrix (2-D float32, rows unit-stride and apart): on this thread inside
        a block share or a step beside others, or when small; else in one share per thread."""
        rows = a.shape[0]
        # One spread at a time (Numba's fallback threading layer, workqueue, aborts the process on
        # concurrent launches): a call made meanwhile from another Python thread runs on its own.
        if (
            parallel.blas_single_threaded()
            or rows * self.shape[0] * self.shape[1] < SPREAD_MIN_MACS
            or not _LAUNCH.acquire(blocking=False)
        ):
            callers().packed(self._address, a, self.panels, out)
            return
        try:
            count = self.panels.shape[0]
            threads = parallel.numba_threads(parallel.thread_count())
            by_rows = count < threads or rows >= threads * ROW_BLOCK
            parts = rows if by_rows else count
            bounds = np.array([parts * i // threads for i in range(threads + 1)], dtype=np.int64)
            callers().packed_shares(self._address, a, self.panels, out, bounds, by_rows)
        finally:
            _LAUNCH.release()


_LAUNCH = threading.Lock()
