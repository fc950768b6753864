"""Products by packed weights (``modelgraph/runner/fast/packed.py`` and the ``packed`` entry of
``gemm_ir.py``): panels with a narrower last one, row tiles with a smaller last tile, depth and row
blocks with short last blocks, strided rows, shares by rows and by panels on Numba's threads, against
a float64 reference; bad arrays refused; and whole application models with every conv packed
against Keras's outputs, their weights held once."""

from __future__ import annotations

import gc
import os
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from modelgraph.runner import parallel, threads
from modelgraph.runner.fast import jit

from . import test_parity_samples as parity

pytestmark = pytest.mark.skipif(
    not jit.available(), reason="the jit extra (numba, llvmlite) is not installed"
)

if jit.available():
    from modelgraph.runner.fast import gemm_ir, ir, packed

SAMPLES = Path(__file__).resolve().parents[2] / "samples"

# Every sample with a golden, in its first container.
_FIRST_CONTAINERS = list({case.values[0]: case for case in parity._cases()}.values())


# (rows, depth, columns): one value; a last panel of a masked vector; a tile's worth of rows and a
# leftover; several depth blocks with a short last one; one row block and a bit; ResNet50's shapes
# at batch 1 (7x7 and 14x14 layers).
SHAPES = [
    (1, 1, 1),
    (5, 3, 70),
    (13, 257, 64),
    (7, 513, 200),
    (gemm_ir.ROW_BLOCK + 5 if jit.available() else 197, 40, 130),
    (49, 2048, 512),
    (196, 256, 1024),
]


