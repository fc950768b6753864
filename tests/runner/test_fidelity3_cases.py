"""Fidelity round 3 (issue #33): samples/gen_fidelity3.py, replayed without TensorFlow.

Each case is a model file made by real Keras with goldens from every Keras that computed it
(``<name>.<referee>.npz``: ``jax`` / ``tensorflow`` for Keras 3, ``tf_keras``); the runner and the
ONNX export (on onnxruntime) must reproduce the referee that follows the maths, outputs and states,
within ``1e-5 + 1e-4 |ref|``.

* ``bidi_masked_states`` (tf_keras): masked Bidirectional LSTM/GRU/SimpleRNN layers with
  ``return_state``, ``initial_state`` (inputs, and computed from the sequence), after
  ``TimeDistributed``, masks from ``Embedding(mask_zero)`` and ``Masking``, every merge mode, several
  ``unroll=True`` (tf_keras's unrolled loop zeroes the backward outputs by the mask in time order).
* ``bidi_unrolled`` (Keras 3): masked Bidirectional layers with ``unroll=True``; ``reference`` is the
  same model without ``unroll`` (Keras on both backends agree on it), which Keras 3 files follow.
* ``channels_first_convs``: channels_first Conv1D/2D/3D, Conv*Transpose, SeparableConv1D/2D and
  DepthwiseConv1D/2D with unequal strides or dilation. ``reference`` is the generator's plain NumPy
  convolution; an output where a Keras backend disagrees with it is checked against the reference
  only (Keras 3 on TensorFlow gets three wrong: docs/backend-disagreements.md).
* ``mha_int_mask``: MultiHeadAttention scores keep the mask their softmax applied (an explicit int
  ``attention_mask`` with fully masked rows; a causal self-attention over an Embedding(mask_zero)
  query), so the ``Softmax(axis=1)`` after them zeroes the masked positions.
* ``mha_k2_scores_mask`` (tf_keras): the same model written by tf_keras. Its scores carry the same
  mask (``_keras_mask``, recorded as ``mask/<layer>`` in the golden), but tf_keras's Softmax adds
  -1e9 where it is False, so the positions masked for every head come out as 1 / heads.
* ``mha_k2_masked_rows`` (tf_keras): int ``attention_mask`` rows hiding every key, with and without
  returned scores and with a Masking value mask: tf_keras spreads such a row evenly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from modelgraph.loading import load
from modelgraph.runner.interpreter import Runner

DIR = Path(__file__).resolve().parents[2] / "samples" / "fidelity3"

# (name, model files, referees whose goldens are checked)
CASES = [
    ("bidi_masked_states", ("h5", "keras", "json"), ("tf_keras",)),
    ("bidi_unrolled", ("keras", "h5"), ("reference", "jax", "tensorflow")),
    ("channels_first_convs", ("keras", "h5"), ("reference", "jax", "tensorflow")),
    ("mha_int_mask", ("keras", "h5"), ("jax", "tensorflow")),
    ("mha_k2_scores_mask", ("h5", "keras", "json"), ("tf_keras",)),
    ("mha_k2_masked_rows", ("h5", "keras", "json"), ("tf_keras",)),
]
RUNS = [
    (name, suffix, referee)
    for name, suffixes, referees in CASES
    for suffix in suffixes
    for referee in referees
]
ATOL, RTOL = 1e-5, 1e-4


def _golden(name: str, referee: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    g = np.load(DIR / f"{name}.{referee}.npz")
    inputs = {k.split("/", 1)[1]: g[k] for k in g.files if k.startswith("input/")}
    outputs = {k.split("/", 1)[1]: g[k] for k in g.files if k.startswith("output/")}
    return inputs, outputs


def _agrees_with_the_maths(name: str, referee: str) -> dict[str, bool]:
    """Per output: whether the referee's golden agrees with the case's NumPy reference (when it has
    one; every output agrees otherwise)."""
    _, outputs = _golden(name, referee)
    if referee == "reference" or not (DIR / f"{name}.reference.npz").exists():
        return dict.fromkeys(outputs, True)
    _, maths = _golden(name, "reference")
    return {k: bool(np.allclose(v, maths[k], atol=ATOL, rtol=RTOL)) for k, v in outputs.items()}


@pytest.mark.parametrize(("name", "suffix", "referee"), RUNS)
def test_runner_matches_keras(name, suffix, referee):
    inputs, expected = _golden(name, referee)
    agrees = _agrees_with_the_maths(name, referee)
    weights = DIR / f"{name}_weights.h5" if suffix == "json" else None
    runner = Runner(load(DIR / f"{name}.{suffix}", weights=weights))
    assert len(runner.output_keys) == len(expected)
    out = runner.run(inputs)
    for key, (ref_name, ref) in zip(runner.output_keys, expected.items(), strict=True):
        if not agrees[ref_name]:
            continue  # checked against the reference
        np.testing.assert_allclose(out[key], ref, atol=ATOL, rtol=RTOL, err_msg=f"{name}.{suffix} {ref_name}")


@pytest.mark.parametrize(("name", "referee"), [(n, r[0]) for n, _, r in CASES])
def test_onnx_export_matches_keras(name, referee):
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from modelgraph.saving.onnx import to_onnx

    inputs, expected = _golden(name, referee)
    agrees = _agrees_with_the_maths(name, referee)
    model = to_onnx(load(DIR / f"{name}.keras")).model
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {i.name: inputs[i.name] for i in session.get_inputs()}
    got = session.run(None, feeds)
    assert len(got) == len(expected)
    for y, (key, ref) in zip(got, expected.items(), strict=True):
        if not agrees[key]:
            continue
        np.testing.assert_allclose(y, ref, atol=ATOL, rtol=RTOL, err_msg=f"{name} {key}")


def _keras_input_masks(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The implicit masks of the mha_k2 samples' mask sources (Embedding(mask_zero), Masking(0.0))."""
    out = {}
    if "tokens" in feeds:
        out["embed"] = feeds["tokens"] != 0
    if "signal" in feeds:
        out["masking"] = np.any(feeds["signal"] != 0, axis=-1)
    return out


