"""tf.keras implicit mask rules (modelgraph.runner.masks) against the masks real tf_keras computed.

The goldens ``k2_mask_rnn``, ``k2_mask_merge`` and ``k2_mask_attention`` (samples/gen_k2.py) record,
next to every layer's output, the mask tf_keras attached to it (``mask/<layer>/<node>/<tensor>``;
no key = no mask). Each node's rule is fed the Keras masks and tensors of its inputs and must give
exactly Keras's output masks, so a wrong rule is named directly rather than through a diverging RNN
further down (tests/runner/test_parity_samples.py checks those outputs). The unit tests below pin
each rule's behaviour on small hand-made masks.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from modelgraph import catalogue
from modelgraph.graph import ModelGraph, TensorRef
from modelgraph.loading import load
from modelgraph.runner import masks as mk

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
MASK_GOLDENS = ("k2_mask_rnn", "k2_mask_merge", "k2_mask_attention")

# Classes each golden must exercise, so that a regenerated sample cannot silently stop covering a rule.
EXPECTED_CLASSES = {
    "k2_mask_rnn": {"Embedding", "Bidirectional", "TimeDistributed", "Masking", "LSTM", "GRU", "SimpleRNN"},
    "k2_mask_merge": {
        "Add",
        "Subtract",
        "Multiply",
        "Average",
        "Maximum",
        "Minimum",
        "Concatenate",
        "Dot",
        "Dense",
        "LayerNormalization",
        "Dropout",
        "Activation",
        "BatchNormalization",
        "ReLU",
        "LeakyReLU",
        "PReLU",
        "ELU",
        "ThresholdedReLU",
        "GaussianNoise",
        "GaussianDropout",
        "AlphaDropout",
        "SpatialDropout1D",
        "ActivityRegularization",
        "UnitNormalization",
        "Conv1D",
        "Flatten",
        "Reshape",
        "Identity",
        "Rescaling",
        "GlobalAveragePooling1D",
        "GlobalMaxPooling1D",
    },
    "k2_mask_attention": {"Attention", "AdditiveAttention", "MultiHeadAttention", "GlobalAveragePooling1D"},
}


@cache
def _golden(stem: str) -> tuple[dict[str, Any], dict[str, np.ndarray], ModelGraph]:
    meta = json.loads((SAMPLES / "goldens" / f"{stem}.json").read_text())
    with np.load(SAMPLES / "goldens" / f"{stem}.npz", allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    return meta, arrays, load(SAMPLES / meta["files"]["h5"])


def _value(arrays: dict[str, np.ndarray], graph: ModelGraph, ref: TensorRef) -> np.ndarray:
    if graph.layer(ref.layer).class_name == "InputLayer":
        return arrays[f"input/{ref.layer}"]
    return arrays[f"intermediate/{ref.layer}/{ref.node_index}/{ref.tensor_index}"]


def _mask(arrays: dict[str, np.ndarray], ref: TensorRef) -> np.ndarray | None:
    return arrays.get(f"mask/{ref.layer}/{ref.node_index}/{ref.tensor_index}")


def _node_ids(stem: str) -> list[str]:
    _, _, graph = _golden(stem)
    return [f"{n.layer}/{n.index}" for n in graph.nodes if graph.layer(n.layer).class_name != "InputLayer"]


def _cases() -> list:
    return [
        pytest.param(stem, node, id=f"{stem}-{node}") for stem in MASK_GOLDENS for node in _node_ids(stem)
    ]


@pytest.mark.parametrize(("stem", "node_id"), _cases())
def test_rule_matches_keras_masks(stem: str, node_id: str) -> None:
    """Each node's produced masks equal the ones tf_keras attached (None where Keras had none)."""
    _, arrays, graph = _golden(stem)
    name, index = node_id.rsplit("/", 1)
    node = graph.node(name, int(index))
    layer = graph.layer(name)
    # The node's call arguments too: a MultiHeadAttention's scores mask depends on them.
    rule = mk.rule_for_node(layer.class_name, layer.config, 2, node.args, node.kwargs, node.inputs)
    in_masks = [_mask(arrays, r) for r in node.inputs]
    inputs = [_value(arrays, graph, r) for r in node.inputs]
    n_out = 0
    while f"intermediate/{name}/{index}/{n_out}" in arrays:
        n_out += 1
    outputs = [arrays[f"intermediate/{name}/{index}/{t}"] for t in range(n_out)]
    # As the interpreter does: a rule produces only from an input mask or when it is a mask source.
    produced: list[Any] = [None] * n_out
    if rule.produce is not None and (rule.source or any(m is not None for m in in_masks)):
        produced = rule.produce(in_masks, inputs, outputs)
    for t in range(n_out):
        expected = arrays.get(f"mask/{name}/{index}/{t}")
        got = produced[t] if t < len(produced) else None
        where = f"{layer.class_name} {name}[{index}] tensor {t}"
        if expected is None:
            assert got is None, f"{where}: Keras drops the mask, the rule gives one of shape {np.shape(got)}"
        else:
            assert got is not None, f"{where}: Keras keeps a {expected.shape} mask, the rule drops it"
            np.testing.assert_array_equal(np.asarray(got, dtype=bool), expected, err_msg=where)


