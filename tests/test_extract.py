"""extract: sub-models between named tensors (Keras-verified cases are in test_convert.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import modelgraph
from modelgraph.errors import UsageError

from ._cli import run_cli

ROOT = Path(__file__).resolve().parent.parent
NESTED = ROOT / "samples" / "k2" / "nested.h5"
MULTI = ROOT / "samples" / "k3" / "multi_io_list.keras"


def test_cut_replaces_the_producer_by_an_input_layer():
    sub = modelgraph.extract(modelgraph.load(NESTED), outputs=["cat"], inputs=["proj"])
    assert sub.input_names == ["proj"]
    assert sub.layer("proj").class_name == "InputLayer"
    assert sub.layer("proj").config["batch_input_shape"] == [None, 8]
    assert "a" not in {layer.name for layer in sub.layers}
    assert "head" not in {layer.name for layer in sub.layers}
    # the nested model called twice is kept whole, with both calls
    assert [n.index for n in sub.nodes_of("inner_model")] == [0, 1]
    data = np.load(ROOT / "samples" / "goldens" / "k2_nested.npz")
    out = modelgraph.run(sub, {"proj": data["intermediate/proj/0/0"]})
    np.testing.assert_allclose(out["cat"], data["intermediate/cat/0/0"], atol=1e-5)


def test_a_shared_layer_keeps_only_the_calls_used_renumbered():
    graph = modelgraph.load(MULTI)
    assert len(graph.nodes_of("shared_dense")) == 3
    sub = modelgraph.extract(graph, outputs=["shared_dense[2][0]"], inputs=["add_layer"])
    assert [n.index for n in sub.nodes_of("shared_dense")] == [0]
    assert sub.outputs[0] == modelgraph.TensorRef("shared_dense", 0, 0)
    data = np.load(ROOT / "samples" / "goldens" / "k3_multi_io_list.npz")
    out = modelgraph.run(sub, {"add_layer": data["intermediate/add_layer/0/0"]})
    np.testing.assert_allclose(next(iter(out.values())), data["intermediate/shared_dense/2/0"], atol=1e-5)


def test_unknown_name_is_a_usage_error_with_suggestions(tmp_path):
    with pytest.raises(UsageError, match="did you mean 'proj'"):
        modelgraph.extract(modelgraph.load(NESTED), outputs=["prj"])
    proc = run_cli("extract", NESTED, "--outputs", "cta", "-o", tmp_path / "s.keras")
    assert proc.returncode == 2
    assert "unknown layer 'cta'; did you mean 'cat'" in proc.stderr
    assert not list(tmp_path.iterdir())


def test_a_name_inside_a_nested_model_names_the_model_to_cut_at():
    with pytest.raises(UsageError, match="nested model 'inner_model'"):
        modelgraph.extract(modelgraph.load(NESTED), outputs=["inner_model/inner_dense"])


def test_an_input_that_does_not_feed_the_outputs_is_a_usage_error():
    with pytest.raises(UsageError, match=r"\['bn'\] do not feed"):
        modelgraph.extract(modelgraph.load(NESTED), outputs=["seq_inner"], inputs=["bn"])


def test_a_call_that_does_not_exist_is_a_usage_error():
    with pytest.raises(UsageError, match="has 3 call"):
        modelgraph.extract(modelgraph.load(MULTI), outputs=["shared_dense[5][0]"])


def test_extract_cli_writes_a_keras_file(tmp_path):
    out = tmp_path / "sub.keras"
    proc = run_cli("extract", NESTED, "--outputs", "cat", "--inputs", "proj", "-o", out)
    assert proc.returncode == 0, proc.stderr
    sub = modelgraph.load(out)
    assert sub.input_names == ["proj"] and sub.output_names == ["cat"]
