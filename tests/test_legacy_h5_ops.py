"""Keras 3's legacy .h5 writer drops an op node's ``module``; an op that saves ``dtype: null``
(ConvertToTensor, which Keras 3 adds when it merges masks) is still an op, not a layer."""

from __future__ import annotations

from pathlib import Path

from modelgraph.loading import load
from modelgraph.runner.interpreter import Runner

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def test_mask_ops_of_a_keras3_legacy_h5_are_ops_and_run():
    graph = load(SAMPLES / "k3" / "mask_implicit.h5")
    kinds = {layer.name: layer.kind for layer in graph.layers}
    for name in ("not_equal", "convert_to_tensor", "convert_to_tensor_1", "logical_or"):
        assert kinds[name] == "op", name
    assert kinds["emb_q"] == "layer"
    assert Runner(graph, strict=False).check() == []
