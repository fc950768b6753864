"""The committed JSON Schema files match the Pydantic report models, and reports validate against them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelgraph.schemas import export

SCHEMAS = Path(export.__file__).resolve().parent


def test_schema_files_are_in_sync():
    stale = export.stale()
    assert not stale, f"regenerate with: python -m modelgraph.schemas.export (stale: {stale})"
    assert export.main(["--check"]) == 0


@pytest.mark.parametrize("stem", sorted(export.available()))
def test_schema_is_valid_and_versioned(stem):
    jsonschema = pytest.importorskip("jsonschema")
    doc = json.loads((SCHEMAS / f"{stem}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(doc)
    version = doc["properties"]["schema_version"]["const"]
    assert version == doc["x-schema-version"] and version.count(".") == 1
    assert "schema_version" in doc["required"] or "default" in doc["properties"]["schema_version"]


def test_check_detects_a_stale_file(tmp_path):
    for stem in export.available():
        (tmp_path / f"{stem}.schema.json").write_text(export.render(stem))
    assert export.stale(tmp_path) == []
    (tmp_path / "diff.schema.json").write_text("{}\n")
    assert export.stale(tmp_path) == ["diff"]


def test_diff_output_validates_against_schema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    from modelgraph.diff import diff

    samples = Path(__file__).resolve().parent.parent / "samples" / "k3"
    report = diff(samples / "cnn.keras", samples / "mha.keras").report
    doc = json.loads((SCHEMAS / "diff.schema.json").read_text())
    jsonschema.validate(json.loads(report.model_dump_json()), doc)
    assert not report.identical and report.layers


def test_inspect_output_validates_against_schema():
    jsonschema = pytest.importorskip("jsonschema")
    summary = pytest.importorskip("modelgraph.summary")
    from modelgraph.loading import load

    samples = Path(__file__).resolve().parent.parent / "samples" / "k3"
    report = summary.summarize(load(samples / "nested.keras"))
    doc = json.loads((SCHEMAS / "inspect.schema.json").read_text())
    jsonschema.validate(json.loads(report.model_dump_json()), doc)


def test_run_outputs_validate_against_schema(tmp_path):
    """``run --format json`` with a comparison and a profile, and ``run --check --format json``."""
    jsonschema = pytest.importorskip("jsonschema")
    from click.testing import CliRunner

    from modelgraph.cli.main import cli

    model = Path(__file__).resolve().parent.parent / "samples" / "k3" / "multi_io_list.keras"
    out = tmp_path / "out.npz"
    runner = CliRunner()
    assert runner.invoke(cli, ["run", str(model), "--random", "-o", str(out)]).exit_code == 0
    result = runner.invoke(
        cli,
        [
            "run",
            str(model),
            "--random",
            "--expect",
            str(out),
            "--profile",
            "--tap",
            "mix",
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["comparison"]["passed"] and report["profile"]["layers"] and report["tool"] == "modelgraph"
    jsonschema.validate(report, json.loads((SCHEMAS / "run.schema.json").read_text()))
    check = runner.invoke(cli, ["run", str(model), "--check", "--format", "json"])
    assert check.exit_code == 0, check.output
    jsonschema.validate(json.loads(check.output), json.loads((SCHEMAS / "run_check.schema.json").read_text()))
