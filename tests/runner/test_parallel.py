"""Blocks spread over threads: every item once, errors surface, BLAS threads restored, same numbers."""

from __future__ import annotations

import ctypes
import os
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelgraph.runner import fast, parallel
from modelgraph.runner.activations import get_activation
from modelgraph.runner.fast.blocks import row_blocks
from modelgraph.runner.fast.epilogue import element_work, in_place_epilogue
from modelgraph.runner.fast.gemm import conv2d_gemm

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
        time.sleep(0.01)  # long enough for the pool thread to take items too

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
def test_the_first_error_is_raised_and_stops_the_other_threads(two_threads):
    done: list[int] = []
    failed = threading.Event()

    def work(item: int) -> None:
        if item == 3:
            failed.set()
            raise ValueError("block 3 failed")
        if item > 3:
            assert failed.wait(timeout=10)  # items 4.. start only once item 3 is running
        done.append(item)

    with pytest.raises(ValueError, match="block 3"):
        parallel.for_each(work, list(range(40)))
    # Every item before the failure ran; once it failed, at most the one item each other thread
    # had already taken ran too.
    assert 3 not in done and {0, 1, 2} <= set(done) and len(done) <= 3 + 1


@needs_blas_control
def test_a_slow_thread_takes_fewer_items(two_threads):
    """Items go to whichever thread is free: a thread held up on one item does not get half."""
    caller = threading.get_ident()
    taken: dict[int, list[int]] = {}
    lock = threading.Lock()

    def work(item: int) -> None:
        me = threading.get_ident()
        with lock:
            taken.setdefault(me, []).append(item)
        if me != caller and len(taken[me]) == 1:
            time.sleep(0.3)  # the pool thread's first item is slow

    parallel.for_each(work, list(range(20)))
    assert sorted(i for items in taken.values() for i in items) == list(range(20))
    assert len(taken[caller]) >= 15


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


def test_one_item_stays_on_the_caller(two_threads):
    caller = threading.get_ident()
    threads: set[int] = set()
    parallel.for_each(lambda _: threads.add(threading.get_ident()), [0])
    assert threads == {caller}


def test_small_work_runs_on_the_caller(two_threads):
    threads: set[int] = set()
    parallel.for_each(lambda _: threads.add(threading.get_ident()), [0, 1, 2, 3], work=1000)
    assert threads == {threading.get_ident()}


@needs_blas_control
def test_blas_threads_sets_and_restores():
    if parallel.blas_thread_count() is None:
        pytest.skip("NumPy's OpenBLAS has no readable thread count")
    setter = parallel.blas_thread_setter()
    before = setter(2)
    try:
        with parallel.blas_threads(1):
            assert parallel.blas_thread_count() == 1
        assert parallel.blas_thread_count() == 2
    finally:
        setter(before)


