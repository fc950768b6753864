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


def _perturbed(model: keras.Model, seed: int) -> keras.Model:
    """Every weight moved off its initial value (non-zero biases, like a trained model)."""
    rng = np.random.default_rng(seed)
    model.set_weights([w + rng.normal(0, 0.2, w.shape).astype(w.dtype) for w in model.get_weights()])
    return model


def mha_int_mask() -> keras.Model:
    """MultiHeadAttention scores followed by Softmax(axis=1) (over the heads).

    ``cross``: an explicit int32 0/1 ``attention_mask`` input (the inputs have rows that are all 0).
    ``self``: a query masked by Embedding(mask_zero=True) with ``use_causal_mask=True``. Both return
    their scores; the scores keep the mask the layer's softmax applied, so the Softmax after them
    zeroes the masked positions (in Keras 3 on both backends).
    """
    q = keras.Input((4, 6), name="query")
    v = keras.Input((5, 6), name="value")
    m = keras.Input((4, 5), dtype="int32", name="mask")
    tokens = keras.Input((4,), dtype="int32", name="tokens")
    out, scores = keras.layers.MultiHeadAttention(2, 3, name="cross")(
        q, v, attention_mask=m, return_attention_scores=True
    )
    heads = keras.layers.Softmax(axis=1, name="cross_heads")(scores)
    e = keras.layers.Embedding(7, 6, mask_zero=True, name="embed")(tokens)
    out2, scores2 = keras.layers.MultiHeadAttention(3, 2, name="self")(
        e, e, use_causal_mask=True, return_attention_scores=True
    )
    heads2 = keras.layers.Softmax(axis=1, name="self_heads")(scores2)
    model = keras.Model([q, v, m, tokens], [out, heads, out2, heads2], name="mha_int_mask")
    return _perturbed(model, 34)


def mha_int_mask_inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(8)
    mask = rng.integers(0, 2, size=(3, 4, 5)).astype("int32")
    mask[0, 1, :] = 0  # fully masked query rows
    mask[2, 3, :] = 0
    tokens = rng.integers(1, 7, size=(3, 4)).astype("int32")
    tokens[0, 2:] = 0
    tokens[1, 0] = 0  # a masked first query: its causal row is fully masked
    return {
        "query": rng.normal(size=(3, 4, 6)).astype("float32"),
        "value": rng.normal(size=(3, 5, 6)).astype("float32"),
        "mask": mask,
        "tokens": tokens,
    }


def _save_k3(name: str, build, inputs: dict[str, np.ndarray], backend: str) -> None:
    """JAX writes the model files; each backend writes its golden of the same file."""
    if backend == "jax":
        model = build()
        model.save(OUT / f"{name}.keras")
        model.save(OUT / f"{name}.h5")
    model = keras.saving.load_model(OUT / f"{name}.keras")
    ys = model(inputs, training=False)
    ys = ys if isinstance(ys, (list, tuple)) else [ys]
    golden = {f"input/{k}": v for k, v in inputs.items()}
    golden.update({f"output/{n}": np.asarray(y) for n, y in zip(model.output_names, ys, strict=True)})
    np.savez(OUT / f"{name}.{backend}.npz", **golden)


def main() -> None:
    backend = keras.backend.backend()
    OUT.mkdir(exist_ok=True)
    keras.utils.set_random_seed(33)
    _save_k3(
        "fused_output",
        fused_output,
        {"signal": np.random.default_rng(7).normal(size=(2, 6, 2)).astype("float32")},
        backend,
    )
    keras.utils.set_random_seed(34)
    _save_k3("mha_int_mask", mha_int_mask, mha_int_mask_inputs(), backend)


if __name__ == "__main__":
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    main()
