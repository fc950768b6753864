"""Errors name the file the user gave: an HDF5 weights member of a ``.keras`` archive is called
``ARCHIVE.keras:model.weights.h5`` in every message, never ``<_io.BufferedReader>``, whether the member
is stored or compressed; and ``export`` refuses an output that is not an ``.onnx`` file."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from modelgraph.cli.main import cli

sys.path.insert(0, str(Path(__file__).resolve().parent / "validate"))
from _payloads import CASES, CNN_KERAS  # noqa: E402


def _deflated(path: Path) -> Path:
    with zipfile.ZipFile(path) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    out = path.with_name("deflated.keras")
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return out


@pytest.mark.parametrize("compressed", [False, True], ids=["stored", "deflated"])
@pytest.mark.parametrize("rule", ["SEC111", "SEC112", "SEC113"])
def test_a_refused_weights_member_is_named_by_the_archive_path(
    tmp_path: Path, rule: str, compressed: bool
) -> None:
    model = CASES[rule][0](tmp_path)
    if compressed:
        model = _deflated(model)
    result = CliRunner().invoke(cli, ["inspect", str(model)])
    assert result.exit_code == 3, result.output
    assert result.output.startswith(f"modelgraph: error: {model}:model.weights.h5: dataset "), result.output
    assert "<_io" not in result.output


@pytest.mark.parametrize("name", ["model.keras", "model.h5", "model"])
def test_export_refuses_an_output_that_is_not_onnx(tmp_path: Path, name: str) -> None:
    result = CliRunner().invoke(cli, ["export", str(CNN_KERAS), "-o", str(tmp_path / name)])
    assert result.exit_code == 2, result.output
    assert "must end in .onnx" in result.output
    assert list(tmp_path.iterdir()) == []


CKPT = Path(__file__).resolve().parents[1] / "samples" / "savedmodel" / "ckpt" / "seq_mlp"


@pytest.mark.parametrize(
    "args",
    [
        ["inspect", str(CKPT)],
        ["run", str(CKPT), "--random"],
        ["render", str(CKPT), "-o", "x.svg"],
        ["export", str(CKPT), "-o", "x.onnx"],
        ["convert", str(CKPT), "-o", "x.keras"],
        ["diff", str(CKPT), str(CKPT)],
    ],
    ids=lambda a: a[0],
)
def test_a_checkpoint_prefix_given_as_the_model_is_named_as_weights_only(args, tmp_path, monkeypatch):
    """tf.keras names a checkpoint by its prefix (``ckpt/seq_mlp`` for ``ckpt/seq_mlp.index``): given
    where a model goes, the usage error says it is weights only and how to attach it."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert f"'{CKPT}' is a TensorFlow checkpoint prefix" in result.output
    assert f"--weights {CKPT}" in result.output
    assert not (tmp_path / "x.svg").exists() and not (tmp_path / "x.onnx").exists()


def test_a_missing_model_that_is_no_checkpoint_still_says_it_does_not_exist(tmp_path):
    result = CliRunner().invoke(cli, ["inspect", str(tmp_path / "nothing.keras")])
    assert result.exit_code == 2 and "does not exist" in result.output
