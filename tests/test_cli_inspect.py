"""``modelgraph inspect`` in-process: tables, JSON through the report model, exit codes on bad files."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from modelgraph.cli.main import cli
from modelgraph.schemas.reports import InspectReport

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize(
    "stem", ["k3_nested", "k3_multi_io_dict", "k3_ops", "k2_tfops", "k2_nested", "k3_rnn_mask"]
)
def test_json_report_matches_keras_golden(stem: str) -> None:
    golden = json.loads((SAMPLES / "goldens" / f"{stem}.json").read_text())
    for kind in ("keras", "h5"):
        if kind not in golden["files"]:
            continue
        result = invoke("inspect", str(SAMPLES / golden["files"][kind]), "--format", "json")
        assert result.exit_code == 0, result.output
        report = InspectReport.model_validate_json(result.stdout)
        assert {lyr.name: lyr.depth for lyr in report.layers} == golden["layer_depths"]
        assert report.totals.total_params == golden["params"]["total"]
        assert report.totals.trainable_params == golden["params"]["trainable"]
        assert report.totals.non_trainable_params == golden["params"]["non_trainable"]
        assert [o.ref for o in report.outputs] == [f"{r[0]}[{r[1]}][{r[2]}]" for r in golden["output_refs"]]
        shapes = {o["layer"]: o["shape"][1:] for o in golden["outputs"]}
        for out in report.outputs:
            assert out.shape is not None and out.shape[1:] == shapes[out.name]


def test_text_table_and_nested_tree() -> None:
    result = invoke("inspect", str(SAMPLES / "k3" / "nested.keras"), "--expand-nested")
    assert result.exit_code == 0
    assert "inner_model (Functional)" in result.stdout
    assert "└ inner_dense (Dense)" in result.stdout
    assert "Total params: 287" in result.stdout


def test_weights_option_attaches_weights() -> None:
    result = invoke(
        "inspect",
        str(SAMPLES / "k3" / "nested.json"),
        "--weights",
        str(SAMPLES / "k3" / "nested.weights.h5"),
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    assert InspectReport.model_validate_json(result.stdout).has_weights


def _rewrite_config(src: Path, dst: Path, edit) -> Path:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename == "config.json":
                data = json.dumps(edit(json.loads(data))).encode()
            zout.writestr(item, data)
    return dst


def test_layer_names_are_never_markup(tmp_path: Path) -> None:
    def rename(cfg):
        text = json.dumps(cfg).replace('"proj"', '"[bold red]proj[/]"')
        return json.loads(text)

    path = _rewrite_config(SAMPLES / "k3" / "nested.keras", tmp_path / "m.keras", rename)
    result = invoke("inspect", str(path))
    assert result.exit_code == 0, result.output
    assert "[bold red]proj[/] (Dense)" in result.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty"),
        (b"PK\x03\x04garbage", "zip"),
        (b'{"class_name": "Functional", "config": {', "invalid JSON"),
        (b"\x89HDF\r\n\x1a\n" + b"\x00" * 64, "HDF5"),
        (b"hello world", "not a Keras model"),
    ],
)
def test_broken_files_exit_3_with_one_line(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.keras"
    path.write_bytes(content)
    result = invoke("inspect", str(path))
    assert result.exit_code == 3, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("modelgraph: error: "), result.stderr
    assert message.lower() in lines[0].lower()
    assert "Traceback" not in result.output


def test_dangling_reference_exits_3_naming_layer_and_reference(tmp_path: Path) -> None:
    def dangle(cfg):
        for layer in cfg["config"]["layers"]:
            if layer["name"] == "head":
                layer["inbound_nodes"][0]["args"][0]["config"]["keras_history"] = ["ghost", 0, 0]
        return cfg

    path = _rewrite_config(SAMPLES / "k3" / "nested.keras", tmp_path / "m.keras", dangle)
    result = invoke("inspect", str(path))
    assert result.exit_code == 3
    assert "layer 'head' node 0 refers to unknown layer 'ghost' (ghost[0][0])" in result.stderr


def test_savedmodel_without_keras_metadata_is_refused_with_reason(tmp_path: Path) -> None:
    (tmp_path / "saved_model.pb").write_bytes(b"\x08\x01")
    (tmp_path / "variables").mkdir()
    result = invoke("inspect", str(tmp_path))
    assert result.exit_code == 3
    assert "SavedModel without Keras metadata (no keras_metadata.pb" in result.stderr


def test_traceback_flag_shows_traceback(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("[1, 2")
    result = CliRunner().invoke(cli, ["--traceback", "inspect", str(path)])
    assert result.exit_code == 3
    assert "Traceback" in result.stderr


def test_version_is_fast_and_light(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = "import sys; from modelgraph.cli.main import cli; assert 'numpy' not in sys.modules and 'h5py' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)  # the source tree must not shadow
