"""A squeeze-and-excitation scale merged into the 1x1 conv reading the product
(``modelgraph/ScaledConv``, passes/squeeze_excite.py and fast/scaled.py): the kernel against
Multiply-then-conv in float64, its fallback for other shapes, and the pass on Keras's EfficientNetB0."""

from __future__ import annotations

import numpy as np
import pytest

from modelgraph.loading import load
from modelgraph.runner.fast.fused import SCALED_CONV
from modelgraph.runner.fusion import fuse
from modelgraph.runner.interpreter import Runner
from modelgraph.runner.registry import KernelSpec, get_kernel

from .test_kernels_conv_perf_paths import ref_conv


def _kernel(rng, cin, cout, bias, act):
    weights = {"conv/kernel": rng.standard_normal((1, 1, cin, cout)).astype(np.float32) / np.sqrt(cin)}
    if bias:
        weights["conv/bias"] = rng.uniform(-1, 1, cout).astype(np.float32)
    config = {"conv": {"filters": cout, "kernel_size": [1, 1], "activation": act, "use_bias": bias}}
    spec = KernelSpec(name="project", class_name=SCALED_CONV, config=config, weights=weights)
    return get_kernel(SCALED_CONV)(spec), weights


@pytest.mark.parametrize(
    ("shape", "scale_shape", "cout", "bias", "act", "scale_first"),
    [
        ((1, 7, 9, 16), (1, 1, 1, 16), 8, True, "linear", False),  # EfficientNet's batch 1
        ((3, 5, 4, 12), (3, 1, 1, 12), 20, True, "relu", True),  # per image, scale given first
        ((2, 6, 6, 8), (2, 1, 1, 8), 5, False, "linear", False),
        ((2, 2, 3, 8), (2, 1, 1, 8), 7, True, "linear", False),  # fewer pixels than filters
        ((2, 6, 6, 8), (1, 1, 1, 8), 5, True, "linear", False),  # one scale for the batch: fallback
        ((2, 3, 4, 6), (2, 3, 4, 6), 4, True, "relu", False),  # a full product: fallback
        ((2, 3, 4, 6), (2, 1, 4, 6), 4, True, "linear", True),  # broadcast over rows only: fallback
    ],
)
def test_scaled_conv_equals_multiply_then_conv(shape, scale_shape, cout, bias, act, scale_first):
    rng = np.random.default_rng(sum(shape) + sum(scale_shape) + cout)
    x = rng.standard_normal(shape).astype(np.float32)
    s = rng.uniform(0, 1, scale_shape).astype(np.float32)
    run, w = _kernel(rng, shape[-1], cout, bias, act)
    actual = run(s, x) if scale_first else run(x, s)
    product = x.astype(np.float64) * s
    expected = ref_conv(product, w["conv/kernel"], w.get("conv/bias"), (1, 1), (1, 1), "valid", act)
    assert actual.dtype == np.float32 and actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)
    # The check can fail: the scale of another image would not pass.
    if scale_shape[0] > 1:
        swapped = ref_conv(
            x.astype(np.float64) * s[::-1], w["conv/kernel"], w.get("conv/bias"), (1, 1), (1, 1), "valid", act
        )
        assert not np.allclose(actual, swapped, rtol=1e-5, atol=1e-5)


def test_efficientnet_excitations_merge_into_the_projections(rebuilt_apps) -> None:
    graph = load(rebuilt_apps("apps/k3_efficientnetb0/manifest.json"))
    fused = fuse(graph)
    multiplies = [lyr.name for lyr in graph.layers if lyr.class_name == "Multiply"]
    assert len(multiplies) == 16
    assert not {lyr.class_name for lyr in fused.layers} & {"Multiply"}
    merged = [lyr.name for lyr in fused.layers if lyr.class_name == SCALED_CONV]
    assert sorted(merged) == sorted(name.replace("se_excite", "project_conv") for name in multiplies)
    x = np.random.default_rng(3).uniform(0, 255, (2, 64, 64, 3)).astype(np.float32)
    fused_out, plain_out = Runner(graph).run(x), Runner(graph, fuse=False).run(x)
    for key, value in plain_out.items():
        np.testing.assert_allclose(fused_out[key], value, rtol=1e-5, atol=1e-6)
