"""Genuine Keras 1 files, saved by Keras 1.2.2 itself (Theano backend), with its own outputs as goldens.

    samples/keras1_env/setup.sh /work/venvs/k1     # once
    KERAS_BACKEND=theano THEANO_FLAGS="cxx=,device=cpu,floatX=float32,blas.ldflags=,optimizer=None" \
        /work/venvs/k1/bin/python samples/gen_k1.py

The venv is development-only: ``numpy<1.24 scipy theano==1.0.5 keras==1.2.2 h5py<3.12`` on Python
3.11 with the import shims of ``samples/keras1_env/sitecustomize.py`` (``inspect.getargspec``, the
``collections`` ABC aliases, scipy's old private signal modules, ``theano.ifelse``: names Python and
SciPy dropped since Keras 1 was released) and one patched line of Theano's Python pooling; Theano
runs unoptimised in pure Python (no C compiler, no BLAS), which is slow but exact for these small
models. Keras 1's
``image_dim_ordering`` is set per layer (``dim_ordering=``) so the file says which one it used.

Writes ``samples/k1/<name>.h5`` (full model via ``model.save``) and ``samples/k1/<name>.golden.json``:
the Keras version, each layer's depth from Keras 1's own ``layers_by_depth``, the parameter count,
the inputs and the outputs Keras 1 computed (small, stored inline).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "theano")
os.environ.setdefault("THEANO_FLAGS", "cxx=,device=cpu,floatX=float32,blas.ldflags=")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = HERE / "k1"


def _randomise(model, rng) -> None:
    """Realistic weights: glorot-like kernels, non-zero biases, BatchNormalization statistics."""
    for layer in model.layers:
        values = []
        for w in layer.weights:
            name = w.name.rsplit("_", 1)[-1] if "running" not in w.name else w.name
            shape = w.get_value().shape
            if "running_mean" in name:
                values.append(rng.normal(0, 0.5, shape))
            elif "running_std" in name:  # Keras 1 keeps the moving variance under this name
                values.append(rng.uniform(0.5, 2.0, shape))
            elif name in ("gamma",):
                values.append(rng.uniform(0.7, 1.3, shape))
            elif len(shape) == 1:
                values.append(rng.normal(0, 0.2, shape))
            else:
                values.append(rng.normal(0, 1.0 / np.sqrt(max(1, shape[0])), shape))
        if values:
            layer.set_weights([v.astype("float32") for v in values])


def seq_cnn(keras):
    from keras.layers import Activation, BatchNormalization, Convolution2D, Dense, Dropout, Flatten, MaxPooling2D
    from keras.models import Sequential

    model = Sequential(name="k1_seq_cnn")
    model.add(Convolution2D(4, 3, 3, border_mode="same", dim_ordering="tf", input_shape=(8, 8, 3), name="conv1"))
    model.add(BatchNormalization(axis=-1, name="bn1"))
    model.add(Activation("relu", name="relu1"))
    model.add(MaxPooling2D((2, 2), dim_ordering="tf", name="pool1"))
    model.add(Convolution2D(6, 3, 3, border_mode="valid", subsample=(1, 1), dim_ordering="tf", activation="tanh", name="conv2"))
    model.add(Flatten(name="flat"))
    model.add(Dropout(0.5, name="drop"))
    model.add(Dense(5, activation="softmax", name="probs"))
    return model, {"conv1_input": (2, 8, 8, 3)}


def th_cnn(keras):
    from keras.layers import AveragePooling2D, Convolution2D, Dense, Flatten, Input
    from keras.models import Model

    # (no ZeroPadding2D: Keras 1.2.2 does not save its dim_ordering, so its file reloads differently)
    x = Input(shape=(3, 9, 9), name="image")
    h = Convolution2D(4, 3, 3, subsample=(2, 2), dim_ordering="th", activation="relu", name="conv_th")(x)
    h = AveragePooling2D((2, 2), dim_ordering="th", name="avg")(h)
    h = Convolution2D(3, 1, 1, dim_ordering="th", name="conv_1x1")(h)
    y = Dense(4, name="out")(Flatten(name="flat")(h))
    return Model(x, y, name="k1_th_cnn"), {"image": (2, 3, 9, 9)}


def rnn(keras):
    from keras.layers import GRU, LSTM, Dense, Embedding, Input, SimpleRNN, merge
    from keras.models import Model

    tokens = Input(shape=(7,), dtype="int32", name="tokens")
    e = Embedding(20, 4, mask_zero=True, name="emb")(tokens)
    a = LSTM(5, return_sequences=True, name="lstm_seq")(e)
    a = GRU(4, name="gru_last")(a)
    b = SimpleRNN(3, name="srnn")(e)
    c = LSTM(3, go_backwards=True, inner_activation="sigmoid", name="lstm_back")(e)
    h = merge([a, b, c], mode="concat", name="cat")
    y = Dense(2, activation="sigmoid", name="out")(h)
    return Model(tokens, y, name="k1_rnn"), {"tokens": "tokens"}


def wrappers(keras):
    from keras.layers import LSTM, Dense, Input, TimeDistributed, merge
    from keras.layers.wrappers import Bidirectional
    from keras.models import Model

    x = Input(shape=(5, 3), name="seq")
    t = TimeDistributed(Dense(4, activation="relu"), name="td_dense")(x)
    bi = Bidirectional(LSTM(3, return_sequences=True), merge_mode="concat", name="bi")(t)
    s = merge([bi, TimeDistributed(Dense(6), name="td_proj")(x)], mode="sum", name="add")
    m = merge([s, s], mode="mul", name="square")
    g = GRU_like = LSTM(4, consume_less="gpu", name="lstm_gpu")(m)  # noqa: F841 - one fused weight layout
    y = Dense(2, name="out")(g)
    return Model(x, y, name="k1_wrappers"), {"seq": (2, 5, 3)}


def bidirectional_simple(keras):
    from keras.layers import Dense, Input, SimpleRNN
    from keras.layers.wrappers import Bidirectional
    from keras.models import Model

    # a wrapped layer whose weights are not per-gate: each side keeps only its own W, U, b
    x = Input(shape=(4, 3), name="seq")
    h = Bidirectional(SimpleRNN(2), merge_mode="concat", name="bi_simple")(x)
    return Model(x, Dense(2, name="out")(h), name="k1_bidi_simple"), {"seq": (2, 4, 3)}


def _inputs(spec, rng):
    out = {}
    for name, shape in spec.items():
        if shape == "tokens":  # token ids with padding zeros at the end (masked)
            ids = rng.integers(1, 20, (3, 7))
            ids[0, 5:] = 0
            ids[1, 3:] = 0
            out[name] = ids.astype("int32")
        else:
            out[name] = rng.normal(0, 1, shape).astype("float32")
    return out


def main() -> None:
    import keras

    OUT.mkdir(exist_ok=True)
    for seed, build in enumerate((seq_cnn, th_cnn, rnn, wrappers, bidirectional_simple)):
        rng = np.random.default_rng(100 + seed)
        model, spec = build(keras)
        _randomise(model, rng)
        inputs = _inputs(spec, rng)
        feed = list(inputs.values())  # every model here has one input
        outputs = model.predict(feed if len(feed) > 1 else feed[0], batch_size=8)
        outputs = outputs if isinstance(outputs, list) else [outputs]
        name = model.name
        model.save(str(OUT / f"{name}.h5"))
        graph = model if hasattr(model, "layers_by_depth") else model.model  # Sequential wraps a Model
        depths = {layer.name: depth for depth, layers in graph.layers_by_depth.items() for layer in layers}
        golden = {
            "made_by": "real Keras 1.2.2 (Theano 1.0.5) via samples/gen_k1.py",
            "keras_version": keras.__version__,
            "file": f"k1/{name}.h5",
            "params": int(model.count_params()),
            "layer_depths": depths,
            "inputs": {k: {"dtype": str(v.dtype), "data": v.tolist()} for k, v in inputs.items()},
            "outputs": [{"shape": list(o.shape), "data": o.astype("float64").ravel().tolist()} for o in outputs],
        }
        (OUT / f"{name}.golden.json").write_text(json.dumps(golden))
        print(name, model.count_params(), [o.shape for o in outputs])


if __name__ == "__main__":
    main()
