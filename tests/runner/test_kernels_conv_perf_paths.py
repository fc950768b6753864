"""The fast paths of the conv / pooling kernels against straightforward NumPy on random inputs.

The Keras goldens (test_kernels_conv.py) use small layers, which miss paths chosen by size: blocks that
split an image into row bands or group whole images, the einsum depthwise path for wide layers, the
in-place relu/relu6 epilogues, max pooling without a padded copy. Each case here runs with the block
sizes shrunk (so every layer is cut into many blocks) and at the real sizes, against a reference that
pads with ``np.pad`` and sums tap by tap in float64.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from modelgraph.runner import fast
from modelgraph.runner.fast import blocks as fast_blocks
from modelgraph.runner.fast import gemm, jit
from modelgraph.runner.kernels.conv_utils import same_pads
from modelgraph.runner.registry import KernelSpec

ATOL, RTOL = 1e-5, 1e-4


@pytest.fixture(params=["real", "tiny"])
def blocks(request, monkeypatch):
    """Run each case with the real block sizes and with blocks of a few pixels."""
    if request.param == "tiny":
        monkeypatch.setattr(fast_blocks, "GEMM_BLOCK_BYTES", 1 << 10)
        monkeypatch.setattr(fast_blocks, "SPREAD_BLOCK_BYTES", 1 << 10)
        monkeypatch.setattr(fast_blocks, "GEMM_MIN_ROWS", 3)
        monkeypatch.setattr(fast_blocks, "EW_BLOCK_BYTES", 1 << 9)
        monkeypatch.setattr(fast_blocks, "DW_BLOCK_BYTES", 1 << 9)
    return request.param


@pytest.fixture(params=["numpy", "numba"])
def loops(request, monkeypatch):
    """Run each depthwise case on the NumPy (einsum) path and on the compiled loops of the optional
    Numba extra (skipped when it is not installed)."""
    if request.param == "numba" and not jit.available():
        pytest.skip("the jit extra (numba) is not installed")
    monkeypatch.setenv(jit.ENV, "1" if request.param == "numba" else "0")
    return request.param


def _pads(mode, sizes, kernel, strides, dilation):
    if mode == "same":
        return [same_pads(n, k, s, d) for n, k, s, d in zip(sizes, kernel, strides, dilation, strict=True)]
    if mode == "causal":
        return [((k - 1) * d, 0) for k, d in zip(kernel, dilation, strict=True)]
    return [(0, 0)] * len(sizes)


def _windows(x, kernel, strides, dilation, pads, value=0.0):
    """(tap, window) for every kernel tap of the padded input, computed the obvious way."""
    xp = np.pad(x.astype(np.float64), [(0, 0), *pads, (0, 0)], constant_values=value)
    sizes = xp.shape[1:-1]
    out = [
        (n - (k - 1) * d - 1) // s + 1 for n, k, s, d in zip(sizes, kernel, strides, dilation, strict=True)
    ]
    for tap in itertools.product(*(range(k) for k in kernel)):
        sl = tuple(
            slice(t * d, t * d + (o - 1) * s + 1, s)
            for t, d, o, s in zip(tap, dilation, out, strides, strict=True)
        )
        yield tap, xp[(slice(None), *sl)]


def ref_conv(x, kernel, bias, strides, dilation, mode, act=None):
    ks = kernel.shape[:-2]
    pads = _pads(mode, x.shape[1:-1], ks, strides, dilation)
    out = sum(w @ kernel[tap].astype(np.float64) for tap, w in _windows(x, ks, strides, dilation, pads))
    if bias is not None:
        out = out + bias
    return _act(out, act)


def ref_depthwise(x, kernel, bias, strides, dilation, mode, act=None):
    ks = kernel.shape[:-2]
    channels, mult = kernel.shape[-2:]
    pads = _pads(mode, x.shape[1:-1], ks, strides, dilation)
    out = sum(
        (w[..., :, None] * kernel[tap].astype(np.float64)).reshape(*w.shape[:-1], channels * mult)
        for tap, w in _windows(x, ks, strides, dilation, pads)
    )
    if bias is not None:
        out = out + bias
    return _act(out, act)


def _act(out, act):
    if act == "relu":
        return np.maximum(out, 0)
    if act == "relu6":
        return np.clip(out, 0, 6)
    if act == "tanh":
        return np.tanh(out)
    return out


def _run(class_name, config, weights, x):
    spec = KernelSpec(name="layer", class_name=class_name, config=config, weights=weights)
    return fast.kernel_for(class_name, spec)(x)


def _check(actual, expected):
    assert actual.dtype == np.float32
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, atol=ATOL, rtol=RTOL)
    # The comparison can fail: a shifted window or a dropped tap would not pass.
    assert not np.allclose(actual, np.roll(expected, 1, axis=-2), atol=ATOL, rtol=RTOL)


CONV_CASES = [
    # (input (B, H, W, C), kernel (kh, kw), filters, strides, dilation, padding, activation, use_bias)
    ((2, 9, 11, 5), (3, 3), 7, (1, 1), (1, 1), "same", "relu", True),
    ((3, 8, 8, 4), (3, 3), 6, (2, 2), (1, 1), "same", "relu6", True),
    ((2, 13, 12, 3), (7, 7), 8, (2, 2), (1, 1), "same", None, True),
    ((2, 12, 10, 3), (7, 7), 4, (2, 2), (1, 1), "valid", "tanh", False),
    ((2, 10, 9, 6), (3, 2), 5, (1, 2), (2, 1), "same", None, True),
    ((2, 11, 11, 4), (3, 3), 3, (1, 1), (2, 2), "valid", "relu", True),
    ((4, 3, 3, 16), (3, 3), 8, (1, 1), (1, 1), "same", "relu", True),  # tiny images grouped per block
    ((2, 7, 9, 6), (1, 1), 10, (1, 1), (1, 1), "valid", "relu", True),  # pointwise, no copy
    ((2, 7, 9, 6), (1, 1), 10, (2, 2), (1, 1), "same", None, False),  # strided pointwise
    ((1, 16, 16, 8), (4, 4), 6, (2, 2), (1, 1), "same", None, True),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=[f"conv{i}" for i in range(len(CONV_CASES))])
def test_conv2d_blocked_gemm(case, blocks):
    shape, ks, filters, strides, dilation, padding, act, use_bias = case
    rng = np.random.default_rng(hash(case) % 2**32)
    x = rng.standard_normal(shape, dtype=np.float32)
    kernel = rng.standard_normal((*ks, shape[-1], filters), dtype=np.float32)
    weights = {"kernel": kernel}
    bias = None
    if use_bias:
        bias = weights["bias"] = rng.standard_normal(filters, dtype=np.float32)
    config = {"filters": filters, "kernel_size": list(ks), "strides": list(strides), "dilation_rate": list(dilation),
              "padding": padding, "activation": act, "use_bias": use_bias}  # fmt: skip
    expected = ref_conv(x, kernel, bias, strides, dilation, padding, act)
    _check(_run("Conv2D", config, weights, x), expected)


@pytest.mark.parametrize("padding", ["same", "causal", "valid"])
def test_conv1d_blocked_gemm(padding, blocks):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 37, 5), dtype=np.float32)
    kernel = rng.standard_normal((5, 5, 7), dtype=np.float32)
    bias = rng.standard_normal(7, dtype=np.float32)
    config = {"filters": 7, "kernel_size": 5, "strides": 1 if padding == "causal" else 2, "dilation_rate": 1,
              "padding": padding, "activation": "relu"}  # fmt: skip
    strides = (config["strides"],)
    expected = ref_conv(x, kernel, bias, strides, (1,), padding, "relu")
    _check(_run("Conv1D", config, {"kernel": kernel, "bias": bias}, x), expected)


def test_conv2d_channels_first_blocked(blocks):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 6, 10, 9), dtype=np.float32)  # (B, C, H, W)
    kernel = rng.standard_normal((3, 3, 6, 5), dtype=np.float32)
    bias = rng.standard_normal(5, dtype=np.float32)
    config = {"filters": 5, "kernel_size": 3, "padding": "same", "data_format": "channels_first"}
    expected = ref_conv(np.moveaxis(x, 1, -1), kernel, bias, (1, 1), (1, 1), "same")
    _check(np.moveaxis(_run("Conv2D", config, {"kernel": kernel, "bias": bias}, x), 1, -1), expected)


DW_CASES = [
    # (input, kernel (kh, kw), depth multiplier, strides, dilation, padding, activation): no column
    # dilation -> one einsum over whole rows (per column phase when strided, below 144 channels;
    # einsum over the channels from 144 on); column dilation -> einsum over the channels (wide) or
    # one multiply-add per tap (narrow).
    ((2, 9, 10, 8), (3, 3), 1, (1, 1), (1, 1), "same", "relu6"),  # narrow: multiply-add per tap
    ((2, 9, 10, 96), (3, 3), 1, (1, 1), (1, 1), "same", "relu6"),  # wide: einsum
    ((2, 11, 10, 96), (3, 3), 1, (2, 2), (1, 1), "same", None),
    ((2, 10, 11, 72), (5, 5), 1, (2, 2), (1, 1), "same", "relu"),
    ((2, 12, 12, 40), (3, 3), 2, (1, 1), (2, 2), "same", None),  # einsum with a depth multiplier
    ((2, 12, 9, 7), (3, 2), 3, (2, 1), (1, 1), "valid", "relu"),
    ((3, 4, 4, 128), (3, 3), 1, (1, 1), (1, 1), "same", None),  # tiny images grouped per block
    ((2, 11, 12, 8), (3, 3), 1, (2, 2), (1, 1), "same", "relu6"),  # narrow, strided columns: per tap
    ((2, 10, 13, 6), (3, 3), 2, (1, 2), (1, 1), "same", None),
    ((2, 13, 12, 16), (3, 3), 1, (2, 2), (1, 1), "valid", "relu"),
    ((2, 9, 10, 160), (3, 3), 1, (2, 2), (1, 1), "same", "relu6"),  # wide, strided: over channels
    ((2, 11, 10, 4), (3, 3), 2, (2, 3), (1, 1), "valid", None),  # phases, stride 3 columns
    ((2, 9, 12, 6), (3, 3), 1, (1, 1), (1, 2), "same", "relu"),  # column dilation, narrow: per tap
    # Compiled row loops: a kernel row's taps three at a time and the rest one by one (7 = 1 + 3 + 3,
    # 4 = 1 + 3, 5 = 1 + 3 + 1); an output row longer than one stretch (30 x 24 values, the last
    # stretch partial); a narrow strided 7x7 on a phase-split slab.
    ((1, 9, 30, 24), (7, 7), 1, (1, 1), (1, 1), "same", "relu"),
    ((2, 10, 11, 5), (3, 4), 1, (1, 1), (2, 1), "valid", None),
    ((2, 15, 16, 11), (7, 7), 1, (2, 2), (1, 1), "same", None),
]


@pytest.mark.parametrize("case", DW_CASES, ids=[f"dw{i}" for i in range(len(DW_CASES))])
def test_depthwise2d_paths(case, blocks, loops):
    shape, ks, mult, strides, dilation, padding, act = case
    rng = np.random.default_rng(sum(shape) + mult)
    x = rng.standard_normal(shape, dtype=np.float32)
    kernel = rng.standard_normal((*ks, shape[-1], mult), dtype=np.float32)
    bias = rng.standard_normal(shape[-1] * mult, dtype=np.float32)
    config = {"kernel_size": list(ks), "strides": list(strides), "dilation_rate": list(dilation),
              "padding": padding, "depth_multiplier": mult, "activation": act}  # fmt: skip
    expected = ref_depthwise(x, kernel, bias, strides, dilation, padding, act)
    _check(_run("DepthwiseConv2D", config, {"kernel": kernel, "bias": bias}, x), expected)


@pytest.mark.parametrize("channels", [8, 80])
def test_depthwise_as_groups_and_separable(channels, blocks, loops):
    rng = np.random.default_rng(channels)
    x = rng.standard_normal((2, 9, 8, channels), dtype=np.float32)
    dw = rng.standard_normal((3, 3, channels, 1), dtype=np.float32)
    bias = rng.standard_normal(channels, dtype=np.float32)
    # Conv2D with groups == channels is a depthwise conv (kernel (kh, kw, 1, C)).
    config = {"filters": channels, "kernel_size": 3, "padding": "same", "groups": channels}
    expected = ref_depthwise(x, dw, bias, (1, 1), (1, 1), "same")
    _check(_run("Conv2D", config, {"kernel": dw.reshape(3, 3, 1, channels), "bias": bias}, x), expected)
    pw = rng.standard_normal((1, 1, channels, 5), dtype=np.float32)
    config = {"filters": 5, "kernel_size": 3, "strides": 2, "padding": "same", "activation": "relu"}
    mid = ref_depthwise(x, dw, None, (2, 2), (1, 1), "same")
    expected = np.maximum(mid @ pw[0, 0].astype(np.float64) + bias[:5], 0)
    weights = {"depthwise_kernel": dw, "pointwise_kernel": pw, "bias": bias[:5]}
    _check(_run("SeparableConv2D", config, weights, x), expected)


def test_depthwise1d_einsum(blocks, loops):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 33, 70), dtype=np.float32)
    kernel = rng.standard_normal((3, 70, 1), dtype=np.float32)
    config = {"kernel_size": 3, "strides": 2, "padding": "same", "use_bias": False}
    expected = ref_depthwise(x, kernel, None, (2,), (1,), "same")
    _check(_run("DepthwiseConv1D", config, {"kernel": kernel}, x), expected)


POOL_CASES = [
    # (input, pool, strides, padding)
    ((2, 15, 15, 8), (3, 3), (2, 2), "same"),
    ((2, 16, 16, 8), (3, 3), (2, 2), "same"),
    ((2, 15, 14, 8), (3, 3), (2, 2), "valid"),
    ((2, 9, 10, 5), (3, 3), (1, 1), "same"),
    ((2, 9, 10, 5), (2, 2), (1, 1), "same"),
    ((2, 11, 10, 3), (4, 3), (3, 2), "same"),
    ((3, 4, 4, 64), (3, 3), (2, 2), "same"),
    ((2, 8, 8, 4), (2, 2), (2, 2), "same"),
]


@pytest.mark.parametrize("case", POOL_CASES, ids=[f"pool{i}" for i in range(len(POOL_CASES))])
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool2d_paths(case, kind, blocks):
    shape, pool, strides, padding = case
    rng = np.random.default_rng(sum(shape))
    # Mostly negative values: a max pool that padded with zeros instead of -inf would be caught.
    x = rng.standard_normal(shape, dtype=np.float32) - 2
    pads = _pads(padding, shape[1:-1], pool, strides, (1, 1))
    if kind == "max":
        expected = np.max([w for _, w in _windows(x, pool, strides, (1, 1), pads, -np.inf)], axis=0)
    else:
        total = sum(w for _, w in _windows(x, pool, strides, (1, 1), pads))
        count = sum(w for _, w in _windows(np.ones_like(x[:1]), pool, strides, (1, 1), pads))
        expected = total / count
    config = {"pool_size": list(pool), "strides": list(strides), "padding": padding}
    _check(_run("MaxPooling2D" if kind == "max" else "AveragePooling2D", config, {}, x), expected)


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool1d_paths(kind, blocks):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 17, 6), dtype=np.float32) - 2
    pads = _pads("same", (17,), (3,), (2,), (1,))
    windows = [w for _, w in _windows(x, (3,), (2,), (1,), pads, -np.inf if kind == "max" else 0.0)]
    if kind == "max":
        expected = np.max(windows, axis=0)
    else:
        expected = sum(windows) / sum(w for _, w in _windows(np.ones_like(x[:1]), (3,), (2,), (1,), pads))
    config = {"pool_size": 3, "strides": 2, "padding": "same"}
    _check(_run("MaxPooling1D" if kind == "max" else "AveragePooling1D", config, {}, x), expected)


def test_scratch_is_reused_and_reported():
    a = fast_blocks.scratch(7, (4, 5), np.float32)
    b = fast_blocks.scratch(7, (2, 3), np.float32)
    assert np.shares_memory(a, b)
    assert fast_blocks.scratch_bytes() >= a.nbytes
    # Outputs are fresh arrays, never scratch: a second call must not overwrite the first result.
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 8, 8, 4), dtype=np.float32)
    kernel = rng.standard_normal((3, 3, 4, 4), dtype=np.float32)
    fn = fast.kernel_for("Conv2D", KernelSpec("c", "Conv2D", {"filters": 4, "kernel_size": 3, "padding": "same",
                                                         "use_bias": False}, {"kernel": kernel}))  # fmt: skip
    first = fn(x)
    kept = first.copy()
    fn(x * 2)
    np.testing.assert_array_equal(first, kept)


@pytest.mark.parametrize("act", ["linear", "relu", "relu6", "swish"])
@pytest.mark.parametrize("with_bias", [True, False])
def test_copying_epilogue_writes_a_strided_destination(act, with_bias):
    """The bottleneck's expansion epilogue: act(src + bias) lands in a padded slab's interior (a
    strided view) and the padding around it is untouched."""
    from modelgraph.runner.activations import get_activation
    from modelgraph.runner.fast.epilogue import copying_epilogue

    rng = np.random.default_rng(5)
    src = (rng.standard_normal((2, 3, 5, 7)) * 4).astype(np.float32)
    bias = rng.standard_normal(7).astype(np.float32) if with_bias else None
    fn = get_activation(act, (3, 0, 0), "Conv2D")
    slab = np.full((2, 4, 7, 7), 9.0, np.float32)
    interior = slab[:, 1:, 1:6]
    copying_epilogue(bias, act, None if act == "linear" else fn)(src.copy(), interior)
    total = src.astype(np.float64) + (0 if bias is None else bias)
    want = np.asarray(fn(total.astype(np.float32)), np.float64)
    np.testing.assert_allclose(interior, want, rtol=1e-6, atol=1e-6)
    untouched = np.ones(slab.shape, bool)
    untouched[:, 1:, 1:6] = False
    assert (slab[untouched] == 9.0).all()


def test_strided_view_is_as_strided_inside_the_base_and_refuses_to_reach_past_it():
    x = np.arange(2 * 5 * 6 * 3, dtype=np.float32).reshape(2, 5, 6, 3)
    st = x.strides
    shape, strides = (2, 3, 4, 3, 9), (st[0], st[1], st[2], st[1], st[3])  # 3x3 windows of x
    view = gemm.strided_view(x, shape, strides)
    np.testing.assert_array_equal(view, np.lib.stride_tricks.as_strided(x, shape, strides))
    assert not view.flags.writeable and np.shares_memory(view, x)
    with pytest.raises(ValueError):  # one more window row would read past the end of x
        gemm.strided_view(x, (2, 4, 4, 3, 9), strides)
    band = x[:, 1:4]  # rows of two images: not contiguous, so as_strided over the band's strides
    bst = band.strides
    band_shape, band_strides = (2, 1, 4, 3, 9), (bst[0], bst[1], bst[2], bst[1], bst[3])
    band_view = gemm.strided_view(band, band_shape, band_strides)
    np.testing.assert_array_equal(band_view, np.lib.stride_tricks.as_strided(band, band_shape, band_strides))
    np.testing.assert_array_equal(band_view[1, 0, 2, 1], x[1, 2, 2:5].reshape(-1))
    assert not band_view.flags.writeable
