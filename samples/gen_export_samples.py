"""Export cases: models the ONNX exporter must lower for every input length, made by real Keras 3.

Needs Keras 3 (``/work/venvs/k3/bin/python samples/gen_export_samples.py``; ``KERAS_BACKEND=tensorflow``
and ``TF_ENABLE_ONEDNN_OPTS=0`` are set here). Writes ``export/<name>.keras`` and ``export/<name>.npz``
(``x_<L>``: an input of length L, ``y_<L>``: Keras's output for it) and ``export/<name>.json`` (versions).

* ``dilated_same_1d``: Conv1D(padding="same", dilation_rate=2 and 3) on a sequence of unknown length,
  with BatchNormalization (moving statistics set) and non-zero biases. ONNX's SAME_UPPER auto padding
  does not support dilation in onnxruntime, so the exporter must pad explicitly; the goldens at
  lengths 1, 5, 9 and 16 check that it does.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import keras  # noqa: E402
import numpy as np  # noqa: E402

OUT = Path(__file__).resolve().parent / "export"
LENGTHS = (1, 5, 9, 16)


def dilated_same_1d() -> keras.Model:
    keras.utils.set_random_seed(11)
    x = keras.Input((None, 3), name="seq")
    h = keras.layers.Conv1D(4, 3, padding="same", dilation_rate=2, name="dil2")(x)
    h = keras.layers.BatchNormalization(name="bn")(h)
    h = keras.layers.Activation("relu", name="relu")(h)
    h = keras.layers.Conv1D(5, 2, padding="same", dilation_rate=3, name="dil3")(h)
    model = keras.Model(x, h, name="dilated_same_1d")
    rng = np.random.default_rng(11)
    for layer in model.layers:
        for var in layer.weights:
            shape = tuple(var.shape)
            if var.name == "moving_variance":
                var.assign(rng.uniform(0.5, 1.5, shape).astype("float32"))
            else:
                var.assign(rng.normal(0, 0.5, shape).astype("float32"))
    return model


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for name, build in {"dilated_same_1d": dilated_same_1d}.items():
        model = build()
        model.save(OUT / f"{name}.keras")
        rng = np.random.default_rng(5)
        arrays = {}
        for n in LENGTHS:
            x = rng.normal(size=(2, n, 3)).astype("float32")
            arrays[f"x_{n}"] = x
            arrays[f"y_{n}"] = np.asarray(model.predict(x, verbose=0))
        np.savez(OUT / f"{name}.npz", **arrays)
        meta = {"keras_version": keras.__version__, "backend": keras.backend.backend(), "lengths": LENGTHS,
                "python": sys.version.split()[0], "numpy": np.__version__}
        (OUT / f"{name}.json").write_text(json.dumps(meta, indent=1) + "\n")
        print(f"wrote {name}: {', '.join(f'{k}{v.shape}' for k, v in arrays.items())}")


if __name__ == "__main__":
    main()
