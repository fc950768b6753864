"""Shape rules (SHP): one model per rule that triggers it, and a near miss that must not."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _models as M  # noqa: E402

from modelgraph.validate.api import Options, validate_file  # noqa: E402
from modelgraph.validate.shapes import KIND_RULES  # noqa: E402


def conv(name: str, src: str, rank: int, kernel: int, **extra: Any) -> dict[str, Any]:
    cls = {1: "Conv1D", 2: "Conv2D"}[rank]
    return M.layer(
        cls, name, src, filters=2, kernel_size=[kernel] * rank, strides=[1] * rank, padding=extra.pop("padding", "valid"),
        dilation_rate=[1] * rank, use_bias=True, data_format="channels_last", groups=1, activation="linear", **extra,
    )  # fmt: skip


# rule -> (bad model, near miss)
CASES: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
    "SHP001": (
        lambda: M.model(
            [M.inp(), M.inp("in2", (None, 5)), M.layer("Add", "add", ["in", "in2"])], inputs=["in", "in2"]
        ),
        lambda: M.model(
            [M.inp(), M.inp("in2", (None, 1)), M.layer("Add", "add", ["in", "in2"])], inputs=["in", "in2"]
        ),
    ),
    "SHP003": (
        lambda: M.model([M.inp(), M.layer("Reshape", "r", "in", target_shape=[3])]),
        lambda: M.model([M.inp(), M.layer("Reshape", "r", "in", target_shape=[2, -1])]),
    ),
    "SHP004": (
        lambda: M.model([M.inp("in", (None, 3, 2)), conv("c", "in", 1, 5)]),
        lambda: M.model([M.inp("in", (None, 3, 2)), conv("c", "in", 1, 5, padding="same")]),
    ),
    "SHP005": (
        lambda: M.model([M.inp(), conv("c", "in", 2, 3)]),
        lambda: M.model([M.inp("in", (None, 5, 5, 1)), conv("c", "in", 2, 3)]),
    ),
    "SHP006": (
        lambda: M.model([M.inp(), M.dense("d1", "in"), M.dense("d2", ("d1", 0, 1))]),
        lambda: M.model([M.inp(), M.dense("d1", "in"), M.dense("d2", ("d1", 0, 0))]),
    ),
    "SHP007": (
        lambda: M.model(
            [M.inp(), M.inp("in2"), M.layer("Concatenate", "c", ["in", "in2"], axis=5)], inputs=["in", "in2"]
        ),
        lambda: M.model(
            [M.inp(), M.inp("in2"), M.layer("Concatenate", "c", ["in", "in2"], axis=-1)], inputs=["in", "in2"]
        ),
    ),
    "SHP008": (
        lambda: M.model([M.inp(), M.dense("d1", "in", units="abc")]),  # type: ignore[arg-type]
        lambda: M.model([M.inp(), M.dense("d1", "in", units=7)]),
    ),
    "SHP009": (
        lambda: M.model([M.inp("in", None), M.dense("d1", "in")]),
        lambda: M.model([M.inp("in", (None, 4)), M.dense("d1", "in")]),
    ),
    "SHP010": (
        lambda: M.model([M.inp(), M.layer("MyCustomLayer", "c", "in")]),
        lambda: M.model([M.inp(), M.layer("Activation", "c", "in", activation="relu")]),
    ),
    "SHP012": (
        # 2**32 elements per sample (16 GiB as float32) against exactly 2**31.
        lambda: M.model([M.inp("in", (None, 2**16, 2**16)), M.dense("d1", "in")]),
        lambda: M.model([M.inp("in", (None, 2**15, 2**16)), M.dense("d1", "in")]),
    ),
    "SHP011": (
        lambda: M.model(
            [M.inp(), M.layer("Embedding", "e", "in", input_dim=10, output_dim=3, input_length=7)]
        ),
        lambda: M.model(
            [M.inp(), M.layer("Embedding", "e", "in", input_dim=10, output_dim=3, input_length=4)]
        ),
    ),
}


def _rules(path: Path) -> list[str]:
    return [i.rule for i in validate_file(str(path), Options()).issues]


@pytest.mark.parametrize("rule", sorted(CASES))
def test_rule_triggers_and_near_miss_does_not(rule: str, tmp_path: Path) -> None:
    bad, good = CASES[rule]
    bad_issues = validate_file(str(M.write_json(tmp_path / "bad.json", bad())), Options()).issues
    hits = [i for i in bad_issues if i.rule == rule]
    assert hits, [str(i) for i in bad_issues]
    assert all(i.where.startswith("layer '") and i.message and i.hint for i in hits)
    assert rule not in _rules(M.write_json(tmp_path / "good.json", good()))


def test_shp002_input_against_kernel(tmp_path: Path) -> None:
    bad = M.write_keras(tmp_path / "bad.keras", M.simple(), {"dense": M.dense_weights(5, 3)})
    issues = validate_file(str(bad), Options()).issues
    hit = [i for i in issues if i.rule == "SHP002"]
    assert hit and "(5, 3)" in hit[0].message and "(4, 3)" in hit[0].message
    assert "WGT003" not in [i.rule for i in issues]  # one finding, not two
    assert "SHP002" not in _rules(M.valid_keras(tmp_path / "good.keras"))


def test_huge_tensor_is_reported_where_it_first_appears(tmp_path: Path) -> None:
    # The input is fine; the first Dense makes 2**12 x 2**20 = 2**32 elements per sample; the
    # second keeps it that large and is not reported again.
    cfg = M.model(
        [M.inp("in", (None, 2**12, 8)), M.dense("wide", "in", units=2**20), M.dense("after", "wide")]
    )
    hits = [
        i
        for i in validate_file(str(M.write_json(tmp_path / "m.json", cfg)), Options()).issues
        if i.rule == "SHP012"
    ]
    assert len(hits) == 1 and hits[0].severity == "warning", [str(i) for i in hits]
    assert "'wide'" in hits[0].where and "4,294,967,296 elements per sample" in hits[0].message


def test_dimension_past_int64_is_shp004_and_inspect_still_works(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from modelgraph.cli.main import cli

    path = M.write_json(tmp_path / "m.json", M.model([M.inp("in", (None, 10**40, 3)), M.dense("d1", "in")]))
    hits = [i for i in validate_file(str(path), Options()).issues if i.rule == "SHP004"]
    assert len(hits) == 1 and "past the int64 range" in hits[0].message
    result = CliRunner().invoke(cli, ["inspect", str(path)])
    assert result.exit_code == 0, result.output
    assert "10000000000000000000000000000000000000000" in result.output


def test_every_problem_kind_has_a_rule() -> None:
    from modelgraph.validate.registry import RULES

    assert set(KIND_RULES.values()) <= set(RULES)


def test_shape_problems_of_many_layers_are_all_reported(tmp_path: Path) -> None:
    cfg = M.model(
        [
            M.inp(),
            M.inp("in2", (None, 5)),
            M.layer("Add", "add", ["in", "in2"]),
            M.layer("Reshape", "r", "in", target_shape=[3]),
            M.layer("Concatenate", "c", ["in", "r"], axis=5),
        ],
        inputs=["in", "in2"],
        outputs=["add", "c"],
    )
    rules = _rules(M.write_json(tmp_path / "m.json", cfg))
    assert {"SHP001", "SHP003"} <= set(rules)
