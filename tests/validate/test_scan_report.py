"""``modelgraph report RESULTS.jsonl``: text, JSON, SARIF and CycloneDX built from a real scan's records.

The records come from one ``validate --results`` scan of Keras-made samples plus hostile files built
by tests/validate/_hostile.py (a Keras 3 Lambda carrying bytecode, a zip bomb), so the reports carry
real security findings. The SARIF log is checked against the SARIF 2.1.0 schema, the ML-BOM against
the official CycloneDX 1.6 JSON schema shipped by cyclonedx-python-lib (a test dependency).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _hostile as H  # noqa: E402

from modelgraph.cli.main import cli  # noqa: E402
from modelgraph.schemas.validate_record import ScanReport  # noqa: E402
from modelgraph.validate.records import iter_records  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
K2 = REPO / "samples" / "k2"
K3 = REPO / "samples" / "k3"


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    root = tmp_path_factory.mktemp("report")
    reg = root / "reg"
    reg.mkdir()
    shutil.copy(K3 / "mha.keras", reg / "mha.keras")
    shutil.copy(K2 / "cnn.h5", reg / "cnn.h5")
    shutil.copy(K2 / "mha.json", reg / "mha.json")
    shutil.copy(K2 / "mha_weights.h5", reg / "mha_weights.h5")
    code = H.lambda_code("lambda x: __import__('os').system('echo pwned') or x * 2")
    H.keras_zip(reg / "lambda.keras", H.functional([H.keras3_lambda("lam", code)]))
    H.declared_size_bomb(reg / "bomb.keras")
    results = root / "r.jsonl"
    out = CliRunner().invoke(cli, ["validate", str(reg), "--results", str(results), "--jobs", "2"])
    assert out.exit_code == 1, out.output
    return results, [r for _, r in iter_records(results)]


def report(results: Path, fmt: str) -> object:
    return CliRunner().invoke(cli, ["report", str(results), "--format", fmt])


def test_text_report_lists_findings_and_fails(scanned: tuple[Path, list[dict]]) -> None:
    results, records = scanned
    out = report(results, "text")
    assert out.exit_code == 1
    assert "lambda.keras: error   SEC" in out.stdout and "bomb.keras: error   SEC" in out.stdout
    assert f"{len(records)} model(s) in" in out.stdout and "2 model(s) failed" in out.stdout


def test_json_report_totals_match_the_records(scanned: tuple[Path, list[dict]]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    results, records = scanned
    out = report(results, "json")
    assert out.exit_code == 1
    doc = json.loads(out.stdout)
    jsonschema.validate(doc, json.loads((REPO / "schemas" / "scan_report.schema.json").read_text()))
    rep = ScanReport.model_validate(doc)
    assert rep.models == len(records) == 5 and rep.failed == 2 and rep.superseded == 0
    assert rep.errors == sum(r["errors"] for r in records)
    assert sum(c.count for c in rep.by_rule) == sum(len(r["findings"]) for r in records)
    assert rep.formats["keras_zip"] == 3


def test_a_later_record_of_a_model_replaces_the_earlier_one(
    scanned: tuple[Path, list[dict]], tmp_path: Path
) -> None:
    results, records = scanned
    copy = tmp_path / "r.jsonl"
    shutil.copy(results, copy)
    fixed = next(r for r in records if r["path"].endswith("lambda.keras"))
    fixed = {**fixed, "verdict": "ok", "errors": 0, "warnings": 0, "infos": 0, "findings": []}
    with open(copy, "a") as fh:
        fh.write(json.dumps(fixed) + "\n")
    rep = ScanReport.model_validate_json(report(copy, "json").stdout)
    assert rep.models == 5 and rep.failed == 1 and rep.superseded == 1


def test_sarif_report_validates_against_the_sarif_schema(scanned: tuple[Path, list[dict]]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    results, records = scanned
    out = report(results, "sarif")
    assert out.exit_code == 1
    doc = json.loads(out.stdout)
    schema = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())
    jsonschema.Draft7Validator(schema).validate(doc)
    assert len(doc["runs"][0]["results"]) == sum(len(r["findings"]) for r in records)


def test_cyclonedx_ml_bom_validates_against_the_cyclonedx_schema(scanned: tuple[Path, list[dict]]) -> None:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    results, records = scanned
    out = report(results, "cyclonedx")
    assert out.exit_code == 1
    errors = JsonStrictValidator(SchemaVersion.V1_6).validate_str(out.stdout, all_errors=True)
    assert errors is None, [str(e) for e in errors]
    bom = json.loads(out.stdout)
    assert bom["specVersion"] == "1.6"
    comps = bom["components"]
    assert [c["type"] for c in comps] == ["machine-learning-model"] * len(records)
    by_path = {next(p["value"] for p in c["properties"] if p["name"] == "modelgraph:path"): c for c in comps}
    for r in records:
        c = by_path[r["path"]]
        assert c["hashes"] == [{"alg": "SHA-256", "content": r["sha256"]}]
        props = [(p["name"], p["value"]) for p in c["properties"]]
        assert ("modelgraph:format", r["format"]) in props
        if r["model"]:
            assert ("modelgraph:params", str(r["model"]["params"])) in props
            assert {v for k, v in props if k == "modelgraph:layer_class"} == set(r["model"]["layer_classes"])
            assert ("modelgraph:keras_version", r["keras_version"]) in props
    sec = [(r["path"], f["rule"]) for r in records for f in r["findings"] if f["rule"].startswith("SEC")]
    assert len(bom["vulnerabilities"]) == len(sec) >= 2
    refs = {c["bom-ref"]: path for path, c in by_path.items()}
    assert sorted((refs[v["affects"][0]["ref"]], v["id"]) for v in bom["vulnerabilities"]) == sorted(sec)


def test_report_of_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    out = report(tmp_path / "nope.jsonl", "text")
    assert out.exit_code == 2 and "no such results file" in out.output
