"""Writers never carry what ``validate`` forbids: every error-severity security rule against every writer.

Each hostile file (``tests/validate/_payloads.py``) is the real Keras 3.15.1 sample ``samples/k3/cnn.keras``
(or its legacy ``cnn.h5``) with one payload put in. Every writer (``convert`` to ``.keras`` and ``.h5``,
``extract``, ``export``) must end without writing anything: exit 4 with one line naming the rule when the
model loads (the security gate, :mod:`modelgraph.saving.security_gate`), or exit 3 when the reader
already refuses the container. The expected exit code of each case is pinned, so a payload that starts
loading must meet the gate.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from modelgraph.cli.main import cli
from modelgraph.validate.security import SECURITY_RULES

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "validate"))
from _payloads import CASES, CNN_KERAS, NOT_WRITER_CASES  # noqa: E402

WRITERS: dict[str, Callable[[Path, Path], list[str]]] = {
    "convert-keras": lambda model, out: ["convert", str(model), "-o", str(out / "out.keras")],
    "convert-h5": lambda model, out: ["convert", str(model), "-o", str(out / "out.h5")],
    "extract": lambda model, out: ["extract", str(model), "--outputs", "gap", "-o", str(out / "sub.keras")],
    "export": lambda model, out: ["export", str(model), "-o", str(out / "model.onnx")],
}


def test_every_error_rule_has_a_writer_case_or_a_reason() -> None:
    errors = {rid for rid, rule in SECURITY_RULES.items() if rule.severity == "error"}
    assert errors == set(CASES) | set(NOT_WRITER_CASES)
    assert not set(CASES) & set(NOT_WRITER_CASES)


@pytest.mark.parametrize("rule", sorted(CASES))
def test_validate_reports_the_rule(tmp_path: Path, rule: str) -> None:
    import modelgraph

    build, _code = CASES[rule]
    report = modelgraph.validate(build(tmp_path))
    assert rule in {i.rule for i in report.issues if i.severity == "error"}, report.issues


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("rule", sorted(CASES))
def test_no_writer_writes_a_hostile_input(tmp_path: Path, rule: str, writer: str) -> None:
    build, code = CASES[rule]
    model = build(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    result = CliRunner().invoke(cli, WRITERS[writer](model, out))
    assert result.exit_code == code, (result.exit_code, result.output)
    assert list(out.iterdir()) == [], "nothing may be written"
    assert not (tmp_path / "canary").exists(), "a pickle was loaded"
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("modelgraph: error: "), result.output
    if code == 4:
        assert f"{rule} at " in lines[0] and f"modelgraph validate {model}" in lines[0], lines[0]


def test_a_graph_with_no_file_behind_it_has_its_configs_checked(tmp_path: Path) -> None:
    from dataclasses import replace

    import modelgraph
    from modelgraph.errors import SecurityRefusedError

    graph = modelgraph.load(CASES["SEC006"][0](tmp_path))
    in_memory = replace(graph, source="")
    with pytest.raises(SecurityRefusedError, match="SEC006") as caught:
        modelgraph.save(in_memory, tmp_path / "out.keras")
    assert [f.rule for f in caught.value.findings] == ["SEC006"]
    assert not (tmp_path / "out.keras").exists()


def test_the_clean_sample_still_converts(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["convert", str(CNN_KERAS), "-o", str(tmp_path / "out.keras")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out.keras").stat().st_size > 0
