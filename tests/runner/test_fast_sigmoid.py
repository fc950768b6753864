"""The compiled float32 sigmoid / swish of the fast epilogues (modelgraph/runner/fast/sigmoid.py):
its rational tanh against float64, special values, in place and out of place, and what it refuses."""

from __future__ import annotations

import numpy as np
import pytest

from modelgraph.runner.fast import sigmoid

pytestmark = pytest.mark.skipif(not sigmoid.available(), reason="the jit extra (numba) is not installed")


def _grid() -> np.ndarray:
    rng = np.random.default_rng(7)
    dense = np.linspace(-30, 30, 600_001, dtype=np.float32)
    wide = (rng.standard_normal(100_000) * 40).astype(np.float32)
    tiny = np.float32(10.0) ** rng.uniform(-30, -1, 1000).astype(np.float32)
    return np.concatenate([dense, wide, tiny, -tiny])


def test_the_fitted_tanh_is_within_an_ulp_in_float64() -> None:
    # The coefficients as stored (rounded to float32), evaluated exactly: under one float32 ulp of 1.
    h = np.linspace(0, float(sigmoid.TANH_LIMIT), 200_001)
    t = h * h
    p = np.polyval(np.array(sigmoid._P, dtype=np.float64)[::-1], t)
    q = np.polyval(np.array(sigmoid._Q, dtype=np.float64)[::-1], t)
    assert np.abs(h * p / q - np.tanh(h)).max() < 6e-8


@pytest.mark.parametrize("name", ["sigmoid", "silu", "swish"])
def test_close_to_float64_everywhere(name: str) -> None:
    x = _grid()
    out = np.empty_like(x)
    assert sigmoid.apply(name, x, out)
    x64 = x.astype(np.float64)
    exact = 1 / (1 + np.exp(-x64))
    if name != "sigmoid":
        exact = x64 * exact
        err = np.abs(out - exact) / np.maximum(1.0, np.abs(x64))
    else:
        err = np.abs(out - exact)
    assert err.max() < 2.5e-7
    # Where the values are not small, that is a small relative error too.
    big = np.abs(exact) > 0.1
    assert (np.abs(out[big] - exact[big]) / np.abs(exact[big])).max() < 2e-5


def test_special_values_and_in_place() -> None:
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 100.0, -100.0, 40.0, -40.0], dtype=np.float32)
    sig = x.copy()
    assert sigmoid.apply("sigmoid", sig, sig)
    np.testing.assert_array_equal(sig[1:], [1, 0, 0.5, 0.5, 1, 0, 1, 0])
    assert np.isnan(sig[0])
    silu = np.empty_like(x)
    assert sigmoid.apply("silu", x, silu)
    assert np.isnan(silu[0]) and np.isnan(silu[2])  # -inf * sigmoid(-inf) = -inf * 0
    np.testing.assert_array_equal(silu[[1, 3, 5, 6, 7]], [np.inf, 0, 100, 0, 40])


def test_refuses_what_it_does_not_compute() -> None:
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)
    assert not sigmoid.apply("tanh", x, x.copy())
    assert not sigmoid.apply("silu", x.astype(np.float64), np.empty((4, 6)))
    assert not sigmoid.apply("silu", x[:, ::2], np.empty((4, 3), np.float32))  # not C-ordered
    out = np.zeros((4, 6), np.float32)
    assert not sigmoid.apply("silu", x, out[:, :5]) and not out.any()


def test_off_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODELGRAPH_JIT", "0")
    x = np.ones(4, np.float32)
    assert not sigmoid.apply("silu", x, x)
