"""SARIF 2.1.0 output: valid against the official OASIS schema, and shaped the way GitHub reads it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _models as M  # noqa: E402

from modelgraph.cli.main import cli  # noqa: E402
from modelgraph.validate.api import validate  # noqa: E402
from modelgraph.validate.registry import RULES  # noqa: E402
from modelgraph.validate.sarif import sarif_report  # noqa: E402

SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())


def _bad_folder(tmp: Path) -> Path:
    tmp.mkdir()
    M.write_json(tmp / "dangling.json", M.model([M.inp(), M.dense("d1", "ghost")]))
    M.write_json(tmp / "shapes.json", M.model([M.inp(), M.layer("Reshape", "r", "in", target_shape=[3])]))
    M.valid_keras(tmp / "good.keras")
    (tmp / "broken.keras").write_bytes(b"PK\x03\x04 truncated")
    return tmp


def test_sarif_validates_against_the_oasis_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    folder = _bad_folder(tmp_path / "models")
    log = sarif_report(validate([folder], config=None))
    jsonschema.validate(log, SCHEMA, cls=jsonschema.Draft4Validator)
    results = log["runs"][0]["results"]
    assert {r["ruleId"] for r in results} >= {"STR004", "SHP003", "STR001"}


def test_sarif_has_what_github_code_scanning_needs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    folder = _bad_folder(tmp_path / "models")
    log = sarif_report(validate([folder]))
    assert log["version"] == "2.1.0"
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "modelgraph" and driver["version"]
    ids = [r["id"] for r in driver["rules"]]
    assert ids == sorted(RULES)
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"] and rule["help"]["text"]
        assert rule["defaultConfiguration"]["level"] in ("error", "warning", "note")
        if rule["id"].startswith("SEC"):
            assert float(rule["properties"]["security-severity"]) > 0
    for result in run["results"]:
        assert ids[result["ruleIndex"]] == result["ruleId"]
        assert result["message"]["text"]
        loc = result["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"]["uri"].startswith("models/")  # relative to the checkout
        assert loc["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        assert loc["region"]["startLine"] >= 1
        assert result["partialFingerprints"]
    dangling = next(r for r in run["results"] if r["ruleId"] == "STR004")
    assert any(ll.get("fullyQualifiedName") for ll in dangling["locations"][0].get("logicalLocations", []))


def test_fingerprints_are_stable_across_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    folder = _bad_folder(tmp_path / "models")
    a = [r["partialFingerprints"] for r in sarif_report(validate([folder]))["runs"][0]["results"]]
    b = [r["partialFingerprints"] for r in sarif_report(validate([folder], jobs=2))["runs"][0]["results"]]
    assert a == b


def test_cli_sarif_output_parses_and_validates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    folder = _bad_folder(tmp_path / "models")
    out = CliRunner().invoke(cli, ["validate", "--format", "sarif", str(folder)])
    assert out.exit_code == 1, out.output
    jsonschema.validate(json.loads(out.stdout), SCHEMA, cls=jsonschema.Draft4Validator)
    clean = CliRunner().invoke(cli, ["validate", "--format", "sarif", str(folder / "good.keras")])
    assert clean.exit_code == 0
    log = json.loads(clean.stdout)
    jsonschema.validate(log, SCHEMA, cls=jsonschema.Draft4Validator)
    assert log["runs"][0]["results"] == []


def test_sarif_uris_are_percent_encoded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A space, '#' or '%' in a path is not a valid URI character: SARIF viewers would misread it."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "my models #1 100%"
    folder.mkdir()
    M.write_json(folder / "arch one.json", M.simple())
    log = sarif_report(validate([folder]))
    uris = {a["location"]["uri"] for a in log["runs"][0]["artifacts"]}
    assert uris == {"my%20models%20%231%20100%25/arch%20one.json"}, uris
