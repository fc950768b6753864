"""Every fast kernel computes what its reference kernel computes (modelgraph/runner/fast/).

Property tests over random shapes, kernel and pool sizes, strides, dilations, paddings, groups,
depth multipliers, activations (element-wise and along the last axis), float32 and float64 (and
float16 inputs for pooling), both data formats, and inputs that are not C-contiguous (transposed
views, strided slices, one channel moved from channels_first): a fast path that needs contiguous
rows must copy or fall back, never fail. The reference kernels themselves are checked against
Keras by the goldens (test_kernels_conv.py, tests/test_fuzz_cases.py).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelgraph.runner import fast, parallel
from modelgraph.runner.fast import blocks as fast_blocks
from modelgraph.runner.fast import conv as fast_conv
from modelgraph.runner.fast import jit
from modelgraph.runner.fast import pooling as fast_pooling
from modelgraph.runner.registry import KernelSpec

FORMATS = ("channels_last", "channels_first")
ACTIVATIONS = ["linear", "relu", "relu6", "tanh", "softmax", "log_softmax", "gelu"]
SETTINGS = settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)  # the same draws on every run (CI); wider offline runs raise max_examples


def _layout(data: st.DataObject, x: np.ndarray) -> np.ndarray:
    """``x`` as a C-ordered array, a transposed view, a strided slice of a bigger array, or moved
    from channels_first: the input a channels_first model hands a channels-last kernel (C-contiguous
    when there is one channel, with an arbitrary stride on that axis)."""
    how = data.draw(st.sampled_from(["contiguous", "transposed", "sliced", "moved"]))
    if how == "moved":
        return np.moveaxis(np.ascontiguousarray(np.moveaxis(x, -1, 1)), 1, -1)
    if how == "transposed":
        # The same values, laid out with the batch axis last in memory.
        return np.moveaxis(np.ascontiguousarray(np.moveaxis(x, 0, -1)), -1, 0)
    if how == "sliced":
        big = np.zeros((x.shape[0] * 2, *x.shape[1:-1], x.shape[-1] + 1), dtype=x.dtype)
        big[::2, ..., : x.shape[-1]] = x
        return big[::2, ..., : x.shape[-1]]
    return x


@st.composite
def conv_cases(
    draw, classes=("Conv", "Depthwise", "Separable"), ranks=(1, 2, 3), formats=FORMATS, grouped=True
):
    kind = draw(st.sampled_from(classes))
    rank = draw(st.sampled_from([r for r in ranks if kind == "Conv" or r <= 2]))
    fmt = draw(st.sampled_from(formats))
    dtype = draw(st.sampled_from(["float32", "float64"]))
    channels = draw(st.integers(1, 6))
    kernel_size = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    strided = draw(st.booleans())
    strides = tuple(draw(st.integers(1, 3)) for _ in range(rank)) if strided else (1,) * rank
    dilation = (1,) * rank if strided else tuple(draw(st.integers(1, 2)) for _ in range(rank))
    modes = ["valid", "same"] + (["causal"] if rank == 1 and kind == "Conv" else [])
    padding = draw(st.sampled_from(modes))
    spatial = tuple(
        draw(st.integers((k - 1) * d + 1, (k - 1) * d + 7))
        for k, d in zip(kernel_size, dilation, strict=True)
    )
    batch = draw(st.integers(1, 3))
    config = {
        "kernel_size": list(kernel_size),
        "strides": list(strides),
        "dilation_rate": list(dilation),
        "padding": padding,
        "data_format": fmt,
        "activation": draw(st.sampled_from(ACTIVATIONS)),
        "use_bias": draw(st.booleans()),
    }
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    weights: dict[str, np.ndarray] = {}
    if kind == "Conv":
        groups = draw(
            st.sampled_from([g for g in range(1, channels + 1) if (grouped and channels % g == 0) or g == 1])
        )
        filters = groups * draw(st.integers(1, 3))
        config.update(filters=filters, groups=groups)
        weights["kernel"] = rng.normal(size=(*kernel_size, channels // groups, filters))
        out_channels = filters
    else:
        mult = draw(st.integers(1, 2))
        config["depth_multiplier"] = mult
        if kind == "Depthwise":
            weights["kernel"] = rng.normal(size=(*kernel_size, channels, mult))
            out_channels = channels * mult
        else:
            filters = draw(st.integers(1, 4))
            config["filters"] = filters
            weights["depthwise_kernel"] = rng.normal(size=(*kernel_size, channels, mult))
            weights["pointwise_kernel"] = rng.normal(size=(*([1] * rank), channels * mult, filters))
            out_channels = filters
    if config["use_bias"]:
        weights["bias"] = rng.normal(size=(out_channels,))
    class_name = f"{kind}Conv{rank}D" if kind != "Conv" else f"Conv{rank}D"
    shape = (batch, channels, *spatial) if fmt == "channels_first" else (batch, *spatial, channels)
    x = rng.normal(size=shape).astype(dtype)
    spec = KernelSpec(
        "layer", class_name, config, {k: v.astype(dtype) for k, v in weights.items()}, compute_dtype=dtype
    )
    return spec, x


# Block sizes small enough to cut every drawn layer into many row blocks, images and bands.
TINY_BLOCKS = {
    "GEMM_BLOCK_BYTES": 1 << 10,
    "SPREAD_BLOCK_BYTES": 1 << 10,
    "GEMM_MIN_ROWS": 3,
    "EW_BLOCK_BYTES": 1 << 7,
    "DW_BLOCK_BYTES": 1 << 7,
}


@contextlib.contextmanager
def _blocking(data: st.DataObject) -> Iterator[None]:
    """Run the fast kernel with the real block sizes, or with tiny blocks serially or spread over two
    threads (every block a share of its own), as drawn."""
    how = data.draw(st.sampled_from(["real", "tiny", "tiny on 2 threads"]))
    saved = {name: getattr(fast_blocks, name) for name in TINY_BLOCKS}
    spread, threads = parallel.SPREAD_MIN_WORK, os.environ.get("MODELGRAPH_NUM_THREADS")
    try:
        if how != "real":
            for name, value in TINY_BLOCKS.items():
                setattr(fast_blocks, name, value)
        if how == "tiny on 2 threads":
            parallel.SPREAD_MIN_WORK = 0
            os.environ["MODELGRAPH_NUM_THREADS"] = "2"
        yield
    finally:
        for name, value in saved.items():
            setattr(fast_blocks, name, value)
        parallel.SPREAD_MIN_WORK = spread
        if threads is None:
            os.environ.pop("MODELGRAPH_NUM_THREADS", None)
        else:
            os.environ["MODELGRAPH_NUM_THREADS"] = threads


def _check(spec: KernelSpec, x: np.ndarray) -> None:
    want = fast.kernel_for(spec.class_name, spec, reference=True)(np.ascontiguousarray(x))
    got = fast.kernel_for(spec.class_name, spec)(x)
    assert got.shape == want.shape and got.dtype == want.dtype
    tol = 1e-4 if x.dtype == np.float32 else 1e-10
    np.testing.assert_allclose(got, want, atol=tol, rtol=tol)


def test_every_fast_kernel_is_covered():
    """The property tests draw every class that has a fast kernel: the conv cases every Conv,
    DepthwiseConv and SeparableConv rank with one, the pool cases Max/AveragePooling 1D to 3D, the
    global cases GlobalAveragePooling 1D to 3D."""
    names = {factory.__name__ for factory in fast.FAST_KERNELS}
    conv = {"conv1d", "conv2d", "conv3d", "depthwise_conv1d", "depthwise_conv2d"}
    conv |= {"separable_conv1d", "separable_conv2d"}
    pooling = {f"{kind}_pooling{rank}d" for kind in ("max", "avg") for rank in (1, 2, 3)}
    pooling |= {f"global_avg_pooling{rank}d" for rank in (1, 2, 3)}
    assert names == conv | pooling


@SETTINGS
@given(
    conv_cases(classes=("Conv",), ranks=(2,), formats=("channels_last",), grouped=False),
    st.integers(0, 2),
    st.integers(0, 2),
    st.data(),
)
def test_padded_conv2d_matches_reference_of_padded_input(case, top, left, data):
    """The merged ZeroPadding2D -> Conv2D step (fast/fused.py, channels_last, groups 1) reads the
    padding as it goes."""
    spec, x = case
    pads = [(top, 1), (left, 0)]
    want = fast.kernel_for("Conv2D", spec, reference=True)(np.pad(x, [(0, 0), *pads, (0, 0)]))
    got = fast_conv.padded_conv2d(spec, pads)(_layout(data, x))
    tol = 1e-4 if x.dtype == np.float32 else 1e-10
    np.testing.assert_allclose(got, want, atol=tol, rtol=tol)


@pytest.mark.parametrize("fmt", ["channels_last", "channels_first"])
def test_reference_applies_softmax_to_the_output_as_laid_out(fmt):
    """Keras applies a conv's activation to its output as laid out: a channels_first conv's softmax
    normalises the last (spatial) axis, a channels_last one's the channels."""
    rng = np.random.default_rng(0)
    spec = KernelSpec(
        "c",
        "Conv1D",
        {"filters": 3, "kernel_size": 2, "data_format": fmt, "activation": "softmax"},
        {"kernel": rng.normal(size=(2, 4, 3)).astype("float32"), "bias": np.zeros(3, "float32")},
    )
    x = rng.normal(size=(2, 4, 7) if fmt == "channels_first" else (2, 7, 4)).astype("float32")
    for reference_only in (True, False):
        y = fast.kernel_for("Conv1D", spec, reference=reference_only)(x)
        np.testing.assert_allclose(y.sum(axis=-1), 1.0, rtol=1e-5)


