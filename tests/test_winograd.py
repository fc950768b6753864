"""Winograd F(2x2, 3x3) conv path (modelgraph/runner/kernels/_winograd.py).

Checked against the blocked GEMM conv and a float64 tap-by-tap reference over odd and even sizes,
valid and same padding, tiny images, 1 to 300 channels, bias and activations, with scratch budgets
small enough to cut a call into many blocks and output-channel chunks. The dispatch tests make sure
a ResNet-like layer really runs this path (and that ineligible layers do not).
"""

from __future__ import annotations

import numpy as np
import pytest

from modelgraph.runner import fast
from modelgraph.runner.activations import get_activation
from modelgraph.runner.fast import conv
from modelgraph.runner.fast import winograd as _winograd
from modelgraph.runner.fast.blocks import GEMM_BLOCK_BYTES
from modelgraph.runner.fast.epilogue import in_place_epilogue
from modelgraph.runner.fast.gemm import conv2d_gemm
from modelgraph.runner.registry import KernelSpec

ATOL, RTOL = 1e-5, 1e-4


def _pads(padding: str) -> list[tuple[int, int]]:
    return [(1, 1), (1, 1)] if padding == "same" else [(0, 0), (0, 0)]


def _reference(x, kernel, bias, padding, act):
    """float64 conv, one kernel tap at a time."""
    xp = np.pad(x.astype(np.float64), [(0, 0), *_pads(padding), (0, 0)])
    oh, ow = xp.shape[1] - 2, xp.shape[2] - 2
    out = sum(
        xp[:, i : i + oh, j : j + ow] @ kernel[i, j].astype(np.float64) for i in range(3) for j in range(3)
    )
    if bias is not None:
        out = out + bias
    if act == "relu":
        out = np.maximum(out, 0.0)
    elif act == "relu6":
        out = np.clip(out, 0.0, 6.0)
    elif act == "tanh":
        out = np.tanh(out)
    return out


