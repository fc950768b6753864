"""The depthwise loops written as LLVM IR (``modelgraph/runner/fast/depthwise_ir.py``): every stride,
dilation, kernel width (unrolled or not), channel tail and tile tail against a float64 reference, for
this machine's vectors and for narrower ones; the argument checks; the object cache."""

from __future__ import annotations

import numpy as np
import pytest

from modelgraph.runner.fast import jit

pytestmark = pytest.mark.skipif(
    not jit.available(), reason="the jit extra (numba, llvmlite) is not installed"
)

if jit.available():
    from modelgraph.runner.fast import depthwise_ir, ir, ir_call, object_cache


def _reference(
    src: np.ndarray, kernel: np.ndarray, out_shape: tuple[int, ...], strides, dilation
) -> np.ndarray:
    nb, hb, ow, _ = out_shape
    kh, kw = kernel.shape[:2]
    (sh, sw), (dh, dw) = strides, dilation
    out = np.zeros(out_shape, np.float64)
    for i in range(kh):
        for j in range(kw):
            window = src[
                :, i * dh : i * dh + (hb - 1) * sh + 1 : sh, j * dw : j * dw + (ow - 1) * sw + 1 : sw
            ]
            out += window.astype(np.float64) * kernel[i, j].astype(np.float64)
    return out


# (kh, kw, column stride, dilation, channels, output width): tails of every kind.
CASES = [
    (3, 3, 1, 1, 44, 28),  # two full channel vectors and a masked one; 28 = 3 tiles of 8 + overlap
    (5, 5, 1, 1, 11, 7),  # one masked vector only; narrower than a tile
    (7, 7, 2, 1, 32, 13),  # stride 2 with constant offsets
    (3, 3, 2, 2, 17, 9),  # stride and dilation: offsets read at run time
    (1, 13, 1, 1, 33, 20),  # wider than MAX_UNROLLED_WIDTH: a loop over the columns
    (3, 1, 1, 1, 16, 1),  # one pixel, one column
    (2, 4, 3, 1, 5, 3),  # stride 3: run-time offsets
    (3, 3, 1, 3, 64, 11),  # column dilation
    (5, 5, 2, 1, 1, 8),  # one channel
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "k{}x{}-s{}-d{}-c{}-w{}".format(*c))
@pytest.mark.parametrize("row_stride", [1, 2])
def test_matches_a_float64_reference_on_strided_views(case, row_stride, ir_targets) -> None:
    kh, kw, sw, dilation, channels, ow = case
    rng = np.random.default_rng(kh * 100 + kw * 10 + channels)
    nb, hb = 2, 3
    rows = (hb - 1) * row_stride + (kh - 1) * dilation + 2
    cols = (ow - 1) * sw + (kw - 1) * dilation + 3
    whole = rng.standard_normal((nb, rows, cols + 3, channels + 5)).astype(np.float32)
    src = whole[:, :, 1 : cols + 1, 2 : channels + 2]  # a view: no array here is contiguous
    kernel = rng.standard_normal((kh, kw, channels)).astype(np.float32)
    for target in ir_targets:
        dst = np.full((nb, hb, ow + 2, channels), np.nan, np.float32)[:, :, 1:-1]
        depthwise_ir.depthwise(src, kernel, dst, (row_stride, sw), (dilation, dilation), target=target)
        expected = _reference(src, kernel, dst.shape, (row_stride, sw), (dilation, dilation))
        np.testing.assert_allclose(dst, expected, rtol=1e-5, atol=1e-5 * kh * kw, err_msg=str(target))


def test_writes_nothing_outside_its_output() -> None:
    rng = np.random.default_rng(5)
    src = rng.standard_normal((1, 7, 12, 19)).astype(np.float32)
    kernel = rng.standard_normal((3, 3, 19)).astype(np.float32)
    frame = np.full((1, 7, 14, 23), 7.0, np.float32)
    dst = frame[:, 1:6, 2:12, 2:21]
    depthwise_ir.depthwise(src, kernel, dst, (1, 1), (1, 1))
    outside = frame.copy()
    outside[:, 1:6, 2:12, 2:21] = 7.0
    assert (outside == 7.0).all()


@pytest.mark.parametrize(
    ("src_shape", "kernel_shape", "dst_shape", "message"),
    [
        ((1, 4, 6, 8), (3, 3, 8), (1, 3, 4, 8), "smaller than the output needs"),
        ((1, 5, 6, 8), (3, 3, 8), (1, 3, 4, 9), "channels"),
        ((2, 5, 6, 8), (3, 3, 8), (1, 3, 4, 8), "batches"),
    ],
)
def test_arrays_that_do_not_fit_are_refused(src_shape, kernel_shape, dst_shape, message) -> None:
    src, kernel = np.zeros(src_shape, np.float32), np.zeros(kernel_shape, np.float32)
    with pytest.raises(ValueError, match=message):
        depthwise_ir.depthwise(src, kernel, np.zeros(dst_shape, np.float32), (1, 1), (1, 1))


def test_other_dtypes_and_strided_channels_are_refused() -> None:
    kernel = np.zeros((3, 3, 8), np.float32)
    with pytest.raises(ValueError, match="float32"):
        depthwise_ir.depthwise(
            np.zeros((1, 5, 6, 8)), kernel, np.zeros((1, 3, 4, 8), np.float32), (1, 1), (1, 1)
        )
    every_other = np.zeros((1, 5, 6, 16), np.float32)[..., ::2]
    with pytest.raises(ValueError, match="unit channel strides"):
        depthwise_ir.depthwise(every_other, kernel, np.zeros((1, 3, 4, 8), np.float32), (1, 1), (1, 1))


def test_compiled_code_is_cached_on_disk_and_a_bad_entry_is_ignored(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(object_cache.ENV, str(tmp_path))
    target = ir.host_target()
    source = depthwise_ir.module_source(target, 3, 1)
    first = object_cache.ObjectCache(source, target.cpu, target.features)
    assert not first.hit()
    compiled = ir.compile_source(target, source)  # writes the entry
    assert compiled.address("depthwise")
    (entry,) = tmp_path.iterdir()
    again = object_cache.ObjectCache(source, target.cpu, target.features)
    assert again.hit() and again.path == entry
    assert ir.compile_source(target, source).address("depthwise")  # loaded from the entry
    data = entry.read_bytes()
    entry.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))  # changed: its digest no longer matches
    assert not object_cache.ObjectCache(source, target.cpu, target.features).hit()
    monkeypatch.setenv(object_cache.ENV, "")
    assert object_cache.ObjectCache(source, target.cpu, target.features).path is None


def test_code_from_the_cache_computes_the_same() -> None:
    rng = np.random.default_rng(9)
    src = rng.standard_normal((1, 9, 9, 20)).astype(np.float32)
    kernel = rng.standard_normal((5, 5, 20)).astype(np.float32)
    target = ir.host_target()
    source = depthwise_ir.module_source(target, 5, 1)
    outputs = []
    for _ in range(2):  # compiled (or cached) once, then certainly read back from the cache
        compiled = ir.compile_source(target, source)
        dst = np.empty((1, 5, 5, 20), np.float32)
        ir_call.depthwise(compiled.address("depthwise"), src, kernel, dst, 1, 1, 1, 1)
        outputs.append(dst)
    np.testing.assert_array_equal(outputs[0], outputs[1])
    np.testing.assert_allclose(
        outputs[0], _reference(src, kernel, (1, 5, 5, 20), (1, 1), (1, 1)), rtol=1e-5, atol=1e-4
    )
