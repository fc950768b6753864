"""Spread the independent blocks of one kernel over the cores, each thread with single-threaded BLAS.

NumPy releases the GIL inside ufuncs, copies, ``einsum`` and ``matmul``, so a kernel that works
block by block (its own scratch buffers per thread, each block writing a disjoint part of the
output) can run its blocks on several Python threads: then its copies, epilogues and depthwise
loops use every core too, not only its GEMMs. Three things about NumPy's OpenBLAS decide how:

* A GEMM called from each thread would start OpenBLAS's worker threads as well, which would compete
  with the other Python threads. So while the blocks run, OpenBLAS runs every call single-threaded
  (``openblas_set_num_threads_local``, OpenBLAS >= 0.3.27, as bundled with NumPy 2 wheels), and the
  caller's count is restored once all blocks are done. Despite its name, in the pthreads builds
  NumPy ships that call sets the count of the whole process, so only the calling thread sets and
  restores it, once around all shares. (Had each thread restored its own "previous" value,
  overlapping shares would restore each other's 1 and leave every later BLAS call on one core.)
* OpenBLAS's idle workers spin for about 0.1 s after each threaded call, taking half of a core from
  the kernel threads that follow. :func:`shorten_blas_spin` cuts that to under a millisecond.
* Handing a share to a pool thread costs tens of microseconds, and OpenBLAS splits one GEMM among
  its own workers well. So work under ``SPREAD_MIN_WORK`` runs serially and BLAS keeps its threads.

How many threads a run gets is :mod:`modelgraph.runner.threads`'s decision. When the thread-count
call cannot be found (a NumPy built against another BLAS), or with one thread (pinned, or the
machine busy), blocks run serially in the calling thread. Results do not
depend on the thread count: every block is computed the same way wherever it runs.
"""

from __future__ import annotations

import ctypes
import glob
import itertools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from functools import cache
from typing import TypeVar

import numpy as np

from modelgraph.runner import threads

T = TypeVar("T")

_LOCK = threading.Lock()
_IN_SHARE = threading.local()


def thread_count() -> int:
    """Threads a kernel may use: the count :mod:`modelgraph.runner.threads` decided for the run in
    progress (pinned by the user, or the free usable cores)."""
    return threads.thread_count()


def _openblas_libraries() -> list[ctypes.CDLL]:
    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    found = []
    for path in sorted(glob.glob(os.path.join(libs, "*openblas*.so*"))):
        try:
            found.append(ctypes.CDLL(path))  # already loaded by NumPy: this only looks the handle up
        except OSError:
            continue
    return found


@cache
def blas_thread_setter() -> Callable[[int], int] | None:
    """``openblas_set_num_threads_local`` of the OpenBLAS NumPy uses (sets the BLAS thread count,
    process-wide in NumPy's builds, and returns the previous one), or None when NumPy does not bundle
    such an OpenBLAS."""
    for lib in _openblas_libraries():
        setter = getattr(lib, "openblas_set_num_threads_local", None)
        if setter is not None:
            setter.argtypes = [ctypes.c_int]
            setter.restype = ctypes.c_int
            return setter
    return None


# OpenBLAS's idle workers spin for 2**THREAD_TIMEOUT cycles after each threaded call before they
# sleep: 2**28 by default, about 0.1 s. Spinning, a worker takes half of the core a kernel's own
# thread runs on (measured: a spread GEMM right after a threaded one ran at one core's speed, and
# so did one up to 50 ms later). 2**20 cycles (under 1 ms) still bridges the gaps between
# consecutive BLAS calls of one model, and ends long before most spread kernels do.
BLAS_SPIN_LOG2_CYCLES = 20


