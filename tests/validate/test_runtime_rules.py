"""Runtime-support rules (RUN): info by default, errors with require_runnable."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _models as M  # noqa: E402

from modelgraph.validate.api import Options, validate_file  # noqa: E402


def _issues(path: Path, **opts: Any) -> list[Any]:
    return list(validate_file(str(path), Options(**opts)).issues)


def test_run001_unknown_layer_class_info_then_error(tmp_path: Path) -> None:
    cfg = M.model([M.inp(), M.layer("MyCustomLayer", "c", "in"), M.dense("d1", "c")])
    path = M.write_keras(tmp_path / "bad.keras", cfg, {"my_custom_layer": [], "dense": M.dense_weights()})
    hits = [i for i in _issues(path) if i.rule == "RUN001"]
    assert hits and hits[0].severity == "info" and "MyCustomLayer" in hits[0].message
    assert validate_file(str(path), Options()).ok or any(
        i.severity == "error" and not i.rule.startswith("RUN") for i in _issues(path)
    )
    strict = [i for i in _issues(path, require_runnable=True) if i.rule == "RUN001"]
    assert strict and strict[0].severity == "error"
    assert not validate_file(str(path), Options(require_runnable=True)).ok
    good = M.valid_keras(tmp_path / "good.keras")
    assert not [i for i in _issues(good, require_runnable=True) if i.rule.startswith("RUN")]


def test_run001_without_weights_checks_classes_only(tmp_path: Path) -> None:
    cfg = M.model([M.inp(), M.layer("MyCustomLayer", "c", "in")])
    hits = [i for i in _issues(M.write_json(tmp_path / "a.json", cfg)) if i.rule.startswith("RUN")]
    assert [i.rule for i in hits] == ["RUN001"]
    assert not [i for i in _issues(M.write_json(tmp_path / "b.json", M.simple())) if i.rule.startswith("RUN")]


def test_run002_unsupported_option(tmp_path: Path) -> None:
    cfg = M.simple()
    cfg["config"]["layers"][1]["config"]["activation"] = "no_such_activation"
    path = M.write_keras(tmp_path / "bad.keras", cfg, {"dense": M.dense_weights()})
    hits = [i for i in _issues(path) if i.rule == "RUN002"]
    assert hits and "activation" in hits[0].message
    assert "RUN002" not in [i.rule for i in _issues(M.valid_keras(tmp_path / "good.keras"))]


def test_run003_node_that_cannot_be_planned(tmp_path: Path) -> None:
    cfg = M.model([M.inp(), M.dense("d1", "in"), M.dense("d2", "d1")])
    path = M.write_keras(tmp_path / "bad.keras", cfg, {"dense": M.dense_weights(), "dense_1": []})
    hits = [i for i in _issues(path) if i.rule == "RUN003"]
    assert hits and "d2" in hits[0].where
    good = M.write_keras(
        tmp_path / "good.keras", cfg, {"dense": M.dense_weights(), "dense_1": M.dense_weights(3, 3)}
    )
    assert "RUN003" not in [i.rule for i in _issues(good)]
