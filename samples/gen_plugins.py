"""Generate the custom-layer samples the plugin examples are tested on. Run in the Keras 3 venv:

    KERAS_BACKEND=tensorflow /work/venvs/k3/bin/python samples/gen_plugins.py [--verify-converted]

Writes samples/plugins/custom_text.{keras,h5} and samples/plugins/custom_text_golden.{npz,json}: a
small text classifier built by real Keras 3 with three custom objects written the way public models
write them (the Keras code is below, registered with ``@keras.saving.register_keras_serializable``):

* ``AttentionWeightedAverage``: attention-weighted average pooling over time, after DeepMoji's layer
  (one weight ``W`` of shape (features, 1); a softmax over time of ``x @ W`` weights the average);
* ``PositionEmbedding``: a learned positional embedding, after keras-hub's ``PositionEmbedding``
  (one weight ``embeddings`` of shape (sequence_length, features), broadcast to the input's shape);
* ``gelu_tanh``: a registered activation function (GELU, tanh approximation), used by a Dense layer
  and an Activation layer.

With ``--verify-converted [--modelgraph .venv/bin/modelgraph]`` it converts both files to .keras
and .h5 with modelgraph (a subprocess: once with the plugins of examples/plugins/, once with
``--keep-unknown`` and no plugin) into samples/plugins/converted/, loads each result with real Keras
and ``custom_objects``, and records in samples/plugins/converted.json how far its outputs on the
golden inputs are from the golden. The golden is kept out of samples/goldens/
on purpose: the tests that walk every golden run models without plugins.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _common as C  # noqa: E402
import keras  # noqa: E402
from keras import layers, ops  # noqa: E402

warnings.filterwarnings("ignore")
OUT = HERE / "plugins"
CONVERTED = OUT / "converted"
GOLDEN = OUT / "custom_text_golden"
SEQ, VOCAB, WIDTH, CLASSES = 12, 50, 16, 3


# --- the custom objects, as their users write them in Keras -----------------------------------


@keras.saving.register_keras_serializable(package="plugins")
def gelu_tanh(x):
    """GELU, tanh approximation."""
    return 0.5 * x * (1.0 + ops.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


@keras.saving.register_keras_serializable(package="plugins")
class AttentionWeightedAverage(layers.Layer):
    """Weighted average over time; the weights are a softmax over time of a learned projection."""

    def __init__(self, return_attention=False, **kwargs):
        super().__init__(**kwargs)
        self.return_attention = return_attention

    def build(self, input_shape):
        self.W = self.add_weight(
            name="W", shape=(input_shape[-1], 1), initializer="glorot_uniform", trainable=True
        )

    def call(self, x):
        logits = ops.squeeze(ops.matmul(x, self.W), axis=-1)
        ai = ops.exp(logits - ops.max(logits, axis=-1, keepdims=True))
        att = ai / (ops.sum(ai, axis=1, keepdims=True) + keras.config.epsilon())
        result = ops.sum(x * ops.expand_dims(att, -1), axis=1)
        return [result, att] if self.return_attention else result

    def compute_output_shape(self, input_shape):
        out = (input_shape[0], input_shape[-1])
        return [out, (input_shape[0], input_shape[1])] if self.return_attention else out

    def get_config(self):
        return {**super().get_config(), "return_attention": self.return_attention}


@keras.saving.register_keras_serializable(package="plugins")
class PositionEmbedding(layers.Layer):
    """Learned position embeddings, broadcast to the input's shape (added to it by the model)."""

    def __init__(self, sequence_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.sequence_length = int(sequence_length)
        self.initializer = keras.initializers.get(initializer)

    def build(self, input_shape):
        self.position_embeddings = self.add_weight(
            name="embeddings",
            shape=(self.sequence_length, input_shape[-1]),
            initializer=self.initializer,
            trainable=True,
        )

    def call(self, inputs):
        shape = ops.shape(inputs)
        positions = ops.slice(self.position_embeddings, (0, 0), (shape[-2], shape[-1]))
        return ops.broadcast_to(positions, shape)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {
            **super().get_config(),
            "sequence_length": self.sequence_length,
            "initializer": keras.initializers.serialize(self.initializer),
        }


# Keras 3 looks a .keras record up by its registered name, a legacy .h5 record by its class name.
CUSTOM_OBJECTS = {
    "plugins>gelu_tanh": gelu_tanh,
    "plugins>AttentionWeightedAverage": AttentionWeightedAverage,
    "plugins>PositionEmbedding": PositionEmbedding,
    "AttentionWeightedAverage": AttentionWeightedAverage,
    "PositionEmbedding": PositionEmbedding,
}


def build() -> keras.Model:
    ids = keras.Input((SEQ,), dtype="int32", name="ids")
    x = layers.Embedding(VOCAB, WIDTH, name="tokens")(ids)
    x = layers.Add(name="add_positions")([x, PositionEmbedding(SEQ, name="positions")(x)])
    x = layers.Dense(WIDTH, activation=gelu_tanh, name="ffn")(x)
    x = layers.Activation(gelu_tanh, name="act")(layers.Dense(WIDTH, name="proj")(x))
    pooled, att = AttentionWeightedAverage(return_attention=True, name="attention")(x)
    logits = layers.Dense(CLASSES, name="logits")(pooled)
    return keras.Model(ids, [logits, att], name="custom_text")


def trained_like(model: keras.Model, seed: int) -> None:
    """Weights that look trained: scaled normal kernels and embeddings, non-zero biases."""
    rng = np.random.default_rng(seed)
    for var in model.weights:
        shape = tuple(var.shape)
        if var.path.endswith("bias"):
            value = rng.normal(0.0, 0.1, shape)
        else:
            value = rng.normal(0.0, 1.0 / np.sqrt(shape[0]), shape)
        var.assign(value.astype("float32"))


def make() -> None:
    keras.utils.set_random_seed(7)
    model = build()
    trained_like(model, 7)
    rng = np.random.default_rng(11)
    ids = rng.integers(0, VOCAB, size=(4, SEQ)).astype("int32")
    outs = [np.asarray(o) for o in model.predict(ids, verbose=0)]
    OUT.mkdir(parents=True, exist_ok=True)
    files = {}
    for suffix in ("keras", "h5"):
        path = OUT / f"custom_text.{suffix}"
        model.save(path)
        again = keras.models.load_model(path, custom_objects=CUSTOM_OBJECTS)
        diff = C.max_abs_diff([np.asarray(o) for o in again.predict(ids, verbose=0)], outs)
        assert diff == 0.0, (suffix, diff)
        files[suffix] = C.rel(path)
    info = {
        "model": "custom_text",
        "made_by": "real Keras 3 (samples/gen_plugins.py) with the custom layers' own Keras code",
        "custom_objects": sorted(CUSTOM_OBJECTS),
        **C.env_versions(keras_version=keras.__version__, backend=keras.backend.backend()),
        "files": files,
        "outputs": ["logits", "attention[1] (the attention weights)"],
        "params": int(model.count_params()),
    }
    np.savez_compressed(
        GOLDEN.with_suffix(".npz"), **{"input/ids": ids, "output/0": outs[0], "output/1": outs[1]}
    )
    C.dump_json(GOLDEN.with_suffix(".json"), info)
    print(f"custom_text: params={info['params']} logits std={outs[0].std():.4g}")


PLUGINS = [
    HERE.parent / "examples" / "plugins" / f"{n}.py"
    for n in ("attention_pooling", "position_embedding", "gelu_tanh")
]


def convert_all(modelgraph: str) -> None:
    """modelgraph's conversions of both files to both formats, with the plugins and without."""
    import subprocess

    CONVERTED.mkdir(parents=True, exist_ok=True)
    with_plugins = [arg for path in PLUGINS for arg in ("--plugin", str(path))]
    for source in ("keras", "h5"):
        for target in ("keras", "h5"):
            src = OUT / f"custom_text.{source}"
            for prefix, extra in (("plugin", with_plugins), ("keep_unknown", ["--keep-unknown"])):
                out = CONVERTED / f"{prefix}_from_{source}.{target}"
                argv = [
                    modelgraph,
                    *(extra if prefix == "plugin" else []),
                    "convert",
                    str(src),
                    "-o",
                    str(out),
                ]
                argv += extra if prefix == "keep_unknown" else []
                subprocess.run(argv, check=True, capture_output=True, text=True)


def verify_converted() -> None:
    """Load what modelgraph wrote with the users' custom objects and record the outputs."""
    golden = np.load(GOLDEN.with_suffix(".npz"))
    ids = golden["input/ids"]
    expected = [golden["output/0"], golden["output/1"]]
    results = {}
    for path in sorted(CONVERTED.glob("*")):
        if path.suffix not in (".keras", ".h5"):
            continue
        model = keras.models.load_model(path, custom_objects=CUSTOM_OBJECTS)
        outs = [np.asarray(o) for o in model.predict(ids, verbose=0)]
        results[path.name] = {
            "loaded_by": f"keras {keras.__version__} load_model(custom_objects=...)",
            "layer_classes": sorted({type(layer).__name__ for layer in model.layers}),
            "max_abs_diff_vs_golden": C.max_abs_diff(outs, expected),
        }
        print(path.name, results[path.name])
    C.dump_json(OUT / "converted.json", results)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--verify-converted", action="store_true")
    parser.add_argument("--modelgraph", default=str(HERE.parent / ".venv" / "bin" / "modelgraph"))
    args = parser.parse_args()
    if args.verify_converted:
        convert_all(args.modelgraph)
        verify_converted()
    else:
        make()