@cache
def shorten_blas_spin() -> bool:
    """Make NumPy's OpenBLAS workers stop spinning ``2**BLAS_SPIN_LOG2_CYCLES`` cycles after a call
    (unless ``OPENBLAS_THREAD_TIMEOUT`` is set): OpenBLAS re-reads its environment and restarts its
    worker threads, which read the timeout when they start. Done once, by the first runner that
    spreads work; True when it took effect."""
    if "OPENBLAS_THREAD_TIMEOUT" in os.environ:
        return False
    for lib in _openblas_libraries():
        read_env = getattr(lib, "openblas_read_env", None)
        shutdown = getattr(lib, "blas_thread_shutdown_", None)
        timeout = getattr(lib, "openblas_thread_timeout", None)
        if read_env is None or shutdown is None or timeout is None:
            continue
        with _LOCK:
            os.environ["OPENBLAS_THREAD_TIMEOUT"] = str(BLAS_SPIN_LOG2_CYCLES)
            try:
                read_env()
            finally:
                del os.environ["OPENBLAS_THREAD_TIMEOUT"]
            timeout.restype = ctypes.c_int
            if timeout() != BLAS_SPIN_LOG2_CYCLES:
                return False
            shutdown()  # the next threaded call starts the workers again, with the new timeout
        return True
    return False


# Spins of an idle OpenMP thread (GNU libgomp, under Numba's threading layer) before it sleeps: its
# default, 300000, kept the other core busy for milliseconds after each product by packed weights,
# and the Python block shares and BLAS calls that followed ran at one core's speed (ResNet50 at
# batch 1: 28.2-29.2 ms, the same as without those products; 26.5-27.1 with 3000 or 30000 spins).
OPENMP_SPIN_COUNT = 3000


@cache
def shorten_openmp_spin() -> None:
    """Set ``GOMP_SPINCOUNT`` for libgomp to read when Numba's threading layer loads it (unless the
    user set it or ``OMP_WAIT_POLICY``). Without effect if another library loaded libgomp first."""
    if "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = str(OPENMP_SPIN_COUNT)


def numba_threads(count: int) -> int:
    """Size the next Numba parallel call made from this thread: ``count`` threads, at most as many
    as Numba started with; returns the count set. (Imports Numba: call only with the ``jit`` extra.)"""
    shorten_openmp_spin()
    import numba

    count = max(1, min(count, numba.config.NUMBA_NUM_THREADS))
    numba.set_num_threads(count)
    return count


# The getter carries the symbol prefix and suffix of the build (scipy-openblas: ``scipy_..._64_``).
_GETTER_NAMES = (
    "openblas_get_num_threads",
    "scipy_openblas_get_num_threads64_",
    "openblas_get_num_threads64_",
)


def blas_thread_count() -> int | None:
    """The thread count NumPy's OpenBLAS uses for its next call, or None when it cannot be read."""
    for lib in _openblas_libraries():
        for name in _GETTER_NAMES:
            getter = getattr(lib, name, None)
            if getter is not None:
                getter.restype = ctypes.c_int
                return int(getter())
    return None


class ThreadPool:
    """Named threads made when first needed, one per share index: share ``k`` of every call runs on
    thread ``k``. A call with fewer shares than an earlier one touches only the threads it needs, and
    each thread keeps its own scratch buffers (:func:`modelgraph.runner.fast.blocks.scratch`). A
    shared pool let whichever idle thread came first take a share, so a two-thread run could still
    make a third thread's scratch after a four-thread run, and a pool replaced by a larger one kept
    its threads and their scratch: 4.4 MB more than one batch of a stream needed, seen in tests."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._lock = threading.Lock()
        self._threads: list[ThreadPoolExecutor] = []

    def run_each(self, count: int, fn: Callable[..., None], *args: object) -> list[Future[None]]:
        """Start ``fn(*args)`` once on each of the first ``count`` threads."""
        with self._lock:
            while len(self._threads) < count:
                name = f"{self._prefix}-{len(self._threads)}"
                self._threads.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix=name))
            chosen = self._threads[:count]
        return [thread.submit(fn, *args) for thread in chosen]


# The threads for_each hands a kernel's block shares to.
_BLOCKS = ThreadPool("modelgraph")


class _Queue:
    """Item indices handed out one at a time to whichever thread asks first (a slow or preempted
    core takes fewer), until they run out or one of the items fails."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._next = itertools.count()  # next() on a count is atomic under the GIL
        self.failed = False

    def take(self) -> int | None:
        index = next(self._next)
        return None if self.failed or index >= self._count else index


