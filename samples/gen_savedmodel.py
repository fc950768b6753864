"""Generate tf_keras SavedModel directories and TensorFlow checkpoints + goldens.

Run in the tf_keras venv (tf_keras 2.x + tensorflow-cpu, e.g. /work/venvs/k2):

    python samples/gen_savedmodel.py [--only NAME ... | refused]

For every model NAME it writes, under samples/savedmodel/:

    NAME/                    model.save(NAME, save_format="tf"): saved_model.pb, keras_metadata.pb, variables/
    NAME.h5                  the same model as a legacy .h5 (what the SavedModel must match)
    NAME.json                model.to_json() (a config-only model for --weights)
    ckpt/NAME.index + .data  model.save_weights("ckpt/NAME") in TensorFlow format (+ ckpt/checkpoint)
    train_NAME/ckpt-1.*      tf.train.Checkpoint(model=..., optimizer=...).save() after one training step
                             (only models in TRAIN_CKPT: optimizer slots included)
    legacy/NAME/             the SavedModel in the layout TensorFlow 2.0-2.3 wrote (see below)
    goldens/NAME.npz         input/<input name> and output/<i>: tf_keras's outputs on seeded inputs
    goldens/NAME.json        what was made, by which versions, and the tf_keras outputs' shapes

TensorFlow 2.0-2.3 SavedModels: before tf.keras 2.4 there was no keras_metadata.pb; each Keras
object's JSON metadata was stored in saved_model.pb itself, in the ``metadata`` field of the object's
``SavedUserObject`` in the object graph. tf_keras 2.21 only writes keras_metadata.pb (and leaves that
field empty), so ``legacy/NAME`` is made from a tf_keras SavedModel of the same model (saved without
traces to stay small, except LEGACY_WITH_TRACES) by moving every node's metadata into its
SavedUserObject with TensorFlow's own protobuf messages and deleting keras_metadata.pb and
fingerprint.pb (TF 2.0-2.3 wrote neither). The result is then loaded by tf_keras, which still reads
that layout, and must give the same outputs
(``legacy_reload_max_abs_err`` in the golden's JSON).

Refused samples (no Keras graph) are written too: ``subclassed/`` (a subclassed model without
get_config), ``tf_module/`` (``tf.saved_model.save`` of a ``tf.Module``) and
``keras_tf_saved_model/`` (``tf.saved_model.save`` of a Keras model: identifiers, no metadata).
Weights are drawn from a seeded generator per model (non-zero biases, BatchNormalization moving
statistics away from 0/1), so the same library versions give the same arrays. The function graphs TensorFlow stores in
saved_model.pb are left as written: modelgraph never reads or runs them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import warnings
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402
from tf_keras import layers  # noqa: E402

warnings.filterwarnings("ignore")
HERE = Path(__file__).resolve().parent
OUT = HERE / "savedmodel"
GOLDENS = OUT / "goldens"
# Models also saved as a tf.train.Checkpoint with an optimizer (after one training step).
TRAIN_CKPT = ("seq_mlp", "bidi_lstm", "cnn_bn", "mha")
# Models whose SavedModel keeps tf_keras's default traced call functions; the others are saved with
# save_traces=False (an option of model.save): an RNN's traces are megabytes of function graphs, which
# modelgraph never reads, and the Keras metadata and variables are the same either way.
WITH_TRACES = ("seq_mlp", "multi_io", "nested_shared", "cnn_bn", "frozen", "lambda_model")
# TF 2.0-2.3 always stored the traces; two legacy samples keep them (the others stay small).
LEGACY_WITH_TRACES = ("seq_mlp", "nested_shared")


# ------------------------------------------------------------------------------------------ models


def m_seq_mlp():
    return keras.Sequential(
        [
            keras.Input((6,), name="x"),
            layers.Dense(8, activation="relu", name="d1"),
            layers.BatchNormalization(name="bn"),
            layers.Dropout(0.2, name="drop"),
            layers.Dense(3, activation="softmax", name="out"),
        ],
        name="seq_mlp",
    )


def m_multi_io():
    a = keras.Input((5,), name="a")
    b = keras.Input((4,), name="b")
    ha = layers.Dense(6, activation="tanh", name="da")(a)
    hb = layers.Dense(6, activation="relu", name="db")(b)
    cat = layers.Concatenate(name="cat")([ha, hb])
    y1 = layers.Dense(2, name="head1")(cat)
    y2 = layers.Dense(3, activation="sigmoid", name="head2")(layers.Add(name="add")([ha, hb]))
    return keras.Model([a, b], [y1, y2], name="multi_io")


def m_nested_shared():
    inner_in = keras.Input((4,), name="inner_in")
    inner = keras.Model(
        inner_in,
        layers.Dense(4, activation="relu", name="inner_dense2")(layers.Dense(5, name="inner_dense1")(inner_in)),
        name="inner",
    )
    x1 = keras.Input((4,), name="x1")
    x2 = keras.Input((4,), name="x2")
    shared = layers.Dense(4, name="shared")
    h1 = inner(shared(x1))
    h2 = inner(shared(x2))
    y = layers.Dense(2, name="out")(layers.Concatenate(name="cat")([h1, h2, shared(h1)]))
    return keras.Model([x1, x2], y, name="nested_shared")


def m_bidi_lstm():
    x = keras.Input((7,), dtype="int32", name="tokens")
    e = layers.Embedding(20, 6, name="emb")(x)
    h = layers.Bidirectional(layers.LSTM(5, return_sequences=True), name="bilstm")(e)
    h = layers.Bidirectional(layers.GRU(3), merge_mode="sum", name="bigru")(h)
    return keras.Model(x, layers.Dense(2, name="out")(h), name="bidi_lstm")


def m_time_distributed():
    x = keras.Input((5, 4), name="seq")
    h = layers.TimeDistributed(layers.Dense(6, activation="relu", name="td_inner"), name="td")(x)
    h = layers.GRU(4, return_sequences=True, name="gru")(h)
    h = layers.LSTM(3, name="lstm")(h)
    return keras.Model(x, layers.Dense(2, name="out")(h), name="time_distributed")


def m_rnn_cells():
    x = keras.Input((6, 3), name="seq")
    h = layers.RNN(layers.LSTMCell(4, name="lstm_cell"), return_sequences=True, name="rnn_lstm")(x)
    h = layers.RNN([layers.GRUCell(3, name="gru_a"), layers.SimpleRNNCell(2, name="simple_b")], name="rnn_stack")(h)
    return keras.Model(x, layers.Dense(2, name="out")(h), name="rnn_cells")


def m_cnn_bn():
    x = keras.Input((12, 12, 3), name="image")
    h = layers.Conv2D(6, 3, padding="same", name="conv1")(x)
    h = layers.BatchNormalization(name="bn1")(h)
    h = layers.ReLU(name="relu1")(h)
    h = layers.DepthwiseConv2D(3, name="dw")(h)
    h = layers.BatchNormalization(name="bn2")(h)
    h = layers.MaxPooling2D(name="pool")(h)
    h = layers.GlobalAveragePooling2D(name="gap")(h)
    return keras.Model(x, layers.Dense(4, name="out")(h), name="cnn_bn")


def m_mha():
    x = keras.Input((6, 8), name="seq")
    att = layers.MultiHeadAttention(num_heads=2, key_dim=4, name="mha")(x, x)
    h = layers.LayerNormalization(name="ln")(layers.Add(name="res")([x, att]))
    h = layers.GlobalAveragePooling1D(name="gap")(h)
    return keras.Model(x, layers.Dense(3, name="out")(h), name="mha")


def m_frozen():
    x = keras.Input((5,), name="x")
    frozen = layers.Dense(6, activation="relu", name="frozen", trainable=False)
    h = layers.BatchNormalization(name="bn")(frozen(x))
    return keras.Model(x, layers.Dense(2, name="out")(h), name="frozen")


def m_lambda():
    x = keras.Input((4,), name="x")
    h = layers.Dense(4, name="d")(x)
    h = layers.Lambda(lambda t: t * 2.0 + 1.0, name="scale")(h)
    return keras.Model(x, h, name="lambda_model")


def m_conv1d_text():
    x = keras.Input((12,), dtype="int32", name="tokens")
    h = layers.Embedding(30, 8, name="emb")(x)
    h = layers.Conv1D(6, 3, activation="relu", name="conv_a")(h)
    h = layers.MaxPooling1D(2, name="pool")(h)
    h = layers.Conv1D(5, 2, dilation_rate=2, padding="causal", name="conv_b")(h)
    h = layers.GlobalMaxPooling1D(name="gmp")(h)
    return keras.Model(x, layers.Dense(3, activation="softmax", name="out")(h), name="conv1d_text")


def m_separable_up():
    x = keras.Input((8, 8, 3), name="image")
    h = layers.ZeroPadding2D(1, name="pad")(x)
    h = layers.SeparableConv2D(6, 3, depth_multiplier=2, name="sep")(h)
    h = layers.BatchNormalization(name="bn")(h)
    h = layers.PReLU(shared_axes=[1, 2], name="prelu")(h)
    h = layers.Conv2DTranspose(4, 3, strides=2, padding="same", name="up_conv")(h)
    h = layers.Cropping2D(2, name="crop")(h)
    h = layers.UpSampling2D(name="up")(h)
    h = layers.AveragePooling2D(4, name="avg")(h)
    return keras.Model(x, layers.Dense(2, name="out")(layers.Flatten(name="flat")(h)), name="separable_up")


def m_nested_sequential():
    block = keras.Sequential(
        [
            keras.Input((6,), name="block_in"),
            layers.Dense(6, name="block_dense"),
            layers.BatchNormalization(name="block_bn"),
            layers.LeakyReLU(0.1, name="block_act"),
            layers.Dropout(0.1, name="block_drop"),
        ],
        name="block",
    )
    a = keras.Input((6,), name="a")
    b = keras.Input((6,), name="b")
    diff = layers.Subtract(name="diff")([block(a), block(b)])
    prod = layers.Multiply(name="prod")([block(a), diff])
    return keras.Model([a, b], layers.Dense(2, name="out")(prod), name="nested_sequential")


def m_attention_seq():
    q = keras.Input((5, 4), name="query")
    v = keras.Input((7, 4), name="value")
    att = layers.Attention(use_scale=True, name="att")([q, v])
    h = layers.Conv1D(4, 1, name="proj")(att)
    h = layers.SimpleRNN(3, name="rnn")(h)
    h = layers.RepeatVector(2, name="repeat")(h)
    h = layers.Reshape((6,), name="flat")(h)
    return keras.Model([q, v], layers.Dense(2, name="out")(h), name="attention_seq")


MODELS = {
    "seq_mlp": m_seq_mlp,
    "multi_io": m_multi_io,
    "nested_shared": m_nested_shared,
    "bidi_lstm": m_bidi_lstm,
    "time_distributed": m_time_distributed,
    "rnn_cells": m_rnn_cells,
    "cnn_bn": m_cnn_bn,
    "mha": m_mha,
    "frozen": m_frozen,
    "lambda_model": m_lambda,
    "conv1d_text": m_conv1d_text,
    "separable_up": m_separable_up,
    "nested_sequential": m_nested_sequential,
    "attention_seq": m_attention_seq,
}


# ------------------------------------------------------------------------------------------ helpers


def seed_of(name: str) -> int:
    return sum(ord(c) * (i + 1) for i, c in enumerate(name)) % 10_000


def set_weights(model, rng) -> None:
    """Realistic values for every variable: scaled kernels, non-zero biases, BN stats off 0/1."""
    for v in model.weights:
        leaf = v.name.split("/")[-1].split(":")[0]
        shape = tuple(v.shape)
        if v.dtype != tf.float32:
            continue
        if leaf == "moving_variance":
            value = rng.uniform(0.5, 2.0, shape)
        elif leaf in ("gamma",):
            value = rng.uniform(0.5, 1.5, shape)
        elif leaf in ("moving_mean", "beta", "bias"):
            value = rng.normal(0.0, 0.3, shape)
        elif leaf == "embeddings":
            value = rng.normal(0.0, 1.0, shape)
        else:
            fan_in = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
            value = rng.normal(0.0, 1.0 / np.sqrt(max(fan_in, 1)), shape)
        v.assign(value.astype("float32"))


def make_inputs(model, rng) -> dict:
    feeds = {}
    for t in model.inputs:
        shape = (3,) + tuple(int(d) for d in t.shape[1:])
        name = t.name.split(":")[0]
        if t.dtype.is_integer:
            feeds[name] = rng.integers(0, 20, shape).astype(t.dtype.as_numpy_dtype)
        else:
            feeds[name] = rng.normal(0.0, 1.0, shape).astype("float32")
    return feeds


def clear(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def tree_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def make(name: str) -> dict:
    keras.backend.clear_session()
    tf.keras.utils.set_random_seed(seed_of(name))
    rng = np.random.default_rng(seed_of(name))
    model = MODELS[name]()
    set_weights(model, rng)
    feeds = make_inputs(model, rng)
    outputs = model([feeds[t.name.split(":")[0]] for t in model.inputs], training=False)
    outputs = [np.asarray(o) for o in (outputs if isinstance(outputs, (list, tuple)) else [outputs])]

    sm = OUT / name
    for p in (sm, OUT / f"{name}.h5", OUT / f"{name}.json", OUT / f"train_{name}"):
        clear(p)
    for p in (OUT / "ckpt").glob(f"{name}.*"):
        p.unlink()
    model.save(sm, save_format="tf", save_traces=name in WITH_TRACES)
    model.save(OUT / f"{name}.h5", save_format="h5")
    legacy = OUT / "legacy" / name
    # before any training step: the same weights as NAME/
    write_legacy_layout(model, legacy, save_traces=name in LEGACY_WITH_TRACES)
    (OUT / f"{name}.json").write_text(model.to_json(indent=1) + "\n")
    model.save_weights(str(OUT / "ckpt" / name), save_format="tf")
    files = {"savedmodel": f"{name}/", "h5": f"{name}.h5", "json": f"{name}.json", "weights_ckpt": f"ckpt/{name}"}
    if name in TRAIN_CKPT:
        optimizer = keras.optimizers.Adam(1e-3)
        model.compile(optimizer=optimizer, loss="mse")
        # One step moves the weights; the golden below is recomputed from the trained model.
        targets = [np.zeros_like(o) for o in outputs]
        model.train_on_batch([feeds[t.name.split(":")[0]] for t in model.inputs], targets)
        manager = tf.train.Checkpoint(model=model, optimizer=optimizer)
        manager.save(str(OUT / f"train_{name}" / "ckpt"))
        trained = model([feeds[t.name.split(":")[0]] for t in model.inputs], training=False)
        trained = [np.asarray(o) for o in (trained if isinstance(trained, (list, tuple)) else [trained])]
        np.savez_compressed(
            GOLDENS / f"train_{name}.npz",
            **{f"input/{k}": v for k, v in feeds.items()},
            **{f"output/{i}": o for i, o in enumerate(trained)},
        )
        files["train_ckpt"] = f"train_{name}/ckpt-1"
    # Reload check: tf_keras reads its own SavedModel back to the same outputs.
    back = keras.models.load_model(sm, compile=False)
    again = back([feeds[t.name.split(":")[0]] for t in model.inputs], training=False)
    again = [np.asarray(o) for o in (again if isinstance(again, (list, tuple)) else [again])]
    reload_err = max(float(np.max(np.abs(a - b))) for a, b in zip(outputs, again, strict=True))
    # The TF 2.0-2.3 layout of the same model, read back by tf_keras's loader of that layout.
    back = keras.models.load_model(legacy, compile=False)
    again = back([feeds[t.name.split(":")[0]] for t in model.inputs], training=False)
    again = [np.asarray(o) for o in (again if isinstance(again, (list, tuple)) else [again])]
    legacy_err = max(float(np.max(np.abs(a - b))) for a, b in zip(outputs, again, strict=True))
    files["legacy_savedmodel"] = f"legacy/{name}/"
    np.savez_compressed(
        GOLDENS / f"{name}.npz",
        **{f"input/{k}": v for k, v in feeds.items()},
        **{f"output/{i}": o for i, o in enumerate(outputs)},
    )
    info = {
        "model": name,
        "files": files,
        "inputs": {k: {"shape": list(v.shape), "dtype": v.dtype.str} for k, v in feeds.items()},
        "outputs": [{"shape": list(o.shape), "dtype": o.dtype.str} for o in outputs],
        "tf_keras_reload_max_abs_err": reload_err,
        "legacy_reload_max_abs_err": legacy_err,
        "legacy_savedmodel_bytes": tree_size(legacy),
        "savedmodel_bytes": tree_size(sm),
        "weights": [v.name for v in model.weights],
    }
    (GOLDENS / f"{name}.json").write_text(json.dumps(info, indent=1) + "\n")
    return info


def write_legacy_layout(model, target: Path, save_traces: bool = False) -> None:
    """Save ``model`` as a SavedModel in the TF 2.0-2.3 layout: Keras metadata inside saved_model.pb."""
    from tensorflow.core.protobuf import saved_model_pb2
    from tf_keras.protobuf import saved_metadata_pb2

    clear(target)
    model.save(target, save_format="tf", save_traces=save_traces)
    metadata = saved_metadata_pb2.SavedMetadata()
    metadata.ParseFromString((target / "keras_metadata.pb").read_bytes())
    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((target / "saved_model.pb").read_bytes())
    nodes = saved.meta_graphs[0].object_graph_def.nodes
    for node in metadata.nodes:
        user_object = nodes[node.node_id].user_object
        assert user_object.identifier == node.identifier, (node.node_path, user_object.identifier)
        user_object.metadata = node.metadata
    (target / "saved_model.pb").write_bytes(saved.SerializeToString(deterministic=True))
    (target / "keras_metadata.pb").unlink()
    (target / "fingerprint.pb").unlink(missing_ok=True)


def make_refused() -> None:
    """Two SavedModels that hold no Keras graph: modelgraph must refuse both, naming what is missing."""
    keras.backend.clear_session()

    class Scaler(keras.Model):
        def __init__(self):
            super().__init__(name="scaler")
            self.dense = layers.Dense(3)

        def call(self, x):
            return self.dense(x) * 2.0

    m = Scaler()
    m(np.zeros((1, 4), "float32"))
    clear(OUT / "subclassed")
    m.save(OUT / "subclassed", save_format="tf")

    class Affine(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(np.ones((4, 2), "float32"))

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
        def __call__(self, x):
            return tf.matmul(x, self.w)

    clear(OUT / "tf_module")
    tf.saved_model.save(Affine(), str(OUT / "tf_module"))

    # tf.saved_model.save of a Keras model: the objects keep their Keras identifiers, but since TF 2.4
    # their SavedUserObject metadata is empty and no keras_metadata.pb is written.
    keras.backend.clear_session()
    model = keras.Sequential([keras.Input((3,), name="x"), layers.Dense(2, name="d")], name="plain")
    clear(OUT / "keras_tf_saved_model")
    tf.saved_model.save(model, str(OUT / "keras_tf_saved_model"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    GOLDENS.mkdir(exist_ok=True)
    (OUT / "ckpt").mkdir(exist_ok=True)
    (OUT / "legacy").mkdir(exist_ok=True)
    names = args.only or [*MODELS, "refused"]
    for name in names:
        if name == "refused":
            make_refused()
            continue
        info = make(name)
        print(f"{name}: {info['savedmodel_bytes']:,} bytes, reload err {info['tf_keras_reload_max_abs_err']:.2e}")
    versions = {"tensorflow": tf.__version__, "tf_keras": keras.__version__, "numpy": np.__version__}
    (OUT / "versions.json").write_text(json.dumps(versions, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
