"""The rewrite state every fusion pass records its edits in (``Rewrite``, runner/passes/_graph.py):
removed layers rewired to the tensor standing for them, replaced layers taking a new call, and the
graph itself back when nothing was removed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from modelgraph.graph import TensorRef
from modelgraph.loading import load
from modelgraph.runner.interpreter import Runner
from modelgraph.runner.passes._graph import Rewrite

SAMPLES = Path(__file__).resolve().parent.parent.parent / "samples"


def test_a_rewrite_without_edits_is_the_graph() -> None:
    graph = load(SAMPLES / "k3" / "cnn.keras")
    rewrite = Rewrite.of(graph)
    assert rewrite.producer("conv1") == graph.node("conv1") and rewrite.producer("nothing") is None
    assert rewrite.reader(graph.node("conv1")) == graph.node("bn1")
    assert rewrite.reader(graph.node("pool1")) is None  # four branches read it
    assert rewrite.result() is graph


def test_removed_layers_are_rewired_and_replaced_layers_take_their_call() -> None:
    """Keras's cnn sample without its inference-time identity (Dropout), the Dense reading the
    Dropout's input instead, and without its output layer (the model output then the tensor standing
    for it): the same numbers as Keras's model up to the removed layer."""
    graph = load(SAMPLES / "k3" / "cnn.keras")
    rewrite = Rewrite.of(graph)
    rewrite.remove("drop", stands_for=TensorRef("cat2", 0, 0))
    assert rewrite.removed("drop") and not rewrite.removed("cat2")
    rewritten = rewrite.result()
    assert [lyr.name for lyr in rewritten.layers] == [lyr.name for lyr in graph.layers if lyr.name != "drop"]
    assert rewritten.node("probs").inputs == (TensorRef("cat2", 0, 0),)
    x = np.random.default_rng(1).uniform(-1, 1, (2, *graph.layer("img").config["batch_shape"][1:]))
    x = x.astype(np.float32)
    want = Runner(graph, fuse=False).run(x)
    np.testing.assert_allclose(Runner(rewritten, fuse=False).run(x)["probs"], want["probs"], rtol=1e-6)

    # A layer replaced under its name with another node's call; the model output rewired.
    rewrite = Rewrite.of(graph)
    linear = replace(graph.layer("probs"), config={**graph.layer("probs").config, "activation": "linear"})
    rewrite.replace_layer(linear, call=graph.node("drop"))  # reads cat2, as Dropout did
    assert rewrite.layer("probs") is linear
    replaced = rewrite.result()
    assert replaced.layer("probs") is linear and replaced.node("probs").inputs == (TensorRef("cat2", 0, 0),)
    rewrite.remove("drop")
    rewrite.remove("probs", stands_for=TensorRef("cat2", 0, 0))
    rewritten = rewrite.result()
    assert rewritten.outputs == (TensorRef("cat2", 0, 0),)
    assert rewritten.output_structure == TensorRef("cat2", 0, 0)
    assert not rewritten.has_layer("probs") and not rewritten.has_layer("drop")


def test_merged_steps_say_themselves_whether_they_return_fresh_arrays() -> None:
    """``fresh_output`` (which lets an Add write into its input) reads what each merged step's kernel
    registered, not a list kept by the passes: the bottleneck, conv-with-residual and zero-padded
    steps always return a new array, the others (and catalogue classes) do not say so."""
    from modelgraph.runner import registry
    from modelgraph.runner.fast import fused

    fresh = {fused.INVERTED_BOTTLENECK, fused.CONV_RESIDUAL, fused.ZERO_PADDED}
    for name in fresh:
        assert registry.returns_fresh_array(name), name
    for name in (fused.PREPARED_SEPARABLE, fused.SCALED_CONV, fused.ADD_ACTIVATION, "Conv2D", "Add"):
        assert not registry.returns_fresh_array(name), name
    with pytest.raises(ValueError, match="fused steps"):
        registry.register("Conv2D", fresh_output=True)(lambda spec: spec)
