"""Keras 3 implicit masks (modelgraph.runner.masks): the rules of one node, and the sample made by
Keras 3.15.1 whose masks its config does not record (samples/goldens/k3_mask_implicit)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from modelgraph import catalogue
from modelgraph.graph import TensorRef
from modelgraph.loading import load
from modelgraph.runner import masks as mk
from modelgraph.runner.interpreter import Runner

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
M1 = np.array([[True, True, False, True]])
M2 = np.array([[True, False, False, True]])
A, B = TensorRef("a", 0, 0), TensorRef("b", 0, 0)


def _x(*shape: int) -> np.ndarray:
    return np.ones(shape, np.float32)


def test_every_class_states_both_versions_or_says_why():
    for spec in catalogue.declared():
        assert set(spec.masks) <= {mk.K2, mk.K3}, spec.key
        for b in spec.masks.values():
            # Keras 3 calls, and tf.keras MultiHeadAttention (its scores mask depends on the call)
            assert (b.consume in ("call", "mha")) == bool(b.call), spec.key


def test_merges_or_in_keras3_and_in_tf_keras():
    k3 = mk.rule_for_node("Add", {}, 3, ([A, B],), {}, (A, B))
    np.testing.assert_array_equal(k3.produce([M1, M2], [_x(1, 4, 2)] * 2, [_x(1, 4, 2)])[0], M1 | M2)
    assert k3.produce([M1, None], [_x(1, 4, 2)] * 2, [_x(1, 4, 2)]) == [None]
    k2 = mk.rule_for_node("Add", {}, 2, ([A, B],), {}, (A, B))
    np.testing.assert_array_equal(k2.produce([M1, M2], [_x(1, 4, 2)] * 2, [_x(1, 4, 2)])[0], M1 & M2)
    np.testing.assert_array_equal(k2.produce([M1, None], [_x(1, 4, 2)] * 2, [_x(1, 4, 2)])[0], M1)


def test_keras3_concatenate_any_over_the_last_axis():
    rule = mk.rule_for_node("Concatenate", {"axis": 1}, 3, ([A, B],), {}, (A, B))
    out = rule.produce([M1, None], [_x(1, 4, 2), _x(1, 3, 2)], [_x(1, 7, 2)])[0]
    np.testing.assert_array_equal(out, np.concatenate([M1, np.ones((1, 3), bool)], axis=1))


def test_keras3_fills_mask_for_one_tensor_argument_and_named_masks_for_several():
    att = mk.rule_for_node("Attention", {}, 3, ([A, B],), {}, (A, B))
    assert att.consume([M1, M2])["mask"] == [M1, M2]
    mha = mk.rule_for_node("MultiHeadAttention", {}, 3, (A, B), {}, (A, B))
    got = mha.consume([M1, M2])
    assert set(got) == {"query_mask", "value_mask"}
    assert got["query_mask"] is M1 and got["value_mask"] is M2


def test_keras3_rnn_with_an_initial_state_gets_no_mask_but_passes_it_on():
    """Two tensor arguments (sequences, initial_state) and no ``sequences_mask`` parameter: Keras 3's
    __call__ fills in no mask; compute_mask still sees the sequence's mask."""
    rule = mk.rule_for_node("LSTM", {"return_sequences": True}, 3, (A,), {"initial_state": [B]}, (A, B))
    assert rule.consume is None
    np.testing.assert_array_equal(rule.produce([M1, None], [_x(1, 4, 2), _x(1, 3)], [_x(1, 4, 3)])[0], M1)
    k2 = mk.rule_for_node("LSTM", {"return_sequences": True}, 2, (A,), {"initial_state": [B]}, (A, B))
    assert k2.consume([M1, None]) == {"mask": M1}


def test_keras3_given_mask_wins():
    rule = mk.rule_for_node("GlobalAveragePooling1D", {}, 3, (A,), {"mask": B}, (A, B))
    assert rule.consume is None  # the recorded mask kwarg runs as an argument


def test_multi_head_attention_clears_its_inputs_masks_for_later_layers():
    """mha(emb_q, emb_v) runs before att_unmasked_q([feat_q, emb_v]) and mha_self(emb_v, emb_v) in
    Keras's order, so those two see emb_v unmasked (the golden outputs say so)."""
    graph = load(SAMPLES / "k3" / "mask_implicit.keras")
    cleared, position = mk.cleared_masks(graph)
    emb_v = TensorRef("emb_v", 0, 0)
    assert cleared[emb_v] == position[("mha", 0)]
    assert position[("att", 0)] < position[("mha", 0)] < position[("mha_self", 0)]


@pytest.mark.parametrize("fmt", ["keras", "h5", "json"])
def test_sample_needs_the_implicit_masks(fmt: str):
    meta = json.loads((SAMPLES / "goldens" / "k3_mask_implicit.json").read_text())
    config = json.loads((SAMPLES / "k3" / "mask_implicit.json").read_text())
    layers = {lyr["name"]: lyr for lyr in config["config"]["layers"]}
    # The config records no mask for these calls: only the run-time propagation gives it.
    for name in ("att", "add_att", "mha", "add_masked"):
        assert all(not node["kwargs"].get("mask") for node in layers[name]["inbound_nodes"]), name
    path = {"keras": "k3/mask_implicit.keras", "h5": "k3/mask_implicit.h5", "json": "k3/mask_implicit.json"}[
        fmt
    ]
    weights = SAMPLES / "k3" / "mask_implicit.weights.h5" if fmt == "json" else None
    graph = load(SAMPLES / path, weights=weights)
    with np.load(SAMPLES / meta["npz"]) as golden:
        feeds = {k[len("input/") :]: golden[k] for k in golden.files if k.startswith("input/")}
        want = [golden[f"output/{i}"] for i in range(len(meta["outputs"]))]
    runner = Runner(graph)
    got = runner.run(feeds)
    for key, ref in zip(runner.output_keys, want, strict=True):
        np.testing.assert_allclose(got[key], ref, atol=1e-5, rtol=1e-4, err_msg=key)