@pytest.mark.parametrize("stem", MASK_GOLDENS)
def test_goldens_cover_the_rules(stem: str) -> None:
    """The mask samples exercise the classes they were written for and record masks for them."""
    meta, arrays, graph = _golden(stem)
    classes = {layer.class_name for layer in graph.layers}
    assert EXPECTED_CLASSES[stem] <= classes, sorted(EXPECTED_CLASSES[stem] - classes)
    assert meta["options"]["masks"] is True
    assert any(k.startswith("mask/") for k in arrays)
    # Fully masked rows are part of every sample (row 2 of each token input).
    for key, tokens in arrays.items():
        if key.startswith("input/tok"):
            assert not tokens[2].any(), key


# --- unit tests of single rules -------------------------------------------------------------------

M1 = np.array([[True, True, False, True], [False, False, False, False]])
M2 = np.array([[True, False, True, True], [True, True, False, False]])


def _x(*shape: int) -> np.ndarray:
    return np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 1


def _classes_whose_mask(produces: str) -> list[str]:
    """The keys whose tf.keras (Keras 2) mask behaviour produces this way."""
    return [
        spec.key
        for spec in catalogue.all_specs()
        if mk.K2 in spec.masks and spec.masks[mk.K2].produce == produces
    ]


@pytest.mark.parametrize("class_name", _classes_whose_mask("pass"))
def test_pass_through_classes_keep_the_first_mask(class_name: str) -> None:
    rule = mk.rule_for(class_name, {})
    assert not rule.source
    out = rule.produce([M1], [_x(2, 4, 3)], [_x(2, 4, 3)])
    assert out[0] is M1


def test_identity_drops_the_mask() -> None:
    """tf_keras Identity has supports_masking=False (checked against tf_keras in k2_mask_merge)."""
    assert "Identity" not in _classes_whose_mask("pass")
    assert mk.rule_for("Identity", {}).produce is None


@pytest.mark.parametrize(
    "class_name", ["Conv1D", "Flatten", "Reshape", "Dot", "Rescaling", "Lambda", "TFOpLambda"]
)
def test_other_layers_have_no_rule(class_name: str) -> None:
    rule = mk.rule_for(class_name, {})
    assert rule.produce is None and rule.consume is None and not rule.source


@pytest.mark.parametrize(
    "class_name", ["modelgraph/ConvResidual", "modelgraph/AddActivation", "modelgraph/InvertedBottleneck"]
)
def test_merged_steps_keep_the_sums_mask(class_name: str) -> None:
    """A residual sum merged into its conv keeps what the Add's mask would be: the AND of its inputs'
    masks (the conv's own input carries none in tf.keras), not nothing."""
    rule = mk.rule_for(class_name, {})
    out = rule.produce([None, M1], [_x(2, 4, 3), _x(2, 4, 3)], [_x(2, 4, 3)])
    np.testing.assert_array_equal(out[0], M1)
    assert rule.produce([None], [_x(2, 4, 3)], [_x(2, 4, 3)]) == [None]


def test_global_average_pooling_consumes_and_drops() -> None:
    rule = mk.rule_for("GlobalAveragePooling1D", {})
    assert rule.consume([M1]) == {"mask": M1}
    assert rule.consume([None]) == {}
    assert rule.produce is None
    assert mk.rule_for("GlobalMaxPooling1D", {}).consume is None


def test_embedding_is_a_source_only_with_mask_zero() -> None:
    rule = mk.rule_for("Embedding", {"mask_zero": True})
    assert rule.source and rule.consume is None
    tokens = np.array([[0, 3, 0, 1]])
    np.testing.assert_array_equal(rule.produce([None], [tokens], [_x(1, 4, 2)])[0], tokens != 0)
    plain = mk.rule_for("Embedding", {"mask_zero": False})
    assert plain.produce is None and not plain.source
    assert mk.rule_for("Embedding", {}).produce is None


