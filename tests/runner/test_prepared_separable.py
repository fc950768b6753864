"""A ReLU and zero padding merged into the SeparableConv2D reading them (``modelgraph/PreparedSeparable``,
passes/separable_input.py): the kernel against activation, padding and the reference separable conv
one after the other, the caller's input left as it was, and the pass on Keras's NASNetMobile."""

from __future__ import annotations

import numpy as np
import pytest

from modelgraph.loading import load
from modelgraph.runner import fast
from modelgraph.runner.fast import blocks
from modelgraph.runner.fast.fused import PREPARED_SEPARABLE, ZERO_PADDED
from modelgraph.runner.fusion import fuse
from modelgraph.runner.registry import KernelSpec, get_kernel


@pytest.fixture(params=["real", "tiny"])
def slabs(request, monkeypatch):
    """Real block sizes, or blocks of a row or two (every slab a view or a copy of a few rows)."""
    if request.param == "tiny":
        monkeypatch.setattr(blocks, "DW_BLOCK_BYTES", 1 << 7)
    return request.param


@pytest.mark.parametrize(
    ("shape", "kernel", "strides", "dilation", "padding", "pads", "activation"),
    [
        ((1, 9, 8, 5), 3, 1, 1, "same", None, "relu"),  # NASNet's normal cells
        ((2, 11, 10, 6), 5, 2, 1, "valid", [[2, 2], [2, 2]], "relu"),  # reduction cells: pad, stride 2
        ((1, 8, 8, 4), 3, 1, 1, "valid", None, "relu"),  # no padding: the slabs are views
        ((2, 7, 9, 3), 3, 1, 1, "same", [[1, 0], [0, 1]], None),  # padding only
        ((1, 10, 10, 4), 3, 1, 2, "same", None, "relu6"),  # dilated: activated up front
    ],
)
def test_prepared_separable_equals_activation_padding_then_conv(
    shape, kernel, strides, dilation, padding, pads, activation, slabs
):
    rng = np.random.default_rng(sum(shape) + kernel)
    channels, filters = shape[-1], 7
    weights = {
        "depthwise_kernel": rng.standard_normal((kernel, kernel, channels, 1)).astype(np.float32),
        "pointwise_kernel": rng.standard_normal((1, 1, channels, filters)).astype(np.float32),
        "bias": rng.uniform(-1, 1, filters).astype(np.float32),
    }
    config = {
        "filters": filters,
        "kernel_size": [kernel, kernel],
        "strides": [strides, strides],
        "dilation_rate": [dilation, dilation],
        "padding": padding,
        "activation": "linear",
        "use_bias": True,
    }
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    original = x.copy()
    spec = KernelSpec(
        name="sep",
        class_name=PREPARED_SEPARABLE,
        config={"activation": activation, "pads": pads, "layer": config},
        weights={f"layer/{k}": v for k, v in weights.items()},
    )
    actual = get_kernel(PREPARED_SEPARABLE)(spec)(x)
    np.testing.assert_array_equal(x, original)  # the caller's input is not activated in place
    prepared = x if activation is None else np.clip(x, 0, 6 if activation == "relu6" else None)
    if pads is not None:
        prepared = np.pad(prepared, [(0, 0), *map(tuple, pads), (0, 0)])
    plain = KernelSpec(name="sep", class_name="SeparableConv2D", config=config, weights=weights)
    expected = fast.kernel_for("SeparableConv2D", plain, reference=True)(prepared)
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4)
    # The check can fail: the conv of the input without its activation would not pass.
    if activation is not None and pads is None:
        unactivated = fast.kernel_for("SeparableConv2D", plain, reference=True)(x)
        assert not np.allclose(actual, unactivated, rtol=1e-4, atol=1e-4)


def test_nasnet_relus_and_paddings_merge_into_the_separable_convs(rebuilt_apps) -> None:
    graph = load(rebuilt_apps("apps/k3_nasnetmobile/manifest.json"))
    fused = fuse(graph)
    merged = [lyr for lyr in fused.layers if lyr.class_name == PREPARED_SEPARABLE]
    # Every branch's first separable conv (after its ReLU, and in reduction cells its padding).
    assert len(merged) > 40
    assert {lyr.config["activation"] for lyr in merged} == {"relu"}
    assert any(lyr.config["pads"] is not None for lyr in merged)
    separables = {lyr.name for lyr in graph.layers if lyr.class_name == "SeparableConv2D"}
    feeding = {node.inputs[0].layer for node in fused.nodes if node.layer in separables and node.inputs}
    assert not {
        fused.layer(name).class_name for name in feeding if name in {lyr.name for lyr in fused.layers}
    } & {"ZeroPadding2D"}


def test_nasnet_paddings_shared_by_pools_merge_into_every_pool(rebuilt_apps) -> None:
    """Each reduction cell pads once for two max pools and an average pool: every pool reads the
    padding itself and the padded tensor is not made (the two max pools are twins, one kept by
    shared_layers). The adjusting blocks' padding, read by a Cropping2D (which cannot take it),
    stays a layer of its own."""
    graph = load(rebuilt_apps("apps/k3_nasnetmobile/manifest.json"))
    fused = fuse(graph)
    shared = {
        node.inputs[0].layer
        for node in graph.nodes
        if graph.layer(node.layer).class_name in ("MaxPooling2D", "AveragePooling2D")
        and node.inputs
        and graph.layer(node.inputs[0].layer).class_name == "ZeroPadding2D"
    }
    assert len(shared) == 4
    left = {lyr.name for lyr in fused.layers if lyr.class_name == "ZeroPadding2D"}
    assert not shared & left
    assert all(graph.layer(name).class_name == "ZeroPadding2D" for name in left) and len(left) == 4
    merged = [lyr.config["class_name"] for lyr in fused.layers if lyr.class_name == ZERO_PADDED]
    assert merged.count("MaxPooling2D") == 4 and merged.count("AveragePooling2D") == 4