@pytest.mark.parametrize("shape, kernel, strides", [((8, 30, 31, 24), 3, 1), ((8, 17, 16, 40), 1, 2)])
def test_conv_blocks_give_the_same_numbers_on_any_thread_count(shape, kernel, strides, monkeypatch):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape, dtype=np.float32)
    w = rng.standard_normal((kernel * kernel * shape[-1], 32), dtype=np.float32)
    bias = rng.standard_normal(32, dtype=np.float32)
    monkeypatch.setattr("modelgraph.runner.fast.blocks.GEMM_BLOCK_BYTES", 1 << 14)
    monkeypatch.setattr("modelgraph.runner.fast.blocks.SPREAD_BLOCK_BYTES", 1 << 13)
    monkeypatch.setattr("modelgraph.runner.fast.blocks.GEMM_MIN_ROWS", 16)
    monkeypatch.setattr(parallel, "SPREAD_MIN_WORK", 0)
    pads = [(kernel // 2, kernel // 2)] * 2
    results = []
    for threads in ("1", "2"):
        monkeypatch.setenv("MODELGRAPH_NUM_THREADS", threads)
        epilogue = in_place_epilogue(bias, "relu", None)
        results.append(conv2d_gemm(x, w, (kernel, kernel), (strides, strides), (1, 1), pads, epilogue))
    # Blocks of other heights reach BLAS as GEMMs of other sizes; OpenBLAS may pick another
    # micro-kernel (another summation order) for a short block, so the numbers agree to float32
    # rounding of the dot products, not bit for bit (0.3.31 on this project's CI machines: 1.3e-6).
    np.testing.assert_allclose(results[0], results[1], rtol=1e-5, atol=1e-5)


def test_winograd_blocks_give_the_same_numbers_on_any_thread_count(monkeypatch):
    """Winograd's tile blocks spread over threads, each in its own arena, reading one kernel transform."""
    from modelgraph.runner.fast.winograd import conv2d_winograd

    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 13, 12, 16), dtype=np.float32)
    w = rng.standard_normal((9 * 16, 24), dtype=np.float32)
    bias = rng.standard_normal(24, dtype=np.float32)
    monkeypatch.setattr(parallel, "SPREAD_MIN_WORK", 0)
    results = []
    for threads in ("1", "2"):
        monkeypatch.setenv("MODELGRAPH_NUM_THREADS", threads)
        epilogue = in_place_epilogue(bias, "linear", None)
        results.append(conv2d_winograd(x, w, [(1, 1), (1, 1)], epilogue, budget=1 << 15))
    np.testing.assert_array_equal(results[0], results[1])
    padded = np.pad(x.astype(np.float64), [(0, 0), (1, 1), (1, 1), (0, 0)])
    direct = sum(
        np.einsum("nhwc,cf->nhwf", padded[:, i : i + 13, j : j + 12], w.reshape(3, 3, 16, 24)[i, j])
        for i in range(3)
        for j in range(3)
    )
    np.testing.assert_allclose(results[1], direct + bias, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "class_name, config",
    [
        ("DepthwiseConv2D", {"kernel_size": [3, 3], "strides": [2, 2], "padding": "same"}),
        ("DepthwiseConv2D", {"kernel_size": [5, 5], "padding": "same", "dilation_rate": [1, 2]}),
        ("MaxPooling2D", {"pool_size": [3, 3], "strides": [2, 2], "padding": "same"}),
    ],
)
def test_window_blocks_give_the_same_numbers_on_any_thread_count(class_name, config, monkeypatch):
    from modelgraph.runner.registry import KernelSpec

    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 19, 17, 70), dtype=np.float32)
    weights = {}
    if class_name == "DepthwiseConv2D":
        weights = {"kernel": rng.standard_normal((*config["kernel_size"], 70, 1), dtype=np.float32)}
        config = {**config, "use_bias": False}
    monkeypatch.setattr("modelgraph.runner.fast.blocks.DW_BLOCK_BYTES", 1 << 12)
    monkeypatch.setattr("modelgraph.runner.fast.blocks.EW_BLOCK_BYTES", 1 << 12)
    monkeypatch.setattr(parallel, "SPREAD_MIN_WORK", 0)
    results = []
    for threads in ("1", "2"):
        monkeypatch.setenv("MODELGRAPH_NUM_THREADS", threads)
        spec = KernelSpec(name="w", class_name=class_name, config=config, weights=weights)
        results.append(fast.kernel_for(class_name, spec)(x))
    np.testing.assert_array_equal(results[0], results[1])


def test_spreading_work_shortens_openblas_spin(two_threads, monkeypatch):
    """After the first spread call, OpenBLAS's idle workers spin 2**20 cycles, not its default 2**28
    (unless the user chose a timeout), so they leave the cores to the kernels' own threads."""
    libs = parallel._openblas_libraries()
    timeouts = [getattr(lib, "openblas_thread_timeout", None) for lib in libs]
    if parallel.blas_thread_setter() is None or not any(timeouts):
        pytest.skip("NumPy's OpenBLAS has no thread timeout to read")
    monkeypatch.setattr(parallel, "SPREAD_MIN_WORK", 0)
    parallel.for_each(lambda _: None, [0, 1])
    timeout = next(t for t in timeouts if t is not None)
    timeout.restype = ctypes.c_int
    if "OPENBLAS_THREAD_TIMEOUT" in os.environ:
        assert parallel.shorten_blas_spin() is False
    else:
        assert parallel.shorten_blas_spin() is True
        assert timeout() == parallel.BLAS_SPIN_LOG2_CYCLES
        assert "OPENBLAS_THREAD_TIMEOUT" not in os.environ  # the process environment is left as it was
    # BLAS still works, threaded, after its workers were restarted.
    a = np.random.default_rng(3).standard_normal((300, 200))
    np.testing.assert_allclose(a @ a.T, np.einsum("ik,jk->ij", a, a), rtol=1e-10, atol=1e-10)


