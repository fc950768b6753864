"""TF.js Normalization (samples/tfjs/normalization, converted by tensorflowjs 4.22.0 from tf_keras
2.21's k2/normalization.h5): adapt() built the layer outside any name scope, so its variables are
stored as bare 'mean', 'variance', 'count' (count converted to int32); they belong to the layer."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from modelgraph.loading import load
from modelgraph.runner.interpreter import Runner
from modelgraph.validate.api import Options, validate_file

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
MODEL = SAMPLES / "tfjs" / "normalization" / "model.json"


def test_bare_names_bind_to_the_normalization_layer():
    manifest = json.loads(MODEL.read_text())["weightsManifest"][0]["weights"]
    assert [w["name"] for w in manifest if "/" not in w["name"]] == ["mean", "variance", "count"]
    graph = load(MODEL)
    assert [w.name for w in graph.layer("norm").weights] == ["mean", "variance", "count"]
    assert graph.layer("fixed").weights == ()


def test_validate_is_clean_and_outputs_match_keras():
    issues = validate_file(str(MODEL), Options(check_values=True)).issues
    assert [str(i) for i in issues if i.severity in ("error", "warning")] == []
    golden = np.load(SAMPLES / "goldens" / "k2_normalization.npz")
    out = Runner(load(MODEL)).run({"x": golden["input/x"]})
    np.testing.assert_allclose(out["d"], golden["output/0"], atol=1e-5, rtol=1e-4)
