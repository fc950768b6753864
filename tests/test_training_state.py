"""Training state carried by ``convert`` into ``.keras``: compile_config and optimizer variables.

``samples/verify_training.py`` converted every compiled sample, loaded the result with real Keras 3
and recorded what Keras found (compiled, optimizer variables equal to the originals, one more
training step equal to the original Keras's); these tests pin the bytes Keras verified and what it
found, and check modelgraph's own view of the state without Keras.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import sys
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest

import modelgraph
from modelgraph.loading.training import TRAINING_KEY
from modelgraph.saving.training import NotCarried, compile_config, optimizer_variables

from ._cli import run_cli

ROOT = Path(__file__).resolve().parent.parent
VERIFIED = json.loads((ROOT / "samples" / "training" / "verified.json").read_text())
CASES = VERIFIED["cases"]


def _canonical_hash(path: Path) -> str:
    spec = importlib.util.spec_from_file_location("convert_cases", ROOT / "samples" / "convert_cases.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("convert_cases", module)
    spec.loader.exec_module(module)
    return module.canonical_hash(path)


def _members(path: Path) -> tuple[dict, h5py.File]:
    archive = zipfile.ZipFile(path)
    config = json.loads(archive.read("config.json"))
    return config, h5py.File(io.BytesIO(archive.read("model.weights.h5")), "r")


@pytest.mark.parametrize("case", CASES, ids=[c["source"].rsplit("/", 1)[-1] for c in CASES])
def test_converted_file_is_the_one_keras_verified(case, tmp_path):
    out = tmp_path / "out.keras"
    report = modelgraph.save(modelgraph.load(ROOT / case["source"]), out)
    assert _canonical_hash(out) == case["canonical"]
    if h5py.version.hdf5_version == VERIFIED["writer_hdf5_version"]:
        assert hashlib.sha256(out.read_bytes()).hexdigest() == case["sha256"]
    assert [f"modelgraph: note: {n}" for n in report.notes] == case["notes"]


@pytest.mark.parametrize("case", CASES, ids=[c["source"].rsplit("/", 1)[-1] for c in CASES])
def test_keras_found_the_training_state(case):
    """What real Keras 3 found in the converted file: compiled with the same optimizer class; where
    the state is carried, every variable equal and the next step as the original Keras took it (to
    float32 rounding, or no worse than Keras 3 on its own file)."""
    assert case["compiled"] and case["optimizer_matches_class"]
    if case["state_carried"]:
        assert case["missing_state"] == [] and case["state_max_abs_error"] == 0.0
        # Keras 3 on a file of the same model it loads itself (its Huber config drops ``delta``, so
        # even its own .keras takes a different step)
        stem = Path(case["source"]).stem
        baseline = max(
            (c["source_next_step_max_abs_error"] or 0.0 for c in CASES if Path(c["source"]).stem == stem),
            default=0.0,
        )
        assert case["next_step_max_abs_error"] <= max(1e-6, baseline)


def test_every_named_state_is_carried():
    """Every legacy .h5 (tf_keras, its legacy optimizers, Keras 3's legacy writer) and every Keras 3
    .keras carries its optimizer state; only tf.keras's unnamed .keras state is left out."""
    for case in CASES:
        named = case["source"].endswith(".h5") or case["source"].startswith("samples/training/k3_")
        assert case["state_carried"] == named, case["source"]


def test_legacy_decay_becomes_its_schedule(tmp_path):
    out = tmp_path / "decay.keras"
    modelgraph.save(modelgraph.load(ROOT / "samples/training/k2_legacy_adam_decay.h5"), out)
    config, weights = _members(out)
    rate = config["compile_config"]["optimizer"]["config"]["learning_rate"]
    assert rate["class_name"] == "InverseTimeDecay"
    assert rate["config"]["decay_rate"] == pytest.approx(0.01) and rate["config"]["decay_steps"] == 1
    # a schedule has no learning_rate variable: the step counter, then m and v of six variables
    assert len(weights["optimizer/vars"]) == 1 + 2 * 6
    assert weights["optimizer/vars/0"].dtype == np.int64


def test_strip_drops_the_training_state(tmp_path):
    source = ROOT / "samples/training/k2_adam_amsgrad.h5"
    plain = run_cli("convert", source, "-o", tmp_path / "a.keras")
    stripped = run_cli("convert", source, "--strip", "-o", tmp_path / "b.keras")
    assert plain.returncode == stripped.returncode == 0, plain.stderr
    assert "--strip" in stripped.stderr and "--strip" not in plain.stderr
    config, weights = _members(tmp_path / "a.keras")
    assert config["compile_config"]["optimizer"]["class_name"] == "Adam" and "optimizer" in weights
    config, weights = _members(tmp_path / "b.keras")
    assert "compile_config" not in config and "optimizer" not in weights
    assert modelgraph.load(tmp_path / "b.keras").metadata.get(TRAINING_KEY) is None


def test_converted_state_reads_back_as_written(tmp_path):
    """modelgraph reads its own output's state: the same compile_config and variables."""
    out = tmp_path / "out.keras"
    source = modelgraph.load(ROOT / "samples/training/k2_rmsprop_centered.h5")
    modelgraph.save(source, out)
    record = modelgraph.load(out).metadata[TRAINING_KEY]
    assert record.form == "compile_config"
    assert compile_config(record) == record.config
    values = [np.asarray(v.read()) for v in record.variables]
    original = {
        n: np.asarray(v.read())
        for n, v in zip(
            source.metadata[TRAINING_KEY].names, source.metadata[TRAINING_KEY].variables, strict=True
        )
    }
    # RMSprop(momentum, centered): counter, learning rate, then 6 velocities, 6 momenta, 6 averages
    assert len(values) == 2 + 3 * 6
    np.testing.assert_array_equal(values[2], original["RMSprop/velocity/hidden/kernel:0"])
    np.testing.assert_array_equal(values[2 + 6], original["RMSprop/momentum/hidden/kernel:0"])
    np.testing.assert_array_equal(values[-1], original["RMSprop/average_gradient/probs/bias:0"])


def test_unknown_optimizer_arguments_are_not_guessed():
    record = modelgraph.load(ROOT / "samples/training/k2_sgd_nesterov.h5").metadata[TRAINING_KEY]
    config = json.loads(json.dumps(record.config))
    config["optimizer_config"]["config"]["centred_nonsense"] = 3
    with pytest.raises(NotCarried, match="centred_nonsense=3 has no Keras 3 equivalent"):
        compile_config(type(record)(record.form, config, record.writer))
    config["optimizer_config"] = {"class_name": "MyOptimizer", "config": {}}
    with pytest.raises(NotCarried, match="'MyOptimizer' has no Keras 3 equivalent"):
        compile_config(type(record)(record.form, config, record.writer))


def test_optimizer_variables_that_name_no_model_variable_are_refused():
    graph = modelgraph.load(ROOT / "samples/training/k2_sgd_nesterov.h5")
    record = graph.metadata[TRAINING_KEY]
    renamed = type(record)(
        record.form,
        record.config,
        record.writer,
        tuple(n.replace("probs", "elsewhere") for n in record.names),
        record.variables,
    )
    optimizer = compile_config(record)["optimizer"]
    stored = [w for layer in graph.layers for w in layer.weights]
    assert len(optimizer_variables(record, optimizer, stored)) == 2 + 6
    with pytest.raises(NotCarried, match="belongs to no model variable"):
        optimizer_variables(renamed, optimizer, stored)


def test_optimizer_variables_under_hostile_names_are_not_carried(tmp_path):
    """``optimizer/vars`` holding anything but ``0 .. n-1`` (here a name of 5,000 digits, which
    Python refuses to parse as an int) reads as no optimizer state, not an internal error."""
    source = ROOT / "samples/training/k3_sgd_momentum.keras"
    out = tmp_path / "hostile.keras"
    with zipfile.ZipFile(source) as archive, zipfile.ZipFile(out, "w") as target:
        for name in archive.namelist():
            data = archive.read(name)
            if name == "model.weights.h5":
                buffer = io.BytesIO(data)
                with h5py.File(buffer, "a") as f:
                    f.create_dataset("optimizer/vars/" + "9" * 5000, data=np.zeros(()))
                data = buffer.getvalue()
            target.writestr(name, data)
    record = modelgraph.load(out).metadata[TRAINING_KEY]
    assert record.form == "compile_config" and record.variables == ()


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("optimizer_config", "config", "momentum"), "fast"),
        (("optimizer_config", "config", "learning_rate"), "a"),
        (("optimizer_config", "config", "name"), 3),
        (("optimizer_config", "config", "decay"), {}),
        (("loss",), {"class_name": "Huber", "config": {"reduction": []}}),
    ],
)
def test_a_malformed_training_config_is_left_out_with_a_note(tmp_path, path, value):
    """A training config whose values are not what Keras writes converts the model without it (a
    note names the value); it never ends in an internal error."""
    source = tmp_path / "model.h5"
    source.write_bytes((ROOT / "samples/training/k2_sgd_nesterov.h5").read_bytes())
    with h5py.File(source, "r+") as f:
        config = json.loads(f.attrs["training_config"])
        target = config
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        f.attrs["training_config"] = json.dumps(config).encode()
    report = modelgraph.save(modelgraph.load(source), tmp_path / "out.keras")
    assert any(note.startswith("the training config is not written") for note in report.notes), report.notes
    config, _ = _members(tmp_path / "out.keras")
    assert "compile_config" not in config
