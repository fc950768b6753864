"""The Keras advisory table: one hostile file per row, the rules that find it, ``--target-keras``, SARIF.

Every row of :data:`ADVISORIES` (and so of ``docs/security.md``) is a test case: a row whose rules have
no hostile file in ``_payloads.py`` fails, so the table cannot grow without a test.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import modelgraph
from modelgraph.cli.main import cli
from modelgraph.validate.sarif import sarif_report
from modelgraph.validate.security.advisories import (
    ADVISORIES,
    Advisory,
    advisories_markdown,
    advisory_ids,
    parse_version,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _payloads import payload  # noqa: E402

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def _built(advisory: Advisory, rule: str, tmp: Path) -> Path:
    kinds = list(advisory.formats) or ["keras", "h5"]
    for kind in kinds:
        build = payload(rule, kind)
        if build is not None:
            return build(tmp)
    raise AssertionError(f"{advisory.id}: no hostile file for {rule} in {kinds} (add one to _payloads.py)")


def _findings(report, rule: str):
    return [i for i in report.issues if i.rule == rule]


def test_the_docs_table_is_the_generated_one() -> None:
    text = DOC.read_text()
    begin = text.index("<!-- advisories:begin")
    body = text[text.index("\n", begin) + 1 : text.index("<!-- advisories:end -->")]
    assert body == advisories_markdown(), "regenerate the table in docs/security.md: advisories_markdown()"


@pytest.mark.parametrize("advisory", ADVISORIES, ids=[a.id for a in ADVISORIES])
def test_each_advisory_row_is_found_by_its_rules(tmp_path: Path, advisory: Advisory) -> None:
    for n, rule in enumerate(advisory.rules):
        folder = tmp_path / str(n)
        folder.mkdir()
        model = _built(advisory, rule, folder)
        report = modelgraph.validate(model)
        assert _findings(report, rule), (rule, report.issues)
        assert report[0].format in {"keras_zip", "legacy_h5"} and advisory.concerns(report[0].format)
        if not advisory.on_load:
            continue
        inside = advisory.affected[-1].introduced  # a version the advisory says acts on the file
        judged = _findings(modelgraph.validate(model, target_keras=inside), rule)
        assert judged and all(i.severity == "error" for i in judged), judged
        assert all(advisory.id.split("/")[0] in i.message and "acts on it" in i.message for i in judged)


def test_target_keras_lowers_a_finding_past_every_fix_and_raises_it_inside(tmp_path: Path) -> None:
    for sub in ("tfsm", "h5", "k"):
        (tmp_path / sub).mkdir()
    tfsm = payload("SEC006", "keras")(tmp_path / "tfsm")
    cases = {"3.10": "error", "3.12.0": "error", "3.12.1": "warning", "3.13.1": "error", "3.13.2": "warning"}
    for version, severity in cases.items():
        [finding] = _findings(modelgraph.validate(tfsm, target_keras=version), "SEC006")
        assert finding.severity == severity, (version, finding)
    # A legacy .h5 Lambda: Keras 3 refuses it from 3.11.3 on; tf.keras 2.x runs it in every release.
    h5_lambda = payload("SEC001", "h5")(tmp_path / "h5")
    for version, severity in {
        "3.11.2": "error",
        "3.11.3": "warning",
        "2.15": "error",
        "2.12": "error",
    }.items():
        [finding] = _findings(modelgraph.validate(h5_lambda, target_keras=version), "SEC001")
        assert finding.severity == severity, (version, finding)
    # The same Lambda in a .keras: tf.keras 2.13+ refuses it in safe_mode; no advisory covers Keras 3.
    keras_lambda = payload("SEC001", "keras")(tmp_path / "k")
    for version, severity in {"2.12": "error", "2.15": "warning", "3.15.1": "error"}.items():
        [finding] = _findings(modelgraph.validate(keras_lambda, target_keras=version), "SEC001")
        assert finding.severity == severity, (version, finding)


def test_a_rule_without_advisory_is_unchanged_and_a_bad_version_is_a_usage_error(tmp_path: Path) -> None:
    from modelgraph.validate.issue import Issue
    from modelgraph.validate.security.advisories import judge

    custom = Issue("SEC004", "warning", "custom object", "$")
    assert judge(custom, "keras_zip", parse_version("3.12")) == custom
    model = payload("SEC006", "keras")(tmp_path)
    result = CliRunner().invoke(cli, ["validate", str(model), "--target-keras", "three"])
    assert result.exit_code == 2 and "is not a Keras version" in result.output
    assert parse_version("3.12") == (3, 12, 0) and parse_version("3.13.2rc1") == (3, 13, 2)


def test_sarif_and_rules_name_the_advisories(tmp_path: Path) -> None:
    model = payload("SEC006", "keras")(tmp_path)
    sarif = sarif_report(modelgraph.validate(model))
    run = sarif["runs"][0]
    rule = next(r for r in run["tool"]["driver"]["rules"] if r["id"] == "SEC006")
    assert "CVE-2026-1462" in rule["properties"]["tags"] and "GHSA-4f3f-g24h-fr8m" in rule["helpUri"]
    result = next(r for r in run["results"] if r["ruleId"] == "SEC006")
    assert result["properties"]["tags"] == ["CVE-2026-1462"]
    listed = CliRunner().invoke(cli, ["rules", "--format", "json"])
    meaning = next(r["meaning"] for r in json.loads(listed.output)["rules"] if r["id"] == "SEC014")
    assert "CVE-2026-12479" in meaning
    assert set(advisory_ids("SEC001")) == {"CVE-2024-3660", "CVE-2025-9905", "CVE-2026-12481"}


def test_each_finding_says_which_keras_versions_act_on_it(tmp_path: Path) -> None:
    for sub in ("k", "h5"):
        (tmp_path / sub).mkdir()
    [tfsm] = _findings(modelgraph.validate(payload("SEC006", "keras")(tmp_path / "k")), "SEC006")
    assert tfsm.message.endswith(
        "[Keras acts on it when loading: CVE-2026-1462 >=3.0,<3.12.1; >=3.13.0,<3.13.2]"
    )
    [h5] = _findings(modelgraph.validate(payload("SEC001", "h5")(tmp_path / "h5")), "SEC001")
    assert "CVE-2024-3660 >=1.0,<2.13, CVE-2024-3660 >=2.0, CVE-2025-9905 >=3.0,<3.11.3]" in h5.message
