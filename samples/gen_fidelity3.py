"""Samples for issue #33 (fidelity round 3), made by real Keras 3 and tf_keras.

Run with the Keras 3 venv, once per backend (the goldens of both backends are kept; JAX writes the
model files, so run it first), then with the tf_keras venv:

    KERAS_BACKEND=jax        /work/venvs/k3/bin/python samples/gen_fidelity3.py
    KERAS_BACKEND=tensorflow /work/venvs/k3/bin/python samples/gen_fidelity3.py
    /work/venvs/k2/bin/python samples/gen_fidelity3.py tf_keras [NAME...]
    KERAS_BACKEND=jax        /work/venvs/k3/bin/python samples/gen_fidelity3.py verify-convert [MODELGRAPH]
    KERAS_BACKEND=tensorflow /work/venvs/k3/bin/python samples/gen_fidelity3.py verify-convert [MODELGRAPH]

``verify-convert`` converts the tf_keras samples of ``CONVERTED`` with modelgraph (default
``.venv/bin/modelgraph``), loads each written file in Keras 3 (safe mode) and records in
``fidelity3/converted.json`` its canonical hash and how far Keras 3 is from tf_keras's golden (or
modelgraph's one-line refusal).

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

# TensorFlow runs channels_first convolutions on the CPU only through oneDNN (without it: "only
# supports the NHWC tensor form"); set before TensorFlow is imported.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

if sys.argv[1:2] == ["tf_keras"]:
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


def mha_k2_scores_mask() -> keras.Model:
    """tf_keras: MultiHeadAttention scores read by Softmax layers. The scores carry the mask the
    layer's softmax applied (the int ``attention_mask`` argument; the causal band and the
    Embedding(mask_zero) query/value masks), so a ``Softmax`` after them gets it: tf_keras adds -1e9
    where it is False. Over the keys (``axis=-1``) that keeps the masked positions at 0 and spreads a
    fully masked row evenly; over the heads (``axis=1``), masked alike for every head, it gives
    1 / heads (Keras 3 zeroes both)."""
    L = keras.layers
    q = keras.Input((4, 6), name="query")
    v = keras.Input((5, 6), name="value")
    m = keras.Input((4, 5), dtype="int32", name="mask")
    tokens = keras.Input((4,), dtype="int32", name="tokens")
    out, scores = L.MultiHeadAttention(2, 3, name="cross")(q, v, attention_mask=m, return_attention_scores=True)
    heads = L.Softmax(axis=1, name="cross_heads")(scores)
    keys = L.Softmax(axis=-1, name="cross_keys")(scores)
    e = L.Embedding(7, 6, mask_zero=True, name="embed")(tokens)
    out2, scores2 = L.MultiHeadAttention(3, 2, name="self")(e, e, use_causal_mask=True, return_attention_scores=True)
    keys2 = L.Softmax(axis=-1, name="self_keys")(scores2)
    model = keras.Model([q, v, m, tokens], [out, heads, keys, out2, keys2], name="mha_k2_scores_mask")
    return _perturbed(model, 34)


def mha_k2_masked_rows() -> keras.Model:
    """tf_keras: MultiHeadAttention with an int ``attention_mask`` that hides every key of some query
    rows (the fuzzer's tf_keras seed 14), returned scores read by nothing or returned, and the same
    without scores; ``both`` ANDs the mask with a Masking value mask. tf_keras spreads a fully masked
    row evenly (softmax of -1e9 everywhere), in the scores and in the attention output."""
    L = keras.layers
    q = keras.Input((4, 6), name="query")
    v = keras.Input((5, 6), name="value")
    m = keras.Input((4, 5), dtype="int32", name="mask")
    signal = keras.Input((5, 6), name="signal")
    out, _ = L.MultiHeadAttention(2, 3, name="unread")(q, v, attention_mask=m, return_attention_scores=True)
    proj = L.Dense(4, name="proj")(out)
    out2, scores2 = L.MultiHeadAttention(2, 3, name="cross")(q, v, attention_mask=m, return_attention_scores=True)
    plain = L.MultiHeadAttention(3, 2, name="plain")(q, v, attention_mask=m)
    h = L.Masking(0.0, name="masking")(signal)
    out4, scores4 = L.MultiHeadAttention(2, 3, name="both")(q, h, attention_mask=m, return_attention_scores=True)
    model = keras.Model([q, v, m, signal], [proj, out2, scores2, plain, out4, scores4], name="mha_k2_masked_rows")
    return _perturbed(model, 38)


def mha_k2_masked_rows_inputs() -> dict[str, np.ndarray]:
    feeds = mha_int_mask_inputs()
    del feeds["tokens"]
    signal = np.random.default_rng(10).normal(size=(3, 5, 6)).astype("float32")
    signal[0, 3:] = 0  # masked keys: with the mask, more fully masked rows
    signal[1, :2] = 0
    signal[2] = 0  # every key masked
    feeds["signal"] = signal
    return feeds


def tf_keras_scores_masks(model: keras.Model, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The ``_keras_mask`` tf_keras attaches to each MultiHeadAttention's returned scores, from an
    eager run of the model's graph (``mask/<layer>``)."""
    import tensorflow as tf
    from tf_keras.src.engine.keras_tensor import KerasTensor

    values = {t.ref(): tf.constant(feeds[t.name.split(":")[0]]) for t in model.inputs}
    out = {}
    for layer in model.layers:  # functional order: inputs first
        node = layer.inbound_nodes[0]
        if not node.keras_inputs:
            continue
        args, kwargs = tf.nest.map_structure(
            lambda t: values[t.ref()] if isinstance(t, KerasTensor) else t, (node.call_args, node.call_kwargs)
        )
        result = layer(*args, **kwargs)
        for kt, value in zip(tf.nest.flatten(node.outputs), tf.nest.flatten(result), strict=True):
            values[kt.ref()] = value
        if isinstance(layer, keras.layers.MultiHeadAttention) and kwargs.get("return_attention_scores"):
            mask = getattr(result[1], "_keras_mask", None)
            out[f"mask/{layer.name}"] = np.asarray(mask) if mask is not None else np.zeros((0,), bool)
    return out


def _unique(names: list[str]) -> list[str]:
    """Output names made unique (Keras 3 names every output of a layer after the layer)."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        out.append(n if n not in seen else f"{n}_{seen[n]}")
        seen[n] = seen.get(n, 0) + 1
    return out


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
    golden.update({f"output/{n}": np.asarray(y) for n, y in zip(_unique(model.output_names), ys, strict=True)})
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


# --- channels_first convolutions with unequal strides or dilation ------------------------------------

# (output name, class, keyword arguments, input rank); every layer is applied to one input directly.
CF_LAYERS = [
    ("conv1d_s2", "Conv1D", {"filters": 3, "kernel_size": 3, "strides": 2}, 1),
    ("conv1d_d2", "Conv1D", {"filters": 3, "kernel_size": 3, "dilation_rate": 2, "padding": "same"}, 1),
    ("conv2d_s12", "Conv2D", {"filters": 3, "kernel_size": 3, "strides": (1, 2)}, 2),
    ("conv2d_s21_same", "Conv2D", {"filters": 3, "kernel_size": (2, 3), "strides": (2, 1), "padding": "same"}, 2),
    ("conv2d_d21", "Conv2D", {"filters": 3, "kernel_size": 3, "dilation_rate": (2, 1)}, 2),
    ("conv3d_s121", "Conv3D", {"filters": 2, "kernel_size": 2, "strides": (1, 2, 1)}, 3),
    ("conv3d_d112", "Conv3D", {"filters": 2, "kernel_size": 2, "dilation_rate": (1, 1, 2), "padding": "same"}, 3),
    ("convt1d_s2", "Conv1DTranspose", {"filters": 3, "kernel_size": 3, "strides": 2}, 1),
    ("convt2d_s12", "Conv2DTranspose", {"filters": 3, "kernel_size": 3, "strides": (1, 2)}, 2),
    ("convt2d_s21_same", "Conv2DTranspose", {"filters": 3, "kernel_size": (2, 3), "strides": (2, 1), "padding": "same"}, 2),
    ("convt3d_s211", "Conv3DTranspose", {"filters": 2, "kernel_size": 2, "strides": (2, 1, 1)}, 3),
    ("sep1d_s2", "SeparableConv1D", {"filters": 3, "kernel_size": 3, "strides": 2, "depth_multiplier": 2}, 1),
    ("sep2d_s12", "SeparableConv2D", {"filters": 3, "kernel_size": 3, "strides": (1, 2)}, 2),
    ("sep2d_d12", "SeparableConv2D", {"filters": 3, "kernel_size": 3, "dilation_rate": (1, 2), "padding": "same"}, 2),
    ("dw1d_s2", "DepthwiseConv1D", {"kernel_size": 3, "strides": 2, "depth_multiplier": 2}, 1),
    ("dw2d_s12", "DepthwiseConv2D", {"kernel_size": 3, "strides": (1, 2)}, 2),
    ("dw2d_d21", "DepthwiseConv2D", {"kernel_size": 3, "dilation_rate": (2, 1), "padding": "same"}, 2),
]
CF_SHAPES = {1: (2, 9), 2: (2, 7, 8), 3: (2, 5, 6, 7)}  # (channels, *spatial)


def channels_first_convs() -> keras.Model:
    """One channels_first layer per output, each on the input of its rank (issue #33: Keras on
    TensorFlow gets some of them wrong; see docs/backend-disagreements.md)."""
    inputs = {rank: keras.Input(shape, name=f"x{rank}d") for rank, shape in CF_SHAPES.items()}
    outputs = [
        getattr(keras.layers, cls)(name=name, data_format="channels_first", **kw)(inputs[rank])
        for name, cls, kw, rank in CF_LAYERS
    ]
    model = keras.Model(list(inputs.values()), outputs, name="channels_first_convs")
    return _perturbed(model, 36)


def channels_first_inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(10)
    return {f"x{rank}d": rng.normal(size=(2, *shape)).astype("float32") for rank, shape in CF_SHAPES.items()}


def _tuple(value, rank: int) -> tuple[int, ...]:
    return tuple(value) if isinstance(value, (list, tuple)) else (int(value),) * rank


def _same_before(size: int, k: int, s: int, d: int) -> int:
    """TensorFlow's SAME: the padding before a spatial axis (the extra one goes after)."""
    span = (k - 1) * d + 1
    out = -(-size // s)
    return max((out - 1) * s + span - size, 0) // 2


def ref_conv(x, kernel, strides, dilation, padding, groups=1):
    """A grouped N-d convolution by its definition: x (B, C, *S) channels_first, Keras's kernel
    (*K, C // groups, F); plain loops over output positions and kernel taps."""
    rank = x.ndim - 2
    ks = kernel.shape[:rank]
    before = [
        _same_before(x.shape[2 + i], ks[i], strides[i], dilation[i]) if padding == "same" else 0
        for i in range(rank)
    ]
    if padding == "same":
        out_sizes = [-(-x.shape[2 + i] // strides[i]) for i in range(rank)]
    else:
        out_sizes = [(x.shape[2 + i] - (ks[i] - 1) * dilation[i] - 1) // strides[i] + 1 for i in range(rank)]
    cin, f = kernel.shape[-2], kernel.shape[-1]
    fg = f // groups
    y = np.zeros((x.shape[0], f, *out_sizes), np.float64)
    for o in np.ndindex(*out_sizes):
        for k in np.ndindex(*ks):
            idx = [o[i] * strides[i] + k[i] * dilation[i] - before[i] for i in range(rank)]
            if any(j < 0 or j >= x.shape[2 + i] for i, j in enumerate(idx)):
                continue
            for g in range(groups):
                xin = x[(slice(None), slice(g * cin, (g + 1) * cin), *idx)].astype(np.float64)
                y[(slice(None), slice(g * fg, (g + 1) * fg), *o)] += xin @ kernel[k][:, g * fg : (g + 1) * fg]
    return y


def ref_conv_transpose(x, kernel, strides, dilation, padding):
    """A transposed convolution by its definition: each input position scatters ``x @ W[k].T`` to
    ``i * stride + k * dilation``; Keras's kernel (*K, F, C) and output lengths, TensorFlow's SAME crop."""
    rank = x.ndim - 2
    ks = kernel.shape[:rank]
    spans = [(ks[i] - 1) * dilation[i] + 1 for i in range(rank)]
    sizes = x.shape[2:]
    full = [(sizes[i] - 1) * strides[i] + spans[i] for i in range(rank)]
    if padding == "same":
        out_sizes = [sizes[i] * strides[i] for i in range(rank)]
        before = [max(spans[i] - strides[i], 0) // 2 for i in range(rank)]
    else:
        out_sizes = [sizes[i] * strides[i] + max(spans[i] - strides[i], 0) for i in range(rank)]
        before = [0] * rank
    buf = np.zeros((x.shape[0], kernel.shape[-2], *[max(full[i], before[i] + out_sizes[i]) for i in range(rank)]))
    for i_pos in np.ndindex(*sizes):
        xin = x[(slice(None), slice(None), *i_pos)].astype(np.float64)
        for k in np.ndindex(*ks):
            at = [i_pos[i] * strides[i] + k[i] * dilation[i] for i in range(rank)]
            buf[(slice(None), slice(None), *at)] += xin @ kernel[k].T
    return buf[(slice(None), slice(None), *[slice(before[i], before[i] + out_sizes[i]) for i in range(rank)])]


def channels_first_reference(model: keras.Model, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every output of :func:`channels_first_convs` from :func:`ref_conv` / :func:`ref_conv_transpose`."""
    out = {}
    for name, cls, kw, rank in CF_LAYERS:
        layer = model.get_layer(name)
        weights = {w.path.split("/")[-1]: np.asarray(w) for w in layer.weights}
        x = feeds[f"x{rank}d"]
        strides = _tuple(kw.get("strides", 1), rank)
        dilation = _tuple(kw.get("dilation_rate", 1), rank)
        padding = kw.get("padding", "valid")
        if cls.startswith("Conv") and cls.endswith("Transpose"):
            y = ref_conv_transpose(x, weights["kernel"], strides, dilation, padding)
        elif cls.startswith("Conv"):
            y = ref_conv(x, weights["kernel"], strides, dilation, padding)
        else:
            # (*K, C, multiplier) -> grouped (*K, 1, C * m)
            depthwise = weights["depthwise_kernel" if "depthwise_kernel" in weights else "kernel"]
            channels = depthwise.shape[-2]
            grouped = depthwise.reshape(*depthwise.shape[:rank], 1, -1)
            y = ref_conv(x, grouped, strides, dilation, padding, groups=channels)
            if cls.startswith("Separable"):
                y = ref_conv(y, weights["pointwise_kernel"], (1,) * rank, (1,) * rank, "valid")
        bias = weights["bias"].reshape((1, -1) + (1,) * rank)
        out[name] = (y + bias).astype(np.float32)
    return out


def bidi_unrolled(unroll: bool = True) -> keras.Model:
    """Keras 3: masked Bidirectional layers that unroll (LSTM concat with states, GRU merge None).
    Keras 3 on TensorFlow zeroes the backward outputs by the mask in time order, on JAX it never
    zeroes them when unrolling; the reference is the same model without ``unroll``."""
    L = keras.layers
    x = keras.Input((6, 3), name="signal")
    h = L.Masking(0.0, name="masking")(x)
    lstm = L.Bidirectional(
        L.LSTM(3, return_sequences=True, return_state=True, unroll=unroll), name="bidi_lstm"
    )(h)
    gru = L.Bidirectional(L.GRU(2, return_sequences=True, unroll=unroll), merge_mode=None, name="bidi_gru")(h)
    return keras.Model(x, [*lstm, *gru], name="bidi_unrolled")


def bidi_unrolled_inputs() -> dict[str, np.ndarray]:
    signal = np.random.default_rng(11).normal(size=(4, 6, 3)).astype("float32")
    signal[0, 4:] = 0
    signal[1, :2] = 0
    signal[2, 3] = 0
    signal[3] = 0
    return {"signal": signal}


def _bidi_unrolled_built() -> keras.Model:
    return _perturbed(bidi_unrolled(), 37)


def bidi_unrolled_reference(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The sample's weights in the same model without ``unroll`` (the layers' definition)."""
    model = keras.saving.load_model(OUT / "bidi_unrolled.keras")
    plain = bidi_unrolled(unroll=False)
    plain.set_weights(model.get_weights())
    ys = plain(feeds["signal"], training=False)
    return {n: np.asarray(y) for n, y in zip(_unique(model.output_names), ys, strict=True)}


def main_tf_keras(names: list[str]) -> None:
    """The tf_keras samples (``names``: only these; default all)."""
    OUT.mkdir(exist_ok=True)
    if not names or "bidi_masked_states" in names:
        keras.utils.set_random_seed(35)
        _save_tf_keras("bidi_masked_states", bidi_masked_states, bidi_masked_states_inputs())
    for name, build, inputs, seed in (
        ("mha_k2_scores_mask", mha_k2_scores_mask, mha_int_mask_inputs(), 34),
        ("mha_k2_masked_rows", mha_k2_masked_rows, mha_k2_masked_rows_inputs(), 38),
    ):
        if names and name not in names:
            continue
        keras.utils.set_random_seed(seed)
        _save_tf_keras(name, build, inputs)
        model = keras.models.load_model(OUT / f"{name}.h5")
        golden = dict(np.load(OUT / f"{name}.tf_keras.npz"))
        golden.update(tf_keras_scores_masks(model, inputs))
        np.savez(OUT / f"{name}.tf_keras.npz", **golden)


# --- convert: tf_keras samples written as Keras 3 files by modelgraph, loaded by real Keras 3 ---------

#: tf_keras samples converted from their .h5 (``verify-convert``): Keras 3 must reproduce tf_keras's
#: outputs, or modelgraph refuses with one line naming the layer.
CONVERTED = ("mha_k2_masked_rows", "mha_k2_scores_mask")
ROOT = Path(__file__).resolve().parent.parent


def verify_convert(modelgraph: str) -> None:
    """Convert each of :data:`CONVERTED` with ``modelgraph convert`` (a subprocess), load the written
    file in Keras 3 (safe mode) on this backend, run it on the tf_keras golden's inputs and record the
    result, with the written file's canonical hash, in ``fidelity3/converted.json`` (both backends'
    runs are kept)."""
    import json
    import subprocess
    import tempfile

    sys.path.insert(0, str(ROOT / "samples"))
    from convert_cases import canonical_hash

    backend = keras.backend.backend()
    record_path = OUT / "converted.json"
    records = json.loads(record_path.read_text()) if record_path.exists() else {}
    records["made_by"] = "samples/gen_fidelity3.py verify-convert"
    records["keras_version"] = keras.__version__
    for name in CONVERTED:
        golden = np.load(OUT / f"{name}.tf_keras.npz")
        feeds = {k.split("/", 1)[1]: golden[k] for k in golden.files if k.startswith("input/")}
        want = [golden[k] for k in golden.files if k.startswith("output/")]
        with tempfile.TemporaryDirectory() as tmp:
            target = Path(tmp) / f"{name}.keras"
            done = subprocess.run(
                [modelgraph, "convert", f"samples/fidelity3/{name}.h5", "-o", str(target)],
                capture_output=True, text=True, check=False, cwd=ROOT,
            )  # fmt: skip
            record = records.setdefault(name, {})
            record.update({"source": f"samples/fidelity3/{name}.h5", "exit_code": done.returncode})
            if done.returncode != 0:
                record["message"] = done.stderr.strip().replace(str(target), f"{name}.keras")
                record.pop("canonical", None)
                continue
            record["canonical"] = canonical_hash(target)
            model = keras.saving.load_model(target, compile=False, safe_mode=True)
            got = model({i.name: feeds[i.name] for i in model.inputs}, training=False)
            got = [np.asarray(keras.ops.convert_to_numpy(y)) for y in keras.tree.flatten(got)]
        gap = max(float(np.abs(g - w).max()) for g, w in zip(got, want, strict=True))
        record.setdefault("keras3", {})[backend] = {"loaded": True, "max_abs_error": gap, "matches": gap < 1e-5}
        print(f"{name}: Keras 3 ({backend}) on the converted file vs tf_keras: {gap:.2e}")
    record_path.write_text(json.dumps(records, indent=1, sort_keys=True) + "\n")


def main() -> None:
    if sys.argv[1:2] == ["tf_keras"]:
        main_tf_keras(sys.argv[2:])
        return
    if sys.argv[1:2] == ["verify-convert"]:
        verify_convert(sys.argv[2] if len(sys.argv) > 2 else str(ROOT / ".venv" / "bin" / "modelgraph"))
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
    keras.utils.set_random_seed(37)
    feeds = bidi_unrolled_inputs()
    _save_k3("bidi_unrolled", _bidi_unrolled_built, feeds, backend)
    reference = bidi_unrolled_reference(feeds)
    if backend == "jax":
        np.savez(
            OUT / "bidi_unrolled.reference.npz",
            **{f"input/{k}": v for k, v in feeds.items()},
            **{f"output/{k}": v for k, v in reference.items()},
        )
    else:  # the definition is the same on both backends
        kept = np.load(OUT / "bidi_unrolled.reference.npz")
        gap = max(float(np.abs(kept[f"output/{k}"] - v).max()) for k, v in reference.items())
        print(f"bidi_unrolled reference: {backend} vs jax without unroll: {gap:.1e}")
        assert gap < 1e-5, gap
    keras.utils.set_random_seed(36)
    feeds = channels_first_inputs()
    _save_k3("channels_first_convs", channels_first_convs, feeds, backend)
    model = keras.saving.load_model(OUT / "channels_first_convs.keras")
    reference = channels_first_reference(model, feeds)
    np.savez(
        OUT / "channels_first_convs.reference.npz",
        **{f"input/{k}": v for k, v in feeds.items()},
        **{f"output/{k}": v for k, v in reference.items()},
    )


if __name__ == "__main__":
    main()
