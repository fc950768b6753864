"""``modelgraph validate`` / ``modelgraph rules``: exit codes, JSON report, config, selection, jobs, docs."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _models as M  # noqa: E402

from modelgraph.cli.main import cli  # noqa: E402
from modelgraph.schemas.validate_report import RulesReport, ValidateReport  # noqa: E402
from modelgraph.validate.api import expand_paths, validate  # noqa: E402
from modelgraph.validate.config import ValidateConfig, parse_config  # noqa: E402
from modelgraph.validate.registry import FAMILIES, RULES, rules_markdown  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def run(*args: str) -> object:
    return CliRunner().invoke(cli, ["validate", *args])


@pytest.fixture()
def models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # no stray config from the checkout
    (tmp_path / ".git").mkdir()
    d = tmp_path / "models"
    d.mkdir()
    M.valid_keras(d / "good.keras")
    M.write_json(
        d / "dead.json", M.model([M.inp(), M.dense("dead", "in"), M.dense("d1", "in")])
    )  # STR009 warning
    M.write_json(d / "dangling.json", M.model([M.inp(), M.dense("d1", "ghost")]))  # STR004 error
    (d / "notes.json").write_text('{"hello": 1}')  # not a model: not picked up by the walk
    return d


def test_exit_0_on_clean_file(models: Path) -> None:
    out = run(str(models / "good.keras"))
    assert out.exit_code == 0, out.output
    assert "0 error(s)" in out.stdout


def test_exit_1_on_error_and_every_file_is_reported(models: Path) -> None:
    out = run(str(models))
    assert out.exit_code == 1
    assert "STR004" in out.stdout and "STR009" in out.stdout and "hint:" in out.stdout
    assert "notes.json" not in out.stdout


def test_warnings_fail_only_with_strict(models: Path) -> None:
    assert run(str(models / "dead.json")).exit_code == 0
    assert run("--strict", str(models / "dead.json")).exit_code == 1


def test_exit_2_on_usage_errors(models: Path) -> None:
    assert run(str(models / "missing.keras")).exit_code == 2
    assert run("--select", "NOPE999", str(models)).exit_code == 2
    assert run("--format", "xml", str(models)).exit_code == 2
    assert run().exit_code == 2
    bad_cfg = models.parent / "bad.toml"
    bad_cfg.write_text("[tool.modelgraph]\nseverity = {STR004 = 'fatal'}\n")
    assert run("--config", str(bad_cfg), str(models)).exit_code == 2
    bad_cfg.write_text("[tool.modelgraph]\nunknown_key = 1\n")
    assert run("--config", str(bad_cfg), str(models)).exit_code == 2


def test_json_report_round_trips_through_the_model(models: Path) -> None:
    out = run("--format", "json", str(models))
    assert out.exit_code == 1
    report = ValidateReport.model_validate_json(out.stdout)
    assert report.schema_version and report.summary.files == 3 and report.summary.failed == 1
    by_path = {Path(r.path).name: r for r in report.results}
    assert by_path["good.keras"].ok and by_path["good.keras"].format == "keras_zip"
    issue = next(i for i in by_path["dangling.json"].issues if i.rule == "STR004")
    assert issue.severity == "error" and issue.hint and issue.location.layer == "d1"
    assert issue.location.file.endswith("dangling.json")
    assert report.summary.by_rule["STR004"] == 1
    doc = json.loads(out.stdout)
    assert set(doc) == {"schema_version", "tool", "tool_version", "results", "summary"}


def test_select_and_ignore(models: Path) -> None:
    out = run("--format", "json", "--ignore", "STR004,STR009", "--ignore", "STR010", str(models))
    assert out.exit_code == 0
    rules = {i.rule for r in ValidateReport.model_validate_json(out.stdout).results for i in r.issues}
    assert "STR004" not in rules and "STR009" not in rules
    out = run("--format", "json", "--select", "structure", "--ignore", "WGT", str(models))
    rules = {i.rule for r in ValidateReport.model_validate_json(out.stdout).results for i in r.issues}
    assert rules and all(r.startswith("STR") for r in rules)


def test_pyproject_config_overrides_severity_and_suppresses_per_path(models: Path) -> None:
    root = models.parent
    (root / "pyproject.toml").write_text(
        "[tool.modelgraph]\n"
        'severity = { STR009 = "error" }\n'
        '[tool.modelgraph.per-file-ignores]\n"models/dangling.json" = ["STR004"]\n'
    )
    out = run("--format", "json", str(models))
    report = ValidateReport.model_validate_json(out.stdout)
    by_path = {Path(r.path).name: r for r in report.results}
    assert not by_path["dead.json"].ok  # STR009 raised to error
    assert "STR004" not in {i.rule for i in by_path["dangling.json"].issues}
    assert out.exit_code == 1


def test_dot_modelgraph_toml_wins_and_sets_defaults(models: Path) -> None:
    (models.parent / ".modelgraph.toml").write_text(
        'ignore = ["STR004"]\nseverity = {STR010 = "info"}\nstrict = true\n'
    )
    assert run(str(models / "dangling.json")).exit_code == 0
    assert run(str(models / "dead.json")).exit_code == 1  # strict from the config file


def test_config_parsing_units() -> None:
    cfg = parse_config({"select": ["SEC", "shapes"], "severity": {"SEC0": "warning"}})
    assert cfg.select is not None and "SEC001" in cfg.select and "SHP001" in cfg.select
    assert cfg.severity["SEC001"] == "warning"
    assert not cfg.enabled("STR004") and cfg.enabled("SEC001")
    assert ValidateConfig().enabled("STR004")


def test_jobs_gives_the_same_results_in_the_same_order(models: Path) -> None:
    for i in range(4):
        M.write_json(models / f"extra{i}.json", M.model([M.inp(), M.dense("d1", "ghost")]))
    one = validate([models])
    many = validate([models], jobs=2)
    assert [(r.path, r.issues) for r in one] == [(r.path, r.issues) for r in many]
    assert run("--jobs", "2", str(models)).exit_code == 1
    assert run("--jobs", "0", str(models / "good.keras")).exit_code == 0


def test_directory_walk_finds_models_and_model_folders(tmp_path: Path) -> None:
    d = tmp_path / "tree"
    (d / "sub" / ".hidden").mkdir(parents=True)
    M.valid_keras(d / "a.keras")
    M.write_json(d / "sub" / "b.json", M.simple())
    M.write_json(d / "sub" / ".hidden" / "c.json", M.simple())
    unz = d / "unzipped"
    unz.mkdir()
    (unz / "config.json").write_text(json.dumps(M.simple()))
    (unz / "metadata.json").write_text("{}")
    found = [Path(p).relative_to(d).as_posix() for p in expand_paths([d])]
    assert found == ["unzipped", "a.keras", "sub/b.json"] or sorted(found) == [
        "a.keras",
        "sub/b.json",
        "unzipped",
    ]


def test_rules_command_lists_every_rule() -> None:
    out = CliRunner().invoke(cli, ["rules"])
    assert out.exit_code == 0
    for rid, rule in RULES.items():
        assert re.search(rf"^{rid}\s+{rule.severity}\s+{rule.family}", out.stdout, re.M)
    js = CliRunner().invoke(cli, ["rules", "--format", "json"])
    assert [r.id for r in RulesReport.model_validate_json(js.stdout).rules] == list(RULES)


def test_rule_ids_follow_the_family_prefixes() -> None:
    for rid, rule in RULES.items():
        assert re.fullmatch(r"[A-Z]{3}\d{3}", rid) and FAMILIES[rid[:3]] == rule.family
        assert rule.title and rule.meaning and rule.hint and rule.severity in ("error", "warning", "info")


def test_docs_rules_md_is_in_sync() -> None:
    doc = REPO / "docs" / "rules.md"
    assert doc.read_text() == rules_markdown(), (
        "regenerate: modelgraph rules --format markdown > docs/rules.md"
    )


def test_every_rule_is_tested_both_ways() -> None:
    """Each rule id appears in a test module of this folder (triggering file + near miss live there)."""
    text = "".join(
        p.read_text() for p in Path(__file__).parent.glob("test_*.py") if p.name != Path(__file__).name
    )
    missing = [rid for rid in RULES if rid not in text]
    assert not missing, missing


def test_pre_commit_hooks_file() -> None:
    text = (REPO / ".pre-commit-hooks.yaml").read_text()
    assert "id: modelgraph-validate" in text and "entry: modelgraph validate" in text


K2 = REPO / "samples" / "k2"


def test_weights_attach_to_a_config_only_model() -> None:
    """A to_json() config and its save_weights file (tf_keras 2.21) checked together: no WGT008,
    values read; without --weights only the config is checked."""
    alone = run(str(K2 / "cnn.json"))
    assert alone.exit_code == 0 and "WGT008" in alone.output
    both = run(str(K2 / "cnn.json"), "--weights", str(K2 / "cnn_weights.h5"), "--check-values")
    assert both.exit_code == 0, both.output
    assert "WGT008" not in both.output and "0 error(s), 0 warning(s), 0 info" in both.output
    results = validate(str(K2 / "cnn.json"), weights=K2 / "cnn_weights.h5")
    assert [r.ok for r in results] == [True] and not results[0].issues


def test_a_weights_file_of_another_model_is_a_finding_on_that_file() -> None:
    other = K2 / "mha_weights.h5"
    res = run(str(K2 / "cnn.json"), "--weights", str(other))
    assert res.exit_code == 1
    assert f"{other}: error   WGT009" in res.output, res.output
    report = ValidateReport.model_validate_json(
        run(str(K2 / "cnn.json"), "--weights", str(other), "--format", "json").output
    )
    files = {i.rule: i.location.file for i in report.results[0].issues}
    assert files["WGT009"] == str(other) and files["WGT008"] == str(K2 / "cnn.json")
    sarif = json.loads(run(str(K2 / "cnn.json"), "--weights", str(other), "--format", "sarif").output)
    uris = {
        r["ruleId"]: r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for r in sarif["runs"][0]["results"]
    }
    assert uris["WGT009"].endswith("mha_weights.h5") and uris["WGT008"].endswith("cnn.json")


def test_a_mis_shaped_weight_in_the_attached_file_is_reported(tmp_path: Path) -> None:
    import shutil

    import h5py
    import numpy as np

    weights = tmp_path / "cnn_weights.h5"
    shutil.copy(K2 / "cnn_weights.h5", weights)
    with h5py.File(weights, "r+") as h5:
        names = []
        h5.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
        kernel = next(n for n in names if n.startswith("conv1/") and "kernel" in n)
        shape = h5[kernel].shape
        del h5[kernel]
        h5.create_dataset(kernel, data=np.zeros((*shape[:-1], shape[-1] + 1), np.float32))
    res = run(str(K2 / "cnn.json"), "--weights", str(weights))
    assert res.exit_code == 1 and "conv1" in res.output, res.output
    assert re.search(r"error +(SHP002|WGT003)", res.output), res.output


def test_weights_with_several_models_is_a_usage_error() -> None:
    res = run(str(K2 / "cnn.json"), str(K2 / "mha.json"), "--weights", str(K2 / "mha_weights.h5"))
    assert res.exit_code == 2 and "--weights attaches to one model; the paths name 2" in res.output


# --- validate for CI: defaults and exit codes --------------------------------------------------------


def test_nan_weights_fail_by_default_and_no_check_values_skips_the_scan(tmp_path: Path) -> None:
    k, b = M.dense_weights()
    k[0, 0] = float("nan")
    bad = M.write_keras(tmp_path / "nan.keras", M.simple(), {"dense": [k, b]})
    res = run(str(bad))
    assert res.exit_code == 1 and "WGT006" in res.output, res.output
    assert run(str(bad), "--check-values").exit_code == 1  # still accepted
    skipped = run(str(bad), "--no-check-values")
    assert skipped.exit_code == 0 and "WGT006" not in skipped.output, skipped.output


def test_a_keras_archive_without_weights_fails(tmp_path: Path) -> None:
    stripped = M.write_keras(tmp_path / "stripped.keras", M.simple())
    res = run(str(stripped))
    assert res.exit_code == 1 and "WGT010" in res.output, res.output


def test_a_folder_lists_what_it_skipped_and_nothing_to_check_is_a_usage_error(tmp_path: Path) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "empty.json").write_text("")
    (folder / "notes.txt").write_text("hi")
    res = CliRunner().invoke(cli, ["validate", str(folder)])
    assert res.exit_code == 2, res.output
    assert "nothing to check" in res.output and "skipped 2 file(s)" in res.output
    assert "empty.json" in res.output and "notes.txt" in res.output
    missing = run(str(tmp_path / "missing.keras"))
    assert missing.exit_code == 2 and "no such file" in missing.output
    M.valid_keras(folder / "good.keras")
    ok = run(str(folder))
    assert ok.exit_code == 0 and "skipped 2 file(s)" in ok.output and "1 file(s) checked" in ok.output


def test_models_only_skips_given_files_that_are_not_models(tmp_path: Path) -> None:
    package = tmp_path / "package.json"
    package.write_text('{"name": "web", "version": "1.0.0"}')
    assert run(str(package)).exit_code == 1  # given by name: checked, and not a model
    res = run(str(package), "--models-only")
    assert res.exit_code == 0 and "skipped 1 file(s)" in res.output, res.output
    model = M.valid_keras(tmp_path / "good.keras")
    both = run(str(package), str(model), "--models-only")
    assert both.exit_code == 0 and "1 file(s) checked" in both.output


def test_no_color_is_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = M.write_keras(tmp_path / "stripped.keras", M.simple())
    coloured = CliRunner().invoke(cli, ["validate", str(bad)], color=True)
    assert "\x1b[" in coloured.output
    monkeypatch.setenv("NO_COLOR", "1")
    plain = CliRunner().invoke(cli, ["validate", str(bad)], color=True)
    assert "\x1b[" not in plain.output and "WGT010" in plain.output


def test_pre_commit_hooks_match_json_models_and_tfjs() -> None:
    text = (REPO / ".pre-commit-hooks.yaml").read_text()
    patterns = re.findall(r"^  files: (.+)$", text, re.M)
    entries = re.findall(r"^  entry: (.+)$", text, re.M)
    assert len(patterns) == len(entries) == 2
    for pattern, entry in zip(patterns, entries, strict=True):
        for name in ("m.keras", "w.h5", "m.hdf5", "model.json", "tfjs/model.json", "arch.json"):
            assert re.search(pattern, name), (pattern, name)
        assert "--models-only" in entry