def test_masking_uses_the_configured_value() -> None:
    rule = mk.rule_for("Masking", {"mask_value": -1.0})
    x = np.array([[[-1.0, -1.0], [-1.0, 0.0], [0.0, 0.0]]])
    assert rule.source
    np.testing.assert_array_equal(rule.produce([None], [x], [x])[0], [[False, True, True]])
    default = mk.rule_for("Masking", {})
    np.testing.assert_array_equal(default.produce([None], [x], [x])[0], [[True, True, False]])


@pytest.mark.parametrize("class_name", ["LSTM", "GRU", "SimpleRNN", "ConvLSTM2D"])
def test_rnn_keeps_the_mask_only_with_return_sequences(class_name: str) -> None:
    seq = mk.rule_for(class_name, {"return_sequences": True, "return_state": True})
    assert seq.consume([M1, None]) == {"mask": M1}
    out = seq.produce([M1, None], [_x(2, 4, 3), _x(2, 5)], [_x(2, 4, 5), _x(2, 5), _x(2, 5)])
    assert out[0] is M1 and out[1:] == [None, None]
    last = mk.rule_for(class_name, {"return_sequences": False})
    assert last.produce([M1], [_x(2, 4, 3)], [_x(2, 5)]) == [None]


@pytest.mark.parametrize("merge_mode", ["concat", "sum", "mul", "ave", None])
def test_bidirectional_masks_per_merge_mode(merge_mode: str | None) -> None:
    def config(return_sequences: bool, return_state: bool = False) -> dict[str, Any]:
        inner = {"units": 3, "return_sequences": return_sequences, "return_state": return_state}
        return {"merge_mode": merge_mode, "layer": {"class_name": "LSTM", "config": inner}}

    n_seq = 2 if merge_mode is None else 1
    seq = mk.rule_for("Bidirectional", config(True))
    assert seq.consume([M1]) == {"mask": M1}
    assert seq.produce([M1], [_x(2, 4, 3)], [_x(2, 4, 3)] * n_seq) == [M1] * n_seq
    last = mk.rule_for("Bidirectional", config(False))
    assert last.produce([M1], [_x(2, 4, 3)], [_x(2, 3)] * n_seq) == [None] * n_seq
    # return_state: the states (two per direction for an LSTM) never carry a mask.
    state = mk.rule_for("Bidirectional", config(True, True))
    got = state.produce([M1], [_x(2, 4, 3)], [_x(2, 4, 3)] * n_seq + [_x(2, 3)] * 4)
    assert got == [M1] * n_seq + [None] * 4


def test_bidirectional_default_merge_mode_is_concat() -> None:
    rule = mk.rule_for(
        "Bidirectional", {"layer": {"class_name": "GRU", "config": {"return_sequences": True}}}
    )
    assert rule.produce([M1], [_x(2, 4, 3)], [_x(2, 4, 6)]) == [M1]
    assert mk.rule_for("Bidirectional", {}).produce([M1], [_x(2, 4, 3)], [_x(2, 6)]) == [None]


@pytest.mark.parametrize("class_name", _classes_whose_mask("and"))
def test_merge_layers_and_the_present_masks(class_name: str) -> None:
    rule = mk.rule_for(class_name, {})
    x = _x(2, 4, 3)
    np.testing.assert_array_equal(rule.produce([M1, M2], [x, x], [x])[0], M1 & M2)
    # An unmasked input does not count (Keras ANDs only the masks that exist).
    np.testing.assert_array_equal(rule.produce([None, M2], [x, x], [x])[0], M2)
    assert rule.produce([None, None], [x, x], [x]) == [None]
    np.testing.assert_array_equal(rule.produce([M1, M2, M1], [x, x, x], [x])[0], M1 & M2)


def test_concatenate_last_axis_keeps_the_time_mask() -> None:
    rule = mk.rule_for("Concatenate", {"axis": -1})
    a, b = _x(2, 4, 3), _x(2, 4, 2)
    np.testing.assert_array_equal(rule.produce([M1, None], [a, b], [_x(2, 4, 5)])[0], M1)
    np.testing.assert_array_equal(rule.produce([M1, M2], [a, b], [_x(2, 4, 5)])[0], M1 & M2)
    assert rule.produce([None, None], [a, b], [_x(2, 4, 5)]) == [None]


def test_concatenate_time_axis_joins_the_masks() -> None:
    rule = mk.rule_for("Concatenate", {"axis": 1})
    a, b = _x(2, 4, 3), _x(2, 4, 3)
    got = rule.produce([M1, M2], [a, b], [_x(2, 8, 3)])[0]
    np.testing.assert_array_equal(got, np.concatenate([M1, M2], axis=1))
    # Same-rank inputs whose masks already have the feature axis (e.g. from Masking on 3-D data).
    got = rule.produce([M1[..., None], None], [_x(2, 4, 1), _x(2, 3, 1)], [_x(2, 7, 1)])[0]
    np.testing.assert_array_equal(got, np.concatenate([M1, np.ones((2, 3), bool)], axis=1))