# --- pooling ---------------------------------------------------------------------------------------


@st.composite
def pool_cases(draw, ranks=(1, 2, 3), kinds=("Max", "Average"), paddings=("valid", "same"), formats=FORMATS):
    """A Max/AveragePoolingND layer and an input for it: pool sizes 1-4, strides None (the pool
    size: non-overlapping windows) or 1-3, valid or same padding, float16/32/64."""
    kind = draw(st.sampled_from(kinds))
    rank = draw(st.sampled_from(ranks))
    fmt = draw(st.sampled_from(formats))
    dtype = draw(st.sampled_from(["float32", "float16", "float64"]))
    pool = tuple(draw(st.integers(1, 4)) for _ in range(rank))
    strides = draw(st.one_of(st.none(), st.tuples(*(st.integers(1, 3) for _ in range(rank)))))
    padding = draw(st.sampled_from(paddings))
    spatial = tuple(draw(st.integers(k, k + 8)) for k in pool)
    channels = draw(st.integers(1, 6))
    batch = draw(st.integers(1, 3))
    config = {"pool_size": list(pool), "strides": None if strides is None else list(strides)}
    config.update(padding=padding, data_format=fmt)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shape = (batch, channels, *spatial) if fmt == "channels_first" else (batch, *spatial, channels)
    # Mostly negative: a max pool that padded with zeros instead of minus infinity would be caught.
    x = (rng.normal(size=shape) - 1.5).astype(dtype)
    return KernelSpec("pool", f"{kind}Pooling{rank}D", config, compute_dtype=dtype), x


