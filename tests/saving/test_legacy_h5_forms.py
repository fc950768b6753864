"""The forms the legacy ``.h5`` writer chooses so tf_keras 2 and Keras 3 read one file alike
(docs/writing.md, "Legacy .h5"); that both loaders then load and run each sample to Keras's
numbers is recorded in samples/convert/verified.json and replayed by tests/test_convert.py."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

import modelgraph
from modelgraph.errors import NotConvertibleError
from modelgraph.saving.legacy_h5_ops import op_as_layer

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"


def _written(source: Path, tmp_path: Path) -> tuple[dict, h5py.File]:
    out = tmp_path / "out.h5"
    modelgraph.save(modelgraph.load(source), out)
    f = h5py.File(out, "r")
    return json.loads(f.attrs["model_config"]), f


def _layers(config: dict) -> dict[str, dict]:
    return {record["name"]: record for record in config["config"]["layers"]}


def test_a_nested_sequential_is_written_without_its_input_layer_and_counted_from_0(tmp_path):
    config, _ = _written(SAMPLES / "convert" / "h5_forms.h5", tmp_path)
    layers = _layers(config)
    nested = layers["seq_in"]["config"]["layers"]
    assert [r["class_name"] for r in nested] == ["Dense"]
    # its two calls feed other layers: node 0 and node 1 in both loaders
    assert layers["ln_two_axes"]["inbound_nodes"] == [[["seq_in", 0, 0, {}]]]
    assert layers["tf.math.multiply"]["inbound_nodes"] == [
        [["tf.__operators__.add", 0, 0, {}], ["seq_in", 1, 0, {}]]
    ]


def test_a_multi_axis_layer_gets_a_module_so_keras3_keeps_its_axis(tmp_path):
    config, _ = _written(SAMPLES / "convert" / "h5_forms.h5", tmp_path)
    layers = _layers(config)
    for name in ("ln_two_axes", "softmax_two_axes"):
        assert layers[name]["module"] == "keras.layers"
        assert layers[name]["config"]["axis"] == [1, 2]
    assert "module" not in layers["d"]


def test_ops_become_the_layers_both_versions_have(tmp_path):
    config, _ = _written(SAMPLES / "convert" / "h5_forms.h5", tmp_path)
    layers = _layers(config)
    classes = {name: layers[name]["class_name"] for name in layers if name.startswith("tf.")}
    assert classes == {
        "tf.__operators__.add": "Add",
        "tf.math.multiply": "Multiply",
        "tf.math.subtract": "Subtract",
        "tf.math.minimum": "Minimum",
        "tf.math.maximum": "Maximum",
        "tf.math.multiply_1": "Rescaling",
        "tf.__operators__.add_1": "Rescaling",
    }
    rescalings = [layers[name]["config"] for name in ("tf.math.multiply_1", "tf.__operators__.add_1")]
    assert [(c["scale"], c["offset"]) for c in rescalings] == [(0.25, 0.0), (1.0, 3.0)]


def _op(name: str, *args) -> dict:
    return {"class_name": name, "name": "op", "inbound_nodes": [{"args": list(args), "kwargs": {}}]}


def _tensor(shape=(None, 4), dtype="float32") -> dict:
    return {
        "class_name": "__keras_tensor__",
        "config": {"shape": list(shape), "dtype": dtype, "keras_history": ["x", 0, 0]},
    }


@pytest.mark.parametrize(
    ("op", "args", "scale", "offset"),
    [
        ("Add", (_tensor(), 3.0), 1.0, 3.0),
        ("Add", (2, _tensor()), 1.0, 2.0),
        ("Subtract", (_tensor(), 1.5), 1.0, -1.5),
        ("Subtract", (1.5, _tensor()), -1.0, 1.5),
        ("Multiply", (0.5, _tensor()), 0.5, 0.0),
    ],
)
def test_a_tensor_and_a_number_make_an_exact_rescaling(op, args, scale, offset):
    class_name, config, node = op_as_layer(_op(op, *args))
    assert class_name == "Rescaling"
    assert (config["scale"], config["offset"]) == (scale, offset)
    assert node["args"] == [_tensor()]


@pytest.mark.parametrize(
    "entry",
    [
        _op("Divide", _tensor(), 2.0),  # x / c is not x * (1 / c) bit for bit
        _op("Add", _tensor((None, 4)), _tensor((None, 1))),  # broadcasting
        _op("Add", _tensor(dtype="int32"), _tensor(dtype="int32")),
        _op("Multiply", _tensor(dtype="int32"), 2),
        _op("Add", _tensor(), True),
    ],
)
def test_ops_without_an_exact_layer_are_refused(entry):
    assert isinstance(op_as_layer(entry), str)


def test_bfloat16_weights_are_written_as_their_float32_values(tmp_path):
    source = modelgraph.load(SAMPLES / "k2" / "dtypes.h5")
    _, f = _written(SAMPLES / "k2" / "dtypes.h5", tmp_path)
    kernel = f["model_weights/d_bf16/d_bf16/kernel:0"]
    assert kernel.dtype == np.float32
    want = next(w for w in source.layer("d_bf16").weights if w.name == "kernel")
    assert want.dtype == "bfloat16"
    np.testing.assert_array_equal(kernel[()], want.read())


@pytest.mark.parametrize(
    ("source", "layers", "reason"),
    [
        (
            "k3/rms_norm.keras",
            ["rms_last", "rms_two_axes"],
            "a Keras 3 layer class that tf_keras 2 does not have",
        ),
        ("k3/app_mobilenetv3small.keras", ["activation", "activation_1"], "activation='hard_silu'"),
        # Keras 3 ops drop the Embedding's mask; Keras 3 would carry it on through Rescaling/Add
        ("convert/k3_masked_op.keras", ["multiply", "add"], "would carry on the implicit mask"),
    ],
)
def test_what_tf_keras_does_not_have_is_refused_before_writing(source, layers, reason, tmp_path):
    with pytest.raises(NotConvertibleError) as error:
        modelgraph.save(modelgraph.load(SAMPLES / source), tmp_path / "out.h5")
    message = str(error.value)
    for name in layers:
        assert f"'{name}' (" in message
    assert reason in message
    assert not list(tmp_path.iterdir())


def test_the_same_model_gives_the_same_h5_bytes(tmp_path):
    source = SAMPLES / "convert" / "h5_forms.h5"
    first = modelgraph.save(modelgraph.load(source), tmp_path / "a.h5")
    second = modelgraph.save(modelgraph.load(source), tmp_path / "b.h5")
    assert first.sha256 == second.sha256
    assert (tmp_path / "a.h5").read_bytes() == (tmp_path / "b.h5").read_bytes()
