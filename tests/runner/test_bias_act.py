"""The compiled one-pass epilogue (modelgraph/runner/fast/bias_act.py) and padding pass
(``jit.pad_clamp``): equal to the NumPy passes they replace element for element, special values
included, and refusing what they cannot do."""

from __future__ import annotations

import numpy as np
import pytest

from modelgraph.runner import rowwise
from modelgraph.runner.fast import bias_act, jit

pytestmark = pytest.mark.skipif(not jit.available(), reason="the jit extra (numba) is not installed")


def _block(rows: int, width: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, width)) * 4).astype(np.float32)
    x.flat[::7] = np.float32(-0.0)
    x.flat[3::11] = np.nan
    x.flat[5::13] = np.inf
    x.flat[6::17] = -np.inf
    return x


@np.errstate(invalid="ignore")
def _numpy(block: np.ndarray, bias: np.ndarray, residual: np.ndarray | None, name: str | None) -> np.ndarray:
    out = block.copy()
    rowwise.apply(np.add, out, rowwise.repeat_row(bias))
    if residual is not None:
        np.add(out, residual, out=out)
    if name == "relu":
        rowwise.relu_(out)
    elif name == "relu6":
        rowwise.relu6_(out)
    return out


@pytest.mark.parametrize("name", [None, "linear", "relu", "relu6"])
@pytest.mark.parametrize("with_residual", [False, True])
@pytest.mark.parametrize(("rows", "width"), [(1, 1), (49, 2048), (37, 44), (3, 5)])
def test_one_pass_equals_the_numpy_passes(
    name: str | None, with_residual: bool, rows: int, width: int
) -> None:
    block = _block(rows, width, 1)
    bias = _block(1, width, 2)[0]
    residual = _block(rows, width, 3) if with_residual else None
    expected = _numpy(block, bias, residual, name)
    clamp = bias_act.bounds(name)
    assert clamp is not None
    got = block.copy()
    assert bias_act.apply(got, bias, residual, clamp)
    # Same bits: NaN where NumPy has NaN, -0.0 where it keeps the sign of a zero.
    np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))


def test_a_four_dimensional_block_and_its_residual_region() -> None:
    block = _block(2 * 3 * 4, 8, 4).reshape(2, 3, 4, 8)
    bias = _block(1, 8, 5)[0]
    residual = _block(2 * 3 * 4, 8, 6).reshape(2, 3, 4, 8)
    expected = _numpy(block.reshape(-1, 8), bias, residual.reshape(-1, 8), "relu").reshape(block.shape)
    got = block.copy()
    assert bias_act.apply(got, bias, residual, bias_act.BOUNDS["relu"])
    np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))


def test_refuses_what_it_cannot_do() -> None:
    bias = np.ones(4, np.float32)
    assert bias_act.bounds("sigmoid") is None
    for block in (np.ones((3, 4)), np.ones((4, 3), np.float32).T, np.ones((3, 5), np.float32)):
        before = block.copy()
        assert not bias_act.apply(block, bias, None, bias_act.BOUNDS["relu"])
        np.testing.assert_array_equal(block, before)
    strided_residual = np.ones((4, 6), np.float32)[:, :4]
    assert not bias_act.apply(np.ones((4, 4), np.float32), bias, strided_residual, bias_act.BOUNDS["relu"])


def test_turned_off_by_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(jit.ENV, "0")
    assert not bias_act.apply(np.ones((2, 4), np.float32), np.ones(4, np.float32), None, (0.0, np.inf))


@pytest.mark.parametrize("clamp", [(-np.inf, np.inf), (0.0, np.inf), (0.0, 6.0)])
@pytest.mark.parametrize(
    ("top", "bottom", "left", "right"), [(0, 0, 0, 0), (1, 1, 1, 1), (2, 0, 0, 3), (0, 3, 2, 0)]
)
def test_pad_clamp_equals_clip_then_pad(
    clamp: tuple[float, float], top: int, bottom: int, left: int, right: int
) -> None:
    x = _block(2 * 5 * 6, 3, 7).reshape(2, 5, 6, 3)
    expected = np.pad(np.clip(x, *clamp), [(0, 0), (top, bottom), (left, right), (0, 0)])
    buf = np.full(expected.shape, 99.0, np.float32)  # every cell must be written
    jit.pad_clamp(x, buf, top, left, clamp)
    np.testing.assert_array_equal(buf.view(np.uint32), expected.view(np.uint32))
