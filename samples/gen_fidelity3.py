"""Samples for issue #33 (fidelity round 3), made by real Keras 3 and tf_keras.

Run with the Keras 3 venv, once per backend (the goldens of both backends are kept; JAX writes the
model files, so run it first), then with the tf_keras venv:

    KERAS_BACKEND=jax        /work/venvs/k3/bin/python samples/gen_fidelity3.py
    KERAS_BACKEND=tensorflow /work/venvs/k3/bin/python samples/gen_fidelity3.py
    /work/venvs/k2/bin/python samples/gen_fidelity3.py tf_keras

Goldens are ``<name>.<referee>.npz`` (referee ``jax``, ``tensorflow`` or ``tf_keras``) holding
``input/<name>`` and ``output/<name>`` in the model's output order.

``fused_output``: a Conv1D whose BatchNormalization is the model's output.  The runner folds the
BatchNormalization into the convolution; the output must still carry the BatchNormalization's name
(with and without ``--all-intermediates``, which runs the unfused plan).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

if sys.argv[1:] == ["tf_keras"]:
    import tf_keras as keras
else:
    import keras

OUT = Path(__file__).parent / "fidelity3"


def fused_output() -> keras.Model:
    """Conv1D -> BatchNormalization (model output), with non-trivial moving statistics."""
    x = keras.Input((6, 2), name="signal")
    h = keras.layers.Conv1D(3, 3, name="conv")(x)
    h = keras.layers.BatchNormalization(name="dense_1")(h)
    model = keras.Model(x, h, name="fused_output")
    bn = model.get_layer("dense_1")
    rng = np.random.default_rng(33)
    bn.set_weights([
        rng.uniform(0.5, 1.5, 3).astype("float32"),
        rng.normal(0, 0.3, 3).astype("float32"),
        rng.normal(0, 0.5, 3).astype("float32"),
        rng.uniform(0.5, 2.0, 3).astype("float32"),
    ])
    conv = model.get_layer("conv")
    kernel, bias = conv.get_weights()
    conv.set_weights([kernel, rng.normal(0, 0.2, bias.shape).astype("float32")])
    return model


def _perturbed(model: keras.Model, seed: int) -> keras.Model:
    """Every weight moved off its initial value (non-zero biases, like a trained model)."""
    rng = np.random.default_rng(seed)
    model.set_weights([w + rng.normal(0, 0.2, w.shape).astype(w.dtype) for w in model.get_weights()])
    return model


def mha_int_mask() -> keras.Model:
    """MultiHeadAttention scores followed by Softmax(axis=1) (over the heads).

    ``cross``: an explicit int32 0/1 ``attention_mask`` input (the inputs have rows that are all 0).
    ``self``: a query masked by Embedding(mask_zero=True) with ``use_causal_mask=True``. Both return
    their scores; the scores keep the mask the layer's softmax applied, so the Softmax after them
    zeroes the masked positions (in Keras 3 on both backends).
    """
    q = keras.Input((4, 6), name="query")
    v = keras.Input((5, 6), name="value")
    m = keras.Input((4, 5), dtype="int32", name="mask")
    tokens = keras.Input((4,), dtype="int32", name="tokens")
    out, scores = keras.layers.MultiHeadAttention(2, 3, name="cross")(
        q, v, attention_mask=m, return_attention_scores=True
    )
    heads = keras.layers.Softmax(axis=1, name="cross_heads")(scores)
    e = keras.layers.Embedding(7, 6, mask_zero=True, name="embed")(tokens)
    out2, scores2 = keras.layers.MultiHeadAttention(3, 2, name="self")(
        e, e, use_causal_mask=True, return_attention_scores=True
    )
    heads2 = keras.layers.Softmax(axis=1, name="self_heads")(scores2)
    model = keras.Model([q, v, m, tokens], [out, heads, out2, heads2], name="mha_int_mask")
    return _perturbed(model, 34)


def mha_int_mask_inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(8)
    mask = rng.integers(0, 2, size=(3, 4, 5)).astype("int32")
    mask[0, 1, :] = 0  # fully masked query rows
    mask[2, 3, :] = 0
    tokens = rng.integers(1, 7, size=(3, 4)).astype("int32")
    tokens[0, 2:] = 0
    tokens[1, 0] = 0  # a masked first query: its causal row is fully masked
    return {
        "query": rng.normal(size=(3, 4, 6)).astype("float32"),
        "value": rng.normal(size=(3, 5, 6)).astype("float32"),
        "mask": mask,
        "tokens": tokens,
    }


def _save_k3(name: str, build, inputs: dict[str, np.ndarray], backend: str) -> None:
    """JAX writes the model files; each backend writes its golden of the same file."""
    if backend == "jax":
        model = build()
        model.save(OUT / f"{name}.keras")
        model.save(OUT / f"{name}.h5")
    model = keras.saving.load_model(OUT / f"{name}.keras")
    ys = model(inputs, training=False)
    ys = ys if isinstance(ys, (list, tuple)) else [ys]
    golden = {f"input/{k}": v for k, v in inputs.items()}
    golden.update({f"output/{n}": np.asarray(y) for n, y in zip(model.output_names, ys, strict=True)})
    np.savez(OUT / f"{name}.{backend}.npz", **golden)


def bidi_masked_states() -> keras.Model:
    """tf_keras masked Bidirectional layers with states, in a larger graph.

    * tokens -> Embedding(mask_zero) -> TimeDistributed(Dense) -> Bidirectional(LSTM, unroll,
      return_sequences + return_state, ``initial_state`` from inputs), merge ``concat``;
    * signal -> Masking -> Bidirectional(GRU, unroll, return_sequences + return_state, initial_state
      computed from the sequence), merge None; -> Bidirectional(SimpleRNN, unroll) ``ave``;
      -> Bidirectional(LSTM, return_state) ``mul`` (not unrolled, last outputs);
    * signal -> Masking -> Bidirectional(GRU(reset_after=False), unroll) ``sum``.

    ``unroll=True`` is what differs: tf_keras's unrolled loop carries the previous output over masked
    steps and zeroes the backward layer's outputs by the mask in time order while they are still in
    reversed order (docs/backend-disagreements.md).
    """
    L = keras.layers
    tokens = keras.Input((6,), dtype="int32", name="tokens")
    signal = keras.Input((6, 3), name="signal")
    states = [keras.Input((3,), name=f"state_{i}") for i in range(4)]
    e = L.Embedding(9, 4, mask_zero=True, name="embed")(tokens)
    e = L.TimeDistributed(L.Dense(4, activation="tanh"), name="per_step")(e)
    lstm = L.Bidirectional(
        L.LSTM(3, return_sequences=True, return_state=True, unroll=True), name="bidi_lstm"
    )(e, initial_state=states)
    h = L.Masking(0.0, name="masking")(signal)
    pooled = L.GlobalAveragePooling1D(name="pool")(h)
    init = [L.Dense(3, activation="tanh", name=f"init_{i}")(pooled) for i in range(2)]
    gru = L.Bidirectional(
        L.GRU(3, return_sequences=True, return_state=True, unroll=True), merge_mode=None, name="bidi_gru"
    )(h, initial_state=init)
    both = L.Concatenate(name="both")([gru[0], gru[1]])
    ave = L.Bidirectional(L.SimpleRNN(2, return_sequences=True, unroll=True), merge_mode="ave", name="bidi_rnn")(
        both
    )
    mul = L.Bidirectional(L.LSTM(2, return_state=True), merge_mode="mul", name="bidi_last")(ave)
    total = L.Bidirectional(
        L.GRU(2, return_sequences=True, reset_after=False, unroll=True), merge_mode="sum", name="bidi_sum"
    )(h)
    outputs = [*lstm, *gru, ave, *mul, total]
    model = keras.Model([tokens, signal, *states], outputs, name="bidi_masked_states")
    return _perturbed(model, 35)


def bidi_masked_states_inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(9)
    tokens = rng.integers(1, 9, size=(4, 6)).astype("int32")
    signal = rng.normal(size=(4, 6, 3)).astype("float32")
    for a in (tokens, signal):  # trailing, leading and inner padding, and a fully masked row
        a[0, 4:] = 0
        a[1, :2] = 0
        a[2, 3] = 0
        a[3] = 0
    feeds = {"tokens": tokens, "signal": signal}
    feeds.update({f"state_{i}": rng.normal(0, 0.5, size=(4, 3)).astype("float32") for i in range(4)})
    return feeds


def _save_tf_keras(name: str, build, inputs: dict[str, np.ndarray]) -> None:
    """Every format tf_keras writes: .h5, .keras, to_json + save_weights; its golden."""
    model = build()
    model.save(OUT / f"{name}.h5")
    model.save(OUT / f"{name}.keras")
    (OUT / f"{name}.json").write_text(model.to_json(), encoding="utf-8")
    model.save_weights(OUT / f"{name}_weights.h5")
    ys = model([inputs[t.name.split(":")[0]] for t in model.inputs], training=False)
    ys = ys if isinstance(ys, (list, tuple)) else [ys]
    golden = {f"input/{k}": v for k, v in inputs.items()}
    golden.update({f"output/{n}": np.asarray(y) for n, y in zip(model.output_names, ys, strict=True)})
    np.savez(OUT / f"{name}.tf_keras.npz", **golden)


def main_tf_keras() -> None:
    OUT.mkdir(exist_ok=True)
    keras.utils.set_random_seed(35)
    _save_tf_keras("bidi_masked_states", bidi_masked_states, bidi_masked_states_inputs())


def main() -> None:
    if sys.argv[1:] == ["tf_keras"]:
        main_tf_keras()
        return
    backend = keras.backend.backend()
    OUT.mkdir(exist_ok=True)
    keras.utils.set_random_seed(33)
    _save_k3(
        "fused_output",
        fused_output,
        {"signal": np.random.default_rng(7).normal(size=(2, 6, 2)).astype("float32")},
        backend,
    )
    keras.utils.set_random_seed(34)
    _save_k3("mha_int_mask", mha_int_mask, mha_int_mask_inputs(), backend)


if __name__ == "__main__":
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    main()
