"""Genuine Keras 1 files (Keras 1.2.2 on Theano, ``samples/gen_k1.py``): read as Keras 2 reads them
and run to Keras 1's own outputs."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np
import pytest

import modelgraph
from modelgraph.loading.keras1 import KERAS1_BACKEND

from ._cli import run_cli

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
GOLDENS = sorted((SAMPLES / "k1").glob("*.golden.json"))
CONV_MODELS = {"k1_seq_cnn", "k1_th_cnn"}


def _golden(path: Path) -> dict:
    return json.loads(path.read_text())


def _inputs(golden: dict) -> list[np.ndarray]:
    return [np.asarray(v["data"], dtype=v["dtype"]) for v in golden["inputs"].values()]


def _run(golden: dict, backend: str) -> list[np.ndarray]:
    token = KERAS1_BACKEND.set(backend)
    try:
        graph = modelgraph.load(SAMPLES / golden["file"])
    finally:
        KERAS1_BACKEND.reset(token)
    outputs = modelgraph.Runner(graph).run(*_inputs(golden))
    if isinstance(outputs, dict):
        return [np.asarray(v) for v in outputs.values()]
    return [np.asarray(o) for o in (outputs if isinstance(outputs, list | tuple) else [outputs])]


def test_there_are_keras1_samples():
    assert len(GOLDENS) == 5


@pytest.mark.parametrize("path", GOLDENS, ids=[p.name.split(".")[0] for p in GOLDENS])
def test_keras1_file_loads_with_keras1_depths_and_params(path):
    golden = _golden(path)
    graph = modelgraph.load(SAMPLES / golden["file"])
    assert graph.keras_version == golden["keras_version"] == "1.2.2"
    depths = {layer.name: layer.depth for layer in graph.layers}
    # a Sequential's implicit input is named by the loader, not by the file
    expected = {k: v for k, v in golden["layer_depths"].items() if k in depths or not k.endswith("_input_1")}
    assert {k: depths.get(k) for k in expected} == expected
    assert graph.param_count == golden["params"]


@pytest.mark.parametrize("path", GOLDENS, ids=[p.name.split(".")[0] for p in GOLDENS])
def test_keras1_file_runs_to_keras1_outputs(path):
    """Theano made these files, so the run reads them as Theano ran them."""
    golden = _golden(path)
    outputs = _run(golden, "theano")
    assert len(outputs) == len(golden["outputs"])
    for got, want in zip(outputs, golden["outputs"], strict=True):
        assert list(got.shape) == want["shape"]
        np.testing.assert_allclose(got.ravel(), want["data"], atol=2e-6, rtol=0)


@pytest.mark.parametrize("path", GOLDENS, ids=[p.name.split(".")[0] for p in GOLDENS])
def test_the_backend_matters_only_for_convolutions(path):
    """By default a Keras 1 file reads as Keras 2 loads it (kernels as stored): the same numbers for
    models without convolutions, Theano's reversed kernels give other numbers with them."""
    golden = _golden(path)
    same = all(
        np.allclose(a.ravel(), b["data"], atol=2e-6)
        for a, b in zip(_run(golden, "tensorflow"), golden["outputs"], strict=True)
    )
    assert same == (path.name.split(".")[0] not in CONV_MODELS)


def test_keras1_configs_and_weights_read_as_keras2():
    graph = modelgraph.load(SAMPLES / "k1" / "k1_rnn.h5")
    lstm = graph.layer("lstm_seq")
    assert lstm.config["units"] == 5 and lstm.config["recurrent_activation"] == "hard_sigmoid"
    assert "output_dim" not in lstm.config and "consume_less" not in lstm.config
    assert [(w.name, w.shape) for w in lstm.weights] == [
        ("kernel", (4, 20)),
        ("recurrent_kernel", (5, 20)),
        ("bias", (20,)),
    ]
    assert graph.layer("gru_last").config["reset_after"] is False  # Keras 1 GRUs reset before the product
    assert graph.layer("cat").class_name == "Concatenate"  # Keras 1's Merge(mode="concat")
    assert graph.layer("emb").weights[0].name == "embeddings"
    th = modelgraph.load(SAMPLES / "k1" / "k1_th_cnn.h5").layer("conv_th")
    assert th.config["data_format"] == "channels_first" and th.config["kernel_size"] == [3, 3]
    assert th.weights[0].shape == (3, 3, 3, 4)  # stored filters-first (4, 3, 3, 3)


def test_keras1_lstm_gates_are_joined_in_keras2_order():
    """Keras 1 stored i, c, f, o; Keras 2 joins i, f, c, o."""
    import h5py

    graph = modelgraph.load(SAMPLES / "k1" / "k1_rnn.h5")
    kernel = graph.layer("lstm_seq").weights[0].read()
    with h5py.File(SAMPLES / "k1" / "k1_rnn.h5", "r", locking=False) as f:
        group = f["model_weights"]["lstm_seq"]
        parts = [group[f"lstm_seq_W_{g}"][()] for g in "ifco"]
    np.testing.assert_array_equal(kernel, np.concatenate(parts, axis=-1))


