"""Regenerate the recurrent/attention kernel goldens in samples/kernels/rnn/.

Run with the Keras 3 venv (it runs the tf.keras part itself with the Keras 2 venv):

    KERAS_BACKEND=tensorflow /work/venvs/k3/bin/python samples/kernels/make_rnn_goldens.py

One ``<case>.npz`` per case:

* ``config``: the layer's ``get_config()`` as a JSON string; ``class_name``; ``keras_version``
  (``keras.__version__`` or ``tf_keras.__version__``).
* ``weights/<canonical name>``: the layer's weights (random, non-zero biases) under the names of
  ``modelgraph/weight_names.py``.
* ``call``: the call structure as JSON ``{"args": [...], "kwargs": {...}}`` where every array is the
  string ``"@<npz key>"`` and lists stay lists (``null`` for an absent mask in a mask list).
  Arrays are stored as ``inputs/<i>`` (positional argument i), ``inputs/<i>/<j>`` (item j of a list
  argument, e.g. tf.keras ``[x, h0, c0]``), ``kwargs/<name>`` and ``kwargs/<name>/<j>``
  (``kwargs/mask``, ``kwargs/initial_state/0``, Attention's ``kwargs/mask/1``).
  Non-array keyword arguments (``return_attention_scores``, ``use_causal_mask``) are plain JSON.
* ``outputs/<i>``: Keras's outputs in order (output, then states / attention scores).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "rnn"
K2_PYTHON = "/work/venvs/k2/bin/python"
SEED = 20240607
B, T, F = 2, 5, 3

PART = sys.argv[1] if len(sys.argv) > 1 else "k3"
if PART == "k2":
    import tensorflow as tf
    import tf_keras as keras

    KERAS_VERSION = keras.__version__
    layers = keras.layers
else:
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras
    import tensorflow as tf

    KERAS_VERSION = keras.__version__
    layers = keras.layers

rng = np.random.default_rng(SEED if PART == "k3" else SEED + 1)


def rand(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (rng.normal(0.0, scale, size=shape)).astype(np.float32)


def canonical(path: str, class_name: str) -> str:
    """Canonical weight name from a Keras variable path (``bidi/forward_lstm/lstm_cell/kernel:0``)."""
    segments = [s for s in path.split(":")[0].split("/") if s]
    last = segments[-1]
    if class_name == "MultiHeadAttention" and len(segments) >= 2:
        return f"{segments[-2]}/{last}"
    if class_name == "Bidirectional":
        for segment in segments[:-1]:
            for direction in ("forward", "backward"):
                if segment.startswith(direction):
                    return f"{direction}/{last}"
    return last


def randomise(layer) -> dict[str, np.ndarray]:
    new = []
    for w in layer.get_weights():
        new.append((rng.normal(0.0, 0.5, size=w.shape) + (0.1 if w.ndim <= 1 else 0.0)).astype(np.float32))
    layer.set_weights(new)
    weights = {}
    if layer.__class__.__name__ == "Bidirectional":
        for direction, sub in (("forward", layer.forward_layer), ("backward", layer.backward_layer)):
            for var, value in zip(sub.weights, sub.get_weights(), strict=True):
                weights[f"{direction}/{canonical(getattr(var, 'path', None) or var.name, '')}"] = value
        return weights
    for var, value in zip(layer.weights, layer.get_weights(), strict=True):
        path = getattr(var, "path", None) or var.name
        name = canonical(path, layer.__class__.__name__)
        assert name not in weights, (name, path)
        weights[name] = value
    return weights


def _default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, tuple):
        return list(o)
    if hasattr(o, "as_list"):  # tf.TensorShape, as tf.keras's own JSON encoder writes it
        return o.as_list()
    raise TypeError(type(o))


def encode(value, key: str, arrays: dict[str, np.ndarray]):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [encode(v, f"{key}/{j}", arrays) for j, v in enumerate(value)]
    arrays[key] = np.asarray(value)
    return "@" + key


def to_tensor(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [to_tensor(v) for v in value]
    return tf.constant(value)


def case(name, layer, args, kwargs=None):
    """Build ``layer``, randomise its weights, call it and save the golden ``name``."""
    kwargs = kwargs or {}
    targs = [to_tensor(a) for a in args]
    tkwargs = {k: to_tensor(v) for k, v in kwargs.items()}
    layer(*targs, **tkwargs)  # build
    weights = randomise(layer)
    outs = layer(*targs, **tkwargs)
    save(name, layer, args, kwargs, outs, weights)


def save(name, layer, args, kwargs, outs, weights) -> None:
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    arrays: dict[str, np.ndarray] = {}
    call = {
        "args": [encode(a, f"inputs/{i}", arrays) for i, a in enumerate(args)],
        "kwargs": {k: encode(v, f"kwargs/{k}", arrays) for k, v in kwargs.items()},
    }
    payload = {
        "config": np.array(json.dumps(layer.get_config(), default=_default, sort_keys=True)),
        "class_name": np.array(layer.__class__.__name__),
        "keras_version": np.array(KERAS_VERSION),
        "call": np.array(json.dumps(call)),
    }
    payload.update({f"weights/{k}": v for k, v in weights.items()})
    payload.update(arrays)
    payload.update({f"outputs/{i}": np.asarray(o) for i, o in enumerate(outs)})
    OUT.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT / f"{name}.npz", **payload)
    print(name, [np.asarray(o).shape for o in outs])


def mha_masked_model_case(name: str, return_scores: bool) -> None:
    """MultiHeadAttention fed by Embedding(mask_zero=True): the Keras masks of query and value.

    Keras (both versions) does not record these masks in the node; a runner passes them as the
    ``query_mask``/``value_mask`` keyword arguments, which is how the golden records them.
    """
    tq = keras.Input((4,), dtype="int32")
    tv = keras.Input((5,), dtype="int32")
    emb = layers.Embedding(10, 6, mask_zero=True)
    q, v = emb(tq), emb(tv)
    mha = layers.MultiHeadAttention(num_heads=2, key_dim=3)
    out = mha(q, v, return_attention_scores=return_scores)
    outs = list(out) if return_scores else [out]
    model = keras.Model([tq, tv], [*outs, q, v])
    weights = randomise(mha)
    tokens_q = np.array([[3, 1, 0, 2], [5, 6, 7, 0]], dtype=np.int32)
    tokens_v = np.array([[1, 0, 4, 2, 9], [8, 3, 2, 0, 0]], dtype=np.int32)
    results = [np.asarray(r) for r in model([tokens_q, tokens_v])]
    qa, va = results[-2], results[-1]
    kwargs = {"query_mask": tokens_q != 0, "value_mask": tokens_v != 0}
    if return_scores:
        kwargs["return_attention_scores"] = True
    save(name, mha, [qa, va], kwargs, results[:-2], weights)


def mask_bt(batch: int = B, steps: int = T) -> np.ndarray:
    m = np.ones((batch, steps), dtype=bool)
    m[0, 1] = False  # a hole in the middle
    m[0, -1] = False
    m[1, -2:] = False  # right padding
    if steps > 3:
        m[1, 0] = False  # masked first step
    return m


def k3_cases() -> None:
    x = rand(B, T, F)
    # SimpleRNN
    case("k3_simple_rnn", layers.SimpleRNN(4), [x])
    case(
        "k3_simple_rnn_seq_relu_nobias",
        layers.SimpleRNN(4, activation="relu", use_bias=False, return_sequences=True),
        [x],
    )
    case(
        "k3_simple_rnn_backwards_state",
        layers.SimpleRNN(4, go_backwards=True, return_sequences=True, return_state=True),
        [x],
    )
    case("k3_simple_rnn_mask", layers.SimpleRNN(4, return_sequences=True), [x], {"mask": mask_bt()})
    # LSTM
    case("k3_lstm", layers.LSTM(5), [x])
    case("k3_lstm_seq_state", layers.LSTM(5, return_sequences=True, return_state=True), [x])
    case("k3_lstm_backwards_seq", layers.LSTM(5, go_backwards=True, return_sequences=True), [x])
    case("k3_lstm_mask_seq", layers.LSTM(5, return_sequences=True), [x], {"mask": mask_bt()})
    case(
        "k3_lstm_mask_zero_output",
        layers.LSTM(5, return_sequences=True, zero_output_for_mask=True),
        [x],
        {"mask": mask_bt()},
    )
    case("k3_lstm_mask_last_state", layers.LSTM(5, return_state=True), [x], {"mask": mask_bt()})
    case(
        "k3_lstm_mask_backwards",
        layers.LSTM(5, go_backwards=True, return_sequences=True, return_state=True),
        [x],
        {"mask": mask_bt()},
    )
    case(
        "k3_lstm_initial_state",
        layers.LSTM(5, return_state=True, return_sequences=True),
        [x],
        {"initial_state": [rand(B, 5), rand(B, 5)]},
    )
    case(
        "k3_lstm_hard_sigmoid_relu",
        layers.LSTM(5, activation="relu", recurrent_activation="hard_sigmoid", return_sequences=True),
        [x],
    )
    case("k3_lstm_nobias_unroll", layers.LSTM(5, use_bias=False, unroll=True), [x])
    # GRU
    case("k3_gru", layers.GRU(4), [x])
    case("k3_gru_reset_before_seq", layers.GRU(4, reset_after=False, return_sequences=True), [x])
    case("k3_gru_nobias", layers.GRU(4, use_bias=False, return_sequences=True), [x])
    case("k3_gru_reset_before_nobias", layers.GRU(4, use_bias=False, reset_after=False), [x])
    case(
        "k3_gru_mask_init_backwards",
        layers.GRU(4, go_backwards=True, return_sequences=True, return_state=True),
        [x],
        {"mask": mask_bt(), "initial_state": [rand(B, 4)]},
    )
    case(
        "k3_gru_softsign_hard_sigmoid",
        layers.GRU(4, activation="softsign", recurrent_activation="hard_sigmoid", unroll=True),
        [x],
    )
    # Bidirectional
    case("k3_bidi_lstm_concat_seq", layers.Bidirectional(layers.LSTM(3, return_sequences=True)), [x])
    case("k3_bidi_gru_sum", layers.Bidirectional(layers.GRU(3), merge_mode="sum"), [x])
    case(
        "k3_bidi_simple_mul_seq",
        layers.Bidirectional(layers.SimpleRNN(3, return_sequences=True), merge_mode="mul"),
        [x],
    )
    case("k3_bidi_lstm_ave", layers.Bidirectional(layers.LSTM(3), merge_mode="ave"), [x])
    case(
        "k3_bidi_gru_none_seq",
        layers.Bidirectional(layers.GRU(3, return_sequences=True), merge_mode=None),
        [x],
    )
    case(
        "k3_bidi_lstm_state_init",
        layers.Bidirectional(layers.LSTM(3, return_sequences=True, return_state=True)),
        [x],
        {"initial_state": [rand(B, 3) for _ in range(4)]},
    )
    case(
        "k3_bidi_none_state",
        layers.Bidirectional(layers.GRU(3, return_state=True), merge_mode=None),
        [x],
    )
    case(
        "k3_bidi_backward_layer",
        layers.Bidirectional(
            layers.GRU(3, return_sequences=True),
            backward_layer=layers.GRU(
                2, activation="relu", reset_after=False, return_sequences=True, go_backwards=True
            ),
        ),
        [x],
    )
    case(
        "k3_bidi_lstm_mask_seq",
        layers.Bidirectional(layers.LSTM(3, return_sequences=True)),
        [x],
        {"mask": mask_bt()},
    )
    case("k3_bidi_gru_mask_last", layers.Bidirectional(layers.GRU(3)), [x], {"mask": mask_bt()})
    # TimeDistributed
    x4 = rand(B, 3, 4, F)
    case("k3_td_lstm", layers.TimeDistributed(layers.LSTM(3, return_sequences=True)), [x4])
    td_mask = rng.random((B, 3, 4)) > 0.35
    td_mask[:, :, 0] = True
    case("k3_td_gru_mask", layers.TimeDistributed(layers.GRU(3)), [x4], {"mask": td_mask})
    case("k3_td_dense", layers.TimeDistributed(layers.Dense(4, activation="tanh")), [x])
    # ConvLSTM
    xs = rand(B, 3, 5, 5, 2)
    case("k3_convlstm2d_same_seq", layers.ConvLSTM2D(3, 3, padding="same", return_sequences=True), [xs])
    case(
        "k3_convlstm2d_valid_strides_state", layers.ConvLSTM2D(2, (3, 2), strides=2, return_state=True), [xs]
    )
    case(
        "k3_convlstm2d_dilation_backwards",
        layers.ConvLSTM2D(2, 2, dilation_rate=2, padding="same", go_backwards=True),
        [xs],
    )
    case(
        "k3_convlstm2d_mask_init",
        layers.ConvLSTM2D(2, 3, padding="same", return_sequences=True),
        [xs],
        {"mask": mask_bt(B, 3), "initial_state": [rand(B, 5, 5, 2), rand(B, 5, 5, 2)]},
    )
    case(
        "k3_convlstm1d",
        layers.ConvLSTM1D(3, 2, padding="valid", return_sequences=True, recurrent_activation="hard_sigmoid"),
        [rand(B, 3, 6, 2)],
    )
    case(
        "k3_convlstm3d_nobias",
        layers.ConvLSTM3D(2, 2, padding="same", use_bias=False),
        [rand(B, 2, 3, 3, 3, 2)],
    )
    # MultiHeadAttention
    q, v, k = rand(B, 4, 6), rand(B, 5, 6), rand(B, 5, 3)
    case("k3_mha_self", layers.MultiHeadAttention(num_heads=2, key_dim=3), [q, q])
    case(
        "k3_mha_cross_key_vdim_out",
        layers.MultiHeadAttention(num_heads=2, key_dim=3, value_dim=4, output_shape=5),
        [q, v, k],
    )
    case(
        "k3_mha_scores",
        layers.MultiHeadAttention(num_heads=3, key_dim=2),
        [q, v],
        {"return_attention_scores": True},
    )
    case(
        "k3_mha_causal", layers.MultiHeadAttention(num_heads=2, key_dim=3), [q, q], {"use_causal_mask": True}
    )
    case(
        "k3_mha_causal_scores",
        layers.MultiHeadAttention(num_heads=2, key_dim=3),
        [q, v],
        {"use_causal_mask": True, "return_attention_scores": True},
    )
    att_mask = rng.random((B, 4, 5)) > 0.3
    att_mask[:, :, 0] = True
    case(
        "k3_mha_attention_mask",
        layers.MultiHeadAttention(num_heads=2, key_dim=3),
        [q, v],
        {"attention_mask": att_mask},
    )
    qm = np.array([[True, True, False, True], [True, True, True, False]])
    vm = np.array([[True, False, True, True, True], [True, True, True, False, False]])
    mha_masked_model_case("k3_mha_qv_masks", return_scores=False)
    mha_masked_model_case("k3_mha_qv_masks_scores", return_scores=True)
    case(
        "k3_mha_key_mask_causal",
        layers.MultiHeadAttention(num_heads=2, key_dim=3),
        [q, v, k],
        {"key_mask": vm, "use_causal_mask": True},
    )
    case("k3_mha_nobias", layers.MultiHeadAttention(num_heads=2, key_dim=3, use_bias=False), [q, v])
    case(
        "k3_mha_dropout_config",
        layers.MultiHeadAttention(num_heads=2, key_dim=3, dropout=0.3),
        [q, v],
        {"attention_mask": att_mask},
    )
    q4 = rand(B, 3, 4, 5)
    case("k3_mha_2d_axes_default", layers.MultiHeadAttention(num_heads=2, key_dim=2), [q4, q4])
    case(
        "k3_mha_axis_2_out_tuple",
        layers.MultiHeadAttention(num_heads=2, key_dim=2, attention_axes=2, output_shape=(2, 3)),
        [q4, q4],
    )
    case(
        "k3_mha_sliding_window",
        layers.MultiHeadAttention(num_heads=2, key_dim=3, sliding_window=2),
        [q, q],
        {"return_attention_scores": True},
    )
    # Attention / AdditiveAttention
    qa, va, ka = rand(B, 4, 3), rand(B, 5, 3), rand(B, 5, 3)
    case("k3_attention_dot", layers.Attention(), [[qa, va]])
    case(
        "k3_attention_scale_key_scores",
        layers.Attention(use_scale=True),
        [[qa, va, ka]],
        {"return_attention_scores": True},
    )
    case("k3_attention_concat_scale", layers.Attention(use_scale=True, score_mode="concat"), [[qa, va]])
    case(
        "k3_attention_concat",
        layers.Attention(score_mode="concat", dropout=0.2),
        [[qa, va, ka]],
        {"return_attention_scores": True},
    )
    case(
        "k3_attention_masks_causal",
        layers.Attention(),
        [[qa, va]],
        {"mask": [qm, vm], "use_causal_mask": True, "return_attention_scores": True},
    )
    case("k3_attention_value_mask_only", layers.Attention(use_scale=True), [[qa, va]], {"mask": [None, vm]})
    case(
        "k3_additive_attention",
        layers.AdditiveAttention(),
        [[qa, va, ka]],
        {"mask": [qm, vm], "return_attention_scores": True},
    )
    case(
        "k3_additive_attention_noscale",
        layers.AdditiveAttention(use_scale=False),
        [[qa, va]],
        {"use_causal_mask": True},
    )


def k2_cases() -> None:
    x = rand(B, T, F)
    case(
        "k2_lstm_hard_sigmoid_seq",
        layers.LSTM(4, recurrent_activation="hard_sigmoid", return_sequences=True),
        [x],
    )
    case(
        "k2_gru_reset_before_hard_sigmoid",
        layers.GRU(4, reset_after=False, recurrent_activation="hard_sigmoid", return_state=True),
        [x],
    )
    case("k2_gru_mask_seq", layers.GRU(4, return_sequences=True), [x], {"mask": mask_bt()})
    case("k2_simple_rnn_init_list", layers.SimpleRNN(4, return_sequences=True), [[x, rand(B, 4)]])
    case("k2_lstm_init_list_state", layers.LSTM(4, return_state=True), [[x, rand(B, 4), rand(B, 4)]])
    case(
        "k2_lstm_time_major",
        layers.LSTM(4, time_major=True, return_sequences=True, go_backwards=True),
        [np.swapaxes(x, 0, 1).copy()],
    )
    case(
        "k2_bidi_lstm_init_list",
        layers.Bidirectional(layers.LSTM(3, return_sequences=True, return_state=True)),
        [[x, rand(B, 3), rand(B, 3), rand(B, 3), rand(B, 3)]],
    )
    case(
        "k2_bidi_gru_ave_mask",
        layers.Bidirectional(layers.GRU(3, recurrent_activation="hard_sigmoid"), merge_mode="ave"),
        [x],
        {"mask": mask_bt()},
    )
    case("k2_td_lstm", layers.TimeDistributed(layers.LSTM(3)), [rand(B, 3, 4, F)])
    case(
        "k2_convlstm2d",
        layers.ConvLSTM2D(2, 3, padding="same", return_sequences=True, recurrent_activation="hard_sigmoid"),
        [rand(B, 3, 4, 4, 2)],
    )
    q, v = rand(B, 4, 6), rand(B, 5, 6)
    att_mask = rng.random((B, 4, 5)) > 0.3
    att_mask[0, 1, :] = False  # a fully masked query row: tf.keras adds -1e9 and never zeroes
    case(
        "k2_mha_attention_mask_scores",
        layers.MultiHeadAttention(num_heads=2, key_dim=3),
        [q, v],
        {"attention_mask": att_mask, "return_attention_scores": True},
    )
    mha_masked_model_case("k2_mha_qv_masks", return_scores=False)
    case(
        "k2_mha_causal_key",
        layers.MultiHeadAttention(num_heads=2, key_dim=3, value_dim=2),
        [q, v, rand(B, 5, 4)],
        {"use_causal_mask": True},
    )
    qa, va = rand(B, 4, 3), rand(B, 5, 3)
    qm = np.array([[True, True, False, True], [True, True, True, False]])
    vm = np.array([[True, False, True, True, True], [True, True, True, False, False]])
    case(
        "k2_attention_masks_causal",
        layers.Attention(use_scale=True),
        [[qa, va]],
        {"mask": [qm, vm], "use_causal_mask": True, "return_attention_scores": True},
    )
    case("k2_additive_attention", layers.AdditiveAttention(), [[qa, va]], {"mask": [qm, vm]})


def main() -> None:
    if PART == "k2":
        k2_cases()
        return
    for old in OUT.glob("*.npz"):
        old.unlink()
    k3_cases()
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    subprocess.run([K2_PYTHON, __file__, "k2"], check=True, env=env)


if __name__ == "__main__":
    main()