def test_concatenate_without_an_int_axis_uses_the_last() -> None:
    rule = mk.rule_for("Concatenate", {"axis": None})
    np.testing.assert_array_equal(rule.produce([M1, None], [_x(2, 4, 1), _x(2, 4, 1)], [_x(2, 4, 2)])[0], M1)


def test_dense_attention_consumes_the_mask_list_and_keeps_the_query_mask() -> None:
    for class_name in ("Attention", "AdditiveAttention"):
        rule = mk.rule_for(class_name, {})
        assert rule.consume([M1, M2]) == {"mask": [M1, M2]}
        assert rule.consume([None, M2]) == {"mask": [None, M2]}
        assert rule.consume([None, None]) == {}
        assert rule.produce([M1, M2], [_x(2, 4, 3), _x(2, 4, 3)], [_x(2, 4, 3)])[0] is M1
        assert rule.produce([None, M2], [_x(2, 4, 3), _x(2, 4, 3)], [_x(2, 4, 3)]) == [None]
        got = rule.produce([M1, M2], [_x(2, 4, 3)] * 2, [_x(2, 4, 3), _x(2, 4, 4)])
        assert got[0] is M1 and got[1] is None


def test_multi_head_attention_consumes_query_and_the_other_masks() -> None:
    rule = mk.rule_for("MultiHeadAttention", {})
    m3 = np.array([[False, True, True, True], [True, False, True, True]])
    got = rule.consume([M1, M2, m3])
    assert got.keys() == {"query_mask", "value_mask"} and got["query_mask"] is M1
    np.testing.assert_array_equal(got["value_mask"], M2 & m3)
    # The node's tensors can be [query, attention_mask, key, value] (keywords by sorted name, tf.keras
    # up to 2.18) or in call order (tf_keras 2.19+): every mask after the query's reaches the kernel.
    got = rule.consume([M1, None, m3, M2])
    np.testing.assert_array_equal(got["value_mask"], M2 & m3)
    assert rule.consume([None, M2]) == {"value_mask": M2}
    assert rule.consume([M1]) == {"query_mask": M1}
    assert rule.consume([None, None]) == {}
    assert rule.consume([]) == {}


def _mha_rule(**kwargs: Any) -> mk.MaskRule:
    """The tf.keras rule of ``mha(query, **kwargs)``, tensors named by their TensorRefs' layers."""
    refs = {n: TensorRef(n, 0, 0) for n in ("query", "value", "key", "attention_mask")}
    bound = {k: refs.get(v, v) if isinstance(v, str) else v for k, v in kwargs.items()}
    inputs = tuple(refs[n] for n in ("query", *[k for k in kwargs if k in refs]))
    return mk.rule_for_node("MultiHeadAttention", {"attention_axes": [1]}, 2, (refs["query"],), bound, inputs)


def test_multi_head_attention_output_and_scores_masks() -> None:
    q = np.array([[True, False, True], [False, False, False]])
    x_q, x_v = _x(2, 3, 5), _x(2, 4, 5)
    # Output mask: the query's (the base compute_mask sees only the first call argument).
    rule = _mha_rule(value="value")
    assert not rule.source
    assert rule.produce([q, M2], [x_q, x_v], [x_q]) == [q]
    assert rule.produce([None, M2], [x_q, x_v], [x_q]) == [None]
    # Scores (batch, heads, T, S): the inner Softmax's mask, q[:, :, None] & v[:, None, :] per head.
    rule = _mha_rule(value="value", return_attention_scores=True)
    assert not rule.source
    got = rule.produce([q, M2], [x_q, x_v], [x_q, _x(2, 2, 3, 4)])
    assert got[0] is q
    np.testing.assert_array_equal(got[1], (q[:, :, None] & M2[:, None, :])[:, None])
    got = rule.produce([q, None], [x_q, x_v], [x_q, _x(2, 2, 3, 4)])
    np.testing.assert_array_equal(got[1], q[:, None, :, None])
    assert rule.produce([None, None], [x_q, x_v], [x_q, _x(2, 2, 3, 4)]) == [None, None]
    rule = _mha_rule(value="value", key="key", return_attention_scores=True)
    got = rule.produce([None, M2, M1], [x_q, x_v, x_v], [x_q, _x(2, 2, 3, 4)])
    assert got[0] is None
    np.testing.assert_array_equal(got[1], np.broadcast_to((M1 & M2)[:, None, None, :], (2, 1, 1, 4)))


