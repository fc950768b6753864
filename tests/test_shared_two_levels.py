"""One nested model used at two nesting levels (inside another nested model and directly in the outer
model), made by Keras 3.15.1 and tf_keras 2.21 (samples/*/shared_two_levels.*): Keras stores its
variables once, at the first path its saver visits, and counts them once."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from modelgraph.loading import load
from modelgraph.sharing import repeated_objects
from modelgraph.stats import model_totals
from modelgraph.validate.api import Options, validate_file

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
CASES = [
    ("k3", "k3/shared_two_levels.keras", None),
    ("k3", "k3/shared_two_levels_dir", None),
    ("k3", "k3/shared_two_levels.h5", None),
    ("k3", "k3/shared_two_levels.json", "k3/shared_two_levels.weights.h5"),
    ("k2", "k2/shared_two_levels.keras", None),
    ("k2", "k2/shared_two_levels.h5", None),
    ("k2", "k2/shared_two_levels.json", "k2/shared_two_levels_weights.h5"),
]


@pytest.mark.parametrize(("family", "model", "weights"), CASES)
def test_params_counted_once_and_weights_found(family: str, model: str, weights: str | None) -> None:
    golden = json.loads((SAMPLES / "goldens" / f"{family}_shared_two_levels.json").read_text())
    graph = load(SAMPLES / model, weights=None if weights is None else SAMPLES / weights)
    assert repeated_objects(graph) == {("shared_inner",): ("mid", "shared_inner")}
    assert graph.param_count == golden["params"]["total"]
    totals = model_totals(graph)
    assert totals.total_params == golden["params"]["total"]
    assert totals.trainable_params == golden["params"]["trainable"]
    # Both places read the same values (a .keras stores them once, at the first place; a legacy .h5
    # under each top-level layer that holds the object).
    inner = graph.layer_at(("shared_inner", "s_d1")).weights
    first = graph.layer_at(("mid", "shared_inner", "s_d1")).weights
    assert [w.name for w in inner] == [w.name for w in first] and inner
    for a, b in zip(inner, first, strict=True):
        np.testing.assert_array_equal(a.read(), b.read())
    if model.endswith((".keras", "_dir")):
        assert [w.location for w in inner] == [w.location for w in first]


@pytest.mark.parametrize(("family", "model", "weights"), CASES)
def test_validate_is_clean(family: str, model: str, weights: str | None) -> None:
    opts = Options(check_values=True, weights=None if weights is None else str(SAMPLES / weights))
    issues = validate_file(str(SAMPLES / model), opts).issues
    assert [str(i) for i in issues if i.severity == "error"] == []
