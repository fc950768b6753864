"""Hard cases for ``modelgraph convert`` made with Keras 3 (the tf_keras ones are in
gen_convert_samples.py).

    KERAS_BACKEND=tensorflow /work/venvs/k3/bin/python samples/gen_convert_samples_k3.py

Writes ``samples/convert/``:

* ``k3_masked_op.keras`` + golden: an ``Embedding(mask_zero=True)`` whose output goes through
  Keras 3 ops (``e * 2.0``, ``e + e``) into an LSTM. Keras 3 ops drop the implicit mask, so the
  LSTM runs unmasked; the same ops written as layers (``Rescaling``, ``Add``) would carry the mask
  on, so the ``.h5`` writer must keep refusing them here.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "-1")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from gen_convert_samples import OUT, save_golden  # noqa: E402


def _masked_op(keras) -> None:
    from keras import ops

    rng = np.random.default_rng(3)
    tokens = keras.Input((6,), dtype="int32", name="tokens")
    e = keras.layers.Embedding(12, 4, mask_zero=True, name="emb")(tokens)
    h = ops.add(ops.multiply(e, 2.0), e)
    y = keras.layers.LSTM(3, name="lstm")(h)
    model = keras.Model(tokens, y, name="k3_masked_op")
    for layer in model.layers:
        layer.set_weights([rng.normal(0, 0.5, w.shape).astype("float32") for w in layer.get_weights()])
    data = rng.integers(1, 12, (3, 6)).astype("int32")
    data[:, 4:] = 0  # padding the mask would skip
    expected = np.asarray(model(data, training=False))
    model.save(OUT / "k3_masked_op.keras")
    files = {"keras": "convert/k3_masked_op.keras"}
    save_golden("k3_masked_op", f"keras {keras.__version__}", files, {"tokens": data}, expected)


def main() -> None:
    import keras

    keras.utils.set_random_seed(0)
    OUT.mkdir(exist_ok=True)
    _masked_op(keras)
    print("wrote k3_masked_op", file=sys.stderr)


if __name__ == "__main__":
    main()
