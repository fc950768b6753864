"""Compiled and trained models, for carrying training configs and optimizer state through ``convert``.

    /work/venvs/k2/bin/python samples/gen_training.py k2     # tf_keras 2 files
    KERAS_BACKEND=tensorflow /work/venvs/k3/bin/python samples/gen_training.py k3

Each model is small, compiled with a different optimizer / loss / metrics combination and trained
for three steps on seeded data, so every optimizer slot holds non-zero state. Writes
``samples/training/<name>.h5`` (and ``.keras`` where the Keras version writes one) and
``samples/training/<name>.optimizer.json``: the optimizer's variables as Keras itself reports them
after training (path, shape and values), the golden that ``verify_convert.py`` compares Keras 3's
optimizer variables with after loading the converted file.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "-1")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = HERE / "training"


def _model(keras, name: str):
    x = keras.Input((6,), name="x")
    h = keras.layers.Dense(5, name="hidden")(x)
    h = keras.layers.BatchNormalization(name="bn")(h)
    h = keras.layers.Activation("relu", name="act")(h)
    y = keras.layers.Dense(3, activation="softmax", name="probs")(h)
    return keras.Model(x, y, name=name)


def _train(model, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 1, (24, 6)).astype("float32")
    y = np.eye(3, dtype="float32")[rng.integers(0, 3, 24)]
    model.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)


def _golden(model, name: str, seed: int) -> None:
    """Record the optimizer's variables, then train one more step (after the model is saved) and record
    the weights Keras gets: a converted file that carries the training state faithfully takes the
    same step."""
    found = model.optimizer.variables
    variables = [
        {"path": getattr(v, "path", None) or v.name, "shape": list(v.shape), "values": np.asarray(v).ravel().tolist()}
        for v in (found() if callable(found) else found)
    ]
    rng = np.random.default_rng(seed + 100)
    x = rng.normal(0, 1, (8, 6)).astype("float32")
    y = np.eye(3, dtype="float32")[rng.integers(0, 3, 8)]
    model.train_on_batch(x, y)
    after = {w.path if hasattr(w, "path") else w.name: np.asarray(w).ravel().tolist() for w in model.weights}
    golden = {"optimizer": type(model.optimizer).__name__, "variables": variables}
    golden["next_step"] = {"x": x.tolist(), "y": y.tolist(), "weights_after": after}
    (OUT / f"{name}.optimizer.json").write_text(json.dumps(golden))


def _make(keras, cases: dict, first_seed: int) -> None:
    """Build, compile, train and save each case (``.h5`` and ``.keras``) and record its golden."""
    for seed, (name, compile_args) in enumerate(cases.items(), start=first_seed):
        keras.utils.set_random_seed(seed)
        model = _model(keras, name)
        model.compile(**compile_args)
        _train(model, seed)
        model.save(OUT / f"{name}.h5")
        model.save(OUT / f"{name}.keras")
        _golden(model, name, seed)


def k2() -> None:
    import tf_keras as keras

    cases = {
        "k2_sgd_nesterov": dict(optimizer=keras.optimizers.SGD(0.05, momentum=0.9, nesterov=True), loss="categorical_crossentropy", metrics=["accuracy"]),
        "k2_rmsprop_centered": dict(optimizer=keras.optimizers.RMSprop(0.01, momentum=0.5, centered=True), loss=keras.losses.CategoricalCrossentropy(label_smoothing=0.1), metrics=[keras.metrics.AUC(name="auc")]),
        "k2_adam_amsgrad": dict(optimizer=keras.optimizers.Adam(0.02, amsgrad=True), loss="mse"),
        "k2_legacy_adam_decay": dict(optimizer=keras.optimizers.legacy.Adam(0.02, decay=0.01), loss="categorical_crossentropy"),
    }
    _make(keras, cases, first_seed=0)


def k3() -> None:
    import keras

    schedule = keras.optimizers.schedules.ExponentialDecay(0.05, decay_steps=2, decay_rate=0.5)
    cases = {
        "k3_adamw_schedule": dict(optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01), loss="categorical_crossentropy", metrics=["accuracy"]),
        "k3_sgd_momentum": dict(optimizer=keras.optimizers.SGD(0.05, momentum=0.9), loss=keras.losses.Huber(delta=0.5)),
    }
    _make(keras, cases, first_seed=10)


if __name__ == "__main__":
    OUT.mkdir(exist_ok=True)
    {"k2": k2, "k3": k3}[sys.argv[1]]()
