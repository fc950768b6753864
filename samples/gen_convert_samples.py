"""Hard cases for ``modelgraph convert`` that the other samples lack, made with tf_keras 2.

    /work/venvs/k2/bin/python samples/gen_convert_samples.py [NAME ...]

Writes ``samples/convert/``:

* ``keras22_gru.h5`` + golden: GRUs computing the reset gate before the recurrent matmul
  (``reset_after=False``), saved by tf_keras, then given the config Keras 2.0-2.2 wrote: no
  ``reset_after`` key (its default then was False; tf.keras 2 and Keras 3 default to True), no
  ``time_major`` key, top-level class ``Model``, ``keras_version`` 2.2.4. Keras 3 cannot load it
  (it builds a reset-after GRU whose bias does not fit); the golden outputs are tf_keras's, computed
  before the config was edited back to Keras 2.2's form.
* ``time_major.h5`` + golden: an LSTM and a GRU (sequence + state) with ``time_major=True`` (Keras 3
  has no such option; ``convert`` writes Transpose op nodes around them).
* ``attention_masks.h5`` + golden: tf.keras implicit masks into Attention, AdditiveAttention and
  MultiHeadAttention calls (fully masked rows included), which ``convert`` writes explicitly.
* ``h5_forms.h5`` + golden: what the ``.h5`` writer must put in a form both tf_keras 2 and Keras 3
  read alike: a nested Sequential that starts with an InputLayer, called twice, feeding other layers
  (tf_keras numbers its calls from 1, Keras 3 from 0), LayerNormalization and Softmax over two axes (Keras 3's
  ``.h5`` loader drops a multi-element ``axis`` list), and TF ops of two tensors
  (``x + y``, ``x * y``, ``x - y``, ``tf.maximum``, ``tf.minimum``) and of a tensor and a number
  (``x + 3.0``, ``x * 0.25``).
* ``unconvertible.h5``: a Lambda, a TF op with no Keras 3 equivalent (``tf.math.bessel_i0``) and a
  ``ThresholdedReLU``: ``convert`` must refuse the file naming all three.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "-1")

import h5py  # noqa: E402
import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = HERE / "convert"


def save_golden(name: str, made_by: str, files: dict, inputs: dict, outputs) -> None:
    """``convert/<name>.npz`` (``input/<name>``, ``output/<i>``) and ``convert/<name>.json``: the
    inputs and the outputs the making Keras computed, as the convert tests read them."""
    outputs = outputs if isinstance(outputs, list) else [outputs]
    arrays = {**{f"input/{k}": v for k, v in inputs.items()}, **{f"output/{i}": o for i, o in enumerate(outputs)}}
    np.savez(OUT / f"{name}.npz", **arrays)
    golden = {
        "family": "convert",
        "model": name,
        "made_by": made_by,
        "files": files,
        "inputs": {k: {"shape": list(v.shape), "dtype": v.dtype.str} for k, v in inputs.items()},
    }
    (OUT / f"{name}.json").write_text(json.dumps(golden, indent=1) + "\n")


def _keras22_gru(tf, keras) -> None:
    rng = np.random.default_rng(22)
    x = keras.Input((5, 3), name="x")
    h = keras.layers.GRU(4, reset_after=False, return_sequences=True, name="gru_seq")(x)
    h = keras.layers.GRU(3, reset_after=False, name="gru_last")(h)
    y = keras.layers.Dense(2, name="out")(h)
    model = keras.Model(x, y, name="keras22_gru")
    for layer in model.layers:
        weights = [rng.normal(0, 0.5, w.shape).astype("float32") for w in layer.get_weights()]
        layer.set_weights(weights)
    data = rng.normal(0, 1, (3, 5, 3)).astype("float32")
    expected = model.predict(data, verbose=0)
    path = OUT / "keras22_gru.h5"
    model.save(path)
    with h5py.File(path, "r+") as f:
        config = json.loads(f.attrs["model_config"])
        config["class_name"] = "Model"
        for layer in config["config"]["layers"]:
            layer["config"].pop("reset_after", None)
            layer["config"].pop("time_major", None)
        f.attrs["model_config"] = json.dumps(config).encode()
        f.attrs["keras_version"] = b"2.2.4"
        f["model_weights"].attrs["keras_version"] = b"2.2.4"
    made_by = f"tf_keras {keras.__version__}, config edited to Keras 2.2.4's form"
    save_golden("keras22_gru", made_by, {"h5": "convert/keras22_gru.h5"}, {"x": data}, expected)


def _time_major(tf, keras) -> None:
    rng = np.random.default_rng(7)
    x = keras.Input((2, 3), name="steps")  # time-major: axis 0 is time, axis 1 the batch
    last = keras.layers.LSTM(4, time_major=True, name="lstm_tm")(x)
    seq, state = keras.layers.GRU(3, time_major=True, return_sequences=True, return_state=True, name="gru_tm")(x)
    out = keras.layers.Dense(2, name="after_seq")(seq)  # reads the time-major sequence
    model = keras.Model(x, [last, seq, state, out], name="time_major")
    for layer in model.layers:
        layer.set_weights([rng.normal(0, 0.5, w.shape).astype("float32") for w in layer.get_weights()])
    data = rng.normal(0, 1, (5, 2, 3)).astype("float32")  # 5 steps of a batch of 2
    expected = model.predict(data, verbose=0)
    model.save(OUT / "time_major.h5")
    files = {"h5": "convert/time_major.h5"}
    save_golden("time_major", f"tf_keras {keras.__version__}", files, {"steps": data}, expected)


def _attention_masks(tf, keras) -> None:
    """tf.keras implicit masks into attention layers, every call Keras 3 can be told the same masks:
    Attention [q, v] / [q, v, k], AdditiveAttention (+ scores), MultiHeadAttention (q, v), (q, v, k)
    with keywords, self-attention + causal mask, an unmasked query, an attention_mask tensor. Token
    rows include fully masked ones. (samples/k2/mask_attention.h5 adds MultiHeadAttention returning
    its scores.)"""
    rng = np.random.default_rng(11)
    layers = keras.layers
    tq = keras.Input((5,), dtype="int32", name="tok_q")
    tv = keras.Input((7,), dtype="int32", name="tok_v")
    tk = keras.Input((7,), dtype="int32", name="tok_k")
    fq = keras.Input((5, 6), name="feat_q")
    am = keras.Input((5, 7), dtype="int32", name="att_mask")
    eq = layers.Embedding(20, 6, mask_zero=True, name="emb_q")(tq)
    ev = layers.Embedding(20, 6, mask_zero=True, name="emb_v")(tv)
    ek = layers.Embedding(20, 6, mask_zero=True, name="emb_k")(tk)
    att = layers.Attention(name="att")([eq, ev])
    att_k = layers.Attention(use_scale=True, score_mode="concat", name="att_qvk")([eq, ev, ek])
    add_att, scores = layers.AdditiveAttention(name="add_att")([eq, ev], return_attention_scores=True)
    att_uq = layers.Attention(name="att_unmasked_q")([fq, ev])
    mha = layers.MultiHeadAttention(2, 3, name="mha")(eq, ev)
    mha_self = layers.MultiHeadAttention(2, 3, name="mha_self_causal")(ev, ev, use_causal_mask=True)
    mha_k = layers.MultiHeadAttention(2, 3, value_dim=2, name="mha_qvk")(eq, key=ek, value=ev)
    mha_uq = layers.MultiHeadAttention(2, 3, name="mha_unmasked_q")(fq, ev)
    mha_am = layers.MultiHeadAttention(2, 3, name="mha_attention_mask")(eq, attention_mask=am, key=ek, value=ev)
    outs = [
        att, layers.LSTM(3, name="lstm_att")(att), att_k, layers.GRU(3, name="gru_att_qvk")(att_k),
        add_att, scores, layers.GlobalAveragePooling1D(name="gap_add_att")(add_att),
        att_uq, layers.SimpleRNN(2, name="srnn_att_uq")(att_uq),
        mha, layers.GRU(3, name="gru_mha")(mha), mha_self, layers.LSTM(2, name="lstm_mha_self")(mha_self),
        mha_k, mha_uq, layers.SimpleRNN(2, name="srnn_mha_uq")(mha_uq), mha_am, layers.GRU(2, name="gru_mha_am")(mha_am),
    ]
    model = keras.Model([tq, tv, tk, fq, am], outs, name="attention_masks")
    for layer in model.layers:
        layer.set_weights([rng.normal(0, 0.5, w.shape).astype("float32") for w in layer.get_weights()])

    def tokens(shape, zero_rows):
        tok = rng.integers(1, 20, size=shape)
        for row, cols in zero_rows.items():
            tok[row, cols] = 0
        return tok.astype("int32")

    data = {
        "tok_q": tokens((5, 5), {0: [0], 1: [2, 4], 2: slice(None), 3: slice(3, None)}),
        "tok_v": tokens((5, 7), {0: [1, 6], 1: slice(0, 3), 2: slice(None), 4: slice(4, None)}),
        "tok_k": tokens((5, 7), {0: [2, 3], 1: slice(0, 2), 2: slice(None), 4: [6]}),
        "feat_q": rng.normal(size=(5, 5, 6)).astype("float32"),
        "att_mask": (rng.random((5, 5, 7)) < 0.8).astype("int32"),
    }
    expected = model.predict([data[n] for n in model.input_names], verbose=0)
    model.save(OUT / "attention_masks.h5")
    files = {"h5": "convert/attention_masks.h5"}
    save_golden("attention_masks", f"tf_keras {keras.__version__}", files, data, expected)


def _h5_forms(tf, keras) -> None:
    rng = np.random.default_rng(5)
    x = keras.Input((5, 8), name="x")
    inner = keras.Sequential(
        [keras.Input((5, 8)), keras.layers.Dense(8, activation="tanh", name="seq_dense")], name="seq_in"
    )
    b = keras.layers.Dense(8, name="d")(x)
    h = inner(x)
    g = inner(b)  # its second call
    h = keras.layers.LayerNormalization(axis=[1, 2], name="ln_two_axes")(h)
    s = keras.layers.Softmax(axis=[1, 2], name="softmax_two_axes")(h)
    added = (s + b) * g
    mixed = tf.maximum(added - h, tf.minimum(h, b))
    y = keras.layers.Dense(3, name="out")(mixed * 0.25 + 3.0)
    model = keras.Model(x, y, name="h5_forms")
    for layer in model.layers:
        layer.set_weights([rng.normal(0, 0.5, w.shape).astype("float32") for w in layer.get_weights()])
    data = rng.normal(0, 1, (3, 5, 8)).astype("float32")
    expected = model.predict(data, verbose=0)
    model.save(OUT / "h5_forms.h5")
    save_golden("h5_forms", f"tf_keras {keras.__version__}", {"h5": "convert/h5_forms.h5"}, {"x": data}, expected)


def _unconvertible(tf, keras) -> None:
    x = keras.Input((4,), name="x")
    h = keras.layers.Lambda(lambda t: t * 2.0, name="double")(x)
    h = tf.math.bessel_i0(h)
    h = keras.layers.ThresholdedReLU(theta=0.5, name="thr")(h)
    y = keras.layers.Dense(2, name="out")(h)
    keras.Model(x, y, name="unconvertible").save(OUT / "unconvertible.h5")


def main() -> None:
    import tensorflow as tf
    import tf_keras as keras

    makers = {
        "keras22_gru": _keras22_gru,
        "time_major": _time_major,
        "h5_forms": _h5_forms,
        "unconvertible": _unconvertible,
        "attention_masks": _attention_masks,
    }
    keras.utils.set_random_seed(0)
    OUT.mkdir(exist_ok=True)
    for name in sys.argv[1:] or list(makers):  # e.g. `gen_convert_samples.py time_major`
        makers[name](tf, keras)
    print("wrote", sorted(p.name for p in OUT.iterdir()), file=sys.stderr)


if __name__ == "__main__":
    main()