def _arrays(shape, seed):
    rows, depth, columns = shape
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((rows, depth + 3)).astype(np.float32)[:, 1 : depth + 1]  # rows apart
    b = rng.standard_normal((depth, columns)).astype(np.float32)
    return a, b, a.astype(np.float64) @ b.astype(np.float64)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_packed_loops_match_a_float64_reference(shape, ir_targets) -> None:
    rows, depth, columns = shape
    a, b, expected = _arrays(shape, rows * 7 + depth + columns)
    for target in ir_targets:
        width = gemm_ir.panel_width(target)
        count = -(-columns // width)
        panels = np.zeros((count, depth, width), np.float32)
        for j in range(count):
            part = b[:, j * width : (j + 1) * width]
            panels[j, :, : part.shape[1]] = part
        frame = np.full((rows, columns + 2), np.nan, np.float32)
        address = gemm_ir.packed_address(target, columns % width)
        ir.callers().packed(address, a, panels, frame[:, :columns])
        np.testing.assert_allclose(
            frame[:, :columns], expected, rtol=1e-5, atol=1e-5 * depth, err_msg=str(target)
        )
        assert np.isnan(frame[:, columns:]).all()  # nothing written beside the output


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_product_is_the_same_on_one_thread_and_in_shares(shape) -> None:
    a, b, expected = _arrays(shape, 11)
    weights = packed.PackedWeights(b)
    assert weights.shape == b.shape
    np.testing.assert_array_equal(weights.matrix(), b)
    results = []
    for count in (1, 2, 3):
        threads.set_threads(count)
        try:
            out = np.empty((a.shape[0], b.shape[1]), np.float32)
            weights.product(a, out)
            results.append(out)
        finally:
            threads.set_threads(None)
    np.testing.assert_allclose(results[0], expected, rtol=1e-5, atol=1e-5 * b.shape[0])
    for out in results[1:]:
        np.testing.assert_array_equal(out, results[0])  # every sum in the same order, wherever it ran


def test_shares_split_by_rows_and_by_panels() -> None:
    a, b, expected = _arrays((600, 96, 300), 5)
    weights = packed.PackedWeights(b)
    count = weights.panels.shape[0]
    for by_rows, parts in ((True, a.shape[0]), (False, count)):
        bounds = np.array([0, parts // 3, parts // 2, parts], dtype=np.int64)
        out = np.full((a.shape[0], b.shape[1]), np.nan, np.float32)
        parallel.numba_threads(2)
        ir.callers().packed_shares(weights._address, a, weights.panels, out, bounds, by_rows)
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)


def test_bad_arrays_and_bounds_are_refused() -> None:
    a, b, _ = _arrays((20, 30, 70), 3)
    weights = packed.PackedWeights(b)
    call = ir.callers()
    with pytest.raises(ValueError, match="do not fit"):
        call.packed(weights._address, a[:, :29], weights.panels, np.empty((20, 70), np.float32))
    with pytest.raises(ValueError, match="do not fit"):
        call.packed(weights._address, a, weights.panels, np.empty((20, 130), np.float32))
    with pytest.raises(ValueError, match="unit-stride"):
        call.packed(
            weights._address, a[:, ::2], packed.PackedWeights(b[::2]).panels, np.empty((20, 70), np.float32)
        )
    with pytest.raises(ValueError, match="apart"):
        overlapping = np.lib.stride_tricks.as_strided(np.empty(200, np.float32), (20, 70), (8, 4))
        call.packed(weights._address, a, weights.panels, overlapping)
    with pytest.raises(ValueError, match="out of range"):
        bounds = np.array([0, 25], dtype=np.int64)
        call.packed_shares(weights._address, a, weights.panels, np.empty((20, 70), np.float32), bounds, True)


def test_empty_depth_gives_zeros() -> None:
    weights = packed.PackedWeights(np.zeros((0, 70), np.float32))
    out = np.full((4, 70), np.nan, np.float32)
    weights.product(np.zeros((4, 0), np.float32), out)
    assert (out == 0).all()


@pytest.mark.parametrize(("stem", "variant", "model", "weights"), _FIRST_CONTAINERS)
def test_samples_with_every_conv_packed_match_keras(
    stem, variant, model, weights, rebuilt_apps, monkeypatch
) -> None:
    """The committed samples are small (no conv reaches ``PACK_MIN_MACS``): here every conv run as a
    GEMM (Conv1D and Conv2D, any filter count) is packed, and each sample still matches its Keras
    golden as in tests/runner/test_parity_samples.py."""
    monkeypatch.setattr(packed, "PACK_MIN_MACS", 0)
    parity.test_sample_parity(stem, variant, model, weights, rebuilt_apps)


@pytest.mark.parametrize("app", ["resnet50", "inceptionv3"])
def test_models_with_every_conv_packed_match_keras(app, rebuilt_apps, monkeypatch) -> None:
    """The committed application samples are small (64x64 images: no conv reaches
    ``PACK_MIN_MACS``), so here every conv run as a GEMM is packed: the results still match Keras's
    golden outputs (ResNet50's kernels have BatchNormalization folded in, InceptionV3's 192 to 448
    filters leave narrower last panels). And the plan holds its weights about once: the folded
    kernels are let go once packed (1.9x of the weights before)."""
    from modelgraph.loading import load
    from modelgraph.runner.compare import compare_results
    from modelgraph.runner.interpreter import Runner

    monkeypatch.setattr(packed, "PACK_MIN_MACS", 0)
    graph = load(rebuilt_apps(f"apps/k3_{app}/manifest.json"))
    with np.load(SAMPLES / "goldens" / f"k3_app_{app}.npz", allow_pickle=False) as data:
        golden = {k: data[k] for k in data.files}
    feeds = {k[len("input/") :]: v for k, v in golden.items() if k.startswith("input/")}
    tracemalloc.start()
    runner = Runner(graph)
    results = runner.run(feeds)
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    if packed.pool_spins():  # (else convs stay on BLAS: see the test below)
        kept = [o for o in gc.get_objects() if isinstance(o, packed.PackedWeights)]
        assert sum(w.nbytes for w in kept) > runner.weight_bytes / 2  # most of the weights are packed
    comparison = compare_results(results, golden, runner.output_keys, atol=1e-5, rtol=1e-4)
    assert comparison.passed, [(t.name, t.max_abs, t.max_rel) for t in comparison.outputs]
    assert held < 1.25 * runner.weight_bytes


def test_convs_stay_on_blas_without_a_spinning_threading_layer(monkeypatch) -> None:
    """On Numba's workqueue layer (no libgomp, no TBB) nothing is packed; on OpenMP it is."""
    calls = ir.callers()
    for layer, packs in (("workqueue", False), ("omp", True), ("tbb", True)):
        monkeypatch.setattr(calls, "threading_layer", lambda layer=layer: layer)
        packed.pool_spins.cache_clear()
        try:
            assert packed.can_pack(np.dtype(np.float32)) is packs
        finally:
            packed.pool_spins.cache_clear()
    assert not packed.can_pack(np.dtype(np.float64))


_CONCURRENT = """
import threading, numpy as np
from modelgraph.runner import threads
from modelgraph.runner.fast import packed
threads.set_threads(2)
rng = np.random.default_rng(0)
a = rng.standard_normal((300, 512)).astype(np.float32)
weights = packed.PackedWeights(rng.standard_normal((512, 384)).astype(np.float32))
expected = np.empty((300, 384), np.float32)
weights.product(a, expected)
wrong = []
def work():
    out = np.empty_like(expected)
    for _ in range(100):
        weights.product(a, out)
        wrong.extend([1] if not np.array_equal(out, expected) else [])
workers = [threading.Thread(target=work) for _ in range(3)]
for t in workers: t.start()
for t in workers: t.join()
print("wrong", len(wrong))
"""


def test_products_from_several_python_threads_at_once_on_workqueue() -> None:
    """Numba's workqueue layer aborts the process when two threads launch parallel loops at once;
    packed products from three Python threads take turns spreading (the others run on their own
    thread) and all give the same result."""
    import subprocess
    import sys

    env = {**os.environ, "NUMBA_THREADING_LAYER": "workqueue"}
    done = subprocess.run(
        [sys.executable, "-c", _CONCURRENT], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "wrong 0"
