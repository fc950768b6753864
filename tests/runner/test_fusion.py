"""Conv/Dense -> BatchNormalization -> ReLU folding: where it applies, where it must not, and numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from modelgraph.loading import load
from modelgraph.runner.fusion import fuse
from modelgraph.runner.interpreter import Runner
from modelgraph.runner.passes.fold_batchnorm import fold_batchnorms

SAMPLES = Path(__file__).resolve().parent.parent.parent / "samples"


def test_mobilenetv2_folds_every_conv_bn_relu6() -> None:
    graph = load(SAMPLES / "k3" / "app_mobilenetv2.keras")
    fused = fuse(graph)
    classes = [lyr.class_name for lyr in fused.layers]
    assert graph.layer("Conv1_relu").class_name == "ReLU"
    assert "BatchNormalization" not in classes and "ReLU" not in classes
    conv = fused.layer("Conv1")
    assert conv.config["activation"] == "relu6" and conv.config["use_bias"] is True
    assert {w.name for w in conv.weights} == {"kernel", "bias"}
    # The loaded graph is untouched.
    assert graph.layer("Conv1").config.get("activation") == "linear"


def test_fused_and_plain_plans_agree_and_intermediates_still_work() -> None:
    graph = load(SAMPLES / "k3" / "app_mobilenetv2.keras")
    x = np.random.default_rng(0).standard_normal(
        (2, *graph.layer(graph.inputs[0].layer).config["batch_shape"][1:])
    )
    runner = Runner(graph)
    plain = Runner(graph, fuse=False)
    assert len(runner.steps) < len(plain.steps)
    a = runner.run(x.astype(np.float32))
    b = plain.run(x.astype(np.float32))
    for key in b:
        np.testing.assert_allclose(a[key], b[key], rtol=1e-4, atol=1e-4)
    tapped = runner.run(x.astype(np.float32), taps=["bn_Conv1"])
    assert any(k.startswith("tap/bn_Conv1") for k in tapped)
    assert "bn_Conv1" in runner.layer_paths()


def test_observable_intermediates_are_not_fused() -> None:
    graph = load(SAMPLES / "k3" / "cnn.keras")
    fused = fuse(graph)
    remaining = {lyr.name for lyr in fused.layers}
    for lyr in graph.layers:
        if lyr.class_name == "BatchNormalization" and lyr.name not in remaining:
            # Only a BatchNormalization with a single reader and no model output may go.
            producer = graph.node(lyr.name, 0).inputs[0].layer
            readers = [n for n in graph.nodes if any(r.layer == producer for r in n.inputs)]
            assert len(readers) == 1
            assert all(ref.layer != lyr.name for ref in graph.outputs)


def test_fusion_inside_a_nested_model_still_serves_taps() -> None:
    import json
    import zipfile

    from modelgraph.loading.normalize import build_graph

    # Wrap MobileNetV2's config as a nested model of an outer Functional.
    with zipfile.ZipFile(SAMPLES / "k3" / "app_mobilenetv2.keras") as z:
        inner = json.loads(z.read("config.json"))
    inner["name"] = inner["config"]["name"]
    shape = inner["config"]["layers"][0]["config"]["batch_shape"]
    kt = {
        "class_name": "__keras_tensor__",
        "config": {"shape": shape, "dtype": "float32", "keras_history": ["x", 0, 0]},
    }
    inner["inbound_nodes"] = [{"args": [kt], "kwargs": {}}]
    outer = {
        "class_name": "Functional",
        "config": {
            "name": "outer",
            "layers": [
                {
                    "module": "keras.layers",
                    "class_name": "InputLayer",
                    "name": "x",
                    "config": {"name": "x", "batch_shape": shape},
                    "inbound_nodes": [],
                },
                inner,
            ],
            "input_layers": [["x", 0, 0]],
            "output_layers": [[inner["name"], 1, 0]],
        },
    }
    from modelgraph.loading.weights import attach

    original = load(SAMPLES / "k3" / "app_mobilenetv2.keras")
    weights = {(inner["name"], *path): lyr.weights for path, lyr in original.walk()}
    graph = attach(build_graph(outer, keras_version="3.15.1"), weights)
    runner = Runner(graph)
    assert runner._fused  # every fusion happened inside the nested model
    assert f"{inner['name']}/bn_Conv1" in runner.layer_paths()


def test_efficientnet_folds_swish_into_the_convs(rebuilt_apps) -> None:
    # Keras's EfficientNetB0: Conv -> BatchNormalization -> Activation("swish") after every conv.
    graph = load(rebuilt_apps("apps/k3_efficientnetb0/manifest.json"))
    fused = fuse(graph)
    assert graph.layer("stem_activation").class_name == "Activation"
    assert "stem_activation" not in {lyr.name for lyr in fused.layers}
    name = graph.layer("block1a_activation").config["activation"]
    assert name in ("swish", "silu")
    assert fused.layer("block1a_dwconv").config["activation"] == name
    # A zero-padded (strided) conv keeps the folded layer in its config.
    assert fused.layer("stem_conv").config["layer"]["activation"] == name
    assert [lyr.name for lyr in fused.layers if lyr.class_name == "Activation"] == []
    x = np.random.default_rng(0).uniform(0, 255, (2, 64, 64, 3)).astype(np.float32)
    fused_out, plain_out = Runner(graph).run(x), Runner(graph, fuse=False).run(x)
    for key, value in plain_out.items():
        np.testing.assert_allclose(fused_out[key], value, rtol=1e-5, atol=1e-5)


def test_nasnet_folds_batchnorm_into_its_separable_convs(rebuilt_apps) -> None:
    # NASNet's cells: ReLU -> SeparableConv2D -> BatchNormalization, dozens of times.
    graph = load(rebuilt_apps("apps/k3_nasnetmobile/manifest.json"))
    fused = fuse(graph)
    separables = {lyr.name for lyr in graph.layers if lyr.class_name == "SeparableConv2D"}
    readers = {node.inputs[0].layer: node.layer for node in graph.nodes if node.inputs}
    folded = {s for s in separables if graph.layer(readers[s]).class_name == "BatchNormalization"}
    assert len(folded) > 30
    remaining = {lyr.name for lyr in fused.layers}
    assert not {readers[s] for s in folded} & remaining
    # The folded weights, before a later pass wraps the conv (separable_input: its ReLU and padding).
    conv = fuse(graph, (fold_batchnorms,)).layer(sorted(folded)[0])
    assert {w.name for w in conv.weights} == {"depthwise_kernel", "pointwise_kernel", "bias"}
    assert (
        conv.weight("depthwise_kernel").read().tolist()
        == graph.layer(conv.name).weight("depthwise_kernel").read().tolist()
    )
    x = np.random.default_rng(0).uniform(-1, 1, (2, 64, 64, 3)).astype(np.float32)
    fused_out, plain_out = Runner(graph).run(x), Runner(graph, fuse=False).run(x)
    for key, value in plain_out.items():
        np.testing.assert_allclose(fused_out[key], value, rtol=1e-5, atol=1e-5)


def test_keras1_convolution_folds_batchnorm_but_not_a_sample_wise_mode() -> None:
    """A Keras 1 ``Convolution2D`` is the Conv2D entry (an alias): BatchNormalization and ReLU fold
    into it as into Conv2D, and the fused run equals the plain one; a BatchNormalization in one of
    Keras 1's sample-wise modes (kept in its config, refused by its kernel) is never folded away."""
    from dataclasses import replace
    from types import MappingProxyType

    graph = load(SAMPLES / "k1" / "k1_seq_cnn.h5")
    assert graph.layer("conv1").class_name == "Convolution2D"
    names = {lyr.name for lyr in fuse(graph).layers}
    assert "bn1" not in names and "relu1" not in names
    shape = graph.layer("conv1_input").config["batch_shape"][1:]
    x = np.random.default_rng(1).uniform(-1, 1, (2, *shape)).astype(np.float32)
    fused, plain = Runner(graph).run(x), Runner(graph, fuse=False).run(x)
    for key, value in plain.items():
        np.testing.assert_allclose(fused[key], value, rtol=1e-5, atol=1e-6)
    bn = graph.layer("bn1")
    moded = replace(bn, config=MappingProxyType({**bn.config, "mode": 2}))
    graph = replace(graph, layers=tuple(moded if lyr.name == "bn1" else lyr for lyr in graph.layers))
    assert "bn1" in {lyr.name for lyr in fuse(graph).layers}
