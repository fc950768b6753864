"""Spread the independent blocks of one kernel over the cores, each thread with single-threaded BLAS.

NumPy releases the GIL inside ufuncs, copies, ``einsum`` and ``matmul``, so a kernel that works
block by block (its own scratch buffers per thread, each block writing a disjoint part of the
output) can run its blocks on several Python threads. What stops that from paying on its own is
OpenBLAS: a GEMM called from each thread would start OpenBLAS's worker threads too, and those spin
on the cores the other Python threads need. So while the blocks run, OpenBLAS is asked to run every
call single-threaded, through ``openblas_set_num_threads_local`` (OpenBLAS >= 0.3.27, as bundled with
NumPy 2 wheels), and the caller's count is restored once all blocks are done.

Despite its name, in the pthreads builds NumPy ships that call changes the count of the whole
process (measured: a GEMM on another thread drops to one core while it is in effect). So only the
calling thread sets and restores it, once around all shares; pool threads never touch it. Had each
thread saved and restored its own "previous" value, overlapping shares would restore each other's
1 and leave every later BLAS call in the process on one core (it did, until this was found).

When that function cannot be found (a NumPy built against another BLAS), or with one thread
(``MODELGRAPH_NUM_THREADS=1``, or one CPU), blocks run serially in the calling thread, as before.
Results do not depend on the thread count: every block is computed the same way wherever it runs.
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cache
from typing import TypeVar

T = TypeVar("T")

_LOCK = threading.Lock()
_POOL: ThreadPoolExecutor | None = None
_IN_SHARE = threading.local()


def thread_count() -> int:
    """Threads a kernel may use: ``MODELGRAPH_NUM_THREADS`` when set to a positive int, else the
    CPUs this process may run on."""
    value = os.environ.get("MODELGRAPH_NUM_THREADS", "").strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _openblas_libraries() -> list[ctypes.CDLL]:
    import numpy as np

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


def _pool(workers: int) -> ThreadPoolExecutor:
    global _POOL
    with _LOCK:
        if _POOL is None or _POOL._max_workers < workers:  # noqa: SLF001 - grow once when asked for more
            _POOL = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="modelgraph")
        return _POOL


def _run_share(fn: Callable[[T], None], share: Sequence[T]) -> None:
    _IN_SHARE.active = True
    try:
        for item in share:
            fn(item)
    finally:
        _IN_SHARE.active = False


# Fewest items per thread before blocks are spread: with fewer, one share is a single block and an
# uneven split leaves a core idle, while one BLAS call with all its threads splits evenly (measured on
# ResNet50 at batch 1, where most layers have one to three blocks: spreading them was slower).
MIN_ITEMS_PER_THREAD = 2


def threads_for(items: int) -> int:
    """How many threads :func:`for_each` spreads this many items over (1: it runs them serially)."""
    threads = min(thread_count(), items // MIN_ITEMS_PER_THREAD)
    if threads <= 1 or blas_thread_setter() is None or getattr(_IN_SHARE, "active", False):
        return 1
    return threads


def for_each(fn: Callable[[T], None], items: Sequence[T]) -> None:
    """Call ``fn`` on every item, the items split into contiguous shares, one per thread.

    The calling thread runs the first share itself; while the shares run, BLAS is single-threaded
    (process-wide, see the module docstring) and the caller's count is restored after them. Runs
    serially (with BLAS as configured) for fewer than ``MIN_ITEMS_PER_THREAD`` items per thread, one
    thread, no BLAS thread control, or inside another ``for_each``. The first exception is
    re-raised once all shares have ended.
    """
    threads = threads_for(len(items))
    set_blas = blas_thread_setter()
    if threads <= 1 or set_blas is None:
        for item in items:
            fn(item)
        return
    bounds = [len(items) * i // threads for i in range(threads + 1)]
    shares = [items[bounds[i] : bounds[i + 1]] for i in range(threads)]
    previous = set_blas(1)
    error: BaseException | None = None
    try:
        futures: list[Future[None]] = [
            _pool(threads - 1).submit(_run_share, fn, share) for share in shares[1:]
        ]
        try:
            _run_share(fn, shares[0])
        except BaseException as exc:  # noqa: BLE001 - re-raised once the other shares are done
            error = exc
        for future in futures:
            exc = future.exception()
            if exc is not None and error is None:
                error = exc
    finally:
        set_blas(previous)
    if error is not None:
        raise error
