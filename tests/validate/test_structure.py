"""Structure rules (STR): one broken file per rule, one near miss per rule, all problems in one pass."""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _models as M  # noqa: E402

from modelgraph.validate.api import Options, validate_file  # noqa: E402
from modelgraph.validate.structure import schema_issues  # noqa: E402


def _issues(path: Path) -> list[Any]:
    return list(validate_file(str(path), Options()).issues)


def _rules(path: Path) -> list[str]:
    return [i.rule for i in _issues(path)]


def _cycle() -> dict[str, Any]:
    return M.model(
        [M.inp(), M.dense("a", "b"), M.dense("b", "a"), M.dense("out", "in")], outputs=["out", "a"]
    )


CONFIG_CASES: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
    "STR004": (
        lambda: M.model([M.inp(), M.dense("d1", "ghost")]),
        lambda: M.model([M.inp(), M.dense("d1", "in")]),
    ),
    "STR005": (
        lambda: M.model([M.inp(), M.dense("d1", "in"), M.dense("d2", ("d1", 3, 0))]),
        lambda: M.model([M.inp(), M.dense("d1", "in", calls=4), M.dense("d2", ("d1", 3, 0))]),
    ),
    "STR006": (_cycle, lambda: M.model([M.inp(), M.dense("a", "in"), M.dense("b", "a")])),
    "STR007": (
        lambda: M.model([M.inp(), M.dense("d1", "in"), M.dense("d1", "in")]),
        lambda: M.model([M.inp(), M.dense("d1", "in"), M.dense("d2", "in")], outputs=["d1", "d2"]),
    ),
    "STR008": (
        lambda: M.model([M.inp(), M.inp("in2"), M.layer("Add", "add", ["in", "in2"])]),
        lambda: M.model([M.inp(), M.inp("in2"), M.layer("Add", "add", ["in", "in2"])], inputs=["in", "in2"]),
    ),
    "STR009": (
        lambda: M.model([M.inp(), M.dense("dead", "in"), M.dense("d1", "in")]),
        lambda: M.model([M.inp(), M.dense("d0", "in"), M.dense("d1", "in")], outputs=["d0", "d1"]),
    ),
    "STR010": (
        lambda: M.model([M.inp(), M.inp("unused"), M.dense("d1", "in")], inputs=["in", "unused"]),
        lambda: M.model([M.inp(), M.inp("in2"), M.layer("Add", "add", ["in", "in2"])], inputs=["in", "in2"]),
    ),
    "STR011": (
        lambda: M.model([M.inp(), M.dense("d1", "in")], outputs=[]),
        lambda: M.model([M.inp(), M.dense("d1", "in")]),
    ),
    "STR012": (
        lambda: {"class_name": "MyModel", "config": {"name": "m", "trainable": True}},
        lambda: M.simple(),
    ),
}


@pytest.mark.parametrize("rule", sorted(CONFIG_CASES))
def test_config_rule_triggers_and_near_miss_does_not(rule: str, tmp_path: Path) -> None:
    bad, good = CONFIG_CASES[rule]
    issues = _issues(M.write_json(tmp_path / "bad.json", bad()))
    hits = [i for i in issues if i.rule == rule]
    assert hits, [str(i) for i in issues]
    assert all(h.message and h.hint and h.path for h in hits)
    assert rule not in _rules(M.write_json(tmp_path / "good.json", good()))


def test_str001_truncated_and_empty_containers(tmp_path: Path) -> None:
    good = M.valid_keras(tmp_path / "good.keras")
    assert "STR001" not in _rules(good)
    data = good.read_bytes()
    cut = tmp_path / "cut.keras"
    cut.write_bytes(data[: len(data) // 2])
    assert "STR001" in _rules(cut)
    empty = tmp_path / "empty.h5"
    empty.write_bytes(b"")
    assert "STR001" in _rules(empty)
    junk = tmp_path / "junk.h5"
    junk.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\x00" * 100)
    assert "STR001" in _rules(junk)


def test_str002_invalid_json_with_line_and_column(tmp_path: Path) -> None:
    text = json.dumps(M.simple(), indent=1)
    bad = tmp_path / "bad.json"
    bad.write_text(text[:-40])
    hits = [i for i in _issues(bad) if i.rule == "STR002"]
    assert hits and "line" in hits[0].message and "column" in hits[0].message
    assert "STR002" not in _rules(M.write_json(tmp_path / "good.json", M.simple()))


def test_str003_every_schema_error_with_its_json_path(tmp_path: Path) -> None:
    cfg = M.simple()
    cfg["config"]["layers"][1]["config"] = 5
    cfg["config"]["layers"][0]["inbound_nodes"] = "nope"
    issues = [i for i in _issues(M.write_json(tmp_path / "bad.json", cfg)) if i.rule == "STR003"]
    wheres = {i.where for i in issues}
    assert "$.config.layers[1].config" in wheres and "$.config.layers[0].inbound_nodes" in wheres
    assert "STR003" not in _rules(M.write_json(tmp_path / "good.json", M.simple()))


def test_str003_nested_models_and_missing_keys() -> None:
    inner = M.simple()
    del inner["config"]["output_layers"]
    inner["name"] = "inner"
    outer = M.model([M.inp(), {**inner, "inbound_nodes": []}])
    wheres = [i.where for i in schema_issues(outer)]
    assert "$.config.layers[1].config.output_layers" in wheres


def test_str013_weights_only_file_is_info(tmp_path: Path) -> None:
    w = M.weights_h5(tmp_path / "m.weights.h5", {"dense": M.dense_weights()})
    result = validate_file(str(w), Options())
    assert [i.rule for i in result.issues] == ["STR013"] and result.ok
    assert "STR013" not in _rules(M.valid_keras(tmp_path / "good.keras"))


def test_str014_a_crashing_check_is_a_finding_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import modelgraph.validate.shapes as shp

    def boom(graph: Any) -> Any:
        raise RuntimeError("boom")

    good = M.valid_keras(tmp_path / "good.keras")
    assert "STR014" not in _rules(good)
    monkeypatch.setattr(shp, "infer", boom)
    issues = _issues(good)
    assert [i.rule for i in issues if i.rule == "STR014"] == ["STR014"]
    assert any(i.rule.startswith("RUN") for i in issues) or validate_file(str(good), Options()).ok


def test_every_structural_problem_in_one_pass(tmp_path: Path) -> None:
    cfg = M.model(
        [
            M.inp(),
            M.inp("unused"),
            M.dense("d1", "ghost"),
            M.dense("d2", ("in", 5, 0)),
            M.dense("d2", "in"),
            M.dense("a", "b"),
            M.dense("b", "a"),
            M.dense("dead", "in"),
            M.dense("out", "in"),
        ],
        inputs=["in", "unused"],
        outputs=["out", "a"],
    )
    rules = set(_rules(M.write_json(tmp_path / "bad.json", cfg)))
    assert {"STR004", "STR005", "STR006", "STR007", "STR010"} <= rules, rules


def test_nested_model_problems_are_found(tmp_path: Path) -> None:
    inner = M.model([M.inp("x"), M.dense("dead", "x"), M.dense("y", "x")], inputs=["x"])
    inner["name"] = "inner"
    inner["config"]["name"] = "inner"
    outer = M.model(
        [M.inp(), {**copy.deepcopy(inner), "inbound_nodes": [{"args": [M._tensor("in")], "kwargs": {}}]}]
    )
    hits = [i for i in _issues(M.write_json(tmp_path / "n.json", outer)) if i.rule == "STR009"]
    assert hits and "inner/dead" in hits[0].where
