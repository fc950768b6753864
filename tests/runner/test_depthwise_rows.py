"""The generated depthwise row loops (a whole kernel row a pass): the committed module is the
generator's output, and each gives bit for bit the generic row loops' sums on odd and even kernel
heights, strides and row dilation, within float32 rounding of the einsum path."""

from __future__ import annotations

import numpy as np
import pytest

from modelgraph.runner.fast import depthwise_rows, depthwise_rows_gen, jit

pytestmark = pytest.mark.skipif(not jit.available(), reason="the jit extra (numba) is not installed")


def test_committed_module_is_the_generators_output():
    assert depthwise_rows_gen.main(["--check"]) == 0, (
        "regenerate with: python -m modelgraph.runner.fast.depthwise_rows_gen"
    )
    assert jit._row_kernels()[0].py_func is depthwise_rows.rows_any  # the generic loops are generated too
    assert sorted(depthwise_rows.BY_WIDTH) == list(depthwise_rows_gen.WIDTHS)


@pytest.mark.parametrize("kw", depthwise_rows_gen.WIDTHS)
@pytest.mark.parametrize(
    ("kh", "stride", "row_dilation", "width"),
    [(None, 1, 1, 44), (None, 2, 1, 11), (1, 1, 1, 144), (2, 1, 2, 8), (4, 2, 1, 40), (3, 1, 1, 200)],
)
def test_fixed_width_loops_match_the_generic_row_loops(kw, kh, stride, row_dilation, width):
    kh = kw if kh is None else kh
    rng = np.random.default_rng(kw * 100 + kh * 10 + stride)
    nb, hb, ow = 2, 5, 9
    rows = (hb - 1) * stride + (kh - 1) * row_dilation + 1
    wp = (ow - 1) * stride + kw
    src = rng.standard_normal((nb, rows, wp, width), dtype=np.float32)
    kernel = rng.standard_normal((kh, kw, width), dtype=np.float32)
    generic_loops, split_loops = jit._row_kernels()
    phased = np.zeros((nb, rows, stride, -(-wp // stride) * width), np.float32)
    split_loops(src, phased, stride)
    generic = np.full((nb, hb, ow, width), np.nan, np.float32)
    generic_loops(phased, kernel, generic, stride, stride, row_dilation, 1)
    fixed = np.full_like(generic, np.nan)
    jit._fixed_width_rows()[kw](phased, kernel, fixed, stride, stride, row_dilation, 1)
    np.testing.assert_array_equal(fixed, generic)
    # and the public entry point takes them, against the einsum formulation
    via_entry = np.full_like(generic, np.nan)
    jit.depthwise(src, kernel, via_entry, (stride, stride), (row_dilation, 1))
    if stride == 1 or width < jit.STRIDED_ROWS_BELOW_CHANNELS:
        np.testing.assert_array_equal(via_entry, generic)
    expected = np.zeros_like(generic)
    for i in range(kh):
        for j in range(kw):
            taps = src[:, i * row_dilation : i * row_dilation + (hb - 1) * stride + 1 : stride]
            expected += taps[:, :, j : j + (ow - 1) * stride + 1 : stride] * kernel[i, j]
    np.testing.assert_allclose(via_entry, expected, rtol=1e-5, atol=1e-5)
