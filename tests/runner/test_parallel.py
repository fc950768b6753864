"""Blocks spread over threads: every item once, errors surface, BLAS threads restored, same numbers."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from modelgraph.runner import parallel
from modelgraph.runner.kernels._conv_utils import conv2d_gemm, in_place_epilogue

needs_blas_control = pytest.mark.skipif(
    parallel.blas_thread_setter() is None, reason="NumPy's BLAS has no thread-local thread count"
)


@pytest.fixture
def two_threads(monkeypatch):
    monkeypatch.setenv("MODELGRAPH_NUM_THREADS", "2")


@needs_blas_control
def test_every_item_runs_once_on_two_threads(two_threads):
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()

    def work(item: int) -> None:
        with lock:
            seen.append((item, threading.get_ident()))

    parallel.for_each(work, list(range(9)))
    assert sorted(i for i, _ in seen) == list(range(9))
    assert len({t for _, t in seen}) == 2  # the caller and one pool thread


@needs_blas_control
def test_blas_is_single_threaded_inside_and_restored_after(two_threads):
    """Both shares see one BLAS thread for their whole run (also after the other share ended), and the
    caller's count is back afterwards, every time. OpenBLAS's count is process-wide: when each
    thread restored its own "previous" value, the shares' restores raced and left it at 1."""
    if parallel.blas_thread_count() is None:
        pytest.skip("NumPy's OpenBLAS has no readable thread count")
    setter = parallel.blas_thread_setter()
    before = setter(2)
    try:
        for _ in range(20):
            inside: list[int | None] = []
            both_started = threading.Barrier(2)
            caller_done = threading.Event()

            def work(item: int, inside=inside, both_started=both_started, caller_done=caller_done) -> None:
                both_started.wait(timeout=10)
                inside.append(parallel.blas_thread_count())
                if item == 0:
                    caller_done.set()
                else:
                    caller_done.wait(timeout=10)
                    inside.append(parallel.blas_thread_count())

            parallel.for_each(work, [0, 0, 1, 1])
            assert inside == [1] * 6
            assert parallel.blas_thread_count() == 2
    finally:
        setter(before)


@needs_blas_control
def test_the_first_error_is_raised_after_all_shares(two_threads):
    done: list[int] = []

    def work(item: int) -> None:
        if item == 5:
            raise ValueError("block 5 failed")
        done.append(item)

    with pytest.raises(ValueError, match="block 5"):
        parallel.for_each(work, list(range(8)))
    # The caller's share (0-3) finished; the failing share stopped at its error.
    assert sorted(done) == [0, 1, 2, 3, 4]


@needs_blas_control
def test_nested_calls_and_one_thread_run_serially(two_threads, monkeypatch):
    caller = threading.get_ident()
    inner_threads: set[int] = set()

    def inner(item: int) -> None:
        inner_threads.add(threading.get_ident())

    def outer(item: int) -> None:
        before = set(inner_threads)
        parallel.for_each(inner, list(range(6)))
        assert len(inner_threads - before) <= 1  # the share's own thread only

    parallel.for_each(outer, list(range(4)))
    monkeypatch.setenv("MODELGRAPH_NUM_THREADS", "1")
    inner_threads.clear()
    parallel.for_each(inner, list(range(6)))
    assert inner_threads == {caller}


def test_few_items_stay_on_the_caller(two_threads):
    caller = threading.get_ident()
    threads: set[int] = set()
    parallel.for_each(lambda _: threads.add(threading.get_ident()), [0, 1, 2])
    assert threads == {caller}


@pytest.mark.parametrize("shape, kernel, strides", [((8, 30, 31, 24), 3, 1), ((8, 17, 16, 40), 1, 2)])
def test_conv_blocks_give_the_same_numbers_on_any_thread_count(shape, kernel, strides, monkeypatch):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape, dtype=np.float32)
    w = rng.standard_normal((kernel * kernel * shape[-1], 32), dtype=np.float32)
    bias = rng.standard_normal(32, dtype=np.float32)
    monkeypatch.setattr("modelgraph.runner.kernels._conv_utils.GEMM_BLOCK_BYTES", 1 << 14)
    pads = [(kernel // 2, kernel // 2)] * 2
    results = []
    for threads in ("1", "2"):
        monkeypatch.setenv("MODELGRAPH_NUM_THREADS", threads)
        epilogue = in_place_epilogue(bias, "relu", None)
        results.append(conv2d_gemm(x, w, (kernel, kernel), (strides, strides), (1, 1), pads, epilogue))
    np.testing.assert_array_equal(results[0], results[1])
