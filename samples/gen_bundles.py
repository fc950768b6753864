"""Make small TensorFlow tensor bundles (checkpoints) and their goldens for the bundle reader's tests.

Needs TensorFlow (the tf_keras venv): ``/work/venvs/k2/bin/python samples/gen_bundles.py``.
Writes ``samples/bundles/<name>.index`` + ``.data-*`` and ``<name>.npz`` (every key's array as TensorFlow
reads it back with ``tf.train.load_checkpoint``; strings as a ``bytes`` object array in a .json).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

OUT = Path(__file__).resolve().parent / "bundles"
RNG = np.random.default_rng(27)


def dtypes_checkpoint() -> tf.train.Checkpoint:
    """One variable per dtype a Keras model stores, plus a scalar, an empty and a string tensor."""
    values = {
        "f32": RNG.normal(size=(3, 4)).astype("float32"),
        "f64": RNG.normal(size=(5,)).astype("float64"),
        "f16": RNG.normal(size=(2, 3)).astype("float16"),
        "bf16": tf.cast(RNG.normal(size=(4,)).astype("float32"), tf.bfloat16),
        "i8": RNG.integers(-100, 100, size=(6,)).astype("int8"),
        "i16": RNG.integers(-3000, 3000, size=(2, 2)).astype("int16"),
        "i32": RNG.integers(-(2**31), 2**31 - 1, size=(3,)).astype("int32"),
        "i64": RNG.integers(-(2**62), 2**62, size=(2,)).astype("int64"),
        "u8": RNG.integers(0, 255, size=(7,)).astype("uint8"),
        "u16": RNG.integers(0, 60000, size=(2,)).astype("uint16"),
        "u32": RNG.integers(0, 2**32 - 1, size=(2,), dtype="uint64").astype("uint32"),
        "u64": RNG.integers(0, 2**63, size=(2,), dtype="uint64"),
        "flag": np.array([True, False, True]),
        "scalar": np.float32(2.5),
        "empty": np.zeros((0, 3), "float32"),
        "words": np.array([b"keras", b"", b"x" * 300, "\u00e9t\u00e9".encode()], dtype=object),
    }
    ckpt = tf.train.Checkpoint()
    for name, value in values.items():
        setattr(ckpt, name, tf.Variable(value, name=name))
    return ckpt


def small_model():
    import tf_keras as keras

    inputs = keras.Input((6,))
    x = keras.layers.Dense(5, activation="relu", name="hidden")(inputs)
    x = keras.layers.BatchNormalization(name="bn")(x)
    outputs = keras.layers.Dense(2, name="head")(x)
    model = keras.Model(inputs, outputs)
    for w in model.weights:
        w.assign(RNG.normal(size=w.shape).astype("float32") * 0.5 + (1.0 if "variance" in w.name else 0.0))
    return model


def golden(prefix: Path) -> None:
    reader = tf.train.load_checkpoint(str(prefix))
    arrays, strings = {}, {}
    for key in sorted(reader.get_variable_to_shape_map()):
        value = reader.get_tensor(key)
        if isinstance(value, bytes) or (isinstance(value, np.ndarray) and value.dtype == object):
            strings[key] = [v.hex() for v in np.asarray(value, dtype=object).ravel()]
            strings[key + "/shape"] = list(np.shape(value))
        elif reader.get_variable_to_dtype_map()[key] == tf.bfloat16:
            arrays[key] = np.asarray(value).astype(np.float32)  # bfloat16 widens exactly
        else:
            arrays[key] = np.asarray(value)
    np.savez(prefix.with_suffix(".npz") if prefix.suffix == "" else Path(f"{prefix}.npz"), **arrays)
    Path(f"{prefix}.strings.json").write_text(json.dumps(strings, indent=1, sort_keys=True) + "\n")


def partitioned(prefix: Path) -> None:
    """A TF1-style partitioned variable (three slices of one [10, 4] tensor) saved by tf.compat.v1.Saver."""
    with tf.Graph().as_default():
        v1 = tf.compat.v1
        init = v1.random_normal_initializer(seed=27)
        v1.get_variable("part", shape=[10, 4], initializer=init, partitioner=v1.fixed_size_partitioner(3))
        v1.get_variable("whole", shape=[3], initializer=v1.constant_initializer([1.0, 2.0, 3.0]))
        saver = v1.train.Saver()
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            saver.save(sess, str(prefix), write_meta_graph=False, write_state=False)


def main() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir()
    dtypes_checkpoint().write(str(OUT / "dtypes"))
    golden(OUT / "dtypes")
    model = small_model()
    model.save_weights(str(OUT / "model_weights"))  # tf.keras's default TF format
    golden(OUT / "model_weights")
    for extra in ("checkpoint",):
        (OUT / extra).unlink(missing_ok=True)
    partitioned(OUT / "partitioned")
    golden(OUT / "partitioned")
    print("\n".join(sorted(p.name for p in OUT.iterdir())))


if __name__ == "__main__":
    main()