def test_multi_head_attention_scores_keep_the_attention_mask_argument_and_the_band() -> None:
    """tf_keras 2.21 attaches to returned scores the mask its softmax applied: an ``attention_mask``
    argument (cast to bool) and the causal band too, even without any input mask (so the rule is a
    mask source)."""
    q = np.array([[True, False, True], [True, True, True]])
    x_q, x_v = _x(2, 3, 5), _x(2, 4, 5)
    given = (np.arange(24).reshape(2, 3, 4) % 3).astype(np.int32)  # 0 masks, 1 and 2 keep
    rule = _mha_rule(value="value", attention_mask="attention_mask", return_attention_scores=True)
    assert rule.source
    got = rule.produce([None, None, None], [x_q, x_v, given], [x_q, _x(2, 2, 3, 4)])
    assert got[0] is None
    np.testing.assert_array_equal(got[1], (given != 0)[:, None])
    got = rule.produce([q, M2, None], [x_q, x_v, given], [x_q, _x(2, 2, 3, 4)])
    np.testing.assert_array_equal(got[1], ((given != 0) & q[:, :, None] & M2[:, None, :])[:, None])
    rule = _mha_rule(value="value", use_causal_mask=True, return_attention_scores=True)
    assert rule.source
    got = rule.produce([None, None], [x_q, x_v], [x_q, _x(2, 2, 3, 4)])
    np.testing.assert_array_equal(got[1], np.tril(np.ones((3, 4), bool))[None, None])
    # Without returned scores the argument leaves no mask.
    assert not _mha_rule(value="value", attention_mask="attention_mask").source


def test_softmax_consumes_and_passes() -> None:
    rule = mk.rule_for("Softmax", {})
    assert rule.consume([M1]) == {"mask": M1}
    assert rule.produce([M1], [_x(2, 4)], [_x(2, 4)]) == [M1]


def _td(class_name: str, config: dict[str, Any]) -> mk.MaskRule:
    return mk.rule_for("TimeDistributed", {"layer": {"class_name": class_name, "config": config}})


def test_time_distributed_dense_keeps_the_time_mask() -> None:
    rule = _td("Dense", {"units": 2})
    assert not rule.source
    assert rule.consume([M1]) == {"mask": M1}
    np.testing.assert_array_equal(rule.produce([M1], [_x(2, 4, 3)], [_x(2, 4, 2)])[0], M1)


def test_time_distributed_rnn_reduces_or_keeps_the_inner_mask() -> None:
    m3 = np.zeros((2, 4, 5), bool)
    m3[0, 1, :2] = True
    m3[1, 3, 4] = True
    x = _x(2, 4, 5, 3)
    last = _td("LSTM", {"return_sequences": False})
    np.testing.assert_array_equal(last.produce([m3], [x], [_x(2, 4, 2)])[0], m3.any(axis=-1))
    seq = _td("LSTM", {"return_sequences": True})
    np.testing.assert_array_equal(seq.produce([m3], [x], [_x(2, 4, 5, 2)])[0], m3)


def test_time_distributed_mask_sources() -> None:
    tokens = np.array([[[1, 0, 2], [0, 0, 0]], [[3, 3, 0], [0, 1, 0]]])
    emb = _td("Embedding", {"mask_zero": True})
    assert emb.source
    np.testing.assert_array_equal(emb.produce([None], [tokens], [_x(2, 2, 3, 4)])[0], tokens != 0)
    masking = _td("Masking", {"mask_value": 0.0})
    assert masking.source
    x = np.array([[[0.0, 0.0], [1.0, 0.0]], [[0.0, 2.0], [0.0, 0.0]]])
    np.testing.assert_array_equal(masking.produce([None], [x], [x])[0], [[False, True], [True, False]])
    assert not _td("Embedding", {"mask_zero": False}).source


def test_time_distributed_inner_without_rule() -> None:
    rule = _td("Conv1D", {"filters": 2})
    assert not rule.source
    x = _x(2, 4, 5, 3)
    m3 = np.ones((2, 4, 5), bool)
    m3[1, 2] = False
    np.testing.assert_array_equal(rule.produce([m3], [x], [_x(2, 4, 5, 2)])[0], m3.any(axis=-1))
    assert rule.produce([None], [x], [_x(2, 4, 5, 2)]) == [None]
    # A malformed config (no inner layer record) falls back to the same reduction.
    bare = mk.rule_for("TimeDistributed", {})
    np.testing.assert_array_equal(bare.produce([M1], [_x(2, 4, 3)], [_x(2, 4, 3)])[0], M1)
