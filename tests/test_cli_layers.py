"""``modelgraph layers``: the catalogue as a table, one class explained, JSON, docs/layers.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from modelgraph import catalogue
from modelgraph.catalogue.report import layers_markdown
from modelgraph.cli.main import cli
from modelgraph.schemas.layers_report import LayersReport

REPO = Path(__file__).resolve().parent.parent


def _invoke(*args: str):
    return CliRunner().invoke(cli, ["layers", *args])


def test_json_lists_every_catalogue_class_with_its_concerns() -> None:
    result = _invoke("--format", "json")
    assert result.exit_code == 0, result.output
    report = LayersReport.model_validate_json(result.output)
    assert [c.name for c in report.classes] == [s.key for s in catalogue.all_specs()]
    by_name = {c.name: c for c in report.classes}
    assert by_name["Conv2D"].aliases == ["Convolution2D"]
    assert by_name["op:Take"].support.shapes == "no static shape rule yet"
    assert by_name["op:Take"].support.run is True
    assert by_name["RMSNormalization"].support.run is True
    assert by_name["RMSNormalization"].config_defaults == {"axis": -1, "epsilon": 1e-6}
    assert by_name["RMSNormalization"].support.onnx is True
    assert (
        by_name["op:Cumprod"].support.onnx == "ONNX has a cumulative sum (CumSum) but no cumulative product"
    )


def test_json_validates_against_the_schema_file() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    doc = json.loads((REPO / "schemas" / "layers.schema.json").read_text())
    jsonschema.validate(json.loads(_invoke("--format", "json").output), doc)


def test_one_class_by_alias_and_by_op_name() -> None:
    result = _invoke("Convolution2D")
    assert result.exit_code == 0
    assert result.output.startswith("Conv2D  (conv; Keras 2, 3)")
    both = _invoke("Add", "--format", "json")
    assert [c["name"] for c in json.loads(both.output)["classes"]] == ["Add", "op:Add"]
    refused = _invoke("op:Amax")
    assert "run      no: no NumPy kernel yet" in refused.output
    assert "onnx     no: no reference kernel to check a mapping against yet" in refused.output


def test_an_unknown_class_is_a_usage_error_with_suggestions() -> None:
    result = _invoke("Conv2d")
    assert result.exit_code == 2
    assert "unknown layer class 'Conv2d'; did you mean Conv2D" in result.output


def test_text_table_counts_the_classes() -> None:
    result = _invoke()
    assert result.exit_code == 0
    last = result.output.strip().splitlines()[-1]
    assert last.startswith(f"{len(catalogue.all_specs())} classes, ")


def test_docs_layers_md_is_in_sync() -> None:
    doc = REPO / "docs" / "layers.md"
    assert doc.read_text() == layers_markdown(), (
        "regenerate: modelgraph layers --format markdown > docs/layers.md"
    )