def test_items_that_are_none_still_run(two_threads):
    """Items are handed out by index: an item that is None (or falsy) is called like any other."""
    seen: list[object] = []
    lock = threading.Lock()

    def work(item: object) -> None:
        with lock:
            seen.append(item)

    parallel.for_each(work, [None, 0, None, 1])
    assert sorted(seen, key=repr) == sorted([None, 0, None, 1], key=repr)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    batch=st.integers(1, 9),
    rows=st.integers(1, 40),
    per_row=st.integers(1, 50),
    target=st.integers(1, 4000),
    parts=st.integers(1, 4),
)
def test_row_blocks_cover_every_row_once_and_balance_spread_blocks(batch, rows, per_row, target, parts):
    blocks = row_blocks(batch, rows, per_row, target, parts)
    covered = sorted((n, r) for n0, n1, r0, r1 in blocks for n in range(n0, n1) for r in range(r0, r1))
    assert covered == [(n, r) for n in range(batch) for r in range(rows)]
    assert all(n1 > n0 and r1 > r0 for n0, n1, r0, r1 in blocks)
    if parts == 1:
        assert blocks == row_blocks(batch, rows, per_row, target)
        return
    # Spread blocks: as equal as the images / rows allow, and a multiple of the threads when possible.
    whole_images = all(r0 == 0 and r1 == rows for _, _, r0, r1 in blocks)
    if whole_images:
        sizes = [n1 - n0 for n0, n1, _, _ in blocks]  # images per block
    else:
        assert all(n1 - n0 == 1 for n0, n1, _, _ in blocks)
        sizes = [r1 - r0 for _, _, r0, r1 in blocks]  # rows per band of one image
    assert max(sizes) - min(sizes) <= 1
    can_split = (batch if whole_images else batch * rows) >= parts
    if can_split and len(blocks) < (batch if whole_images else batch * rows):
        assert len(blocks) % parts == 0
    assert len(blocks) >= len(row_blocks(batch, rows, per_row, target))


@needs_blas_control
@pytest.mark.parametrize(("activation", "spread"), [("relu", False), ("swish", True)])
def test_a_costly_epilogue_counts_in_the_decision_to_spread(two_threads, activation, spread):
    # EfficientNetB0's first 1x1 expansion at batch 1: 19 M multiply-adds, under the spreading
    # threshold on their own, but 1.2 M swish elements cost several times the GEMM.
    x = np.random.default_rng(0).standard_normal((1, 112, 112, 16), dtype=np.float32)
    weights = np.random.default_rng(1).standard_normal((16, 96), dtype=np.float32)
    assert parallel.SPREAD_MIN_WORK > 112 * 112 * 16 * 96
    epilogue = in_place_epilogue(None, activation, get_activation(activation))
    threads: set[int] = set()

    def recording(block: np.ndarray, region: object) -> None:
        threads.add(threading.get_ident())
        epilogue(block, region)
        time.sleep(0.005)  # long enough for the pool thread to take blocks too on a busy machine

    recording.element_work = element_work(epilogue)  # type: ignore[attr-defined]
    out = conv2d_gemm(x, weights, (1, 1), (1, 1), (1, 1), [(0, 0), (0, 0)], recording)
    assert (len(threads) == 2) is spread
    np.testing.assert_allclose(
        out, get_activation(activation)(x.reshape(-1, 16) @ weights).reshape(out.shape), rtol=1e-5, atol=1e-5
    )


def test_shares_run_on_the_first_threads_of_the_pool_only():
    # Share k always runs on thread k: after a call with four shares, calls with one share keep to
    # one thread, so they never make scratch buffers on the others.
    pool = parallel.ThreadPool("test-pool")
    seen: list[str] = []
    lock = threading.Lock()

    def record() -> None:
        with lock:
            seen.append(threading.current_thread().name)
        time.sleep(0.002)

    for future in pool.run_each(4, record):
        future.result()
    assert len(set(seen)) == 4
    seen.clear()
    for _ in range(20):
        for future in pool.run_each(1, record):
            future.result()
    assert len(set(seen)) == 1 and seen[0].startswith("test-pool-0")


@needs_blas_control
def test_for_each_hands_shares_to_the_first_pool_threads(monkeypatch):
    names: set[str] = set()
    lock = threading.Lock()

    def work(item: int) -> None:
        with lock:
            names.add(threading.current_thread().name)
        time.sleep(0.005)

    monkeypatch.setenv("MODELGRAPH_NUM_THREADS", "4")
    parallel.for_each(work, list(range(12)))
    monkeypatch.setenv("MODELGRAPH_NUM_THREADS", "2")
    names.clear()
    for _ in range(10):
        parallel.for_each(work, list(range(4)))
    pool_threads = {name for name in names if name.startswith("modelgraph")}
    assert pool_threads and all(name.startswith("modelgraph-0") for name in pool_threads)