def _run_share(fn: Callable[[T], None], items: Sequence[T], queue: _Queue) -> None:
    with serial_kernels():
        while (index := queue.take()) is not None:
            try:
                fn(items[index])
            except BaseException:
                queue.failed = True
                raise


# Multiply-adds (or comparable units of work) a call needs before its items are spread over threads.
# Handing a share to a pool thread and waiting for it costs about 40 us; OpenBLAS's own workers,
# which spin between calls, pick work up faster. Smaller calls therefore run serially and leave BLAS
# its threads: measured in-process on MobileNetV2 at batch 1 (every block under 25M multiply-adds),
# spreading its bands was 1.15-1.35x slower than this; at batch 8 spreading them was 1.2x faster.
SPREAD_MIN_WORK = 1 << 26


def threads_for(items: int, work: float | None = None) -> int:
    """How many threads :func:`for_each` spreads this many items (of ``work`` in all, when known)
    over (1: it runs them serially)."""
    threads = min(thread_count(), items)
    if (
        threads <= 1
        or (work is not None and work < SPREAD_MIN_WORK)
        or blas_thread_setter() is None
        or getattr(_IN_SHARE, "active", False)
    ):
        return 1
    return threads


def for_each(fn: Callable[[T], None], items: Sequence[T], work: float | None = None) -> None:
    """Call ``fn`` on every item, on up to :func:`thread_count` threads (the caller and pool threads),
    each taking the next item when it is done with one, so a core that is slow or busy elsewhere
    does less of the work instead of holding up the call.

    While the items run, BLAS is single-threaded (process-wide, see the module docstring) and the
    caller's count is restored after them. Runs serially (BLAS keeps its own threads) for one item,
    ``work`` under ``SPREAD_MIN_WORK``, one thread, no BLAS thread control, or inside another
    ``for_each``. After a failure no thread starts another item; the first exception is re-raised
    once every thread has stopped.
    """
    threads = threads_for(len(items), work)
    if threads <= 1:
        for item in items:
            fn(item)
        return
    shorten_blas_spin()
    queue = _Queue(len(items))
    error: BaseException | None = None
    with blas_threads(1):
        futures = _BLOCKS.run_each(threads - 1, _run_share, fn, items, queue)
        try:
            _run_share(fn, items, queue)
        except BaseException as exc:  # noqa: BLE001 - re-raised once the other threads are done
            error = exc
        for future in futures:
            exc = future.exception()
            if exc is not None and error is None:
                error = exc
    if error is not None:
        raise error


def blas_single_threaded() -> bool:
    """Whether a BLAS call made on this thread now runs on one thread: inside a block share or a step
    beside others (:func:`serial_kernels`: BLAS is set to one thread), or in a run of one thread."""
    return getattr(_IN_SHARE, "active", False) or thread_count() <= 1


@contextmanager
def serial_kernels(serial: bool = True) -> Iterator[None]:
    """Within the block (when ``serial``), :func:`for_each` runs its items serially on this thread:
    for a kernel that runs beside another on the other cores
    (:mod:`modelgraph.runner.schedule`), so parallel regions never nest."""
    if not serial:
        yield
        return
    before = getattr(_IN_SHARE, "active", False)
    _IN_SHARE.active = True
    try:
        yield
    finally:
        _IN_SHARE.active = before


@contextmanager
def blas_threads(count: int) -> Iterator[None]:
    """Run the block with NumPy's OpenBLAS set to ``count`` threads (process-wide), restoring the
    previous count after it; does nothing when the count cannot be set."""
    set_blas = blas_thread_setter()
    if set_blas is None:
        yield
        return
    previous = set_blas(count)
    try:
        yield
    finally:
        set_blas(previous)
