"""Samples for issue #33 (fidelity round 3), made by real Keras 3.

Run with the Keras 3 venv, once per backend (the goldens of both backends are kept):

    KERAS_BACKEND=jax        /work/venvs/k3/bin/python samples/gen_fidelity3.py
    KERAS_BACKEND=tensorflow /work/venvs/k3/bin/python samples/gen_fidelity3.py

``fused_output``: a Conv1D whose BatchNormalization is the model's output.  The runner folds the
BatchNormalization into the convolution; the output must still carry the BatchNormalization's name
(with and without ``--all-intermediates``, which runs the unfused plan).
"""

from __future__ import annotations

import os
from pathlib import Path

import keras
import numpy as np

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


def main() -> None:
    backend = keras.backend.backend()
    OUT.mkdir(exist_ok=True)
    keras.utils.set_random_seed(33)
    model = fused_output()
    if backend == "jax":  # one model file; the other backend only adds its golden
        model.save(OUT / "fused_output.keras")
        model.save(OUT / "fused_output.h5")
    else:
        model = keras.saving.load_model(OUT / "fused_output.keras")
    x = np.random.default_rng(7).normal(size=(2, 6, 2)).astype("float32")
    y = np.asarray(model(x, training=False))
    np.savez(OUT / f"fused_output.{backend}.npz", **{"input/signal": x, "output/dense_1": y})


if __name__ == "__main__":
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    main()
