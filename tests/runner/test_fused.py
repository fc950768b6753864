"""Merged plan steps: inverted bottlenecks (1x1 expand -> [ZeroPadding2D] -> depthwise -> 1x1
project) and Add -> ReLU.

The bottleneck kernel is checked against the chain computed stage by stage in float64, with the real
band size and with bands of a single row (so every layer is cut into many bands, and bands group
whole images); the fusion passes are checked on the Keras-made MobileNetV2 and ResNet50 samples.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from modelgraph.errors import UnsupportedConfigError
from modelgraph.loading import load
from modelgraph.runner import parallel
from modelgraph.runner.fast import fused
from modelgraph.runner.fast.fused import ADD_ACTIVATION, CONV_RESIDUAL, INVERTED_BOTTLENECK, ZERO_PADDED
from modelgraph.runner.fusion import fuse
from modelgraph.runner.interpreter import Runner
from modelgraph.runner.registry import KernelSpec, get_kernel

from .test_kernels_conv_perf_paths import ref_conv, ref_depthwise

SAMPLES = Path(__file__).resolve().parent.parent.parent / "samples"


@pytest.fixture(params=["real", "tiny", "spread"])
def bands(request, monkeypatch):
    """Real band sizes; one-row bands; bands spread over two threads (thinned to one per thread)."""
    if request.param == "tiny":
        monkeypatch.setattr(fused, "SLAB_BYTES", 1 << 8)
        monkeypatch.setattr(fused, "SPREAD_SLAB_BYTES", 1 << 8)
        monkeypatch.setattr(fused, "MIN_BAND_ROWS", 1)
    if request.param == "spread":
        monkeypatch.setattr(parallel, "SPREAD_MIN_WORK", 0)
        monkeypatch.setattr(fused, "MIN_SHARED_BAND_ROWS", 1)
        monkeypatch.setenv("MODELGRAPH_NUM_THREADS", "2")
    return request.param


CASES = [
    # (input (B, H, W, C), width, out, strides, ZeroPadding2D pads or None, padding, acts, biases)
    ((2, 9, 11, 5), 12, 4, (1, 1), None, "same", ("relu6", "relu6", None), (True, True, True)),
    ((3, 10, 10, 4), 24, 6, (2, 2), [[0, 1], [0, 1]], "valid", ("relu6", "relu6", None), (True, True, True)),
    ((1, 7, 6, 8), 20, 8, (2, 2), None, "same", ("relu", "tanh", "relu"), (False, True, False)),
    ((2, 5, 13, 3), 7, 5, (1, 2), [[2, 0], [1, 3]], "same", (None, "relu6", None), (True, False, True)),
    ((4, 3, 3, 16), 70, 9, (1, 1), None, "same", ("relu6", "relu6", None), (True, True, True)),
    ((1, 1, 1, 6), 9, 3, (1, 1), [[1, 1], [1, 1]], "valid", ("relu6", "relu6", None), (True, True, True)),
    # No expansion (MobileNet's depthwise-separable pair): width is the input's channel count.
    ((2, 9, 8, 6), None, 5, (1, 1), None, "same", (None, "relu6", None), (False, True, True)),
    ((2, 10, 9, 7), None, 4, (2, 2), [[1, 1], [0, 1]], "valid", (None, "relu", "relu"), (False, False, True)),
]


def _weights(rng, cin, width, cout, biases, expand):
    w = {
        "depthwise/kernel": rng.standard_normal((3, 3, width, 1)).astype(np.float32) / 3,
        "project/kernel": rng.standard_normal((1, 1, width, cout)).astype(np.float32) / np.sqrt(width),
    }
    if expand:
        w["expand/kernel"] = rng.standard_normal((1, 1, cin, width)).astype(np.float32) / np.sqrt(cin)
    for stage, size, on in zip(("expand", "depthwise", "project"), (width, width, cout), biases, strict=True):
        if on:
            w[f"{stage}/bias"] = rng.uniform(-1, 1, size).astype(np.float32)
    return w


def _reference(x, w, strides, pre_pads, padding, acts):
    expanded = x
    if "expand/kernel" in w:
        expanded = ref_conv(x, w["expand/kernel"], w.get("expand/bias"), (1, 1), (1, 1), "valid", acts[0])
    if pre_pads is not None:
        expanded = np.pad(expanded, [(0, 0), *map(tuple, pre_pads), (0, 0)])
    dw = ref_depthwise(
        expanded, w["depthwise/kernel"], w.get("depthwise/bias"), strides, (1, 1), padding, acts[1]
    )
    return ref_conv(dw, w["project/kernel"], w.get("project/bias"), (1, 1), (1, 1), "valid", acts[2])


@pytest.mark.parametrize("case", CASES)
def test_fused_kernel_equals_the_chain_stage_by_stage(case, bands):
    shape, width, cout, strides, pre_pads, padding, acts, biases = case
    rng = np.random.default_rng(sum(shape) + (width or 0))
    x = rng.standard_normal(shape).astype(np.float32)
    w = _weights(rng, shape[-1], width or shape[-1], cout, biases, expand=width is not None)
    expand = {"kernel_size": [1, 1], "activation": acts[0] or "linear", "use_bias": biases[0]}
    config = {
        "expand": expand if width is not None else None,
        "pads": pre_pads or [[0, 0], [0, 0]],
        "depthwise": {
            "kernel_size": [3, 3],
            "strides": list(strides),
            "padding": padding,
            "activation": acts[1] or "linear",
            "use_bias": biases[1],
        },
        "project": {"kernel_size": [1, 1], "activation": acts[2] or "linear", "use_bias": biases[2]},
    }
    spec = KernelSpec(name="block", class_name=INVERTED_BOTTLENECK, config=config, weights=w)
    actual = get_kernel(INVERTED_BOTTLENECK)(spec)(x)
    expected = _reference(x, w, strides, pre_pads, padding, acts)
    assert actual.dtype == np.float32 and actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, atol=1e-5, rtol=1e-4)
    # The comparison can fail: a band shifted by one row would not pass.
    if expected.shape[1] > 1:
        assert not np.allclose(actual, np.roll(expected, 1, axis=1), atol=1e-5, rtol=1e-4)


def test_mobilenetv2_bottlenecks_become_one_step_each() -> None:
    graph = load(SAMPLES / "k3" / "app_mobilenetv2.keras")
    merged = fuse(graph)
    blocks = [lyr for lyr in merged.layers if lyr.class_name == INVERTED_BOTTLENECK]
    # block_1 .. block_16 expand; block_0 ("expanded_conv") has no expansion and merges too. A
    # block ending in a residual sum takes the Add's name, with the sum merged into it.
    residual = {2, 4, 5, 7, 8, 9, 11, 12, 14, 15}
    expected = ["expanded_conv_project"] + [
        f"block_{i}_add" if i in residual else f"block_{i}_project" for i in range(1, 17)
    ]
    assert sorted(lyr.name for lyr in blocks) == sorted(expected)
    assert {lyr.name for lyr in blocks if lyr.config.get("residual") == "linear"} == {
        f"block_{i}_add" for i in residual
    }
    names = {lyr.name for lyr in merged.layers}
    assert "block_1_pad" not in names and "block_1_depthwise" not in names
    assert "expanded_conv_depthwise" not in names and "Conv1" in names
    assert merged.layer("expanded_conv_project").config["expand"] is None
    assert merged.node("expanded_conv_project", 0).inputs[0].layer == "Conv1"
    block = merged.layer("block_1_project")
    assert block.config["pads"] == [[0, 1], [0, 1]]
    assert {w.name for w in block.weights} == {
        f"{stage}/{name}" for stage in ("expand", "depthwise", "project") for name in ("kernel", "bias")
    }
    # The residual block reads its input twice: once through its chain, once as the shortcut.
    add = merged.node("block_2_add", 0)
    assert [ref.layer for ref in add.args] == ["block_1_project", "block_1_project"]
    assert "block_2_project" not in names
    # The loaded graph is untouched.
    assert graph.layer("block_1_project").class_name == "Conv2D"


def test_merged_plan_matches_the_plain_plan_and_taps_still_work() -> None:
    graph = load(SAMPLES / "k3" / "app_mobilenetv2.keras")
    size = graph.layer(graph.inputs[0].layer).config["batch_shape"][1:]
    x = np.random.default_rng(3).standard_normal((3, *size)).astype(np.float32)
    runner = Runner(graph)
    assert sum(s.class_name == INVERTED_BOTTLENECK for s in runner.steps) == 17
    merged = runner.run(x)
    plain = Runner(graph, fuse=False).run(x)
    for key, value in plain.items():
        np.testing.assert_allclose(merged[key], value, rtol=1e-4, atol=1e-5)
    tapped = runner.run(x, taps=["block_5_depthwise_relu"])
    assert tapped["tap/block_5_depthwise_relu"].min() >= 0.0


@pytest.mark.parametrize("act", ["relu", "relu6"])
@pytest.mark.parametrize("overwrite", [None, 1])
def test_add_activation_kernel(act, overwrite, monkeypatch):
    monkeypatch.setattr(fused, "ADD_CHUNK", 7)  # many chunks, the last one partial
    rng = np.random.default_rng(5)
    xs = [rng.uniform(-8, 8, (2, 5, 3, 4)).astype(np.float32) for _ in range(3)]
    copies = [x.copy() for x in xs]
    spec = KernelSpec(
        name="add", class_name=ADD_ACTIVATION, config={"activation": act, "overwrite": overwrite}
    )
    out = get_kernel(ADD_ACTIVATION)(spec)(xs)
    total = copies[0] + copies[1] + copies[2]
    expected = np.clip(total, 0, 6) if act == "relu6" else np.maximum(total, 0)
    np.testing.assert_array_equal(out, expected)
    if overwrite is None:
        for x, c in zip(xs, copies, strict=True):
            np.testing.assert_array_equal(x, c)
    else:
        assert out is xs[overwrite]
        np.testing.assert_array_equal(xs[0], copies[0])


def test_add_activation_broadcasts_like_add():
    spec = KernelSpec(name="add", class_name=ADD_ACTIVATION, config={"activation": "relu", "overwrite": 0})
    a = np.arange(-6, 6, dtype=np.float32).reshape(2, 3, 2)
    b = np.array([1.0, -2.0], dtype=np.float32)  # rank 1: one value per sample, as Keras's Add aligns it
    out = get_kernel(ADD_ACTIVATION)(spec)([a, b])
    plain_add = get_kernel("Add")(KernelSpec(name="add", class_name="Add", config={}))
    np.testing.assert_array_equal(out, np.maximum(plain_add([a, b]), 0))
    np.testing.assert_array_equal(out, np.maximum(a + b[:, None, None], 0))
    np.testing.assert_array_equal(a, np.arange(-6, 6, dtype=np.float32).reshape(2, 3, 2))


def test_resnet50_residual_sums_merge_into_their_conv_with_the_relu(rebuilt_apps) -> None:
    graph = load(rebuilt_apps("apps/k3_resnet50/manifest.json"))
    merged = fuse(graph)
    sums = [lyr for lyr in merged.layers if lyr.class_name == CONV_RESIDUAL]
    assert len(sums) == 16 and not any(lyr.class_name == "Activation" for lyr in merged.layers)
    assert not any(lyr.class_name in ("Add", ADD_ACTIVATION) for lyr in merged.layers)
    # Each sum is merged into a conv only it reads (the block's last conv, or a projection
    # shortcut's conv), never into an identity shortcut (which the next block reads too).
    for lyr in sums:
        assert lyr.config["activation"] == "relu" and lyr.name.endswith("_add")
        assert lyr.config["conv"]["name"].endswith(("_0_conv", "_3_conv"))
        assert lyr.config["conv"]["name"] not in {x.name for x in merged.layers}
        assert len(merged.node(lyr.name, 0).args) == 2
    # The stem's explicit paddings merge into the conv and the pool that read them.
    names = {x.name: x for x in merged.layers}
    assert "conv1_pad" not in names and "pool1_pad" not in names
    assert names["conv1_conv"].class_name == names["pool1_pool"].class_name == ZERO_PADDED
    assert names["pool1_pool"].config["pads"] == [[1, 1], [1, 1]]
    x = np.random.default_rng(2).standard_normal((2, 64, 64, 3)).astype(np.float32)
    runner = Runner(graph)
    kept = x.copy()
    out = runner.run(x)
    np.testing.assert_array_equal(x, kept)
    plain = Runner(graph, fuse=False).run(x)
    for key, value in plain.items():
        np.testing.assert_allclose(out[key], value, rtol=1e-4, atol=1e-3)


def _conv_ref(x, kernel, bias, pads):
    """A float64 reference conv (stride 1, any kernel size) of channels-last ``x``."""
    x = np.pad(x.astype(np.float64), [(0, 0), *pads, (0, 0)])
    kh, kw, _, f = kernel.shape
    oh, ow = x.shape[1] - kh + 1, x.shape[2] - kw + 1
    out = np.zeros((x.shape[0], oh, ow, f))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nhwc,cf->nhwf", x[:, i : i + oh, j : j + ow], kernel[i, j])
    return out + bias


@pytest.mark.parametrize(
    "shape, k, residual_shape, act",
    [
        ((2, 9, 7, 6), 1, None, "relu"),  # pointwise GEMM blocks
        ((3, 8, 8, 64), 3, None, "relu6"),  # 3x3: GEMM or Winograd, by size
        ((8, 16, 16, 64), 3, None, "linear"),  # Winograd (forced below)
        ((2, 5, 5, 4), 3, (1, 1, 1, 8), "relu"),  # a broadcast residual: added after the conv
    ],
)
def test_conv_residual_kernel(shape, k, residual_shape, act, bands, monkeypatch):
    monkeypatch.setattr("modelgraph.runner.fast.blocks.GEMM_BLOCK_BYTES", 1 << 12)
    monkeypatch.setattr("modelgraph.runner.fast.blocks.GEMM_MIN_ROWS", 8)
    if shape[0] == 8:
        monkeypatch.setattr("modelgraph.runner.fast.winograd.MIN_WORK", 0)
        monkeypatch.setattr("modelgraph.runner.fast.winograd.KERNEL_TILES", 0)
        monkeypatch.setattr("modelgraph.runner.fast.winograd.GEMM_BLOCK_BYTES", 1 << 14)
    rng = np.random.default_rng(sum(shape) + k)
    x = rng.standard_normal(shape).astype(np.float32)
    filters = 8 if residual_shape else shape[-1]
    kernel = (rng.standard_normal((k, k, shape[-1], filters)) / np.sqrt(k * k * shape[-1])).astype(np.float32)
    bias = rng.standard_normal(filters).astype(np.float32)
    out_shape = (*shape[:3], filters)
    residual = rng.standard_normal(residual_shape or out_shape).astype(np.float32)
    kept = residual.copy()
    conv = {"filters": filters, "kernel_size": [k, k], "padding": "same", "activation": "linear"}
    spec = KernelSpec(
        name="sum",
        class_name=CONV_RESIDUAL,
        config={"conv": conv, "activation": act},
        weights={"conv/kernel": kernel, "conv/bias": bias},
    )
    out = get_kernel(CONV_RESIDUAL)(spec)(x, residual)
    total = _conv_ref(x, kernel, bias, [(k // 2, k // 2)] * 2) + kept
    expected = {"relu": np.maximum(total, 0), "relu6": np.clip(total, 0, 6), "linear": total}[act]
    assert out.dtype == np.float32 and out.shape == out_shape
    np.testing.assert_allclose(out, expected, atol=2e-5, rtol=1e-4)
    np.testing.assert_array_equal(residual, kept)  # the shortcut is read, never written
    # Without the residual the result is clearly different (the comparison can fail).
    assert not np.allclose(
        out, {"relu": np.maximum, "relu6": np.maximum, "linear": np.add}[act](total - kept, 0)
    )


def test_bottleneck_residual_equals_block_plus_shortcut():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 9, 9, 6)).astype(np.float32)
    w = _weights(rng, 6, 18, 6, (True, True, True), expand=True)
    config = {
        "expand": {"kernel_size": [1, 1], "activation": "relu6", "use_bias": True},
        "pads": [[0, 0], [0, 0]],
        "depthwise": {"kernel_size": [3, 3], "strides": [1, 1], "padding": "same", "activation": "relu6"},
        "project": {"kernel_size": [1, 1], "activation": "linear", "use_bias": True},
    }
    plain = get_kernel(INVERTED_BOTTLENECK)(
        KernelSpec(name="b", class_name=INVERTED_BOTTLENECK, config=config, weights=w)
    )
    merged_spec = KernelSpec(
        name="b", class_name=INVERTED_BOTTLENECK, config={**config, "residual": "linear"}, weights=w
    )
    merged = get_kernel(INVERTED_BOTTLENECK)(merged_spec)
    np.testing.assert_allclose(merged(x, x), plain(x) + x, atol=1e-6, rtol=1e-6)
    with pytest.raises(ValueError, match="takes 2 input"):
        merged(x)


ZERO_PAD_CASES = [
    # (inner class, inner config, pads, input shape): ResNet's stem conv and pool, EfficientNet's
    # strided depthwise conv, and asymmetric / "same" variants.
    (
        "Conv2D",
        {"filters": 8, "kernel_size": [7, 7], "strides": [2, 2], "padding": "valid"},
        [[3, 3], [3, 3]],
        (2, 17, 15, 3),
    ),
    (
        "Conv2D",
        {"filters": 5, "kernel_size": [3, 3], "padding": "same", "activation": "relu"},
        [[0, 2], [1, 0]],
        (1, 9, 8, 4),
    ),
    (
        "DepthwiseConv2D",
        {"kernel_size": [3, 3], "strides": [2, 2], "padding": "valid"},
        [[0, 1], [0, 1]],
        (2, 10, 12, 6),
    ),
    ("DepthwiseConv2D", {"kernel_size": [5, 5], "padding": "same"}, [[2, 1], [0, 3]], (1, 7, 9, 5)),
    (
        "MaxPooling2D",
        {"pool_size": [3, 3], "strides": [2, 2], "padding": "valid"},
        [[1, 1], [1, 1]],
        (2, 11, 12, 4),
    ),
    (
        "MaxPooling2D",
        {"pool_size": [2, 3], "strides": [1, 2], "padding": "valid"},
        [[0, 1], [2, 1]],
        (1, 6, 9, 3),
    ),
    # Padded more after than half the pool: no pool row is inside the input for both output rows.
    ("MaxPooling2D", {"pool_size": [4, 2], "padding": "valid"}, [[1, 3], [0, 1]], (2, 4, 5, 3)),
]


@pytest.mark.parametrize("class_name, config, pads, shape", ZERO_PAD_CASES)
def test_zero_padded_step_equals_padding_then_the_op(class_name, config, pads, shape, bands):
    rng = np.random.default_rng(len(ZERO_PAD_CASES) + sum(shape))
    x = (rng.standard_normal(shape) - 0.5).astype(np.float32)  # mostly negative: padding zeros matter
    channels = shape[-1]
    weights = {}
    if class_name == "Conv2D":
        k = config["kernel_size"]
        weights = {
            "kernel": rng.standard_normal((*k, channels, config["filters"])).astype(np.float32),
            "bias": rng.standard_normal(config["filters"]).astype(np.float32),
        }
    elif class_name == "DepthwiseConv2D":
        weights = {
            "kernel": rng.standard_normal((*config["kernel_size"], channels, 1)).astype(np.float32),
            "bias": rng.standard_normal(channels).astype(np.float32),
        }
    pad_spec = KernelSpec(name="pad", class_name="ZeroPadding2D", config={"padding": pads})
    op_spec = KernelSpec(name="op", class_name=class_name, config=config, weights=weights)
    expected = get_kernel(class_name)(op_spec)(get_kernel("ZeroPadding2D")(pad_spec)(x))
    merged = KernelSpec(
        name="op",
        class_name=ZERO_PADDED,
        config={"pads": pads, "class_name": class_name, "layer": config},
        weights={f"layer/{k}": v for k, v in weights.items()},
    )
    actual = get_kernel(ZERO_PADDED)(merged)(x)
    assert actual.shape == expected.shape and actual.dtype == np.float32
    np.testing.assert_allclose(actual, expected, atol=2e-5, rtol=1e-5)
    if class_name == "MaxPooling2D":
        # The comparison can fail: some border windows take their max from the zero padding.
        assert (actual == 0).any() and not (x.max(axis=(1, 2)) == 0).any()


def test_zero_padded_refuses_pads_it_cannot_take() -> None:
    """Max pooling with a side padded as wide as its window (a window of padding alone), and
    malformed pads, are refused, never guessed (the fusion pass does not merge them)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 6, 6, 2)).astype(np.float32)
    merged = KernelSpec(
        name="p",
        class_name=ZERO_PADDED,
        config={"pads": [[3, 3], [3, 3]], "class_name": "MaxPooling2D", "layer": {"pool_size": [3, 3]}},
    )
    with pytest.raises(UnsupportedConfigError):
        get_kernel(ZERO_PADDED)(merged)(x)
    bad = KernelSpec(
        name="p", class_name=ZERO_PADDED, config={"pads": [[1, 1]], "class_name": "Conv2D", "layer": {}}
    )
    with pytest.raises(UnsupportedConfigError):
        get_kernel(ZERO_PADDED)(bad)


def test_sums_that_cannot_merge_into_a_conv_still_merge_with_their_relu() -> None:
    """In a config-only ResNet50 (no weights: no BatchNormalization folds, no conv takes the sum into
    its epilogue), every Add -> ReLU still becomes one step. Its inputs are BatchNormalization
    outputs, which are not known to be fresh arrays, so it overwrites none of them."""
    merged = fuse(load(SAMPLES / "apps" / "k3_resnet50" / "config.json"))
    sums = [lyr for lyr in merged.layers if lyr.class_name == ADD_ACTIVATION]
    assert len(sums) == 16 and not any(lyr.class_name == CONV_RESIDUAL for lyr in merged.layers)
    assert not any(lyr.class_name == "Activation" and lyr.name.endswith("_out") for lyr in merged.layers)
    for lyr in sums:
        refs = merged.node(lyr.name, 0).args[0]
        assert lyr.config == {"activation": "relu", "overwrite": None}
        assert any(ref.layer.endswith("_3_bn") for ref in refs)