@pytest.mark.parametrize("name", ["mha_k2_scores_mask", "mha_k2_masked_rows"])
def test_tf_keras_scores_carry_the_mask_tf_keras_attached(name):
    """The runner's mask rule of each tf_keras MultiHeadAttention call that returns its scores gives
    exactly the ``_keras_mask`` tf_keras attached to them (golden ``mask/<layer>``): its softmax's
    mask, the ``attention_mask`` argument and the causal band included."""
    from modelgraph.runner import masks as mk

    graph = load(DIR / f"{name}.h5")
    golden = np.load(DIR / f"{name}.tf_keras.npz")
    feeds = {k.split("/", 1)[1]: golden[k] for k in golden.files if k.startswith("input/")}
    sources = _keras_input_masks(feeds)
    checked = 0
    for node in graph.nodes:
        layer = graph.layer(node.layer)
        if layer.class_name != "MultiHeadAttention" or not node.kwargs.get("return_attention_scores"):
            continue
        expected = golden[f"mask/{node.layer}"]
        values = [
            feeds[r.layer] if r.layer in feeds else np.zeros((*sources[r.layer].shape, 6), np.float32)
            for r in node.inputs
        ]
        in_masks = [sources.get(r.layer) for r in node.inputs]
        rule = mk.rule_for_node(layer.class_name, layer.config, 2, node.args, node.kwargs, node.inputs)
        assert rule.source or any(m is not None for m in in_masks)
        batch, t = values[0].shape[:2]
        scores = np.zeros((batch, layer.config["num_heads"], t, expected.shape[-1]), np.float32)
        produced = rule.produce(in_masks, values, [values[0], scores])
        np.testing.assert_array_equal(np.asarray(produced[1], bool), expected, err_msg=node.layer)
        checked += 1
    assert checked >= 2
