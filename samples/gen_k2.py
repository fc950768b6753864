"""Generate tf_keras (Keras 2) sample files + goldens. Run in the tf_keras venv (see make_samples.py).

    python samples/gen_k2.py [--only NAME ...] [--apps [NAME ...]] [--no-models] [--wild]

Writes samples/k2/, samples/wild/ (tf_keras-made "wild" files), samples/apps/k2_*/,
samples/goldens/k2_*.{npz,json} and goldens/wild_*.{npz,json}.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import traceback
import warnings
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _common as C  # noqa: E402
import rebuild  # noqa: E402

import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402
from tf_keras import layers  # noqa: E402
from tf_keras.src.engine import functional as kfunctional  # noqa: E402

warnings.filterwarnings("ignore")
BUILD_NOTES: dict = {}
OUT = HERE / "k2"
WILD = HERE / "wild"
APPS = HERE / "apps"
FAMILY = "k2"


def err(e: BaseException) -> str:
    s = f"{type(e).__name__}: {e}"
    return s if len(s) < 4000 else s[:4000] + "...[truncated]"


# ------------------------------------------------------------------------------------------ models


def m_multi_io_list():
    a = keras.Input((8,), name="a")
    b = keras.Input((8,), name="b")
    shared = layers.Dense(8, activation="relu", name="shared_dense")
    sa, sb = shared(a), shared(b)
    add = layers.Add(name="add_layer")([sa, sb])
    sc = shared(add)
    cat = layers.Concatenate(name="concat")([sa, sb, sc])
    u = layers.Dense(6, activation="tanh", name="mix")(cat)
    out1 = layers.Dense(3, activation="softmax", name="out1")(u)
    out2 = layers.Activation("sigmoid", name="out2")(sc)
    out3 = layers.Dense(2, name="out3")(layers.Dropout(0.5, name="drop")(u))
    return keras.Model([a, b], [out1, out2, out3], name="multi_io_list")


def in_multi_io_list(rng):
    return {"a": rng.normal(size=(3, 8)), "b": rng.normal(size=(3, 8))}


def m_multi_io_dict():
    x1 = keras.Input((4,), name="x1")
    x2 = keras.Input((5,), name="x2")
    h = layers.Concatenate(name="cat")([x1, x2])
    try:
        h = layers.Dense(7, activation="relu", name="dénse_ü")(h)
    except ValueError as e:  # tf_keras cannot: TF name scopes are ASCII-only
        BUILD_NOTES["multi_io_dict"] = f"unicode layer name 'dénse_ü' refused by tf_keras: {err(e)}; used 'dense_u'"
        h = layers.Dense(7, activation="relu", name="dense_u")(h)
    score = layers.Dense(1, name="score_head")(h)
    probs = layers.Dense(3, activation="softmax", name="probs_head")(h)
    return keras.Model({"x1": x1, "x2": x2}, {"score": score, "probs": probs}, name="multi_io_dict")


def in_multi_io_dict(rng):
    return {"x1": rng.normal(size=(3, 4)), "x2": rng.normal(size=(3, 5))}


def m_single_bare():
    x = keras.Input((5,), name="x")
    y = layers.Dense(4, activation="relu", name="d1")(x)
    y = layers.Dense(2, name="d2")(y)
    return keras.Model(x, y, name="single_bare")


def in_single(rng):
    return {"x": rng.normal(size=(3, 5))}


def m_nested():
    inner_in = keras.Input((8,), name="inner_in")
    t = layers.Dense(8, activation="relu", name="inner_dense")(inner_in)
    t = layers.BatchNormalization(name="inner_bn")(t)
    inner = keras.Model(inner_in, t, name="inner_model")
    seq = keras.Sequential(
        [keras.Input((8,)), layers.Dense(4, activation="relu", name="sq_d1"), layers.Dense(4, name="sq_d2")],
        name="seq_inner",
    )
    seq_noin = keras.Sequential([layers.Dense(3, name="sn_d")], name="seq_noin_inner")
    a = keras.Input((6,), name="a")
    p = layers.Dense(8, name="proj")(a)
    i1 = inner(p)
    i2 = inner(i1)
    s = seq(i2)
    t2 = seq_noin(s)
    bn = layers.BatchNormalization(name="bn")(i1)
    out = layers.Dense(2, name="head")(layers.Concatenate(name="cat")([bn, t2]))
    return keras.Model(a, [out, i2, s], name="nested")


def in_nested(rng):
    return {"a": rng.normal(size=(3, 6))}


def m_tfops():
    a = keras.Input((6,), name="a")
    b = keras.Input((6,), name="b")
    m = a * 3.0  # TFOpLambda tf.math.multiply
    ad = m + b  # tf.__operators__.add with a tensor in kwargs
    c = 2.0 + a  # constant first argument
    sl = a[:, 1:]  # SlicingOpLambda tf.__operators__.getitem
    s1, s2 = tf.split(ad, 2, axis=-1)  # tf.split, two outputs
    cc = tf.concat([s1, c], axis=-1)  # list first argument
    r = tf.reshape(a, (-1, 3, 2))
    relu = tf.nn.relu(cc)
    mean = tf.reduce_mean(r, axis=1)
    d = layers.Dense(4, name="dense")(relu)
    return keras.Model([a, b], [d, s2, sl, mean], name="tfops")


def in_tfops(rng):
    return {"a": rng.normal(size=(3, 6)), "b": rng.normal(size=(3, 6))}


def m_rnn_mask():
    tok = keras.Input((7,), dtype="int32", name="tok")
    e = layers.Embedding(20, 8, mask_zero=True, name="emb")(tok)
    l1 = layers.LSTM(6, return_sequences=True, name="lstm")(e)
    l2 = layers.LSTM(5, name="lstm2")(l1)
    f = keras.Input((7, 4), name="feat")
    mk = layers.Masking(0.0, name="masking")(f)
    g = layers.GRU(5, name="gru")(mk)
    out = layers.Dense(3, name="out")(layers.Concatenate(name="cat")([l2, g]))
    return keras.Model([tok, f], out, name="rnn_mask")


def in_rnn_mask(rng):
    tok = rng.integers(1, 20, size=(3, 7))
    tok[0, 5:] = 0
    tok[1, 3:] = 0
    tok[2, 2] = 0
    feat = rng.normal(size=(3, 7, 4))
    feat[0, 4:] = 0.0
    feat[2, 1] = 0.0
    return {"tok": tok.astype("int32"), "feat": feat}


def m_rnn_state():
    x = keras.Input((5, 3), name="x")
    seq, h, c = layers.LSTM(4, return_sequences=True, return_state=True, name="lstm_state")(x)
    g_out, g_h = layers.GRU(4, return_state=True, name="gru_state")(seq, initial_state=h)
    bi = layers.Bidirectional(layers.SimpleRNN(3, return_sequences=True), name="bidi")(x)
    bi_last = layers.GlobalAveragePooling1D(name="bi_pool")(bi)
    return keras.Model(x, [seq, h, c, g_out, g_h, bi_last], name="rnn_state")


def in_rnn_state(rng):
    return {"x": rng.normal(size=(3, 5, 3))}


def m_dtypes():
    x = keras.Input((6,), name="x")
    h = layers.Dense(8, activation="relu", name="d_f32")(x)
    h = layers.Dense(8, activation="relu", dtype="mixed_float16", name="d_mixed16")(h)
    h = layers.Dense(8, dtype="bfloat16", name="d_bf16")(h)
    h = layers.Dense(4, dtype="mixed_bfloat16", name="d_mixedbf16")(h)
    out = layers.Activation("linear", dtype="float32", name="out")(h)
    return keras.Model(x, out, name="dtypes")


def in_dtypes(rng):
    return {"x": rng.normal(size=(3, 6))}


def m_cnn():
    img = keras.Input((16, 16, 3), name="img")
    x = layers.Conv2D(8, 3, padding="same", name="conv1")(img)
    x = layers.BatchNormalization(name="bn1")(x)
    x = layers.ReLU(name="relu1")(x)
    p = layers.MaxPooling2D(2, name="pool1")(x)
    b1 = layers.Conv2D(4, 1, name="b1_conv")(p)
    b2 = layers.DepthwiseConv2D(3, padding="same", depth_multiplier=2, name="b2_dw")(p)
    b2 = layers.Conv2D(4, 3, padding="same", activation="relu", name="b2_conv")(b2)
    b3 = layers.AveragePooling2D(3, strides=1, padding="same", name="b3_avg")(p)
    b3 = layers.Conv2D(4, 1, name="b3_conv")(b3)
    b4 = layers.ZeroPadding2D(((1, 0), (1, 0)), name="b4_pad")(p)
    b4 = layers.Conv2D(4, 2, strides=1, padding="valid", name="b4_conv")(b4)
    cat = layers.Concatenate(name="cat")([b1, b2, b3, b4])
    s = layers.SeparableConv2D(8, 3, strides=2, padding="same", name="sep")(cat)
    s = layers.BatchNormalization(scale=False, name="bn2")(s)
    s = layers.Activation("relu", name="act2")(s)
    gap = layers.GlobalAveragePooling2D(name="gap")(s)
    fl = layers.Flatten(name="flat")(layers.MaxPooling2D(2, name="pool2")(s))
    d = layers.Dropout(0.3, name="drop")(layers.Concatenate(name="cat2")([gap, fl]))
    out = layers.Dense(5, activation="softmax", name="probs")(d)
    return keras.Model(img, out, name="cnn")


def in_cnn(rng):
    return {"img": rng.normal(size=(2, 16, 16, 3))}


def m_mha():
    x = keras.Input((5, 8), name="tokens")
    a = layers.MultiHeadAttention(num_heads=2, key_dim=4, name="mha")(x, x)
    h = layers.LayerNormalization(name="ln1")(layers.Add(name="res1")([x, a]))
    c = layers.MultiHeadAttention(num_heads=2, key_dim=3, value_dim=5, name="mha_causal")(
        h, h, use_causal_mask=True
    )
    h = layers.Add(name="res_c")([h, c])
    f = layers.Dense(16, activation="gelu", name="ffn1")(h)
    f = layers.Dense(8, name="ffn2")(f)
    out = layers.LayerNormalization(name="ln2")(layers.Add(name="res2")([h, f]))
    pooled = layers.GlobalAveragePooling1D(name="gap")(out)
    return keras.Model(x, [out, pooled], name="mha")


def in_mha(rng):
    return {"tokens": rng.normal(size=(2, 5, 8))}


def m_seq_in():
    return keras.Sequential(
        [
            keras.Input((5,), name="seq_input"),
            layers.Dense(4, activation="relu", name="sd1"),
            layers.Dropout(0.2, name="sdrop"),
            layers.Dense(3, activation="softmax", name="sd2"),
        ],
        name="seq_in",
    )


def in_seq(rng):
    return {"seq_input": rng.normal(size=(3, 5))}


def m_seq_noin():
    m = keras.Sequential([layers.Dense(4, activation="relu", name="sn1"), layers.Dense(3, name="sn2")],
                         name="seq_noin")
    m(np.zeros((1, 5), "float32"))
    return m


def m_seq_input_shape():
    # the Keras-2 idiom: input_shape= on the first layer (first layer config carries batch_input_shape)
    return keras.Sequential([layers.Dense(4, activation="relu", input_shape=(5,), name="si1"),
                             layers.Dense(3, name="si2")], name="seq_input_shape")


# Implicit (tf.keras) mask propagation. Token rows: leading zeros, middle + trailing zeros, all zeros
# (a fully masked row), a middle gap, no zeros. The goldens of these models also record every mask
# Keras attached (``mask/<layer>/<node>/<tensor>``, bool), so each mask rule is checked on its own.

def _tokens(rng, shape, zero_rows):
    tok = rng.integers(1, 20, size=shape)
    for row, cols in zero_rows.items():
        tok[row, cols] = 0
    return tok.astype("int32")


_ZEROS_A = {0: slice(0, 2), 1: [3, 5, 6], 2: slice(None), 3: slice(2, 4)}
_ZEROS_B = {0: [1, 6], 1: slice(0, 3), 2: slice(None), 4: slice(4, None)}


def m_mask_rnn():
    tok = keras.Input((7,), dtype="int32", name="tok")
    e = layers.Embedding(20, 5, mask_zero=True, name="emb")(tok)
    outs = []
    for mode, rnn in (("concat", layers.LSTM), ("sum", layers.GRU), ("mul", layers.LSTM),
                      ("ave", layers.GRU), (None, layers.SimpleRNN)):
        tag = mode or "none"
        seq = layers.Bidirectional(rnn(3, return_sequences=True), merge_mode=mode, name=f"bi_seq_{tag}")(e)
        if mode is None:  # two sequence outputs, each keeps the input mask
            outs += [layers.SimpleRNN(2, name="after_bi_none_0")(seq[0]),
                     layers.SimpleRNN(2, name="after_bi_none_1")(seq[1])]
        else:
            outs.append(layers.SimpleRNN(2, name=f"after_bi_{tag}")(seq))
        last = layers.Bidirectional(rnn(3), merge_mode=mode, name=f"bi_last_{tag}")(e)
        outs += list(last) if mode is None else [last]
    seq, *states = layers.Bidirectional(
        layers.LSTM(3, return_sequences=True, return_state=True), name="bi_state")(e)
    outs += [layers.GRU(2, name="after_bi_state")(seq), *states]
    # TimeDistributed: Dense carries the (batch, time) mask; LSTM over a 3-D mask reduces it with any().
    td = layers.TimeDistributed(layers.Dense(4), name="td_dense")(e)
    outs.append(layers.GRU(3, name="gru_after_td")(td))
    tok3 = keras.Input((4, 5), dtype="int32", name="tok3")
    e3 = layers.TimeDistributed(layers.Embedding(20, 3, mask_zero=True), name="td_emb")(tok3)
    s3 = layers.TimeDistributed(layers.LSTM(3, return_sequences=True), name="td_lstm_seq")(e3)
    l3 = layers.TimeDistributed(layers.GRU(2), name="td_gru")(s3)
    outs.append(layers.LSTM(2, name="lstm_after_td")(l3))
    # Masking on float input -> go_backwards RNNs (the mask is not reversed on the way out).
    feat = keras.Input((6, 3), name="feat")
    mk = layers.Masking(-1.0, name="masking")(feat)
    outs.append(layers.SimpleRNN(3, go_backwards=True, name="srnn_back")(mk))
    g = layers.GRU(3, reset_after=False, go_backwards=True, return_sequences=True, name="gru_back")(mk)
    outs.append(layers.LSTM(2, name="lstm_after_back")(g))
    td_mk = layers.TimeDistributed(layers.Masking(0.5), name="td_masking")(feat)
    outs.append(layers.GRU(2, name="gru_after_td_masking")(td_mk))
    return keras.Model([tok, tok3, feat], outs, name="mask_rnn")


def in_mask_rnn(rng):
    tok = _tokens(rng, (5, 7), _ZEROS_A)
    tok3 = rng.integers(1, 20, size=(5, 4, 5))
    tok3[0, 1] = 0  # a fully masked (batch, time) step
    tok3[1, :, 3:] = 0
    tok3[2] = 0
    tok3[3, 2, :2] = 0
    tok3[4, 3, 1:4] = 0
    feat = rng.normal(size=(5, 6, 3))
    feat[0, :2] = -1.0
    feat[1, 2] = -1.0
    feat[1, 5] = -1.0
    feat[2] = -1.0
    feat[3, 4:] = -1.0
    feat[4, 1, 0] = -1.0  # not masked: only one feature equals mask_value
    feat[4, 3] = 0.5  # td_masking (0.5) masks this step
    return {"tok": tok, "tok3": tok3.astype("int32"), "feat": feat}


def m_mask_merge():
    ta = keras.Input((7,), dtype="int32", name="tok_a")
    tb = keras.Input((7,), dtype="int32", name="tok_b")
    f = keras.Input((7, 3), name="feat")
    ea = layers.Embedding(20, 4, mask_zero=True, name="emb_a")(ta)
    eb = layers.Embedding(20, 4, mask_zero=True, name="emb_b")(tb)
    fd = layers.Dense(4, name="feat_dense")(f)  # unmasked
    outs = []
    for cls in (layers.Add, layers.Subtract, layers.Multiply, layers.Average, layers.Maximum, layers.Minimum):
        tag = cls.__name__.lower()
        outs.append(layers.GRU(2, name=f"gru_{tag}")(cls(name=tag)([ea, eb])))  # AND of the masks
    outs.append(layers.GRU(2, name="gru_add_mixed")(layers.Add(name="add_mixed")([ea, fd])))
    outs.append(layers.LSTM(2, name="lstm_cat_last")(layers.Concatenate(name="cat_last")([ea, f])))
    outs.append(layers.LSTM(2, name="lstm_cat_time")(layers.Concatenate(axis=1, name="cat_time")([ea, eb])))
    outs.append(layers.SimpleRNN(2, name="srnn_cat3")(layers.Concatenate(name="cat3")([ea, fd, eb])))
    outs.append(layers.LSTM(2, name="lstm_dot")(layers.Dot(axes=2, name="dot")([ea, eb])))  # Dot drops
    # Layers that carry the mask over, chained between Embedding and the RNN.
    h = ea
    for lyr in (layers.Dense(5, name="pt_dense"), layers.LayerNormalization(name="pt_ln"),
                layers.Dropout(0.3, name="pt_dropout"), layers.Activation("tanh", name="pt_act"),
                layers.BatchNormalization(name="pt_bn"), layers.ReLU(name="pt_relu"),
                layers.LeakyReLU(name="pt_leaky"), layers.PReLU(name="pt_prelu"), layers.ELU(name="pt_elu"),
                layers.ThresholdedReLU(0.05, name="pt_thr"), layers.GaussianNoise(0.1, name="pt_gnoise"),
                layers.GaussianDropout(0.1, name="pt_gdrop"), layers.AlphaDropout(0.1, name="pt_adrop"),
                layers.SpatialDropout1D(0.2, name="pt_sdrop"), layers.ActivityRegularization(name="pt_actreg"),
                layers.UnitNormalization(name="pt_unit")):
        h = lyr(h)
    outs.append(layers.LSTM(3, name="lstm_pass")(h))
    # Layers that drop the mask (the RNN after them sees every step).
    outs.append(layers.GRU(2, name="gru_conv")(layers.Conv1D(3, 2, padding="same", name="drop_conv")(ea)))
    flat = layers.Flatten(name="drop_flatten")(ea)
    outs.append(layers.GRU(2, name="gru_reshape")(layers.Reshape((7, 4), name="drop_reshape")(flat)))
    outs.append(layers.GRU(2, name="gru_identity")(layers.Identity(name="drop_identity")(ea)))
    outs.append(layers.GRU(2, name="gru_rescaling")(layers.Rescaling(2.0, name="drop_rescaling")(ea)))
    # Global pooling: the average is masked, the max is not.
    outs.append(layers.GlobalAveragePooling1D(name="gap")(ea))
    outs.append(layers.GlobalMaxPooling1D(name="gmp")(ea))
    outs.append(layers.GlobalAveragePooling1D(name="gap_and")(layers.Add(name="add_for_gap")([ea, eb])))
    return keras.Model([ta, tb, f], outs, name="mask_merge")


def in_mask_merge(rng):
    return {"tok_a": _tokens(rng, (5, 7), _ZEROS_A), "tok_b": _tokens(rng, (5, 7), _ZEROS_B),
            "feat": rng.normal(size=(5, 7, 3))}


def m_mask_attention():
    tq = keras.Input((5,), dtype="int32", name="tok_q")
    tv = keras.Input((7,), dtype="int32", name="tok_v")
    tk = keras.Input((7,), dtype="int32", name="tok_k")
    fq = keras.Input((5, 6), name="feat_q")
    eq = layers.Embedding(20, 6, mask_zero=True, name="emb_q")(tq)
    ev = layers.Embedding(20, 6, mask_zero=True, name="emb_v")(tv)
    ek = layers.Embedding(20, 6, mask_zero=True, name="emb_k")(tk)
    outs = []
    att = layers.Attention(name="att")([eq, ev])  # mask [q, v]; output mask = query mask
    outs += [att, layers.LSTM(3, name="lstm_att")(att)]
    att_k = layers.Attention(use_scale=True, score_mode="concat", name="att_qvk")([eq, ev, ek])
    outs += [att_k, layers.GRU(3, name="gru_att_qvk")(att_k)]
    add_att, scores = layers.AdditiveAttention(name="add_att")([eq, ev], return_attention_scores=True)
    outs += [add_att, scores, layers.GlobalAveragePooling1D(name="gap_add_att")(add_att)]
    att_uq = layers.Attention(name="att_unmasked_q")([fq, ev])  # only the value is masked
    outs += [att_uq, layers.SimpleRNN(2, name="srnn_att_uq")(att_uq)]
    mha = layers.MultiHeadAttention(2, 3, name="mha")(eq, ev)  # query and value masks, implicit
    outs += [mha, layers.GRU(3, name="gru_mha")(mha), layers.GlobalAveragePooling1D(name="gap_mha")(mha)]
    mha_self = layers.MultiHeadAttention(2, 3, name="mha_self_causal")(ev, ev, use_causal_mask=True)
    outs += [mha_self, layers.LSTM(2, name="lstm_mha_self")(mha_self)]
    # value/key/attention_mask as keywords in sorted-name order, so this node reads the same in every
    # tf.keras version (2.19+ keeps call order, earlier ones sort by name); the kw_order sample covers
    # the other orders.
    mha_k, mha_scores = layers.MultiHeadAttention(2, 3, value_dim=2, name="mha_qvk")(
        eq, key=ek, value=ev, return_attention_scores=True)
    outs += [mha_k, mha_scores]
    mha_uq = layers.MultiHeadAttention(2, 3, name="mha_unmasked_q")(fq, ev)
    outs += [mha_uq, layers.SimpleRNN(2, name="srnn_mha_uq")(mha_uq)]
    # An attention_mask tensor next to value and key: node tensors [query, attention_mask, key, value].
    am = keras.Input((5, 7), dtype="int32", name="att_mask")
    mha_am = layers.MultiHeadAttention(2, 3, name="mha_attention_mask")(eq, attention_mask=am, key=ek, value=ev)
    outs += [mha_am, layers.GRU(2, name="gru_mha_am")(mha_am)]
    return keras.Model([tq, tv, tk, fq, am], outs, name="mask_attention")


def in_mask_attention(rng):
    zq = {0: [0], 1: [2, 4], 2: slice(None), 3: slice(3, None)}
    zk = {0: [2, 3], 1: slice(0, 2), 2: slice(None), 4: [6]}
    return {"tok_q": _tokens(rng, (5, 5), zq), "tok_v": _tokens(rng, (5, 7), _ZEROS_B),
            "tok_k": _tokens(rng, (5, 7), zk), "feat_q": rng.normal(size=(5, 5, 6)),
            "att_mask": (rng.random((5, 5, 7)) < 0.8).astype("int32")}


def m_kw_order():
    # tf_keras 2.19+ flattens a node's tensors as (call_args, call_kwargs.values()): keywords in the
    # order they were passed, not by name. A config records every argument after the first as a
    # keyword in that order (positional value/key named after call()), and reloading keeps it, so the
    # node inputs below are [q, v, k], [q, v, k, mask], [q, v, k, mask], [q, v, mask, k]. Sorted by name
    # they would read [q, k, v] / [q, mask, k, v], and model.layers would list tok_k before tok_v.
    tq = keras.Input((5,), dtype="int32", name="tok_q")
    tv = keras.Input((7,), dtype="int32", name="tok_v")
    tk = keras.Input((7,), dtype="int32", name="tok_k")
    am = keras.Input((5, 7), dtype="int32", name="att_mask")
    eq = layers.Embedding(20, 6, mask_zero=True, name="emb_q")(tq)
    ev = layers.Embedding(20, 6, mask_zero=True, name="emb_v")(tv)
    ek = layers.Embedding(20, 6, name="emb_k")(tk)  # an unmasked key next to a masked value
    outs = [
        layers.MultiHeadAttention(2, 3, name="mha_q_v_k")(eq, ev, ek),
        layers.MultiHeadAttention(2, 3, name="mha_q_v_k_mask")(eq, ev, ek, attention_mask=am),
        layers.MultiHeadAttention(2, 3, value_dim=2, name="mha_kw_value_key_mask")(
            eq, value=ev, key=ek, attention_mask=am),
        layers.MultiHeadAttention(2, 3, name="mha_v_kw_mask_key")(eq, ev, attention_mask=am, key=ek),
    ]
    outs.append(layers.GlobalAveragePooling1D(name="gap")(outs[-1]))
    return keras.Model([tq, tv, tk, am], outs, name="kw_order")


def in_kw_order(rng):
    return {"tok_q": _tokens(rng, (4, 5), {0: [0], 1: [2, 4], 3: slice(3, None)}),
            "tok_v": _tokens(rng, (4, 7), {0: [1, 6], 1: slice(0, 3), 2: [5]}),
            "tok_k": _tokens(rng, (4, 7), {1: [0, 3]}),
            "att_mask": (rng.random((4, 5, 7)) < 0.8).astype("int32")}


def m_wild_nested_twice():
    inner_in = keras.Input((4,), name="inner_in")
    inner = keras.Model(inner_in, layers.Dense(4, activation="tanh", name="inner_dense")(inner_in),
                        name="inner_model")
    a = keras.Input((4,), name="a")
    i1 = inner(a)
    i2 = inner(i1)
    add = layers.Add(name="add")([i1, i2])
    return keras.Model(a, [add, i2], name="nested_twice")


def in_wild4(rng):
    return {"a": rng.normal(size=(3, 4))}


LONG = 14000  # characters per layer name; 5 names -> layer_names attribute > 64512 bytes -> chunked


def m_wild_chunked():
    x = keras.Input((2,), name="x")
    h = x
    for i in range(5):
        h = layers.Dense(2, name=f"d{i:03d}_" + "n" * (LONG - 5))(h)
    return keras.Model(x, h, name="chunked_attrs")


def in_wild2(rng):
    return {"x": rng.normal(size=(3, 2))}


# The mask models have many small layers: HDF5 keeps ~2 kB per layer group, so they are written as
# legacy .h5 + JSON only (the container does not change the masks).
_MASK_OPTS = {"masks": True, "formats": ["h5", "json"]}

def m_shared_two_levels():
    s_in = keras.Input((6,), name="s_in")
    shared = keras.Model(s_in, layers.Dense(4, name="s_d2")(layers.Dense(8, activation="relu", name="s_d1")(s_in)),
                         name="shared_inner")
    m_in = keras.Input((6,), name="m_in")
    mid = keras.Model(m_in, layers.Dense(6, name="m_d")(layers.Concatenate(name="m_cat")([shared(m_in), m_in])),
                      name="mid")
    x = keras.Input((6,), name="x")
    a = mid(x)
    b = shared(x)  # the same nested model, directly in the outer model too
    c = shared(a)
    return keras.Model(x, layers.Concatenate(name="cat")([a, b, c]), name="shared_two_levels")


def in_vec6(rng):
    return {"x": rng.normal(size=(3, 6))}


def m_td_conv_rank5():
    x = keras.Input((4, 5, 5, 3), name="x")
    c1 = layers.TimeDistributed(layers.Conv1D(2, 3, padding="same", name="c1d"), name="td_conv1d")(x)
    c2 = layers.TimeDistributed(layers.Conv2D(2, 2, name="c2d"), name="td_conv2d")(x)
    c3 = layers.TimeDistributed(layers.Conv1D(3, 2, strides=2, activation="relu", name="c1d_s2"),
                                name="td_conv1d_strided")(x)
    return keras.Model(x, [c1, c2, c3], name="td_conv_rank5")


def in_td_conv_rank5(rng):
    return {"x": rng.normal(size=(2, 4, 5, 5, 3))}


def m_rnn_cells():
    x = keras.Input((6, 3), name="x")
    tok = keras.Input((6,), dtype="int32", name="tok")
    r1 = layers.RNN(layers.LSTMCell(4, name="lstm_cell"), return_sequences=True, name="rnn_lstm")(x)
    r2 = layers.RNN(layers.GRUCell(3, name="gru_cell"), go_backwards=True, name="rnn_gru")(r1)
    r3, h3 = layers.RNN(layers.SimpleRNNCell(3, name="srnn_cell"), return_state=True, name="rnn_simple")(x)
    stacked = layers.StackedRNNCells([layers.LSTMCell(3, name="st_lstm"), layers.GRUCell(2, name="st_gru")],
                                     name="stacked_cells")
    r4, *st = layers.RNN(stacked, return_sequences=True, return_state=True, name="rnn_stacked")(x)
    e = layers.Embedding(20, 3, mask_zero=True, name="emb")(tok)
    r5 = layers.RNN(layers.GRUCell(3, reset_after=False, name="gru_cell_v1"), return_sequences=True,
                    name="rnn_masked")(e)
    r6 = layers.RNN(layers.LSTMCell(2, name="lstm_cell_b"), go_backwards=True, name="rnn_masked_back")(r5)
    h2 = layers.Dense(2, name="init_proj")(h3)
    r7 = layers.RNN(layers.SimpleRNNCell(2, name="srnn_cell_init"), name="rnn_init")(x, initial_state=[h2])
    return keras.Model([x, tok], [r2, r3, h3, r4, *st, r6, r7], name="rnn_cells")


def in_rnn_cells(rng):
    tok = rng.integers(1, 20, size=(3, 6))
    tok[0, 4:] = 0
    tok[1, 2] = 0
    return {"x": rng.normal(size=(3, 6, 3)), "tok": tok.astype("int32")}


def m_random_ids():
    # Inputs with Keras's default float32 dtype whose values are ids: into a nested model's
    # Embedding, into TimeDistributed(Embedding), and through a Reshape; and an input whose time
    # axis is unknown (run --random needs --shape for it).
    ids = keras.Input((6,), name="ids")
    i_in = keras.Input((6,), name="inner_ids")
    inner = keras.Model(i_in, layers.GlobalAveragePooling1D(name="inner_pool")(
        layers.Embedding(50, 4, name="inner_emb")(i_in)), name="inner")
    grid = keras.Input((3, 5), name="grid")
    g = layers.TimeDistributed(layers.Embedding(30, 2, name="td_emb_inner"), name="td_emb")(grid)
    flat = keras.Input((2, 3), name="flat_ids")
    f = layers.Embedding(7, 3, name="flat_emb")(layers.Reshape((6,), name="flat")(flat))
    seq = keras.Input((None, 4), name="seq")
    s = layers.GlobalAveragePooling1D(name="seq_pool")(layers.Dense(3, name="seq_dense")(seq))
    out = layers.Concatenate(name="cat")([inner(ids), layers.Flatten(name="g_flat")(g),
                                          layers.Flatten(name="f_flat")(f), s])
    return keras.Model([ids, grid, flat, seq], out, name="random_ids")


def in_random_ids(rng):
    return {"ids": rng.integers(0, 50, size=(3, 6)).astype("float32"),
            "grid": rng.integers(0, 30, size=(3, 3, 5)).astype("float32"),
            "flat_ids": rng.integers(0, 7, size=(3, 2, 3)).astype("float32"),
            "seq": rng.normal(size=(3, 5, 4))}


def m_nested_outputs():
    # A nested model with two outputs, called twice, every call's outputs a model output: the output
    # keys carry node indices (enc:0:0 ... enc:1:1); tf.keras's config numbers them from 1.
    e_in = keras.Input((4,), name="e_in")
    h = layers.Dense(3, activation="tanh", name="e_dense")(e_in)
    enc = keras.Model(e_in, [h, layers.Dense(2, name="e_head")(h)], name="enc")
    a = keras.Input((4,), name="a")
    b = keras.Input((4,), name="b")
    a1, a2 = enc(a)
    b1, b2 = enc(b)
    return keras.Model([a, b], [a1, a2, b1, b2], name="nested_outputs")


def in_nested_outputs(rng):
    return {"a": rng.normal(size=(3, 4)), "b": rng.normal(size=(3, 4))}


def m_normalization():
    # adapt() builds the layer outside any name scope, so tf_keras names its variables "mean",
    # "variance", "count" with no layer prefix (a TF.js manifest then names no layer).
    x = keras.Input((4,), name="x")
    norm = layers.Normalization(name="norm")
    norm.adapt(np.random.default_rng(0).normal(2.0, 3.0, size=(64, 4)).astype("float32"))
    fixed = layers.Normalization(mean=[1.0, 2.0, 3.0, 4.0], variance=[1.0, 4.0, 9.0, 16.0], name="fixed")
    y = layers.Dense(3, name="d")(layers.Concatenate(name="cat")([norm(x), fixed(x)]))
    return keras.Model(x, y, name="normalization")


def in_vec4(rng):
    return {"x": rng.normal(2.0, 3.0, size=(3, 4))}


def m_transposed():
    # tf_keras writes `groups: 1` into every Conv*DTranspose config (Keras 3's constructors refuse it).
    x1 = keras.Input((5, 3), name="x1")
    x2 = keras.Input((4, 4, 2), name="x2")
    x3 = keras.Input((3, 3, 3, 2), name="x3")
    a = layers.Conv1DTranspose(4, 3, strides=2, padding="same", name="t1")(x1)
    a = layers.Activation("sigmoid", name="sig")(a)
    b = layers.Conv2DTranspose(3, (3, 2), strides=(2, 1), padding="valid", name="t2")(x2)
    b = layers.Dense(2, name="t2_dense")(b)
    c = layers.Conv3DTranspose(2, 2, strides=(1, 2, 1), padding="same", name="t3")(x3)
    return keras.Model([x1, x2, x3], [a, layers.Flatten(name="fb")(b), c], name="transposed")


def in_transposed(rng):
    return {"x1": rng.normal(size=(2, 5, 3)), "x2": rng.normal(size=(2, 4, 4, 2)),
            "x3": rng.normal(size=(2, 3, 3, 3, 2))}


def m_passthrough():
    # A model input that is also a model output, unchanged (ONNX needs an Identity for it).
    x = keras.Input((4,), name="x")
    extra = keras.Input((3,), name="extra")
    y = layers.Dense(2, name="d")(x)
    return keras.Model([x, extra], [y, extra, x], name="passthrough")


def in_passthrough(rng):
    return {"x": rng.normal(size=(3, 4)), "extra": rng.normal(size=(3, 3))}


MODELS = {
    "multi_io_list": (m_multi_io_list, in_multi_io_list,
                      ["list inputs", "list outputs", "shared layer called 3 times at different depths",
                       "Add/Concatenate merge layers", "Dropout", "compiled (optimizer weights + training_config)"],
                      {"compile": True, "tfjs": ["", "_q8", "_f16"]}),
    "multi_io_dict": (m_multi_io_dict, in_multi_io_dict,
                      ["dict inputs", "dict outputs whose keys differ from layer names",
                       "unicode layer name attempted (tf_keras refuses it, see build_notes)"],
                      {"tfjs": [""]}),
    "single_bare": (m_single_bare, in_single, ["bare tensor input/output (wrapped in input_layers anyway)"],
                    {"tfjs": [""]}),
    "nested": (m_nested, in_nested,
               ["nested Functional called twice (+1 node offsets)", "nested Sequential with InputLayer",
                "nested Sequential built without Input", "nested model outputs as model outputs"],
               {"tfjs": [""]}),
    "tfops": (m_tfops, in_tfops,
              ["TFOpLambda tf.math.multiply / tf.__operators__.add (tensor in kwargs)", "constant first argument",
               "SlicingOpLambda tf.__operators__.getitem", "tf.split (2 outputs)", "tf.concat list argument",
               "tf.reshape", "tf.nn.relu", "tf.math.reduce_mean"], {"tfjs": [""]}),
    "rnn_mask": (m_rnn_mask, in_rnn_mask,
                 ["Embedding(mask_zero) -> LSTM -> LSTM (implicit masks)", "Masking -> GRU", "int32 input"],
                 {"tfjs": [""]}),
    "rnn_state": (m_rnn_state, in_rnn_state,
                  ["LSTM return_state (3 outputs)", "GRU initial_state kwarg tensor", "Bidirectional(SimpleRNN)"],
                  {"tfjs": [""]}),
    "dtypes": (m_dtypes, in_dtypes, ["mixed_float16 layer", "bfloat16 layer", "mixed_bfloat16 layer"],
               {"tolerance_hint": "low-precision compute in Keras: compare with rtol~2e-2"}),
    "cnn": (m_cnn, in_cnn,
            ["Conv2D", "BatchNormalization (+scale=False)", "ReLU", "Max/AveragePooling2D", "DepthwiseConv2D",
             "ZeroPadding2D", "SeparableConv2D", "Concatenate", "GlobalAveragePooling2D", "Flatten", "Dropout"],
            {"compile": True, "tfjs": ["", "_q8", "_f16"]}),
    "mha": (m_mha, in_mha, ["MultiHeadAttention (+use_causal_mask kwarg)", "LayerNormalization", "gelu"],
            {"tfjs": [""]}),
    "seq_in": (m_seq_in, in_seq, ["top-level Sequential with explicit Input"], {"tfjs": [""]}),
    "seq_noin": (m_seq_noin, in_seq, ["top-level Sequential without Input (built by calling)"], {"tfjs": [""]}),
    "seq_input_shape": (m_seq_input_shape, in_seq, ["Sequential with input_shape= on first layer"],
                        {"tfjs": [""]}),
    # New entries go last: a model's seed is 200 + its position in this table.
    "mask_rnn": (m_mask_rnn, in_mask_rnn,
                 ["Embedding(mask_zero) -> Bidirectional(LSTM/GRU/SimpleRNN) every merge_mode, with and "
                  "without return_sequences, + return_state; an RNN after each sequence output",
                  "TimeDistributed(Dense), TimeDistributed(Embedding(mask_zero)) (3-D mask), "
                  "TimeDistributed(LSTM(return_sequences)) -> TimeDistributed(GRU) -> LSTM",
                  "Masking(-1.0) -> SimpleRNN(go_backwards), GRU(reset_after=False, go_backwards, "
                  "return_sequences) -> LSTM; TimeDistributed(Masking)",
                  "fully masked rows; leading/middle/trailing masked steps",
                  "intermediate masks recorded (mask/<layer>/<node>/<tensor>)"],
                 _MASK_OPTS),
    "mask_merge": (m_mask_merge, in_mask_merge,
                   ["Add/Subtract/Multiply/Average/Maximum/Minimum of two differently masked sequences -> GRU",
                    "Add of masked + unmasked", "Concatenate axis -1 (masked + unmasked), axis 1 (both masked), "
                    "three inputs", "Dot drops the mask",
                    "pass-through chain Dense/LayerNormalization/Dropout/Activation/BatchNormalization/ReLU/"
                    "LeakyReLU/PReLU/ELU/ThresholdedReLU/GaussianNoise/GaussianDropout/AlphaDropout/"
                    "SpatialDropout1D/ActivityRegularization/UnitNormalization -> LSTM",
                    "mask dropped by Conv1D, Flatten+Reshape, Identity, Rescaling -> GRU",
                    "GlobalAveragePooling1D (masked mean), GlobalMaxPooling1D (mask ignored)",
                    "intermediate masks recorded (mask/<layer>/<node>/<tensor>)"],
                   _MASK_OPTS),
    "mask_attention": (m_mask_attention, in_mask_attention,
                       ["Attention [q, v] and [q, v, k] (score_mode concat, use_scale), AdditiveAttention "
                        "(+return_attention_scores) with implicit query/value masks",
                        "Attention with an unmasked query", "MultiHeadAttention(q, v), (q, v, k) with "
                        "return_attention_scores, self-attention + use_causal_mask, unmasked query, "
                        "(q, v, k, attention_mask=<int input>); "
                        "masks read from the inputs' _keras_mask",
                        "RNN / GlobalAveragePooling1D after attention (output mask = query mask)",
                        "intermediate masks recorded (mask/<layer>/<node>/<tensor>)"],
                       _MASK_OPTS),
    "kw_order": (m_kw_order, in_kw_order,
                 ["MultiHeadAttention node tensors in call order, not keyword-name order (tf_keras 2.19+): "
                  "positional (q, v, k), (q, v, k, attention_mask=), keywords value/key/attention_mask, "
                  "(q, v, attention_mask=, key=)",
                  "model.layers order follows the node input order (tok_v before tok_k)",
                  "implicit query/value masks, unmasked key; intermediate masks recorded"],
                 {"masks": True}),
    "shared_two_levels": (m_shared_two_levels, in_vec6,
                          ["one nested Functional used inside another nested model and directly in the "
                           "outer model (twice): .keras stores its weights once, at the first path the saver "
                           "visits; params counted once"], {}),
    "td_conv_rank5": (m_td_conv_rank5, in_td_conv_rank5,
                      ["TimeDistributed(Conv1D) (same, strided) on rank-5 inputs: the inner Conv1D sees "
                       "rank 4 and convolves the second-to-last axis, the axes before it are batch",
                       "TimeDistributed(Conv2D) on rank 5"], {}),
    "rnn_cells": (m_rnn_cells, in_rnn_cells,
                  ["generic RNN layer over LSTMCell, GRUCell (go_backwards), SimpleRNNCell (return_state), "
                   "StackedRNNCells (return_sequences + return_state)",
                   "RNN(GRUCell(reset_after=False)) and RNN(LSTMCell, go_backwards) over an Embedding mask",
                   "RNN(SimpleRNNCell) with initial_state"], {"masks": True}),
    "random_ids": (m_random_ids, in_random_ids,
                   ["float32 inputs holding ids: into a nested model's Embedding, TimeDistributed(Embedding), "
                    "Reshape -> Embedding", "an input with an unknown time axis (None, 4)"], {}),
    "nested_outputs": (m_nested_outputs, in_nested_outputs,
                       ["a nested model with two outputs called twice, all four tensors model outputs "
                        "(output keys enc:<node>:<tensor>; tf.keras configs number the nested model's "
                        "nodes from 1)"], {}),
    "normalization": (m_normalization, in_vec4,
                      ["Normalization after adapt(): variables mean, variance, count stored without a layer "
                       "prefix (TF.js manifest names 'mean', 'variance', 'count')",
                       "Normalization with mean/variance in its config (no weights)"], {"tfjs": [""]}),
    "transposed": (m_transposed, in_transposed,
                       ["Conv1DTranspose/Conv2DTranspose/Conv3DTranspose (strided, same/valid): tf_keras "
                        "configs carry groups: 1"], {}),
    "passthrough": (m_passthrough, in_passthrough,
                    ["model inputs returned unchanged as model outputs (one also used by a layer)"], {}),
}

WILD_MODELS = {
    "nested_twice": (m_wild_nested_twice, in_wild4,
                     ["tf_keras .h5 with a nested Functional called twice; Keras 3 cannot reload it"], {}),
    "chunked_attrs": (m_wild_chunked, in_wild2,
                      ["legacy .h5 whose layer_names attribute is chunked (layer_names0, layer_names1, ...)",
                       "5 Dense layers with 14000-character names"], {"formats": ["h5", "weights_h5"]}),
}


# ------------------------------------------------------------------------------------ weights


def owner_classes(model):
    owner = {}
    for layer in model._flatten_layers(include_self=False, recursive=True):
        for v in layer.weights:
            owner[id(v)] = type(layer).__name__
    return owner


def randomize(model, base_seed: int, book: C.RecipeBook | None = None):
    book = book or C.RecipeBook()
    owner = owner_classes(model)
    for i, v in enumerate(model.weights):
        if not v.dtype.is_floating:
            continue
        arr = book.make(v.name, owner.get(id(v), ""), v.name, tuple(v.shape), "float32", base_seed + i)
        v.assign(tf.cast(arr, v.dtype))
    return book


# ------------------------------------------------------------------------------ graph facts


def is_graph(model):
    return getattr(model, "_is_graph_network", False)


def flat(x):
    return tf.nest.flatten(x)


def graph_info(model) -> dict:
    info = {"class_name": type(model).__name__, "name": model.name,
            "layers_order": [l.name for l in model.layers]}
    try:
        info["config_layers_order"] = [l["config"]["name"] for l in model.get_config()["layers"]]
    except Exception:
        pass
    if not is_graph(model):
        info["graph"] = None
        return info
    nbd = model._nodes_by_depth
    in_model = {id(n) for ns in nbd.values() for n in ns}
    depth_of_node = {id(n): d for d, ns in nbd.items() for n in ns}
    _, _, map_layers, layers_by_depth = kfunctional._map_graph_network(model.inputs, model.outputs)
    cidx, node_depths, node_raw = {}, {}, {}
    for layer in map_layers:
        k = 0
        for raw, n in enumerate(layer._inbound_nodes):
            if id(n) in in_model:
                cidx[id(n)] = k
                k += 1
                node_raw.setdefault(layer.name, []).append(raw)
                node_depths.setdefault(layer.name, []).append(depth_of_node[id(n)])

    def ref(t):
        layer, ni, ti = t._keras_history
        n = layer._inbound_nodes[ni]
        return [layer.name, cidx.get(id(n), f"raw:{ni}"), ti]

    info["graph_layers_order"] = [l.name for l in map_layers]
    info["layer_classes"] = {l.name: {"class_name": type(l).__name__, "module": type(l).__module__}
                             for l in map_layers}
    info["layer_depths"] = {l.name: d for d, ls in layers_by_depth.items() for l in ls}
    info["layers_by_depth"] = {str(d): [l.name for l in ls] for d, ls in sorted(layers_by_depth.items(), reverse=True)}
    info["nodes_by_depth"] = {str(d): [[n.layer.name, cidx[id(n)]] for n in ns]
                              for d, ns in sorted(nbd.items(), reverse=True)}
    info["node_depths"] = node_depths
    info["node_raw_indices"] = node_raw
    edges, shapes = {}, {}
    for layer in map_layers:
        for n in layer._inbound_nodes:
            if id(n) not in in_model:
                continue
            edges.setdefault(layer.name, []).append([ref(t) for t in n.keras_inputs])
            shapes.setdefault(layer.name, []).append(
                [[C.shape_list(t.shape), t.dtype.name] for t in flat(n.outputs)])
    info["node_input_refs"] = edges
    info["node_output_shapes_dtypes"] = shapes
    info["input_names"] = [t._keras_history[0].name for t in model.inputs]
    info["output_refs"] = [ref(t) for t in model.outputs]
    info["inputs_structure"] = structure(model._nested_inputs)
    info["outputs_structure"] = structure(model._nested_outputs)
    nested = {}
    for layer in map_layers:
        if isinstance(layer, keras.Model):
            nested[layer.name] = graph_info(layer)
    if nested:
        info["nested"] = nested
    return info


def structure(s):
    if isinstance(s, dict):
        return {"type": "dict", "keys": {k: t._keras_history[0].name for k, t in s.items()}}
    if isinstance(s, (list, tuple)):
        return {"type": "list", "length": len(s)}
    return {"type": "tensor"}


def param_counts(model):
    tr = int(sum(np.prod(v.shape) for v in model.trainable_weights))
    ntr = int(sum(np.prod(v.shape) for v in model.non_trainable_weights))
    return {"total": int(model.count_params()), "trainable": tr, "non_trainable": ntr}


def feed(model, arrays):
    if not is_graph(model):
        return next(iter(arrays.values()))
    return tf.nest.map_structure(lambda t: arrays[t._keras_history[0].name], model._nested_inputs)


def run(model, arrays):
    out = model(feed(model, arrays), training=False)
    return [np.asarray(o) for o in flat(out)]


def intermediates(model, arrays, masks=False) -> dict:
    """Every top-level node output (``intermediate/<layer>/<node>/<tensor>``); with ``masks`` also the
    tf.keras mask attached to each one (``mask/<layer>/<node>/<tensor>``, bool; absent = no mask)."""
    nbd = model._nodes_by_depth
    in_model = {id(n) for ns in nbd.values() for n in ns}
    _, _, map_layers, _ = kfunctional._map_graph_network(model.inputs, model.outputs)
    keys, tensors = [], []
    for layer in map_layers:
        if isinstance(layer, layers.InputLayer):
            continue
        k = 0
        for n in layer._inbound_nodes:
            if id(n) not in in_model:
                continue
            for ti, t in enumerate(flat(n.outputs)):
                keys.append(f"intermediate/{layer.name}/{k}/{ti}")
                tensors.append(t)
            k += 1
    probe = keras.Model(model.inputs, tensors)
    vals = probe(feed(model, arrays), training=False)
    res = {k: np.asarray(v) for k, v in zip(keys, flat(vals))}
    if masks:  # an eager call leaves each layer's compute_mask result on its output tensor
        for k, v in zip(keys, flat(vals), strict=True):
            m = getattr(v, "_keras_mask", None)
            if m is not None:
                res["mask/" + k[len("intermediate/"):]] = np.asarray(m).astype(bool)
    return res


# ------------------------------------------------------------------------------------ formats


def write_formats(model, base: Path, which=("h5", "keras", "json", "weights_h5")):
    files, errors = {}, {}
    for old in base.parent.glob(base.name + "*"):
        if old.is_file() and (old.name.startswith(base.name + ".") or old.name.startswith(base.name + "_weights")):
            old.unlink()

    def attempt(key, fn):
        try:
            files[key] = fn()
        except Exception as e:
            errors[key] = err(e)

    def h5():
        model.save(f"{base}.h5")
        return C.rel(f"{base}.h5")

    def kz():
        model.save(f"{base}.keras")
        return C.rel(f"{base}.keras")

    def js():
        with open(f"{base}.json", "w", encoding="utf-8") as f:
            f.write(model.to_json())
        return C.rel(f"{base}.json")

    def wh5():
        model.save_weights(f"{base}_weights.h5")
        return C.rel(f"{base}_weights.h5")

    table = {"h5": h5, "keras": kz, "json": js, "weights_h5": wh5}
    for k in which:
        attempt(k, table[k])
    return files, errors


def reload_checks(files, arrays, expected):
    res = {}

    def check(key, loader):
        try:
            m = loader()
            res[key] = {"ok": True, "max_abs_diff": C.max_abs_diff(run(m, arrays), expected)}
        except Exception as e:
            res[key] = {"ok": False, "error": err(e)}
        keras.backend.clear_session()

    p = lambda r: str(HERE / r)  # noqa: E731
    if "h5" in files:
        check("h5", lambda: keras.models.load_model(p(files["h5"])))
    if "keras" in files:
        check("keras", lambda: keras.models.load_model(p(files["keras"])))
    if "json" in files and "weights_h5" in files:
        def j():
            with open(p(files["json"]), encoding="utf-8") as f:
                m = keras.models.model_from_json(f.read())
            m.load_weights(p(files["weights_h5"]))
            return m
        check("json+weights_h5", j)
    return res


def versions():
    return C.env_versions(keras_version=keras.__version__, tensorflow_version=tf.__version__,
                          keras_package="tf_keras")


def to_inputs(model, arrays):
    dt = {t._keras_history[0].name: t.dtype.name for t in model.inputs} if is_graph(model) else {}
    if len(dt) == 1 and len(arrays) == 1:  # single input: key by the real (maybe auto) input name
        arrays = {next(iter(dt)): next(iter(arrays.values()))}
    return {k: np.asarray(v).astype(dt.get(k, "float32")) for k, v in arrays.items()}


def describe_outputs(info, outs):
    ostruct = info.get("outputs_structure", {"type": "tensor"})
    dict_keys = sorted(ostruct["keys"]) if ostruct.get("type") == "dict" else None
    res = []
    for i, (o, r) in enumerate(zip(outs, info.get("output_refs", [None] * len(outs)))):
        e = {"key": f"output/{i}", "ref": r, "layer": r[0] if r else None, "shape": list(o.shape),
             "dtype": o.dtype.str}
        if dict_keys:
            e["dict_key"] = dict_keys[i]
        res.append(e)
    return res


DEPTH_NOTE = (
    "layer_depths/layers_by_depth from tf_keras functional._map_graph_network(model.inputs, model.outputs) "
    "(the same call Functional.__init__ makes); nodes_by_depth from model._nodes_by_depth; node indices are "
    "compacted per layer (nodes of this model only, in layer._inbound_nodes order); node_raw_indices are "
    "positions in layer._inbound_nodes (for a nested model raw index = serialized index, node 0 being its own "
    "construction node)"
)


def gen_model(name, seed, family=FAMILY, table=None, out_dir=None):
    table = table or MODELS
    out_dir = out_dir or OUT
    builder, make_in, covers, opts = table[name]
    keras.backend.clear_session()
    keras.utils.set_random_seed(seed)
    model = builder()
    rng = np.random.default_rng(seed)
    arrays = to_inputs(model, make_in(rng))
    if opts.get("compile"):
        model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")
        ys = [np.zeros(tuple(1 if d is None else d for d in t.shape), "float32") for t in model.outputs]
        model.train_on_batch(feed(model, {k: v[:1] for k, v in arrays.items()}), ys)
    randomize(model, seed * 1000)
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, layers.Normalization) and layer.built:
            layer.finalize_state()  # recompute from the (randomized) stored variables, as a reload does
    outs = run(model, arrays)
    extra = {}
    if name != "chunked_attrs":
        try:
            extra = intermediates(model, arrays, masks=bool(opts.get("masks")))
        except Exception as e:
            print(f"  [{name}] no intermediates: {err(e)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    files, errors = write_formats(model, out_dir / name, opts.get("formats", ("h5", "keras", "json", "weights_h5")))
    ginfo = graph_info(model)
    cfg = model.get_config()
    info = {
        "family": family,
        "model": name,
        "made_by": "real tf_keras (Keras 2 API) via samples/gen_k2.py",
        **versions(),
        "covers": covers,
        "files": files,
        "format_errors": errors,
        "params": param_counts(model),
        "inputs": {k: {"shape": list(v.shape), "dtype": v.dtype.str} for k, v in arrays.items()},
        "config_input_layers": cfg.get("input_layers"),
        "config_output_layers": cfg.get("output_layers"),
        **ginfo,
        "options": opts,
        "intermediates_recorded": bool(extra),
        "depth_attributes": DEPTH_NOTE,
    }
    if name in BUILD_NOTES:
        info["build_notes"] = BUILD_NOTES[name]
    if "tolerance_hint" in opts:
        info["tolerance_hint"] = opts["tolerance_hint"]
    info["outputs"] = describe_outputs(ginfo, outs)
    info["reload"] = reload_checks(files, arrays, outs)
    if opts.get("tfjs"):
        info["files"]["tfjs"] = {v or "float32": C.rel(HERE / "tfjs" / f"{name}{v}" / "model.json")
                                 for v in opts["tfjs"]}
    if name == "chunked_attrs":
        import h5py

        with h5py.File(HERE / files["h5"], "r") as f:
            info["h5_layer_names_attrs"] = sorted(k for k in f["model_weights"].attrs if k.startswith("layer_names"))
            info["h5_root_attrs"] = sorted(f.attrs.keys())
    C.save_golden(f"{family}_{name}", arrays, outs, info, extra)
    print(f"  [{name}] files={list(files)} errors={list(errors)} reload="
          f"{ {k: (v.get('max_abs_diff') if v['ok'] else 'ERR') for k, v in info['reload'].items()} }")


# ------------------------------------------------------------------------------ applications

APP_SPECS = {
    "MobileNetV3Small": ("MobileNetV3Small", {}, 64, (0, 255), True),
    "ConvNeXtTiny": ("ConvNeXtTiny", {}, 64, (0, 255), False),
}


def gen_app(app, seed):
    ctor, kw, size, (lo, hi), full = APP_SPECS[app]
    keras.backend.clear_session()
    keras.utils.set_random_seed(seed)
    model = getattr(keras.applications, ctor)(
        weights=None, input_shape=(size, size, 3), classes=10, classifier_activation=None, **kw)
    book = randomize(model, seed * 100000)
    rng = np.random.default_rng(seed)
    x = rng.uniform(lo, hi, size=(2, size, size, 3)).astype("float32")
    in_name = model.inputs[0]._keras_history[0].name
    arrays = {in_name: x}
    outs = run(model, arrays)
    name = f"app_{app.lower()}"
    adir = APPS / f"{FAMILY}_{app.lower()}"
    if adir.exists():
        shutil.rmtree(adir)
    adir.mkdir(parents=True)
    files = {}
    with tempfile.TemporaryDirectory() as td:
        hpath = Path(td) / "m.h5"
        model.save(hpath)
        manifest = C.h5_manifest(hpath, book)
        manifest.update({"container": "h5"})
        C.dump_json(adir / "manifest.json", manifest)
        rebuilt = rebuild.rebuild(adir, Path(td) / "rebuilt")
        try:
            from tf_keras.src.applications import convnext

            # tf_keras does not register ConvNeXt's LayerScale: load_model needs it as a custom object
            m2 = keras.models.load_model(rebuilt, custom_objects={"LayerScale": convnext.LayerScale})
            rebuild_check = {"ok": True, "max_abs_diff": C.max_abs_diff(run(m2, arrays), outs)}
        except Exception as e:
            rebuild_check = {"ok": False, "error": err(e)}
        if full:
            OUT.mkdir(parents=True, exist_ok=True)
            shutil.copy(hpath, OUT / f"{name}.h5")
            files["h5"] = C.rel(OUT / f"{name}.h5")
    files["manifest"] = C.rel(adir / "manifest.json")
    ginfo = graph_info(model)
    info = {
        "family": FAMILY,
        "model": name,
        "application": ctor,
        "constructor_kwargs": {"weights": None, "input_shape": [size, size, 3], "classes": 10,
                               "classifier_activation": None, **kw},
        "made_by": "real tf_keras keras.applications (samples/gen_k2.py --apps); weights random from recipes",
        **versions(),
        "files": files,
        "weights_committed": "full .h5" if full else "manifest only: rebuild with samples/rebuild.py (-> legacy .h5)",
        "rebuild_check": rebuild_check,
        "params": param_counts(model),
        "inputs": {in_name: {"shape": list(x.shape), "dtype": x.dtype.str, "range": [lo, hi]}},
        **ginfo,
        "depth_attributes": DEPTH_NOTE,
    }
    info["outputs"] = describe_outputs(ginfo, outs)
    info["output_stats"] = [{"mean": float(o.mean()), "std": float(o.std()), "min": float(o.min()),
                             "max": float(o.max())} for o in outs]
    C.save_golden(f"{FAMILY}_{name}", arrays, outs, info)
    print(f"  [{name}] params={info['params']['total']} out std={outs[0].std():.4g} rebuild={rebuild_check}")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--apps", nargs="*", default=None)
    ap.add_argument("--no-models", action="store_true")
    ap.add_argument("--wild", action="store_true")
    args = ap.parse_args(argv)
    if not args.no_models:
        names = args.only or list(MODELS)
        for i, name in enumerate(MODELS):
            if name in names:
                print(f"k2 model {name}", flush=True)
                try:
                    gen_model(name, seed=200 + i)
                except Exception:
                    traceback.print_exc()
                    raise
    if args.wild:
        for i, name in enumerate(WILD_MODELS):
            print(f"wild model {name}", flush=True)
            gen_model(name, seed=300 + i, family="wild", table=WILD_MODELS, out_dir=WILD)
    if args.apps is not None:
        apps = args.apps or list(APP_SPECS)
        for i, app in enumerate(APP_SPECS):
            if app in apps:
                print(f"k2 app {app}", flush=True)
                gen_app(app, seed=600 + i)


if __name__ == "__main__":
    main()
