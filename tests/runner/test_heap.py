"""The runner keeps freed memory in glibc's heap for reuse (modelgraph.runner.heap)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

from modelgraph.loading import load
from modelgraph.runner import heap
from modelgraph.runner.interpreter import Runner

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
            "keepcost",
        )
    ]  # fmt: skip


def _mallinfo() -> _MallInfo2:
    libc = heap._glibc()
    info = getattr(libc, "mallinfo2", None) if libc is not None else None
    if info is None:
        pytest.skip("needs glibc >= 2.33 (mallinfo2)")
    info.restype = _MallInfo2
    return info()


def test_a_freed_large_tensor_stays_in_the_heap():
    """After the runner's setting, a 64 MiB array (above glibc's own 32 MiB mmap ceiling) comes from
    the heap, and once freed its memory stays there, free for the next allocation, instead of being
    unmapped (and faulted back in, page by page, by the next layer)."""
    if not heap.keep_freed_memory():
        pytest.skip("not glibc, or the environment sets its own malloc thresholds")
    size = 64 << 20
    before = _mallinfo()
    block = np.ones(size, dtype=np.uint8)
    during = _mallinfo()
    assert during.hblkhd - before.hblkhd < size  # not a mapping of its own
    del block
    after = _mallinfo()
    assert after.fordblks >= size  # free in the heap, kept for reuse
    assert after.arena >= during.arena  # the heap was not trimmed


def test_the_users_own_malloc_settings_are_kept(monkeypatch):
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    assert heap.keep_freed_memory.__wrapped__() is False
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=131072")
    assert heap.keep_freed_memory.__wrapped__() is False


def test_a_run_applies_it():
    """Running a model makes the setting (once per process)."""
    heap.keep_freed_memory.cache_clear()
    Runner(load(SAMPLES / "k3" / "cnn.keras")).run(np.zeros((1, 16, 16, 3), np.float32))
    assert heap.keep_freed_memory.cache_info().currsize == 1