@st.composite
def global_cases(draw):
    """A GlobalAveragePoolingND layer (keepdims or not) and an input for it, float16/32/64."""
    rank = draw(st.sampled_from((1, 2, 3)))
    fmt = draw(st.sampled_from(FORMATS))
    dtype = draw(st.sampled_from(["float32", "float16", "float64"]))
    spatial = tuple(draw(st.integers(1, 9)) for _ in range(rank))
    channels, batch = draw(st.integers(1, 40)), draw(st.integers(1, 3))
    config = {"data_format": fmt, "keepdims": draw(st.booleans())}
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shape = (batch, channels, *spatial) if fmt == "channels_first" else (batch, *spatial, channels)
    x = (rng.normal(size=shape) + 0.5).astype(dtype)
    return KernelSpec("gap", f"GlobalAveragePooling{rank}D", config, compute_dtype=dtype), x


@pytest.mark.parametrize(
    "cases", [conv_cases(), pool_cases(), global_cases()], ids=["conv", "pooling", "global pooling"]
)
@SETTINGS
@given(data=st.data())
def test_fast_kernels_match_reference(cases, data):
    """Every fast conv and pooling kernel, on every drawn layout, block size and thread count."""
    spec, x = data.draw(cases)
    with _blocking(data):
        _check(spec, _layout(data, x))


