"""The one graph walk (modelgraph.graph_walk) that shape inference, the runner's plan and the ONNX
exporter share, on real files: one nested model used inside another nested model and twice by the
outer model (samples/*/shared_two_levels.*, made by Keras 3.15.1 and tf_keras 2.21)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from modelgraph.errors import UnsupportedConfigError, UnsupportedError
from modelgraph.graph import ModelGraph, TensorRef
from modelgraph.graph_walk import GraphWalker, Scope, Visit, output_keys
from modelgraph.loading import load
from modelgraph.runner.interpreter import Runner

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
FILES = ["k3/shared_two_levels.keras", "k3/shared_two_levels.h5", "k2/shared_two_levels.keras"]

# Keras's order: the nested model inside ``mid`` first, then the two direct calls of ``shared_inner``
# (a model called twice gets ``:<node>`` in its path), each followed by the nested model's own visit.
EXPECTED = [
    "mid/shared_inner/s_d1",
    "mid/shared_inner/s_d2",
    "model mid/shared_inner",
    "mid/m_cat",
    "mid/m_d",
    "model mid",
    "shared_inner:0/s_d1",
    "shared_inner:0/s_d2",
    "model shared_inner",
    "shared_inner:1/s_d1",
    "shared_inner:1/s_d2",
    "model shared_inner",
    "cat",
]


class Recorder(GraphWalker[str]):
    """A client that records what it visits; a node's value is the path of the node that made it."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.reads: dict[str, list[str]] = {}
        self.scopes: list[tuple[str, int]] = []

    def run_node(self, visit: Visit, env: dict[TensorRef, str], masks: dict[TensorRef, Any] | None) -> None:
        self.seen.append(visit.path)
        self.reads[visit.path] = [env[r] for r in visit.node.inputs]
        for t in visit.scope.referenced_outputs(visit.node):
            env[TensorRef(visit.layer.name, visit.node.index, t)] = visit.path
        if masks is not None:
            masks[TensorRef(visit.layer.name, visit.node.index, 0)] = f"mask of {visit.path}"

    def enter_model(self, visit: Visit, inner: Scope) -> None:
        self.scopes.append((inner.prefix, inner.depth))

    def model_done(self, visit: Visit, outs: Sequence[tuple[int, str]]) -> None:
        self.seen.append(f"model {visit.path}")


@pytest.mark.parametrize("name", FILES)
def test_nested_and_shared_calls_are_inlined_in_keras_order(name: str) -> None:
    graph = load(SAMPLES / name)
    rec = Recorder()
    env = {ref: f"input {ref.layer}" for ref in graph.inputs}
    rec.walk(graph, env, {})
    assert rec.seen == EXPECTED
    assert rec.scopes == [
        ("mid/", 1),
        ("mid/shared_inner/", 2),
        ("shared_inner:0/", 1),
        ("shared_inner:1/", 1),
    ]
    # Inputs bound to the caller's values; outputs aliased to the outer node's outputs.
    assert rec.reads["mid/shared_inner/s_d1"] == ["input x"]
    assert rec.reads["mid/m_cat"] == ["mid/shared_inner/s_d2", "input x"]
    assert rec.reads["shared_inner:0/s_d1"] == ["input x"]  # b = shared(x)
    assert rec.reads["shared_inner:1/s_d1"] == ["mid/m_d"]  # c = shared(mid(x))
    assert rec.reads["cat"] == ["mid/m_d", "shared_inner:0/s_d2", "shared_inner:1/s_d2"]
    assert env[graph.outputs[0]] == "cat"


@pytest.mark.parametrize("name", FILES)
def test_the_runner_plan_is_the_walk(name: str) -> None:
    """The plan's steps are the walk's visits, in order (the runner is a client, not a copy)."""
    graph = load(SAMPLES / name)
    rec = Recorder()
    rec.walk(graph, {ref: "" for ref in graph.inputs})
    steps = Runner(graph, fuse=False).steps
    assert [("model " if s.kind == "model" else "") + s.path for s in steps] == rec.seen


def test_a_call_binding_no_tensor_is_reported_and_skipped() -> None:
    graph = load(SAMPLES / "k3/shared_two_levels.keras")
    calls: list[str] = []

    class Missing(Recorder):
        def missing_inputs(self, visit: Visit, missing: Sequence[TensorRef]) -> None:
            calls.append(f"{visit.path} misses {[str(r) for r in missing]}")

    rec = Missing()
    rec.walk(graph, {})  # no input bound
    assert rec.seen == []
    assert calls[0] == "mid misses ['x[0][0]']"


def test_output_keys_name_every_output_once() -> None:
    refs = [TensorRef("a", 0, 0), TensorRef("b", 0, 0), TensorRef("b", 1, 0), TensorRef("a", 0, 0)]
    assert output_keys(refs) == ["a:0:0", "b:0:0", "b:1:0", "a:0:0#2"]
    assert output_keys(refs[:2]) == ["a", "b"]


def _thawed(graph: ModelGraph) -> ModelGraph:
    """``graph`` with every layer's ``trainable`` set to True (at every nesting level)."""
    layers = []
    for layer in graph.layers:
        sub = _thawed(layer.subgraph) if layer.subgraph is not None else None
        layers.append(replace(layer, config={**layer.config, "trainable": True}, subgraph=sub))
    return replace(graph, layers=tuple(layers))


def test_frozen_batchnorm_called_in_training_mode_runs_in_inference_mode() -> None:
    """One rule for the runner and the exporter (Visit.refuses_training): Keras 3 runs a frozen
    BatchNormalization called with training=True (directly, or inside a nested model called with
    training=True) with its moving statistics (samples/k3/frozen_bn_training.*, goldens by Keras)."""
    golden = np.load(SAMPLES / "goldens" / "k3_frozen_bn_training.npz")
    x, want = golden["input/x"], golden["output/0"]
    graph = load(SAMPLES / "k3/frozen_bn_training.keras")
    np.testing.assert_allclose(Runner(graph).run(x)["head"], want, rtol=1e-5, atol=1e-5)
    ort = pytest.importorskip("onnxruntime")
    from modelgraph.saving.onnx.export import to_onnx

    model = to_onnx(graph).model
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {"x": x.astype(np.float32)})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # The same calls on trainable BatchNormalization layers would use batch statistics: refused by both.
    thawed = _thawed(graph)
    with pytest.raises(UnsupportedConfigError, match="training"):
        Runner(thawed)
    with pytest.raises(UnsupportedError, match="bn_frozen.*training"):
        to_onnx(thawed)
