"""``modelgraph diff`` in-process: exit codes, JSON through the report model, text, drawings."""

from __future__ import annotations

import gc
import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from modelgraph.cli.main import cli
from modelgraph.schemas.diff_report import DiffReport

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
K3 = SAMPLES / "k3"

_spec = importlib.util.spec_from_file_location("diff_test_helpers", Path(__file__).with_name("test_diff.py"))
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)


@pytest.fixture(autouse=True)
def _release_files():
    yield
    gc.collect()


def invoke(*args: str):
    return CliRunner().invoke(cli, ["diff", *map(str, args)], catch_exceptions=False)


def test_same_model_other_format_exits_0():
    result = invoke(K3 / "cnn.keras", K3 / "cnn.h5")
    assert result.exit_code == 0, result.output
    assert "identical" in result.output


def test_json_identical_validates():
    result = invoke(K3 / "nested.keras", K3 / "nested_dir", "--format", "json")
    assert result.exit_code == 0
    report = DiffReport.model_validate_json(result.output)
    assert report.identical and report.layers == [] and report.counts.matched == 16


def test_changed_activation_exits_1_and_names_the_layer(tmp_path):
    def cfg(c):
        helpers.layer_cfg(c, "ffn1")["config"]["activation"] = "relu"

    b = helpers.edit_keras(K3 / "mha.keras", tmp_path / "b.keras", cfg)
    result = invoke(K3 / "mha.keras", b, "--format", "json")
    assert result.exit_code == 1
    report = DiffReport.model_validate_json(result.output)
    assert [e.name for e in report.layers] == ["ffn1"]
    assert report.layers[0].config[0].key == "activation"
    text = invoke(K3 / "mha.keras", b)
    assert text.exit_code == 1
    assert "~  ffn1 (Dense)" in text.output and 'activation: "gelu" -> "relu"' in text.output
    assert text.output.strip().splitlines()[-1].startswith("different: 1 config changed")


def test_perturbed_weight_text_and_tolerances(tmp_path):
    def weights(f):
        d = f["layers/dense_1/vars/0"]
        v = d[()]
        v[0, 0] += 1e-3
        d[...] = v

    b = helpers.edit_keras(K3 / "mha.keras", tmp_path / "b.keras", weights=weights)
    result = invoke(K3 / "mha.keras", b)
    assert result.exit_code == 1
    assert "!  ffn2 (Dense)" in result.output and "1/128 values differ" in result.output
    assert invoke(K3 / "mha.keras", b, "--atol", "1e-2").exit_code == 0
    assert invoke(K3 / "mha.keras", b, "--no-weights").exit_code == 0


def test_unreadable_file_exits_3(tmp_path):
    bad = tmp_path / "bad.keras"
    bad.write_bytes(b"not a zip at all")
    result = CliRunner().invoke(cli, ["diff", str(K3 / "cnn.keras"), str(bad)])
    assert result.exit_code == 3
    assert "modelgraph: error:" in result.output
    # a path that does not exist is a usage error (exit 2, one line), as in every command
    missing = CliRunner().invoke(cli, ["diff", str(K3 / "cnn.keras"), str(tmp_path / "nope.h5")])
    assert missing.exit_code == 2
    assert missing.output.strip().count("\n") == 0 and "nope.h5" in missing.output


def test_layer_names_are_not_rich_markup(tmp_path):
    def cfg(c):
        helpers.rename_everywhere(c, "ffn1", "[bold red]ffn1[/]")

    b = helpers.edit_keras(
        K3 / "mha.keras",
        tmp_path / "b.keras",
        cfg,
        lambda f: helpers.set_vars_name(f, "ffn1", "[bold red]ffn1[/]"),
    )
    result = invoke(K3 / "mha.keras", b)
    assert result.exit_code == 1
    assert "renamed: ffn1 -> [bold red]ffn1[/]" in result.output


def test_dot_output_written(tmp_path):
    out = tmp_path / "d.dot"
    result = invoke(K3 / "cnn.keras", K3 / "cnn.h5", "-o", out)
    assert result.exit_code == 0
    text = out.read_text()
    assert text.startswith("digraph modelgraph_diff") and '"conv1\\nConv2D"' in text


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed")
def test_svg_output_written(tmp_path):
    def cfg(c):
        helpers.set_history(helpers.layer_cfg(c, "res2"), 0, ["ln1", 0, 0])

    b = helpers.edit_keras(K3 / "mha.keras", tmp_path / "b.keras", cfg)
    out = tmp_path / "d.svg"
    result = invoke(K3 / "mha.keras", b, "-o", out)
    assert result.exit_code == 1
    svg = out.read_text()
    assert "<svg" in svg and "#ffe0b2" in svg


def test_missing_dot_exits_4(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    result = CliRunner().invoke(
        cli, ["diff", str(K3 / "cnn.keras"), str(K3 / "cnn.h5"), "-o", str(tmp_path / "x.svg")]
    )
    assert result.exit_code == 4
    assert "dot" in result.output


def test_outputs_flag(tmp_path):
    pytest.importorskip("modelgraph.runner.interpreter")
    result = invoke(K3 / "cnn.keras", K3 / "cnn.h5", "--outputs", "--seed", "5", "--format", "json")
    assert result.exit_code == 0, result.output
    report = DiffReport.model_validate_json(result.output)
    assert report.outputs is not None and report.outputs.equal and report.outputs.seed == 5
    assert json.loads(result.output)["options"]["outputs"] is True


@pytest.mark.parametrize("kind", ["complex", "string"])
def test_weights_that_are_not_real_numbers_are_compared_for_equality(tmp_path, kind):
    """A weight replaced by complex or string values has no max abs / rms: the text says how it was
    compared (it used to format None and stop with an internal error)."""
    import io
    import zipfile

    import h5py
    import numpy as np

    source = K3 / "seq_in.keras"
    with zipfile.ZipFile(source) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    weights = io.BytesIO(members["model.weights.h5"])
    with h5py.File(weights, "r+") as h5:
        name = "layers/dense_1/vars/1"
        shape = h5[name].shape
        del h5[name]
        values = np.ones(shape, np.complex64) if kind == "complex" else np.full(shape, b"abc", dtype="S3")
        h5.create_dataset(name, data=values)
    members["model.weights.h5"] = weights.getvalue()
    target = tmp_path / "changed.keras"
    with zipfile.ZipFile(target, "w") as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    result = invoke(source, target)
    assert result.exit_code == 1, result.output
    assert "bias (3,): 3/3 values differ (compared for equality)" in result.output
