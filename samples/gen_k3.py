"""Generate Keras 3 sample files + goldens. Run in the Keras 3 venv (see make_samples.py).

    KERAS_BACKEND=tensorflow python samples/gen_k3.py [--only NAME ...] [--apps] [--no-models] [--check-k2]

Writes samples/k3/, samples/apps/k3_*/, samples/goldens/k3_*.{npz,json}; with --check-k2 it tries to
reload every Keras-2 file in samples/k2 and samples/wild with Keras 3 and records the outcome in the
k2/wild golden JSON files (key "keras3_reload").
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import traceback
import warnings
import zipfile
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _common as C  # noqa: E402
import rebuild  # noqa: E402

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import layers, ops  # noqa: E402
from keras3_graph import feed, functional_of, intermediates  # noqa: E402

warnings.filterwarnings("ignore")
OUT = HERE / "k3"
APPS = HERE / "apps"
FAMILY = "k3"


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
    sc = shared(add)  # third call, deeper: depth of a shared layer = max over its nodes
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
    h = layers.Dense(7, activation="relu", name="dénse_ü")(h)  # unicode layer name
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


def m_single_list1():
    x = keras.Input((5,), name="x")
    y = layers.Dense(4, activation="elu", name="d1")(x)
    y = layers.Dense(2, name="d2")(y)
    return keras.Model([x], [y], name="single_list1")


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
    i2 = inner(i1)  # the nested Functional is called twice
    s = seq(i2)
    t2 = seq_noin(s)
    bn = layers.BatchNormalization(name="bn")(i1)
    out = layers.Dense(2, name="head")(layers.Concatenate(name="cat")([bn, t2]))
    # i2 (nested Functional, 2nd call) and s (nested Sequential) are model outputs directly
    return keras.Model(a, [out, i2, s], name="nested")


def in_nested(rng):
    return {"a": rng.normal(size=(3, 6))}


def m_ops():
    x = keras.Input((6,), name="x")
    y = keras.Input((6,), name="y")
    a1 = ops.add(x, 3.0)  # op Add with a constant
    m = a1 * y  # op Multiply
    s1, s2 = ops.split(m, 2, axis=-1)  # op Split, two outputs
    sl = x[:, 1:]  # op GetItem with slices
    r = ops.reshape(x, (-1, 3, 2))  # op Reshape (newshape includes batch)
    g = ops.gelu(s1)  # op Gelu (approximate=True by default)
    ladd = layers.Add(name="add_layer")([s1, s2])  # layer Add next to op Add
    cat = ops.concatenate([g, ladd], axis=-1)  # op Concatenate
    lcat = layers.Concatenate(name="concatenate_layer")([cat, sl])  # layer Concatenate
    flat = layers.Reshape((6,), name="reshape_layer")(r)  # layer Reshape
    mul = layers.Multiply(name="multiply_layer")([flat, y])  # layer Multiply
    out1 = layers.Dense(4, name="out_dense")(lcat)
    return keras.Model([x, y], [out1, mul, s2], name="ops")  # s2: op output (tensor_index 1) as model output


def in_ops(rng):
    return {"x": rng.normal(size=(3, 6)), "y": rng.normal(size=(3, 6))}


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
    tok[2, 2] = 0  # a zero in the middle: masked step
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


def m_rnn_stateful():
    x = keras.Input((5, 3), batch_size=2, name="x")
    h = layers.LSTM(4, stateful=True, return_sequences=True, name="lstm_stateful")(x)
    h = layers.Bidirectional(layers.GRU(3, stateful=True), name="bidi_stateful")(h)
    out = layers.Dense(2, name="head")(h)
    return keras.Model(x, out, name="rnn_stateful")


def in_rnn_stateful(rng):
    return {"x": rng.normal(size=(2, 5, 3))}


def m_dtypes():
    x = keras.Input((6,), name="x")
    h = layers.Dense(8, activation="relu", name="d_f32")(x)
    h = layers.Dense(8, activation="relu", dtype="mixed_float16", name="d_mixed16")(h)
    h = layers.Dense(8, dtype="bfloat16", name="d_bf16")(h)
    h = layers.Dense(4, dtype="mixed_bfloat16", name="d_mixedbf16")(h)
    out = layers.Activation("linear", dtype="float32", name="out")(h)
    return keras.Model(x, out, name="dtypes")


def m_cnn():
    img = keras.Input((16, 16, 3), name="img")
    x = layers.Conv2D(8, 3, padding="same", name="conv1")(img)
    x = layers.BatchNormalization(name="bn1")(x)
    x = layers.ReLU(name="relu1")(x)
    p = layers.MaxPooling2D(2, name="pool1")(x)  # 8x8x8
    b1 = layers.Conv2D(4, 1, name="b1_conv")(p)
    b2 = layers.DepthwiseConv2D(3, padding="same", depth_multiplier=2, name="b2_dw")(p)
    b2 = layers.Conv2D(4, 3, padding="same", activation="relu", name="b2_conv")(b2)
    b3 = layers.AveragePooling2D(3, strides=1, padding="same", name="b3_avg")(p)
    b3 = layers.Conv2D(4, 1, name="b3_conv")(b3)
    b4 = layers.ZeroPadding2D(((1, 0), (1, 0)), name="b4_pad")(p)  # 9x9
    b4 = layers.Conv2D(4, 2, strides=1, padding="valid", name="b4_conv")(b4)  # 8x8
    cat = layers.Concatenate(name="cat")([b1, b2, b3, b4])  # 8x8x16
    s = layers.SeparableConv2D(8, 3, strides=2, padding="same", name="sep")(cat)  # 4x4x8
    s = layers.BatchNormalization(scale=False, name="bn2")(s)
    s = layers.Activation("relu", name="act2")(s)
    gap = layers.GlobalAveragePooling2D(name="gap")(s)
    fl = layers.Flatten(name="flat")(layers.MaxPooling2D(2, name="pool2")(s))  # 2x2x8
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
    m = keras.Sequential(
        [layers.Dense(4, activation="relu", name="sn1"), layers.Dense(3, name="sn2")], name="seq_noin"
    )
    m(np.zeros((1, 5), "float32"))  # built by calling it on data, no Input given
    return m


def m_quant_int8():
    x = keras.Input((16,), name="x")
    h = layers.Dense(16, activation="relu", name="qd1")(x)
    h = layers.Dense(16, activation="relu", name="qd2")(h)
    out = layers.Dense(4, name="qout")(h)
    return keras.Model(x, out, name="quant_int8")


def in_quant(rng):
    return {"x": rng.normal(size=(3, 16))}


def m_quant_int8_text():
    tok = keras.Input((6,), dtype="int32", name="tok")
    h = layers.Embedding(30, 8, name="qemb")(tok)
    h = layers.EinsumDense("abc,cd->abd", output_shape=(6, 6), bias_axes="d", activation="gelu", name="qein")(h)
    h = layers.EinsumDense("abc,cde->abde", output_shape=(6, 2, 3), bias_axes="e", name="qein_split")(h)
    h = layers.EinsumDense("abcd,cde->abe", output_shape=(6, 4), name="qein_merge")(h)
    h = layers.EinsumDense("abc,bcd->ad", output_shape=5, bias_axes="d", name="qein_flat")(h)
    out = layers.Dense(3, name="qhead")(h)
    return keras.Model(tok, out, name="quant_int8_text")


def in_quant_text(rng):
    return {"tok": rng.integers(0, 30, size=(4, 6))}


def m_quant_int4():
    tok = keras.Input((6,), dtype="int32", name="tok")
    h = layers.Embedding(30, 9, name="q4emb")(tok)
    h = layers.Dense(7, activation="relu", name="q4d1")(h)
    h = layers.Dense(130, activation="gelu", name="q4wide")(h)  # 130 input rows of q4out: 2 groups of 128
    out = layers.Dense(3, name="q4out")(h)
    return keras.Model(tok, out, name="quant_int4")


def m_quant_int4_text():
    tok = keras.Input((6,), dtype="int32", name="tok")
    h = layers.Embedding(30, 8, name="q4emb")(tok)
    h = layers.EinsumDense("abc,cd->abd", output_shape=(6, 130), bias_axes="d", activation="gelu", name="q4ein")(h)
    # Contracted axis second in the kernel (Keras flattens it to rows x columns by a plain reshape),
    # 130 rows: 2 groups of 128.
    h = layers.EinsumDense("abc,dc->abd", output_shape=(6, 6), bias_axes="d", name="q4ein_t")(h)
    h = layers.EinsumDense("abc,cde->abde", output_shape=(6, 2, 3), bias_axes="e", name="q4ein_split")(h)
    h = layers.EinsumDense("abcd,cde->abe", output_shape=(6, 4), name="q4ein_merge")(h)
    h = layers.EinsumDense("abc,bcd->ad", output_shape=5, bias_axes="d", name="q4ein_flat")(h)
    out = layers.Dense(3, name="q4head")(h)
    return keras.Model(tok, out, name="quant_int4_text")


def _tokens(rng, shape, zero_rows):
    tok = rng.integers(1, 20, size=shape)
    for row, cols in zero_rows.items():
        tok[row, cols] = 0
    return tok.astype("int32")


def m_mask_implicit():
    # Keras 3 records a mask kwarg only where a layer's call had a single tensor argument and no
    # keywords; everywhere else (list inputs, several tensors, keywords) the mask reaches the layer at
    # run time through the tensor's _keras_mask, as in tf.keras. Nothing in the config says so.
    tq = keras.Input((5,), dtype="int32", name="tok_q")
    tv = keras.Input((7,), dtype="int32", name="tok_v")
    fq = keras.Input((5, 6), name="feat_q")
    eq = layers.Embedding(20, 6, mask_zero=True, name="emb_q")(tq)
    ev = layers.Embedding(20, 6, mask_zero=True, name="emb_v")(tv)
    outs = []
    att = layers.Attention(name="att")([eq, ev])  # mask [q, v]; output mask = query mask
    outs += [att, layers.LSTM(3, name="lstm_att")(att)]
    add_att, scores = layers.AdditiveAttention(name="add_att")([eq, ev], return_attention_scores=True)
    outs += [add_att, scores, layers.GlobalAveragePooling1D(name="gap_add_att")(add_att)]
    att_uq = layers.Attention(name="att_unmasked_q")([fq, ev])  # only the value is masked
    outs += [att_uq]
    mha = layers.MultiHeadAttention(2, 3, name="mha")(eq, ev)  # query_mask, value_mask populated
    outs += [mha, layers.GlobalAveragePooling1D(name="gap_mha")(mha)]
    mha_self = layers.MultiHeadAttention(2, 3, name="mha_self")(ev, ev)
    outs += [mha_self]
    # Keras 3 merges OR the masks (None when an input has none); tf.keras ANDs the present ones.
    both = layers.Add(name="add_masked")([att, add_att])
    outs += [layers.GlobalAveragePooling1D(name="gap_add")(both)]
    half = layers.Add(name="add_half_masked")([att, fq])
    outs += [layers.GlobalAveragePooling1D(name="gap_half")(half)]
    # A nested Functional: its output tensor keeps the inner layer's mask (Keras 3 warns that the
    # model drops it, then the downstream layer still applies it).
    i_in = keras.Input((5, 6), name="inner_in")
    i_out = layers.LayerNormalization(name="inner_ln")(layers.Dense(6, name="inner_dense")(i_in))
    inner = keras.Model(i_in, i_out, name="inner")
    nested = inner(att)
    outs += [layers.GlobalAveragePooling1D(name="gap_nested")(nested), layers.GRU(2, name="gru_nested")(nested)]
    return keras.Model([tq, tv, fq], outs, name="mask_implicit")


def in_mask_implicit(rng):
    zq = {0: [0], 1: [2, 4], 3: slice(3, None)}
    zv = {0: [1, 6], 1: slice(0, 3), 4: slice(4, None)}
    return {"tok_q": _tokens(rng, (5, 5), zq), "tok_v": _tokens(rng, (5, 7), zv),
            "feat_q": rng.normal(size=(5, 5, 6))}


def m_ln_rms():
    x = keras.Input((4, 6), name="x")
    h = layers.LayerNormalization(rms_scaling=True, scale=False, name="ln_rms_noscale")(x)
    h = layers.LayerNormalization(rms_scaling=True, name="ln_rms")(layers.Dense(5, name="d")(h))
    return keras.Model(x, h, name="ln_rms")


def in_ln_rms(rng):
    return {"x": rng.normal(size=(3, 4, 6))}


def _shared_two_levels(kmod, lay):
    s_in = kmod.Input((6,), name="s_in")
    shared = kmod.Model(s_in, lay.Dense(4, name="s_d2")(lay.Dense(8, activation="relu", name="s_d1")(s_in)),
                        name="shared_inner")
    m_in = kmod.Input((6,), name="m_in")
    mid = kmod.Model(m_in, lay.Dense(6, name="m_d")(lay.Concatenate(name="m_cat")([shared(m_in), m_in])),
                     name="mid")
    x = kmod.Input((6,), name="x")
    a = mid(x)
    b = shared(x)  # the same nested model, directly in the outer model too
    c = shared(a)
    return kmod.Model(x, lay.Concatenate(name="cat")([a, b, c]), name="shared_two_levels")


def m_shared_two_levels():
    return _shared_two_levels(keras, layers)


def in_vec6(rng):
    return {"x": rng.normal(size=(3, 6))}


def m_rnn_cells():
    x = keras.Input((6, 3), name="x")
    tok = keras.Input((6,), dtype="int32", name="tok")
    r1 = layers.RNN(layers.LSTMCell(4, name="lstm_cell"), return_sequences=True, name="rnn_lstm")(x)
    r2 = layers.RNN(layers.GRUCell(3, name="gru_cell"), go_backwards=True, name="rnn_gru")(r1)
    r3, h3 = layers.RNN(layers.SimpleRNNCell(3, name="srnn_cell"), return_state=True,
                        name="rnn_simple")(x)
    stacked = layers.StackedRNNCells([layers.LSTMCell(3, name="st_lstm"), layers.GRUCell(2, name="st_gru")],
                                     name="stacked_cells")
    r4, *st = layers.RNN(stacked, return_sequences=True, return_state=True, name="rnn_stacked")(x)
    e = layers.Embedding(20, 3, mask_zero=True, name="emb")(tok)
    r5 = layers.RNN(layers.GRUCell(3, reset_after=False, name="gru_cell_v1"), return_sequences=True,
                    name="rnn_masked")(e)
    r6 = layers.RNN(layers.LSTMCell(2, name="lstm_cell_b"), go_backwards=True, name="rnn_masked_back")(r5)
    r7 = layers.RNN(layers.SimpleRNNCell(2, name="srnn_cell_init"), name="rnn_init")(x, initial_state=[h3[:, :2]])
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


def m_mask_layers():
    # Keras 3 mask rules per class, each seen through a downstream consumer (GlobalAveragePooling1D
    # or an RNN) that applies whatever mask arrives.
    ta = keras.Input((6,), dtype="int32", name="tok_a")
    tb = keras.Input((6,), dtype="int32", name="tok_b")
    feat = keras.Input((6, 4), name="feat")
    ea = layers.Embedding(20, 4, mask_zero=True, name="emb_a")(ta)
    eb = layers.Embedding(20, 4, mask_zero=True, name="emb_b")(tb)
    outs = []
    cat = layers.Concatenate(name="cat")([ea, feat])  # masked + unmasked: any() over the last axis
    outs.append(layers.LSTM(3, name="lstm_cat")(cat))
    cat_t = layers.Concatenate(axis=1, name="cat_time")([ea, eb])  # along time
    outs.append(layers.GlobalAveragePooling1D(name="gap_cat_time")(cat_t))
    mul = layers.Multiply(name="mul")([ea, eb])  # OR of both masks
    outs.append(layers.GRU(2, name="gru_mul")(mul))
    bi = layers.Bidirectional(layers.GRU(3, return_sequences=True), name="bi")(ea)
    outs.append(layers.GlobalAveragePooling1D(name="gap_bi")(bi))
    td = layers.TimeDistributed(layers.Dense(3), name="td")(eb)
    outs.append(layers.GlobalAveragePooling1D(name="gap_td")(td))
    h0 = layers.Dense(3, name="h0")(layers.GlobalAveragePooling1D(name="gap_feat")(feat))
    init = layers.GRU(3, return_sequences=True, name="gru_init")(ea, initial_state=[h0])  # no mask
    outs.append(layers.GlobalAveragePooling1D(name="gap_init")(init))
    ident = layers.Identity(name="ident")(layers.Dropout(0.5, name="drop")(eb))
    outs.append(layers.LSTM(2, name="lstm_ident")(ident))
    conv = layers.Conv1D(3, 2, padding="same", name="conv")(ea)  # drops the mask
    outs.append(layers.GlobalAveragePooling1D(name="gap_conv")(conv))
    seq = keras.Sequential([keras.Input((6, 4)), layers.Dense(4, name="sq_d"),
                            layers.LayerNormalization(name="sq_ln")], name="seq_inner")
    outs.append(layers.GRU(2, name="gru_seq")(seq(eb)))
    masked = layers.Masking(0.0, name="masking")(feat)
    outs.append(layers.SimpleRNN(2, name="srnn_masking")(layers.Dense(3, name="d_masking")(masked)))
    return keras.Model([ta, tb, feat], outs, name="mask_layers")


def in_mask_layers(rng):
    za = {0: [0, 1], 1: [3], 3: slice(4, None)}
    zb = {0: [5], 1: slice(0, 3), 2: [2, 4], 4: slice(None)}
    feat = rng.normal(size=(5, 6, 4))
    feat[0, 2] = 0.0
    feat[3, 4:] = 0.0
    return {"tok_a": _tokens(rng, (5, 6), za), "tok_b": _tokens(rng, (5, 6), zb), "feat": feat}


def m_cast_ops():
    x = keras.Input((6,), name="x")
    t = ops.cast(x * 4.0, "int32")  # op Cast: its config carries the target dtype (no module in .h5)
    back = ops.cast(t, "float32")
    return keras.Model(x, layers.Dense(3, name="head")(back), name="cast_ops")


def in_cast_ops(rng):
    return {"x": rng.normal(size=(3, 6))}


def m_rms_norm():
    x = keras.Input((5, 8), name="x")
    h = layers.Dense(8, name="proj")(x)
    h = layers.RMSNormalization(epsilon=1e-5, name="rms_last")(h)
    h = layers.RMSNormalization(axis=[1, 2], name="rms_two_axes")(h)
    return keras.Model(x, h, name="rms_norm")


def in_rms_norm(rng):
    return {"x": rng.normal(size=(3, 5, 8))}


def m_nested_dict():
    z_in = keras.Input((6,), name="z")
    a_in = keras.Input((4,), name="a")
    merged = layers.Concatenate(name="inner_cat")([layers.Dense(3, name="from_z")(z_in), a_in])
    inner = keras.Model({"z": z_in, "a": a_in}, merged, name="dict_inner")  # keys not in sorted order
    x = keras.Input((4,), name="x")
    y = keras.Input((6,), name="y")
    out = inner({"a": x, "z": y})
    return keras.Model([x, y], layers.Dense(2, name="head")(out), name="nested_dict")


def in_nested_dict(rng):
    return {"x": rng.normal(size=(3, 4)), "y": rng.normal(size=(3, 6))}


def m_frozen_bn_training():
    """Fine-tuning: frozen BatchNormalization layers called in training mode run in inference mode
    (Keras uses the moving statistics when trainable is False), one called directly with training=True
    and one inside a nested model whose call says training=True."""
    inner_in = keras.Input((6,), name="inner_in")
    inner_bn = layers.BatchNormalization(name="inner_bn")
    inner_bn.trainable = False
    inner = keras.Model(inner_in, layers.Dense(5, name="inner_dense")(inner_bn(inner_in)), name="frozen_block")
    x = keras.Input((8,), name="x")
    h = layers.Dense(6, name="d1")(x)
    bn = layers.BatchNormalization(name="bn_frozen")
    bn.trainable = False
    h = bn(h, training=True)
    h = inner(h, training=True)
    return keras.Model(x, layers.Dense(3, name="head")(h), name="frozen_bn_training")


def in_vec8(rng):
    return {"x": rng.normal(size=(4, 8))}


def in_dtypes(rng):
    return {"x": rng.normal(size=(3, 6))}


# name: (builder, inputs, covers, options)
MODELS = {
    "multi_io_list": (m_multi_io_list, in_multi_io_list,
                      ["list inputs", "list outputs", "shared layer called 3 times at different depths",
                       "Add/Concatenate merge layers", "Dropout", "compiled (optimizer state saved)"],
                      {"compile": True, "sharded": 2e-6, "npz": True}),
    "multi_io_dict": (m_multi_io_dict, in_multi_io_dict,
                      ["dict inputs", "dict outputs whose keys differ from layer names", "unicode layer name 'dénse_ü'"], {}),
    "single_bare": (m_single_bare, in_single, ["bare tensor input and output (flat triple in input_layers)"], {}),
    "single_list1": (m_single_list1, in_single, ["one-element list input/output (wrapped triple)"], {}),
    "nested": (m_nested, in_nested,
               ["nested Functional called twice", "nested Sequential with InputLayer",
                "nested Sequential built without Input", "nested model outputs used as model outputs",
                "BatchNormalization inside nested model"], {"sharded": 6e-7}),
    "ops": (m_ops, in_ops,
            ["Keras 3 op nodes: Add(const), Multiply, Split (2 outputs), GetItem slices, Reshape, Gelu, Concatenate",
             "op class names clashing with layers Add/Concatenate/Reshape/Multiply",
             "op output (tensor_index 1) as model output"], {}),
    "rnn_mask": (m_rnn_mask, in_rnn_mask,
                 ["Embedding(mask_zero) -> LSTM(return_sequences) -> LSTM", "Masking -> GRU",
                  "mask as explicit NotEqual op node + mask kwarg (Keras 3)", "int32 input"], {}),
    "rnn_state": (m_rnn_state, in_rnn_state,
                  ["LSTM return_sequences+return_state (3 outputs)", "GRU return_state with initial_state kwarg tensor",
                   "Bidirectional(SimpleRNN)", "multi-output layer refs (tensor_index)"], {}),
    "rnn_stateful": (m_rnn_stateful, in_rnn_stateful,
                     ["stateful LSTM and Bidirectional(GRU) with a fixed batch size: Keras saves no states, "
                      "so the golden is a freshly loaded model's first call (states reset before the "
                      "intermediates are recorded)"], {"reset_states": True}),
    "dtypes": (m_dtypes, in_dtypes,
               ["mixed_float16 layer", "bfloat16 layer (|V2 storage)", "mixed_bfloat16 layer", "float32 output layer"],
               {"tolerance_hint": "low-precision compute in Keras: compare with rtol~2e-2"}),
    "cnn": (m_cnn, in_cnn,
            ["Conv2D", "BatchNormalization (+scale=False)", "ReLU", "MaxPooling2D", "AveragePooling2D same",
             "DepthwiseConv2D depth_multiplier=2", "ZeroPadding2D", "SeparableConv2D stride 2",
             "Concatenate", "GlobalAveragePooling2D", "Flatten", "Dropout", "softmax"], {"sharded": 3e-6}),
    "mha": (m_mha, in_mha,
            ["MultiHeadAttention self-attention", "MultiHeadAttention use_causal_mask kwarg, value_dim",
             "LayerNormalization", "gelu Dense", "residual Add", "GlobalAveragePooling1D"], {}),
    "seq_in": (m_seq_in, in_seq, ["top-level Sequential with explicit InputLayer"], {}),
    "seq_noin": (m_seq_noin, in_seq, ["top-level Sequential without Input (built by calling)"], {}),
    "quant_int8": (m_quant_int8, in_quant, ["model.quantize('int8'): int8 kernels + kernel_scale"],
                   {"quantize": "int8", "tolerance_hint": "int8 quantized compute"}),
    "quant_int4": (m_quant_int4, in_quant_text,
                   ["model.quantize('int4'): packed nibbles, per-group scale/zero/g_idx (block 128) on "
                    "Embedding and Dense, a Dense with 2 groups"],
                   {"quantize": "int4", "tolerance_hint": "int4 quantized compute"}),
    "quant_int4_per_channel": (m_quant_int4, in_quant_text,
                               ["model.quantize('int4', Int4QuantizationConfig(block_size=-1)): "
                                "symmetric per-channel int4 on Embedding and Dense"],
                               {"quantize": "int4", "quantize_block_size": -1,
                                "tolerance_hint": "int4 quantized compute"}),
    "quant_int4_text": (m_quant_int4_text, in_quant_text,
                        ["model.quantize('int4') on EinsumDense: per-group scale/zero/g_idx (block 128); "
                         "split / merge / flattening equations, a kernel whose contracted axis is not first"],
                        {"quantize": "int4", "tolerance_hint": "int4 quantized compute"}),
    "quant_int4_text_per_channel": (m_quant_int4_text, in_quant_text,
                                    ["model.quantize('int4', Int4QuantizationConfig(block_size=-1)) on "
                                     "EinsumDense: symmetric per-channel int4"],
                                    {"quantize": "int4", "quantize_block_size": -1,
                                     "tolerance_hint": "int4 quantized compute"}),
    "quant_int4_text_act": (m_quant_int4_text, in_quant_text,
                            ["model.quantize('int4', Int4QuantizationConfig(block_size=-1, "
                             "activation_quantizer=AbsMaxQuantizer(axis=-1))): per-channel int4 kernels, "
                             "inputs quantized over the contracted axes (EinsumDense) / last axis (Dense)"],
                            {"quantize": "int4", "quantize_block_size": -1, "quantize_activations": True,
                             "tolerance_hint": "int4 quantized compute"}),
    "nested_dict": (m_nested_dict, in_nested_dict,
                    ["nested Functional with dict inputs {z, a} (not in sorted order), called with a dict"], {}),
    "cast_ops": (m_cast_ops, in_cast_ops,
                 ["Keras 3 op Cast to int32 and back (dict nodes; the legacy .h5 drops `module`, so the "
                  "Cast record carries a `dtype` key like a layer)"], {}),
    "rms_norm": (m_rms_norm, in_rms_norm,
                 ["RMSNormalization on the last axis (epsilon 1e-5) and on axes [1, 2]"], {}),
    "quant_int8_text": (m_quant_int8_text, in_quant_text,
                        ["model.quantize('int8') on Embedding (int8 table + row scales)",
                         "int8 EinsumDense: bias, gelu, split / merge / flattening equations"],
                        {"quantize": "int8", "tolerance_hint": "int8 quantized compute"}),
    "mask_implicit": (m_mask_implicit, in_mask_implicit,
                      ["Keras 3 implicit masks (no mask kwarg in the config): Embedding(mask_zero) into "
                       "Attention, AdditiveAttention (+scores), MultiHeadAttention(q, v) and (v, v)",
                       "Add of two masked inputs (OR) and of a masked and an unmasked one (no mask)",
                       "a mask through a nested Functional applied downstream (GlobalAveragePooling1D, GRU)",
                       "mask op nodes NotEqual -> ConvertToTensor in the legacy .h5"], {}),
    "ln_rms": (m_ln_rms, in_ln_rms,
               ["LayerNormalization(rms_scaling=True, scale=False): gamma stored although scale=False",
                "LayerNormalization(rms_scaling=True)"], {}),
    "shared_two_levels": (m_shared_two_levels, in_vec6,
                          ["one nested Functional used inside another nested model and directly in the "
                           "outer model (twice): its weights are stored once, at the first path Keras's "
                           "saver visits; params counted once"], {}),
    "rnn_cells": (m_rnn_cells, in_rnn_cells,
                  ["generic RNN layer over LSTMCell, GRUCell (go_backwards), SimpleRNNCell (return_state), "
                   "StackedRNNCells (return_sequences + return_state)",
                   "RNN(GRUCell(reset_after=False)) and RNN(LSTMCell, go_backwards) over an Embedding mask",
                   "RNN(SimpleRNNCell) with initial_state"], {}),
    "random_ids": (m_random_ids, in_random_ids,
                   ["float32 inputs holding ids: into a nested model's Embedding, TimeDistributed(Embedding), "
                    "Reshape -> Embedding", "an input with an unknown time axis (None, 4)"], {}),
    "nested_outputs": (m_nested_outputs, in_nested_outputs,
                       ["a nested model with two outputs called twice, all four tensors model outputs "
                        "(output keys enc:<node>:<tensor>; tf.keras configs number the nested model's "
                        "nodes from 1)"], {}),
    "mask_layers": (m_mask_layers, in_mask_layers,
                    ["Keras 3 masks per class, each applied downstream: Concatenate (masked + unmasked, and "
                     "along time), Multiply (OR), Bidirectional(GRU), TimeDistributed(Dense), "
                     "GRU with initial_state (gets no mask), Dropout/Identity (pass), Conv1D (drops), "
                     "nested Sequential (keeps its last layer's mask), Masking -> Dense -> SimpleRNN",
                     "a fully masked row (tok_b row 4)"], {}),
    "frozen_bn_training": (m_frozen_bn_training, in_vec8,
                           ["frozen BatchNormalization called with training=True (runs in inference mode)",
                            "nested model called with training=True around a frozen BatchNormalization"], {}),
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
        if not ("float" in str(v.dtype)):
            continue
        arr = book.make(v.name, owner.get(id(v), ""), v.path, tuple(v.shape), "float32", base_seed + i)
        v.assign(arr)
    return book


# ------------------------------------------------------------------------------ graph facts




def graph_info(model) -> dict:
    """Everything Keras 3 says about the graph of a Functional (or a Sequential's internal one)."""
    fn = functional_of(model)
    info = {"class_name": type(model).__name__, "name": model.name}
    info["layers_order"] = [l.name for l in model.layers]
    if fn is None:
        info["graph"] = None
        return info
    info["graph_source"] = "Sequential._functional" if fn is not model else "model"
    info["operations_order"] = [op.name for op in fn.operations]
    in_model = {id(n) for ns in fn._nodes_by_depth.values() for n in ns}
    depth_of_node = {id(n): d for d, ns in fn._nodes_by_depth.items() for n in ns}
    cidx = {}
    node_depths, node_raw = {}, {}
    for op in fn.operations:
        k = 0
        for raw, n in enumerate(op._inbound_nodes):
            if id(n) in in_model:
                cidx[id(n)] = k
                k += 1
                node_raw.setdefault(op.name, []).append(raw)
                node_depths.setdefault(op.name, []).append(depth_of_node[id(n)])

    def ref(t):
        op, ni, ti = t._keras_history
        n = op._inbound_nodes[ni]
        return [op.name, cidx.get(id(n), f"raw:{ni}"), ti]

    info["operation_classes"] = {
        op.name: {"class_name": type(op).__name__, "module": type(op).__module__,
                  "is_layer": isinstance(op, keras.layers.Layer)}
        for op in fn.operations
    }
    info["layer_depths"] = {op.name: d for d, o in fn._operations_by_depth.items() for op in o}
    info["operations_by_depth"] = {str(d): [op.name for op in o]
                                   for d, o in sorted(fn._operations_by_depth.items(), reverse=True)}
    info["nodes_by_depth"] = {str(d): [[n.operation.name, cidx[id(n)]] for n in ns]
                              for d, ns in sorted(fn._nodes_by_depth.items(), reverse=True)}
    info["node_depths"] = node_depths
    info["node_raw_indices"] = node_raw
    edges, shapes = {}, {}
    for op in fn.operations:
        for n in op._inbound_nodes:
            if id(n) not in in_model:
                continue
            edges.setdefault(op.name, []).append([ref(t) for t in n.input_tensors])
            shapes.setdefault(op.name, []).append(
                [[C.shape_list(t.shape), str(t.dtype)] for t in n.outputs])
    info["node_input_refs"] = edges
    info["node_output_shapes_dtypes"] = shapes
    info["input_names"] = [t._keras_history[0].name for t in fn.inputs]
    info["output_refs"] = [ref(t) for t in fn.outputs]
    info["inputs_structure"] = structure(fn._inputs_struct)
    info["outputs_structure"] = structure(fn._outputs_struct)
    nested = {}
    for op in fn.operations:
        if isinstance(op, keras.Model):
            nested[op.name] = graph_info(op)
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




def run(model, arrays):
    out = model(feed(model, arrays), training=False)
    fn = functional_of(model)
    flat = keras.tree.flatten(out)
    return [np.asarray(keras.ops.convert_to_numpy(o)) for o in flat], fn


def reset_states(model):
    """Zero the states of every stateful RNN (as a freshly loaded model has them)."""
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if getattr(layer, "stateful", False) and hasattr(layer, "reset_states"):
            layer.reset_states()




# ------------------------------------------------------------------------------------ formats


def write_formats(model, name, opts) -> tuple[dict, dict]:
    files, errors = {}, {}
    base = OUT / name
    for old in [*OUT.glob(f"{name}.*"), *OUT.glob(f"{name}_sharded*"), *OUT.glob(f"{name}_npz.keras")]:
        old.unlink()
    if (OUT / f"{name}_dir").exists():
        shutil.rmtree(OUT / f"{name}_dir")

    def attempt(key, fn):
        try:
            r = fn()
            files[key] = r
        except Exception as e:  # record what Keras says
            errors[key] = err(e)

    def keras_zip():
        model.save(f"{base}.keras")
        return C.rel(f"{base}.keras")

    def keras_dir():
        d = OUT / f"{name}_dir"
        if d.exists():
            shutil.rmtree(d)
        keras.saving.save_model(model, str(d), zipped=False)
        return sorted(C.rel(p) for p in d.rglob("*") if p.is_file())

    def legacy_h5():
        keras.saving.save_model(model, f"{base}.h5")
        return C.rel(f"{base}.h5")

    def to_json():
        with open(f"{base}.json", "w", encoding="utf-8") as f:
            f.write(model.to_json())
        return C.rel(f"{base}.json")

    def weights_h5():
        model.save_weights(f"{base}.weights.h5")
        return C.rel(f"{base}.weights.h5")

    def sharded():
        model.save_weights(f"{OUT / (name + '_sharded')}.weights.json", max_shard_size=opts["sharded"])
        return sorted(C.rel(p) for p in OUT.glob(f"{name}_sharded*"))

    def npz():
        from keras.src.saving import saving_lib

        saving_lib.save_model(model, f"{base}_npz.keras", weights_format="npz")
        return C.rel(f"{base}_npz.keras")

    attempt("keras", keras_zip)
    attempt("keras_dir", keras_dir)
    attempt("legacy_h5", legacy_h5)
    attempt("json", to_json)
    attempt("weights_h5", weights_h5)
    if opts.get("sharded"):
        attempt("weights_sharded", sharded)
    if opts.get("npz"):
        attempt("keras_npz", npz)
    return files, errors


def reload_checks(files, arrays, expected) -> dict:
    """Reload every written file with Keras 3 and compare outputs (max abs diff) or record the error."""
    res = {}

    def check(key, loader):
        try:
            m = loader()
            outs, _ = run(m, arrays)
            res[key] = {"ok": True, "max_abs_diff": C.max_abs_diff(outs, expected)}
        except Exception as e:
            res[key] = {"ok": False, "error": err(e)}
        keras.backend.clear_session()

    p = lambda rel: str(HERE / rel)  # noqa: E731
    if "keras" in files:
        check("keras", lambda: keras.saving.load_model(p(files["keras"])))
    if "keras_dir" in files:
        d = str(Path(p(files["keras_dir"][0])).parent)
        check("keras_dir", lambda: keras.saving.load_model(d))
    if "legacy_h5" in files:
        check("legacy_h5", lambda: keras.saving.load_model(p(files["legacy_h5"])))
    if "json" in files and "weights_h5" in files:
        def j():
            with open(p(files["json"]), encoding="utf-8") as f:
                m = keras.models.model_from_json(f.read())
            m.load_weights(p(files["weights_h5"]))
            return m
        check("json+weights_h5", j)
    if "json" in files and "weights_sharded" in files:
        def js():
            with open(p(files["json"]), encoding="utf-8") as f:
                m = keras.models.model_from_json(f.read())
            idx = [x for x in files["weights_sharded"] if x.endswith(".weights.json")][0]
            m.load_weights(p(idx))
            return m
        check("json+weights_sharded", js)
    if "keras_npz" in files:
        check("keras_npz", lambda: keras.saving.load_model(p(files["keras_npz"])))
    return res


def versions():
    return C.env_versions(keras_version=keras.__version__, tensorflow_version=tf.__version__,
                          keras_backend=keras.backend.backend())


def to_inputs(model, arrays):
    """Cast generated arrays to the model's input dtypes."""
    fn = functional_of(model)
    dt = {t._keras_history[0].name: str(t.dtype) for t in fn.inputs}
    if len(dt) == 1 and len(arrays) == 1:  # single input: key by the real (maybe auto) input name
        arrays = {next(iter(dt)): next(iter(arrays.values()))}
    return {k: np.asarray(v).astype(dt.get(k, "float32")) for k, v in arrays.items()}


def gen_model(name: str, seed: int):
    builder, make_in, covers, opts = MODELS[name]
    keras.backend.clear_session()
    keras.utils.set_random_seed(seed)
    model = builder()
    rng = np.random.default_rng(seed)
    arrays = to_inputs(model, make_in(rng))
    if opts.get("compile"):
        model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")
        ys = [np.zeros(tuple(1 if d is None else d for d in t.shape), "float32")
              for t in functional_of(model).outputs]
        xs = feed(model, {k: v[:1] for k, v in arrays.items()})
        model.train_on_batch(xs, ys)
    randomize(model, seed * 1000)
    if opts.get("quantize"):
        config = None
        if "quantize_block_size" in opts:
            act_q = keras.quantizers.AbsMaxQuantizer(axis=-1) if opts.get("quantize_activations") else "default"
            config = keras.quantizers.Int4QuantizationConfig(
                block_size=opts["quantize_block_size"], activation_quantizer=act_q
            )
        model.quantize(opts["quantize"], config=config)
    outs, fn = run(model, arrays)
    if opts.get("reset_states"):
        reset_states(model)  # the intermediates must come from a first call too
    extra = {}
    try:
        extra = intermediates(model, arrays)
    except Exception as e:
        print(f"  [{name}] no intermediates: {err(e)}")
    files, errors = write_formats(model, name, opts)
    info = {
        "family": FAMILY,
        "model": name,
        "made_by": "real Keras 3 (samples/gen_k3.py)",
        **versions(),
        "covers": covers,
        "files": files,
        "format_errors": errors,
        "params": param_counts(model),
        "inputs": {k: {"shape": list(v.shape), "dtype": v.dtype.str} for k, v in arrays.items()},
        "outputs": [],
        "config_input_layers": model.get_config().get("input_layers"),
        "config_output_layers": model.get_config().get("output_layers"),
        **{k: v for k, v in graph_info(model).items()},
        "options": {k: v for k, v in opts.items()},
        "intermediates_recorded": bool(extra),
    }
    if "tolerance_hint" in opts:
        info["tolerance_hint"] = opts["tolerance_hint"]
    info["depth_attributes"] = (
        "layer_depths from Functional._operations_by_depth (ops and layers); nodes_by_depth from "
        "Functional._nodes_by_depth; node indices are compacted per layer (nodes of this model only, in "
        "layer._inbound_nodes order); node_raw_indices are positions in layer._inbound_nodes"
    )
    out_keys = []
    ostruct = info.get("outputs_structure", {"type": "tensor"})
    dict_keys = sorted(ostruct["keys"]) if ostruct.get("type") == "dict" else None
    for i, (o, r) in enumerate(zip(outs, info.get("output_refs", [None] * len(outs)))):
        entry = {"key": f"output/{i}", "ref": r, "layer": r[0] if r else None,
                 "shape": list(o.shape), "dtype": o.dtype.str}
        if dict_keys:
            entry["dict_key"] = dict_keys[i]
        out_keys.append(entry)
    info["outputs"] = out_keys
    info["reload"] = reload_checks(files, arrays, outs)
    C.save_golden(f"{FAMILY}_{name}", arrays, outs, info, extra)
    print(f"  [{name}] files={list(files)} errors={list(errors)} reload="
          f"{ {k: (v.get('max_abs_diff') if v['ok'] else 'ERR') for k, v in info['reload'].items()} }")


# ------------------------------------------------------------------------------ applications

# name: (constructor, kwargs, input size, input range, commit full .keras?)
APP_SPECS = {
    "MobileNetV2": ("MobileNetV2", {"alpha": 0.35}, 64, (-1, 1), True),
    "MobileNetV3Small": ("MobileNetV3Small", {}, 64, (0, 255), True),
    "EfficientNetB0": ("EfficientNetB0", {}, 64, (0, 255), False),
    "NASNetMobile": ("NASNetMobile", {}, 64, (-1, 1), False),
    "DenseNet121": ("DenseNet121", {}, 64, (-1, 1), False),
    "InceptionV3": ("InceptionV3", {}, 75, (-1, 1), False),
    "Xception": ("Xception", {}, 71, (-1, 1), False),
    "ResNet50": ("ResNet50", {}, 64, (-1, 1), False),
    "ConvNeXtTiny": ("ConvNeXtTiny", {}, 64, (0, 255), False),
}


def gen_app(app: str, seed: int):
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
    outs, _ = run(model, arrays)
    name = f"app_{app.lower()}"
    adir = APPS / f"{FAMILY}_{app.lower()}"
    if adir.exists():
        shutil.rmtree(adir)
    adir.mkdir(parents=True)
    files, errors = {}, {}
    with tempfile.TemporaryDirectory() as td:
        kpath = Path(td) / "m.keras"
        model.save(kpath)
        with zipfile.ZipFile(kpath) as z:
            members = z.namelist()
            for m in members:
                if m.endswith(".json"):
                    (adir / m).write_bytes(z.read(m))
            z.extract("model.weights.h5", td)
        manifest = C.h5_manifest(Path(td) / "model.weights.h5", book)
        manifest.update({"container": "keras_zip", "h5_member": "model.weights.h5", "zip_members": members})
        C.dump_json(adir / "manifest.json", manifest)
        # verify: rebuild from the manifest without Keras, reload with Keras, compare
        # goldens = what Keras computes from the saved file (layers such as Normalization cache
        # derived tensors at build time, so the in-memory model may lag behind assigned variables)
        m_file = keras.saving.load_model(kpath)
        file_outs, _ = run(m_file, arrays)
        in_memory_vs_file = C.max_abs_diff(file_outs, outs)
        outs = file_outs
        del m_file
        rebuilt = rebuild.rebuild(adir, Path(td) / "rebuilt")
        try:
            m2 = keras.saving.load_model(rebuilt)
            o2, _ = run(m2, arrays)
            rebuild_check = {"ok": True, "max_abs_diff": C.max_abs_diff(o2, outs)}
        except Exception as e:
            rebuild_check = {"ok": False, "error": err(e)}
        if full:
            shutil.copy(kpath, OUT / f"{name}.keras")
            files["keras"] = C.rel(OUT / f"{name}.keras")
    files["manifest"] = C.rel(adir / "manifest.json")
    files["config_json"] = C.rel(adir / "config.json")
    files["metadata_json"] = C.rel(adir / "metadata.json")
    info = {
        "family": FAMILY,
        "model": name,
        "application": ctor,
        "constructor_kwargs": {"weights": None, "input_shape": [size, size, 3], "classes": 10,
                               "classifier_activation": None, **kw},
        "made_by": "real Keras 3 keras.applications (samples/gen_k3.py --apps); weights random from recipes",
        **versions(),
        "files": files,
        "format_errors": errors,
        "weights_committed": "full .keras" if full else "manifest only: rebuild with samples/rebuild.py",
        "rebuild_check": rebuild_check,
        "golden_outputs_from": "Keras 3 running the model loaded from the saved .keras file",
        "in_memory_vs_file_max_abs_diff": in_memory_vs_file,
        "params": param_counts(model),
        "inputs": {in_name: {"shape": list(x.shape), "dtype": x.dtype.str, "range": [lo, hi]}},
        **graph_info(model),
    }
    info["outputs"] = [{"key": f"output/{i}", "ref": r, "layer": r[0], "shape": list(o.shape),
                        "dtype": o.dtype.str} for i, (o, r) in enumerate(zip(outs, info["output_refs"]))]
    info["output_stats"] = [{"mean": float(o.mean()), "std": float(o.std()), "min": float(o.min()),
                             "max": float(o.max())} for o in outs]
    C.save_golden(f"{FAMILY}_{name}", arrays, outs, info)
    print(f"  [{name}] params={info['params']['total']} out std={outs[0].std():.4g} rebuild={rebuild_check}")


# ------------------------------------------------------------------------------ K2 reload check


def check_k2():
    """Try to load each Keras-2 file with Keras 3; record the outcome in the k2/wild golden JSON."""
    import json

    for gj in sorted((HERE / "goldens").glob("*.json")):
        if not (gj.name.startswith("k2_") or gj.name.startswith("wild_")):
            continue
        info = json.loads(gj.read_text(encoding="utf-8"))
        npz = np.load(HERE / info["npz"])
        arrays = {k[len("input/"):]: npz[k] for k in npz.files if k.startswith("input/")}
        expected = [npz[f"output/{i}"] for i in range(len([k for k in npz.files if k.startswith("output/")]))]
        res = {}
        for key in ("h5", "keras"):
            f = info.get("files", {}).get(key)
            if not f:
                continue
            keras.backend.clear_session()
            try:
                m = keras.saving.load_model(str(HERE / f))
                outs, _ = run(m, arrays)
                res[key] = {"ok": True, "max_abs_diff": C.max_abs_diff(outs, expected)}
            except Exception as e:
                res[key] = {"ok": False, "error": err(e)}
        info["keras3_reload"] = {"keras_version": keras.__version__, **res}
        C.dump_json(gj, info)
        print(f"  [{gj.stem}] keras3 reload: { {k: v.get('max_abs_diff', 'ERR') for k, v in res.items()} }")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", help="model names (default: all)")
    ap.add_argument("--apps", nargs="*", default=None, help="generate applications (all if no names)")
    ap.add_argument("--no-models", action="store_true")
    ap.add_argument("--check-k2", action="store_true")
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    if not args.no_models:
        names = args.only or list(MODELS)
        for i, name in enumerate(MODELS):
            if name in names:
                print(f"k3 model {name}", flush=True)
                try:
                    gen_model(name, seed=100 + i)
                except Exception:
                    traceback.print_exc()
                    raise
    if args.apps is not None:
        apps = args.apps or list(APP_SPECS)
        for i, app in enumerate(APP_SPECS):
            if app in apps:
                print(f"k3 app {app}", flush=True)
                gen_app(app, seed=500 + i)
    if args.check_k2:
        check_k2()


if __name__ == "__main__":
    main()
