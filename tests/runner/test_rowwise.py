"""rowwise: the fast forms of per-channel adds and relu/relu6 give the plain NumPy calls' results."""

from __future__ import annotations

import numpy as np
import pytest

from modelgraph.runner import rowwise
from modelgraph.runner.activations import get_activation


@pytest.mark.parametrize(
    "shape",
    [
        (3,),  # shorter than one row of the run
        (7, 5),  # run length 16385 is not a multiple of the array: a tail
        (rowwise.RUN // 64, 64),  # exactly one run
        (2, 300, 64),  # several runs and a tail
        (4, 9, 11, 96),
        (0, 16),
    ],
)
def test_add_row_equals_broadcast_add(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    bias = rng.standard_normal(shape[-1]).astype(np.float32)
    expected = x + bias
    out = rowwise.apply(np.add, x, rowwise.repeat_row(bias))
    assert out is x
    np.testing.assert_array_equal(x, expected)


def test_add_row_into_out_leaves_input() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((40, 700, 3)).astype(np.float32)
    before = x.copy()
    bias = np.array([1.0, -2.0, 0.5], np.float32)
    out = np.empty_like(x)
    rowwise.apply(np.add, x, rowwise.repeat_row(bias), out)
    np.testing.assert_array_equal(out, before + bias)
    np.testing.assert_array_equal(x, before)


def test_non_contiguous_blocks_split_along_the_first_axis() -> None:
    """A region of whole rows of several images (as conv epilogues get) is not C-ordered."""
    rng = np.random.default_rng(2)
    full = rng.standard_normal((3, 40, 30, 24)).astype(np.float32)
    bias = rng.standard_normal(24).astype(np.float32)
    expected = full.copy()
    expected[:, 5:17] += bias
    block = full[:, 5:17]
    assert not block.flags.c_contiguous
    rowwise.apply(np.add, block, rowwise.repeat_row(bias))
    np.testing.assert_array_equal(full, expected)
    # A strided 2-D view: the plain call.
    columns = full[0, 0, :, ::2]
    plain = columns + bias[::2]
    rowwise.apply(np.add, columns, rowwise.repeat_row(bias[::2]))
    np.testing.assert_array_equal(columns, plain)


def test_alternating_rows_each_get_their_own_run() -> None:
    """Rows used in any order on several threads, on tensors smaller than a run and larger (a run
    built for a small tensor grows when a larger one needs it), never get another row's run."""
    import threading

    rng = np.random.default_rng(4)
    widths = (64, 64, 48, 64, 32)
    rows = [rowwise.repeat_row(rng.standard_normal(c).astype(np.float32)) for c in widths]
    failures: list[str] = []

    def work(seed: int) -> None:
        local = np.random.default_rng(seed)
        for i, k in enumerate((0, 1, 0, 2, 2, 1, 3, 4, 0, 3, 1, 4, 4, 2)):
            x = local.standard_normal((3, (5, 500)[i % 2], rows[k].row.size)).astype(np.float32)
            expected = x + rows[k].row
            if not np.array_equal(rowwise.apply(np.add, x, rows[k]), expected):
                failures.append(f"thread {seed}, row {k}")

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    work(9)
    assert failures == []


def test_other_dtype_or_width_uses_the_plain_call() -> None:
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    rowwise.apply(np.add, x, rowwise.repeat_row(np.ones(4, np.float32)))
    np.testing.assert_array_equal(x, np.arange(12).reshape(3, 4) + 1.0)
    y = np.zeros((2, 4), np.float32)
    with pytest.raises(ValueError):  # broadcasting (3,) against (2, 4) fails as NumPy's does
        rowwise.apply(np.add, y, rowwise.repeat_row(np.ones(3, np.float32)))


SPECIAL = np.array(
    [np.nan, -np.nan, -np.inf, -7.5, -1e-30, -0.0, 0.0, 1e-30, 3.0, 6.0, 6.5, np.inf], np.float32
)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_relu_and_relu6_match_maximum_and_clip(dtype: type) -> None:
    rng = np.random.default_rng(3)
    x = np.concatenate([SPECIAL, rng.standard_normal(50_000) * 4]).astype(dtype)
    np.testing.assert_array_equal(rowwise.relu_(x.copy()), np.maximum(x, 0))
    np.testing.assert_array_equal(rowwise.relu6_(x.copy()), np.clip(x, 0, 6))
    out = np.empty_like(x)
    assert rowwise.relu_(x, out) is out and not np.shares_memory(out, x)
    assert out.dtype == x.dtype


def test_relu_of_integers() -> None:
    x = np.array([-3, 0, 4], np.int32)
    np.testing.assert_array_equal(rowwise.relu_(x.copy()), [0, 0, 4])


def test_activation_table_uses_the_fast_forms() -> None:
    x = np.concatenate([SPECIAL, np.linspace(-9, 9, 1001, dtype=np.float32)])
    before = x.copy()
    for name, expected in (("relu", np.maximum(x, 0)), ("relu6", np.clip(x, 0, 6))):
        y = get_activation(name, (3, 15, 1))(x)
        np.testing.assert_array_equal(y, expected)
        assert y.dtype == np.float32
    np.testing.assert_array_equal(x, before)  # the activation functions never write their input


def test_rows_are_built_once() -> None:
    """Rows used in turn (a fused bottleneck band's three biases, a plan's many layers) keep their
    runs; a run built for a small tensor is rebuilt once, longer, for a larger one."""
    rows = [rowwise.repeat_row(np.full(c, c, np.float32)) for c in (96, 96, 24, *range(1, 40))]
    first = [r.tiled() for r in rows]
    assert all(
        run.size >= rowwise.RUN and run.size % r.row.size == 0 for r, run in zip(rows, first, strict=True)
    )
    for _ in range(3):
        assert all(r.tiled() is run for r, run in zip(rows, first, strict=True))
    small = rowwise.repeat_row(np.arange(10, dtype=np.float32))
    short = small.tiled(100)
    assert short.size == 100 and small.tiled(50) is short
    long = small.tiled(1000)
    assert long.size == 1000 and small.tiled(100) is long


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_silu_in_chunks_equals_the_whole_tensor_formula(dtype: type) -> None:
    # Two whole chunks and a tail, with the values where exp(-x) overflows or underflows.
    rng = np.random.default_rng(4)
    x = np.concatenate([SPECIAL, rng.standard_normal(2 * rowwise.SILU_CHUNK + 17) * 30]).astype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        expected = x / (1 + np.exp(-x))
    out = np.empty_like(x)
    assert rowwise.silu_(x, out) is out
    np.testing.assert_array_equal(out, expected)
    in_place = x.copy()
    assert rowwise.silu_(in_place) is in_place
    np.testing.assert_array_equal(in_place, expected)
    # A strided view is computed whole (no chunking), with the same values.
    strided = x.reshape(-1, 1)[::3, 0]
    np.testing.assert_array_equal(rowwise.silu_(strided, np.empty_like(strided)), expected[::3])


def test_swish_activation_uses_the_chunked_form_and_keeps_its_input() -> None:
    x = np.random.default_rng(5).standard_normal((3, rowwise.SILU_CHUNK + 5)).astype(np.float32)
    before = x.copy()
    y = get_activation("swish", (3, 15, 1))(x)
    np.testing.assert_array_equal(y, before / (1 + np.exp(-before)))
    np.testing.assert_array_equal(x, before)
