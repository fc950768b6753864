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


@pytest.mark.parametrize("name", FILES)
def test_input_nodes_and_bindings_are_given_to_the_client(name: str) -> None:
    """Every input node (the top level's and each nested call's) goes to ``input_node`` in Keras's
    order, after the call has bound it; each nested scope says which caller tensor each input got."""
    graph = load(SAMPLES / name)
    inputs: list[tuple[str, str]] = []
    bindings: dict[str, list[tuple[str, str]]] = {}

    class Inputs(Recorder):
        def input_node(self, visit: Visit, env: dict[TensorRef, str], masks: Any) -> None:
            inputs.append((visit.path, env.get(TensorRef(visit.layer.name, visit.node.index, 0), "unbound")))

        def enter_model(self, visit: Visit, inner: Scope) -> None:
            bindings[inner.prefix] = [(str(a), str(b)) for a, b in inner.bindings]

    Inputs().walk(graph, {ref: f"input {ref.layer}" for ref in graph.inputs})
    assert inputs == [
        ("x", "input x"),
        ("mid/m_in", "input x"),
        ("mid/shared_inner/s_in", "input x"),
        ("shared_inner:0/s_in", "input x"),
        ("shared_inner:1/s_in", "mid/m_d"),
    ]
    assert bindings["mid/"] == [("m_in[0][0]", "x[0][0]")]
    assert bindings["shared_inner:1/"] == [("s_in[0][0]", "mid[0][0]")]


def test_a_client_may_visit_nodes_whose_inputs_nothing_computed() -> None:
    """``missing_inputs`` returning True visits the node anyway (shape inference does: its inputs are
    unknown); a nested call then binds what was computed and nothing else."""
    graph = load(SAMPLES / "k3/shared_two_levels.keras")

    class Anyway(Recorder):
        def missing_inputs(self, visit: Visit, missing: Sequence[TensorRef]) -> bool:
            self.seen.append(f"missing {visit.path}")
            return True

        def run_node(self, visit: Visit, env: dict[TensorRef, str], masks: Any) -> None:
            self.reads[visit.path] = [env.get(r, "?") for r in visit.node.inputs]
            self.seen.append(visit.path)
            if visit.path != "mid/m_d":  # m_d computes nothing
                env[TensorRef(visit.layer.name, visit.node.index, 0)] = visit.path

    rec = Anyway()
    rec.walk(graph, {})  # no input bound
    assert rec.seen[:3] == ["missing mid", "missing mid/shared_inner", "missing mid/shared_inner/s_d1"]
    assert rec.reads["mid/shared_inner/s_d1"] == ["?"]
    assert rec.reads["mid/m_cat"] == ["mid/shared_inner/s_d2", "?"]
    assert rec.reads["shared_inner:1/s_d1"] == ["?"]  # bound to mid's output, which m_d did not compute
    assert rec.reads["cat"] == ["?", "shared_inner:0/s_d2", "shared_inner:1/s_d2"]


@pytest.mark.parametrize("name", FILES)
def test_shape_inference_keeps_one_result_per_nested_call(name: str) -> None:
    """Shape inference is a client of the walk: each call of a nested model (one inside another, one
    called twice) has its own result, inferred with that call's input shapes."""
    from modelgraph.shapes import infer_shapes

    graph = load(SAMPLES / name)
    result = infer_shapes(graph)
    assert set(result.nested) == {("mid", 0), ("shared_inner", 0), ("shared_inner", 1)}
    first, second = result.nested[("shared_inner", 0)], result.nested[("shared_inner", 1)]
    assert first is not second
    assert first.inputs[("s_d1", 0)] == [result.shape(TensorRef("x", 0, 0))] == [(None, 6)]
    assert second.inputs[("s_d1", 0)] == [result.shape(TensorRef("mid", 0, 0))]
    assert result.find(["mid", "shared_inner", "s_d2"]) == first.outputs[("s_d2", 0)]
    assert result.find(["shared_inner", "s_d2"], calls=[1]) == second.outputs[("s_d2", 0)]
    assert [p for p in result.problems if p.severity == "error"] == []


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
