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
    from modelgraph.runner.fast import gemm_ir, ir


def _targets() -> list:
    host = ir.host_target()
    targets = [host]
    features = host.features.split(",")
    if "+avx2" in features and "+fma" in features and host.lanes == 16:
        targets.append(ir.Target("haswell", "", 8, 4))  # AVX2 vectors on an AVX-512 machine
    return targets


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
def test_matches_a_float64_reference_with_strided_rows(shape) -> None:
    rows, depth, columns = shape
    rng = np.random.default_rng(rows * 1000 + depth + columns)
    a = rng.standard_normal((rows, depth + 3)).astype(np.float32)[:, 1 : depth + 1]  # rows apart
    b = rng.standard_normal((depth, columns)).astype(np.float32)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    for target in _targets():
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
