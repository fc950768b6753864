"""The layer catalogue: complete entries, one key per layer, and a class added in one module."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from modelgraph import catalogue
from modelgraph.catalogue.spec import LayerSpec, missing_concerns, support, zero_macs
from modelgraph.graph import Layer
from modelgraph.loading import load
from modelgraph.runner.interpreter import Runner
from modelgraph.shapes import infer_shapes
from modelgraph.stats import model_totals

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def _golden(stem: str) -> tuple[dict, dict[str, np.ndarray]]:
    meta = json.loads((SAMPLES / "goldens" / f"{stem}.json").read_text())
    with np.load(SAMPLES / "goldens" / f"{stem}.npz", allow_pickle=False) as data:
        return meta, {k: data[k] for k in data.files}


# --- completeness ---------------------------------------------------------------------------------


def test_every_entry_has_each_concern_or_says_why_not() -> None:
    half = {spec.key: missing_concerns(spec) for spec in catalogue.all_specs() if missing_concerns(spec)}
    assert half == {}


def test_a_half_filled_entry_is_reported() -> None:
    """An entry that neither implements nor explains a concern is what the test above fails on."""
    dense = catalogue.spec_for("Dense", "shape", "kernel", "macs", "weight_shapes")
    assert dense is not None and missing_concerns(dense) == []
    half = replace(dense, kernel=None, macs=None)
    assert missing_concerns(half) == ["macs", "kernel"]
    assert missing_concerns(LayerSpec("Made-up", family="core")) == [
        "shape",
        "weight_shapes",
        "macs",
        "kernel",
        "onnx",
    ]
    assert missing_concerns(replace(dense, onnx=None)) == ["onnx"]


def test_a_reason_is_reported_as_the_support_value() -> None:
    assert support(catalogue.spec_for("op:Take", "shape"))["shapes"] == "no static shape rule yet"
    assert support(catalogue.spec_for("Conv2D", "kernel"))["run"] is True


def test_an_implementation_for_an_undeclared_key_is_refused() -> None:
    with pytest.raises(RuntimeError, match="no entry"):
        catalogue.attach("NotAKerasLayer", "kernel", zero_macs)


def test_an_implementation_where_an_entry_says_there_is_none_is_refused() -> None:
    with pytest.raises(RuntimeError, match="already has kernel"):
        catalogue.attach("op:Amax", "kernel", zero_macs)  # its entry says "no NumPy kernel yet"


def test_a_second_different_implementation_is_refused() -> None:
    catalogue.spec_for("Dense", "shape")
    with pytest.raises(RuntimeError, match="already has shape"):
        catalogue.attach("Dense", "shape", zero_macs)


def test_every_key_and_alias_is_declared_once() -> None:
    names = list(catalogue.names())
    assert len(names) == len(set(names))


# --- one key per layer ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("class_name", "kind", "config", "key"),
    [
        ("Dense", "layer", {}, "Dense"),
        ("Add", "op", {}, "op:Add"),
        ("TFOpLambda", "layer", {"function": "math.multiply"}, "tf:math.multiply"),
        ("SlicingOpLambda", "layer", {"function": "__operators__.getitem"}, "tf:__operators__.getitem"),
        ("Convolution2D", "layer", {}, "Conv2D"),
        ("Deconv2D", "layer", {}, "Conv2DTranspose"),
        ("MaxPool2D", "layer", {}, "MaxPooling2D"),
        ("NotInTheCatalogue", "layer", {}, "NotInTheCatalogue"),
    ],
)
def test_key_of(class_name: str, kind: str, config: dict, key: str) -> None:
    assert catalogue.key_of(class_name, kind, config) == key
    assert Layer("x", class_name, kind, config).key == key  # type: ignore[arg-type]


def test_an_alias_shares_its_class_entry() -> None:
    assert catalogue.spec_for("Convolution2D") is catalogue.spec_for("Conv2D")


def test_a_keras3_h5_cast_is_one_op_for_shapes_and_the_runner() -> None:
    """Keras 3's legacy .h5 drops `module`, and Cast's config has a `dtype` like a layer's: shape
    inference and the runner must both see the op ``op:Cast`` (the runner used to refuse ``Cast``)."""
    meta, golden = _golden("k3_cast_ops")
    graph = load(SAMPLES / meta["files"]["legacy_h5"])
    casts = [layer for layer in graph.layers if layer.class_name == "Cast"]
    assert [(layer.kind, layer.key) for layer in casts] == [("op", "op:Cast")] * 2
    result = infer_shapes(graph)
    assert not result.problems
    assert result.outputs[("cast", 0)] == [(None, 6)]
    outputs = Runner(graph).run({"x": golden["input/x"]})
    np.testing.assert_allclose(next(iter(outputs.values())), golden["output/0"], rtol=1e-5, atol=1e-6)


# --- a class added by one catalogue module --------------------------------------------------------


@pytest.mark.parametrize("container", ["keras", "legacy_h5"])
def test_rms_normalization_runs_to_keras_numbers(container: str) -> None:
    """RMSNormalization is described in full in catalogue/normalization.py (shape, weights, kernel)."""
    meta, golden = _golden("k3_rms_norm")
    graph = load(SAMPLES / meta["files"][container])
    outputs = Runner(graph).run({"x": golden["input/x"]}, taps=["rms_last"])
    np.testing.assert_allclose(
        outputs["tap/rms_last"], golden["intermediate/rms_last/0/0"], rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(outputs["rms_two_axes"], golden["output/0"], rtol=1e-5, atol=1e-6)


def test_rms_normalization_params_from_the_config_alone() -> None:
    meta, _ = _golden("k3_rms_norm")
    totals = model_totals(load(SAMPLES / meta["files"]["json"]))
    assert totals.total_params == meta["params"]["total"] == 8 * 8 + 8 + 8 + 5 * 8


# --- config upgrades ------------------------------------------------------------------------------


def test_gru_reset_after_default_follows_the_keras_version() -> None:
    gru = catalogue.spec_for("GRU").config
    assert gru.read({"units": 3}, (2, 2, 4))["reset_after"] is False  # standalone Keras 2.2
    assert gru.read({"units": 3}, (2, 15, 0))["reset_after"] is True
    assert gru.read({"units": 3, "reset_after": False}, (3, 15, 1))["reset_after"] is False


def test_keras1_and_keras2_only_rnn_keys_upgrade() -> None:
    lstm = catalogue.spec_for("LSTM").config
    old = lstm.read({"output_dim": 4, "inner_activation": "hard_sigmoid", "implementation": 2}, (1, 2, 2))
    assert old["units"] == 4 and old["recurrent_activation"] == "hard_sigmoid"
    assert "implementation" not in old and "output_dim" not in old
    assert "time_major" not in lstm.read({"units": 4, "time_major": False}, (2, 15, 0))
    assert lstm.read({"units": 4, "time_major": True}, (2, 15, 0))["time_major"] is True


def test_diff_reads_an_omitted_key_as_its_default() -> None:
    """What `diff` needs: a config that omits a key equals one that writes Keras's default."""
    from modelgraph.diff_align import ConfigContext, normalize_config

    k3, k2 = ConfigContext(keras_version="3.15.1"), ConfigContext(keras_version="2.15.0")
    terse = Layer("rnn", "LSTM", "layer", {"units": 4})
    full = Layer("rnn", "LSTM", "layer", {"units": 4, "return_sequences": False, "implementation": 2})
    assert normalize_config(terse, k3) == normalize_config(full, k2)
    other = Layer("rnn", "LSTM", "layer", {"units": 4, "return_sequences": True})
    assert normalize_config(terse, k3) != normalize_config(other, k3)