@SETTINGS
@given(
    pool_cases(ranks=(2,), kinds=("Max", "Average"), paddings=("valid",), formats=("channels_last",)),
    st.booleans(),
    st.data(),
    st.data(),
)
def test_padded_pool2d_matches_reference_of_padded_input(case, compiled, pads_data, data):
    """The merged ZeroPadding2D -> MaxPooling2D / AveragePooling2D step (fast/fused.py) reads the
    zero padding without building it: max pooling floors the windows that reach into it at 0,
    average pooling counts its cells as zeros (the pool's area divides every window), on the
    compiled loops and on the NumPy path; each side of the padding is narrower than the pool, as
    the fusion pass requires."""
    spec, x = case
    pads = [tuple(pads_data.draw(st.integers(0, k - 1)) for _ in range(2)) for k in spec.config["pool_size"]]
    want = fast.kernel_for(spec.class_name, spec, reference=True)(np.pad(x, [(0, 0), *pads, (0, 0)]))
    padded = (
        fast_pooling.padded_max_pool2d
        if spec.class_name == "MaxPooling2D"
        else fast_pooling.padded_avg_pool2d
    )
    saved = os.environ.get(jit.ENV)
    os.environ[jit.ENV] = "1" if compiled else "0"
    try:
        with _blocking(data):
            got = padded(spec, pads)(_layout(data, x))
    finally:
        if saved is None:
            os.environ.pop(jit.ENV, None)
        else:
            os.environ[jit.ENV] = saved
    assert got.shape == want.shape and got.dtype == want.dtype
    if spec.class_name == "MaxPooling2D":
        np.testing.assert_array_equal(got, want)
    else:  # the same cells summed in another order
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(x).max())))


@pytest.mark.parametrize("fmt", ["channels_last", "channels_first"])
@pytest.mark.parametrize("reference_only", [True, False], ids=["reference", "plan"])
def test_same_average_pooling_leaves_padding_out_of_the_divisor(fmt, reference_only):
    """Keras (TensorFlow's AvgPool): with ``same`` padding a border window averages only the cells
    inside the input; a constant input stays constant, where counting the padding would shrink it."""
    spec = KernelSpec(
        "p", "AveragePooling2D", {"pool_size": 3, "strides": 2, "padding": "same", "data_format": fmt}
    )
    x = np.full((2, 4, 7, 5), 3.0, np.float32)
    y = fast.kernel_for("AveragePooling2D", spec, reference=reference_only)(x)
    assert y.shape == ((2, 4, 4, 3) if fmt == "channels_first" else (2, 2, 4, 5))
    np.testing.assert_array_equal(y, 3.0)


def test_reference_kernels_import_no_speed_machinery():
    """The reference kernels stay plain: nothing in modelgraph/runner/kernels/ imports the fast
    kernels, the thread pool, the row-wise passes or the heap tuning."""
    import ast
    from pathlib import Path

    import modelgraph.runner.kernels as kernels

    speed = ("modelgraph.runner.fast", "modelgraph.runner.parallel", "modelgraph.runner.rowwise")
    speed += ("modelgraph.runner.heap",)
    found = []
    for path in sorted(Path(kernels.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            found += [(path.name, n) for n in names if n.startswith(speed)]
    assert not found
