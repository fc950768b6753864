"""The narrow matrix products written as LLVM IR (``modelgraph/runner/fast/gemm_ir.py``): every column
block and masked tail, row tiles and leftover rows, strided rows, against a float64 reference, for
this machine's vectors and narrower ones; layouts they cannot take go to BLAS."""

from __future__ import annotations

import numpy as np
import pytest

from modelgraph.runner import parallel
from modelgraph.runner.fast import jit

pytestmark = pytest.mark.skipif(
    not jit.available(), reason="the jit extra (numba, llvmlite) is not installed"
)

if jit.available():
    from modelgraph.runner.fast import gemm_ir


# (rows, depth, columns): one value; fewer rows than a tile; masked last vectors; several column
# blocks with a masked one; the widest product the loops take; a depth of one.
SHAPES = [
    (1, 1, 1),
    (5, 3, 7),
    (37, 44, 44),
    (100, 264, 44),
    (17, 88, 88),
    (9, 176, 176),
    (300, 11, 11),
    (7, 192, 192),
    (50, 1, 17),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matches_a_float64_reference_with_strided_rows(shape, ir_targets) -> None:
    rows, depth, columns = shape
    rng = np.random.default_rng(rows * 1000 + depth + columns)
    a = rng.standard_normal((rows, depth + 3)).astype(np.float32)[:, 1 : depth + 1]  # rows apart
    b = rng.standard_normal((depth, columns)).astype(np.float32)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    for target in ir_targets:
        frame = np.full((rows, columns + 2), np.nan, np.float32)
        gemm_ir.product(a, b, frame[:, :columns], target=target)
        np.testing.assert_allclose(
            frame[:, :columns], expected, rtol=1e-5, atol=1e-5 * depth, err_msg=str(target)
        )
        assert np.isnan(frame[:, columns:]).all()  # nothing written beside the output


def test_layouts_the_loops_cannot_take_are_refused_and_go_to_blas() -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((20, 8)).astype(np.float32)
    b_fortran = np.asfortranarray(rng.standard_normal((8, 12)).astype(np.float32))
    out = np.empty((20, 12), np.float32)
    with pytest.raises(ValueError, match="cannot take"):
        gemm_ir.product(a, b_fortran, out)
    with pytest.raises(ValueError, match="float32"):
        gemm_ir.product(a.astype(np.float64), b_fortran, out)
    with parallel.serial_kernels():  # where the IR loops would run
        gemm_ir.matmul(a, b_fortran, out)
        np.testing.assert_allclose(out, a @ b_fortran, rtol=1e-6)
        wide = rng.standard_normal((8, gemm_ir.MAX_COLUMNS + 1)).astype(np.float32)
        out_wide = np.empty((20, wide.shape[1]), np.float32)
        gemm_ir.matmul(a, wide, out_wide)
        np.testing.assert_allclose(out_wide, a @ wide, rtol=1e-6)


def test_matmul_gives_blas_results_within_rounding_in_and_out_of_block_shares() -> None:
    rng = np.random.default_rng(4)
    a = rng.standard_normal((333, 96)).astype(np.float32)
    b = rng.standard_normal((96, 44)).astype(np.float32)
    expected = a.astype(np.float64) @ b
    for single in (False, True):
        out = np.empty((333, 44), np.float32)
        with parallel.serial_kernels(single):
            gemm_ir.matmul(a, b, out)
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)


def _conv_reference(src, weights4, out_shape, strides, row_dilation):
    nb, hb, ow, filters = out_shape
    kh, kw = weights4.shape[:2]
    out = np.zeros(out_shape)
    for i in range(kh):
        for j in range(kw):
            rows = src[:, i * row_dilation : i * row_dilation + (hb - 1) * strides[0] + 1 : strides[0]]
            window = rows[:, :, j : j + (ow - 1) * strides[1] + 1 : strides[1]]
            out += np.einsum("nhwc,cf->nhwf", window.astype(np.float64), weights4[i, j].astype(np.float64))
    return out


# (kh, kw, channels, filters, stride, row dilation, output width): stems (3 channels, stride 2), a
# ResNet-like 3x3, masked filter vectors, several filter blocks, a pixel narrower than a tile.
CONVS = [
    (3, 3, 3, 32, 2, 1, 13),
    (7, 7, 3, 64, 2, 1, 20),
    (3, 3, 64, 64, 1, 1, 9),
    (3, 3, 16, 44, 1, 2, 5),
    (1, 3, 5, 7, 1, 1, 3),
    (3, 3, 8, 192, 1, 1, 17),
    (2, 2, 4, 1, 1, 1, 1),
]


@pytest.mark.parametrize("case", CONVS, ids=lambda c: "k{}x{}-c{}-f{}-s{}-d{}-w{}".format(*c))
def test_conv_rows_match_a_float64_reference(case, ir_targets) -> None:
    kh, kw, channels, filters, stride, dilation, ow = case
    rng = np.random.default_rng(kh * 7 + channels + filters)
    nb, hb = 2, 3
    rows, cols = (hb - 1) * stride + (kh - 1) * dilation + 2, (ow - 1) * stride + kw + 2
    src = rng.standard_normal((nb, rows, cols, channels)).astype(np.float32)
    weights4 = rng.standard_normal((kh, kw, channels, filters)).astype(np.float32)
    expected = _conv_reference(src, weights4, (nb, hb, ow, filters), (stride, stride), dilation)
    for target in ir_targets:
        frame = np.full((nb, hb, ow + 1, filters), np.nan, np.float32)
        dst = frame[:, :, :ow]
        gemm_ir.conv_rows(
            src, weights4.reshape(kh, kw * channels, filters), dst, (stride, stride), dilation, target=target
        )
        np.testing.assert_allclose(
            dst, expected, rtol=1e-5, atol=1e-5 * kh * kw * channels, err_msg=str(target)
        )
        assert np.isnan(frame[:, :, ow:]).all()


def test_conv_rows_refuse_a_slab_too_small() -> None:
    src = np.zeros((1, 4, 9, 3), np.float32)
    weights = np.zeros((3, 9, 8), np.float32)
    with pytest.raises(ValueError, match="smaller than the output needs"):
        gemm_ir.conv_rows(src, weights, np.zeros((1, 3, 7, 8), np.float32), (1, 1), 1)


def test_a_column_slice_of_b_is_read_with_its_row_stride() -> None:
    rng = np.random.default_rng(6)
    a = rng.standard_normal((30, 12)).astype(np.float32)
    b = rng.standard_normal((12, 40)).astype(np.float32)[:, 5:25]
    out = np.empty((30, 20), np.float32)
    gemm_ir.product(a, b, out)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