def _problem(seed, batch, height, width, channels, filters, use_bias=True):
    """Inputs and weights scaled like a trained layer's (outputs of order 1)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, height, width, channels), dtype=np.float32)
    kernel = (rng.standard_normal((3, 3, channels, filters)) / np.sqrt(9 * channels)).astype(np.float32)
    bias = rng.standard_normal(filters).astype(np.float32) if use_bias else None
    return x, kernel, bias


CASES = [
    # (batch, height, width, channels, filters, padding, activation, use_bias)
    (1, 8, 8, 3, 4, "same", None, True),
    (3, 7, 9, 5, 6, "same", "relu", True),  # odd height and width: last tiles cropped
    (1, 9, 6, 8, 1, "valid", "relu6", True),
    (3, 10, 11, 1, 7, "valid", None, False),
    (1, 1, 1, 4, 5, "same", "relu", True),  # one output pixel
    (3, 3, 3, 6, 2, "valid", "tanh", True),  # valid 3x3: one output pixel
    (1, 1, 12, 7, 9, "same", None, True),  # one output row
    (3, 13, 3, 4, 4, "valid", "relu", False),  # one output column
    (1, 2, 2, 16, 24, "same", None, True),
    (3, 6, 5, 33, 17, "same", "relu", True),
    (1, 12, 12, 64, 64, "same", "relu", True),
    (3, 5, 7, 300, 40, "same", "relu6", True),
    (1, 6, 6, 40, 300, "valid", None, True),
    (3, 4, 4, 128, 256, "same", "relu", True),
]

# None: the default; the others cut a call into many blocks and output-channel chunks.
BUDGETS = [None, 1 << 16, 1 << 13]


@pytest.mark.parametrize("kept", [False, True], ids=["per-call-U", "kept-U"])
@pytest.mark.parametrize("budget", BUDGETS, ids=["default", "64KiB", "8KiB"])
@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_matches_gemm_and_float64_reference(case, budget, kept):
    """With U transformed per call (in chunks of output channels) or once and kept by the caller."""
    batch, height, width, channels, filters, padding, act, use_bias = case
    x, kernel, bias = _problem(CASES.index(case), batch, height, width, channels, filters, use_bias)
    flat = kernel.reshape(9 * channels, filters)
    epilogue = in_place_epilogue(bias, act, get_activation(act, (3, 0, 0), "Conv2D") if act else None)
    pads = _pads(padding)

    u = _winograd.winograd_kernel(flat) if kept else None
    got = _winograd.conv2d_winograd(x, flat, pads, epilogue, budget, kernel=u)
    direct = conv2d_gemm(x, flat, (3, 3), (1, 1), (1, 1), pads, epilogue)
    expected = _reference(x, kernel, bias, padding, act)

    assert got.dtype == np.float32 and got.shape == expected.shape == direct.shape
    np.testing.assert_allclose(got, expected, atol=ATOL, rtol=RTOL)
    np.testing.assert_allclose(got, direct, atol=ATOL, rtol=RTOL)
    # Near float32 rounding, like the direct conv: far inside the kernel tolerance.
    assert np.abs(got - expected).max() <= 2e-6 * max(1.0, np.abs(expected).max())


def test_kept_kernel_is_the_per_call_transform():
    rng = np.random.default_rng(5)
    flat = rng.standard_normal((9 * 70, 130), dtype=np.float32)  # several channel bands
    u = np.empty((16, 70, 130), np.float32)
    _winograd._transform_kernel(flat.reshape(9, 70, 130), u, np.empty(21 * 70 * 130))
    np.testing.assert_array_equal(_winograd.winograd_kernel(flat), u)


def test_kernel_transform_is_float64_rounded_once():
    rng = np.random.default_rng(0)
    taps = rng.standard_normal((9, 37, 23), dtype=np.float32) * np.float32(3.0)
    g = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
    expected = np.einsum("ai,ijck,bj->abck", g, taps.reshape(3, 3, 37, 23).astype(np.float64), g)
    u = np.empty((16, 37, 23), np.float32)
    _winograd._transform_kernel(taps, u, np.empty(25 * 37 * 23))
    np.testing.assert_array_equal(u, expected.reshape(16, 37, 23).astype(np.float32))


@pytest.mark.parametrize(
    "batch, size, channels, filters",
    [(1, 56, 64, 64), (8, 56, 64, 64), (8, 28, 128, 128), (8, 14, 256, 256), (1, 7, 512, 512)],
)
def test_scratch_stays_within_budget(batch, size, channels, filters):
    """The arena fits the default budget; when U is small that is conv2d_gemm's own block size."""
    th = -(-size // 2)
    budget = _winograd.default_budget(channels, filters)
    layout = _winograd._layout(batch, th, th, channels, filters, budget)
    assert layout.end <= budget <= 2 * GEMM_BLOCK_BYTES
    if 64 * channels * filters <= GEMM_BLOCK_BYTES // 8:
        assert budget == GEMM_BLOCK_BYTES
    covered = sum((n1 - n0) * (t1 - t0) for n0, n1, t0, t1 in layout.blocks)
    assert covered == batch * th


@pytest.mark.parametrize("channels, filters", [(64, 64), (128, 128), (40, 300), (300, 40)])
def test_products_overwrite_the_input_tiles_with_one_chunk(channels, filters):
    """With U kept (one chunk), M shares V's memory one plane behind: the arena is about V and one
    plane of M (plus 15 times what M's plane outgrows V's), not V and M side by side."""
    th = tw = 28
    separate = _winograd._offsets([(0, 1, 0, th)], tw, channels, filters, False, one_chunk=False)
    shared = _winograd._offsets([(0, 1, 0, th)], tw, channels, filters, False, one_chunk=True)
    v_bytes, m_plane = 64 * th * tw * channels, 4 * th * tw * filters
    assert (
        separate[-1] - shared[-1]
        >= 16 * m_plane - (m_plane + 15 * max(0, m_plane - 4 * th * tw * channels)) - 256
    )
    v, _, m, *_ = shared
    assert m == 0 and v >= m_plane  # M's first plane lies before V
    assert shared[3] >= v + v_bytes  # the padded rows and outputs come after both


def test_too_small_input_raises():
    x = np.zeros((1, 2, 5, 3), np.float32)
    with pytest.raises(ValueError, match="larger than input"):
        _winograd.conv2d_winograd(x, np.zeros((27, 2), np.float32), [(0, 0), (0, 0)], lambda b: None)


# --- dispatch from the Conv2D kernel ------------------------------------------------------------


@pytest.fixture
def calls(monkeypatch):
    """Count the Winograd calls made by kernels built after this fixture."""
    seen = []
    original = _winograd.conv2d_winograd

    def spy(*args, **kwargs):
        seen.append(args[0].shape)
        return original(*args, **kwargs)

    monkeypatch.setattr(conv, "conv2d_winograd", spy)  # the name the Conv2D kernel calls
    return seen


def _conv(x, kernel, bias, **config):
    config = {
        "filters": kernel.shape[-1],
        "kernel_size": list(kernel.shape[:-2]),
        "padding": "same",
        **config,
    }
    weights = {"kernel": kernel} if bias is None else {"kernel": kernel, "bias": bias}
    dtype = "float64" if x.dtype == np.float64 else "float32"
    spec = KernelSpec("conv", "Conv2D", config, weights, compute_dtype=dtype)
    return fast.kernel_for("Conv2D", spec)(x)


@pytest.mark.parametrize("data_format", ["channels_last", "channels_first"])
def test_resnet_layer_takes_winograd(calls, data_format):
    """A ResNet50 conv2_x 3x3 layer (56x56x64) at batch 2, with its fused bias and relu."""
    x, kernel, bias = _problem(1, 2, 56, 56, 64, 64)
    assert _winograd.use_winograd(x.shape, [(1, 1), (1, 1)], 64)
    inputs = np.moveaxis(x, -1, 1) if data_format == "channels_first" else x
    got = _conv(inputs, kernel, bias, activation="relu", data_format=data_format)
    if data_format == "channels_first":
        got = np.moveaxis(got, 1, -1)
    assert calls == [(2, 56, 56, 64)]
    np.testing.assert_allclose(got, _reference(x, kernel, bias, "same", "relu"), atol=ATOL, rtol=RTOL)


def _conv_layer(channels: int, seed: int):
    x, kernel, bias = _problem(seed, 2, 56, 56, channels, channels)
    spec = KernelSpec(
        "conv",
        "Conv2D",
        {"filters": channels, "kernel_size": [3, 3], "padding": "same"},
        {"kernel": kernel, "bias": bias},
    )
    return fast.kernel_for("Conv2D", spec), x, kernel, bias


def test_layer_transforms_its_kernel_once(monkeypatch):
    """A Conv2D of 128 x 128 channels keeps U from its first Winograd call; a call too small for
    Winograd does not make one; a 64 x 64 kernel (a cheap transform) is transformed per call."""
    made = []
    original = _winograd.winograd_kernel

    def spy(flat):
        made.append(flat.shape)
        return original(flat)

    monkeypatch.setattr(conv, "winograd_kernel", spy)
    run, x, kernel, bias = _conv_layer(128, 6)
    run(x[:, :4, :4])  # 4 tiles: the direct conv, no U
    assert made == []
    first, second = run(x), run(x[::-1])
    assert made == [(9 * 128, 128)]
    np.testing.assert_array_equal(second, first[::-1])
    np.testing.assert_allclose(first, _reference(x, kernel, bias, "same", None), atol=ATOL, rtol=RTOL)

    small, x, kernel, bias = _conv_layer(64, 7)
    assert _winograd.use_winograd(x.shape, [(1, 1), (1, 1)], 64)
    np.testing.assert_allclose(small(x), _reference(x, kernel, bias, "same", None), atol=ATOL, rtol=RTOL)
    assert made == [(9 * 128, 128)]


@pytest.mark.parametrize(
    "config, dtype",
    [
        ({"strides": [2, 2]}, np.float32),
        ({"dilation_rate": [2, 2]}, np.float32),
        ({}, np.float64),
    ],
    ids=["stride2", "dilated", "float64"],
)
def test_ineligible_layers_keep_gemm(calls, config, dtype):
    x, kernel, bias = _problem(2, 1, 56, 56, 64, 64)
    got = _conv(x.astype(dtype), kernel.astype(dtype), bias.astype(dtype), **config)
    assert calls == []
    assert got.dtype == dtype


def test_small_calls_keep_gemm(calls):
    """Too few tiles or channels to gain: the direct conv."""
    for shape, filters in (((1, 7, 7, 512), 512), ((2, 56, 56, 8), 8)):
        x, kernel, bias = _problem(3, *shape, filters)
        assert not _winograd.use_winograd(shape, [(1, 1), (1, 1)], filters)
        _conv(x, kernel, bias)
    assert calls == []


def test_conv1d_keeps_gemm(calls):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 3000, 64), dtype=np.float32)
    kernel = (rng.standard_normal((3, 64, 64)) / 24).astype(np.float32)
    spec = KernelSpec(
        "conv",
        "Conv1D",
        {"filters": 64, "kernel_size": 3, "padding": "same", "use_bias": False},
        {"kernel": kernel},
    )
    fast.kernel_for("Conv1D", spec)(x)
    assert calls == []


def test_cases_cover_every_loop_shape():
    """The cases above run each loop structure: several blocks, several output-channel chunks, and
    one block kept across chunks."""
    seen = set()
    for batch, height, width, channels, filters, padding, *_ in CASES:
        oh, ow = (height, width) if padding == "same" else (height - 2, width - 2)
        for budget in BUDGETS:
            layout = _winograd._layout(
                batch,
                -(-oh // 2),
                -(-ow // 2),
                channels,
                filters,
                budget or _winograd.default_budget(channels, filters),
            )
            seen.add((len(layout.blocks) > 1, layout.kc < filters))
    assert seen == {(False, False), (True, False), (False, True), (True, True)}