def test_cli_keras1_backend_option(tmp_path):
    golden = _golden(SAMPLES / "k1" / "k1_seq_cnn.golden.json")
    np.save(tmp_path / "x.npy", _inputs(golden)[0])
    np.save(
        tmp_path / "y.npy",
        np.asarray(golden["outputs"][0]["data"], np.float32).reshape(golden["outputs"][0]["shape"]),
    )
    model = SAMPLES / "k1" / "k1_seq_cnn.h5"
    theano = run_cli(
        "--keras1-backend",
        "theano",
        "run",
        model,
        "--input",
        tmp_path / "x.npy",
        "--expect",
        tmp_path / "y.npy",
    )
    default = run_cli("run", model, "--input", tmp_path / "x.npy", "--expect", tmp_path / "y.npy")
    assert theano.returncode == 0, theano.stderr
    assert default.returncode == 1 and "differ" in default.stderr


VERIFIED = json.loads((SAMPLES / "k1" / "verified.json").read_text())


@pytest.mark.parametrize("case", VERIFIED["cases"], ids=[Path(c["source"]).stem for c in VERIFIED["cases"]])
def test_converted_keras1_file_is_the_one_keras3_verified(case, tmp_path):
    """samples/verify_k1.py converted each Keras 1 sample (as Theano made it), loaded it with real
    Keras 3 in safe mode and ran it to Keras 1's outputs; the conversion still gives those bytes."""
    import hashlib
    import importlib.util
    import sys

    import h5py

    spec = importlib.util.spec_from_file_location("convert_cases", SAMPLES / "convert_cases.py")
    cases = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("convert_cases", cases)
    spec.loader.exec_module(cases)
    token = KERAS1_BACKEND.set("theano")
    try:
        graph = modelgraph.load(SAMPLES.parent / case["source"])
    finally:
        KERAS1_BACKEND.reset(token)
    out = tmp_path / "out.keras"
    modelgraph.save(graph, out)
    assert cases.canonical_hash(out) == case["canonical"]
    if h5py.version.hdf5_version == VERIFIED["writer_hdf5_version"]:
        assert hashlib.sha256(out.read_bytes()).hexdigest() == case["sha256"]
    assert case["loaded"] is True
    if "run_error" in case:  # TensorFlow has no channels_first convolution on the CPU
        assert "NCHW" in case["run_error"] or "Conv2D" in case["run_error"]
    else:
        assert case["matches"] is True and case["max_abs_error"] <= VERIFIED["tolerance"]


def test_hard_sigmoid_is_rescaled_gate_by_gate():
    """Keras 1/2's hard_sigmoid(x) = Keras 3's hard_sigmoid(1.2 x): the columns feeding it are scaled."""
    from modelgraph.saving.hard_sigmoid import weight_scales

    lstm = weight_scales("LSTM", {"recurrent_activation": "hard_sigmoid", "activation": "tanh"})
    scaled = lstm["kernel"](np.ones((2, 8), np.float32))
    np.testing.assert_allclose(scaled[0], [1.2, 1.2, 1.2, 1.2, 1, 1, 1.2, 1.2], rtol=1e-7)  # i f (c) o
    gru = weight_scales("GRU", {"recurrent_activation": "hard_sigmoid"})
    np.testing.assert_allclose(
        gru["bias"](np.ones((2, 6), np.float32))[1], [1.2, 1.2, 1.2, 1.2, 1, 1], rtol=1e-7
    )
    assert weight_scales("Dense", {"activation": "relu"}) == {}
    assert weight_scales("Activation", {"activation": "hard_sigmoid"}) == {}  # its input is scaled instead
    assert (
        weight_scales("LSTM", {"activation": "hard_sigmoid"}) is None
    )  # the cell activation: no weight product


@pytest.mark.parametrize(("key", "value"), [("dim_ordering", ["th"]), ("activation", {"a": 1})])
def test_hostile_keras1_values_get_typed_errors(tmp_path, key, value):
    """JSON lists or objects where Keras 1 wrote a string: the run refuses them (exit 4); the
    conversion carries them as it carries any value it does not interpret, or refuses; neither ends
    in an internal error (both raised TypeError before)."""
    import h5py

    from modelgraph.errors import NotConvertibleError, UnsupportedError

    model = tmp_path / "m.h5"
    model.write_bytes((SAMPLES / "k1" / "k1_seq_cnn.h5").read_bytes())
    with h5py.File(model, "r+") as f:
        config = json.loads(f.attrs["model_config"])
        config["config"][0]["config"][key] = value
        f.attrs["model_config"] = json.dumps(config).encode()
    graph = modelgraph.load(model)
    with pytest.raises(UnsupportedError):
        modelgraph.Runner(graph)
    with contextlib.suppress(NotConvertibleError):  # writing may refuse it too; it must not crash
        modelgraph.save(graph, tmp_path / "out.keras")
