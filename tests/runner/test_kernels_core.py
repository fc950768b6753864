"""Core / merge / normalization / preprocessing / applications kernels against Keras-made goldens.

The goldens (``samples/kernels/core/*.npz``) come from ``samples/kernels/make_core_goldens.py``, run
with Keras 3.15.1 and with tf.keras 2 (``k2_*``); see that script for the file layout.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from modelgraph.errors import UnsupportedConfigError, WeightsError
from modelgraph.runner.registry import KernelSpec, get_entry, get_kernel, supported

GOLDENS = Path(__file__).resolve().parents[2] / "samples" / "kernels" / "core"
CASES = sorted(GOLDENS.glob("*.npz"))

ATOL, RTOL = 1e-5, 1e-4

OUR_CLASSES = {
    # core
    "Dense", "EinsumDense", "Activation", "ReLU", "LeakyReLU", "PReLU", "ELU", "Softmax",
    "ThresholdedReLU", "Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D",
    "GaussianNoise", "GaussianDropout", "AlphaDropout", "ActivityRegularization", "Identity",
    "Embedding", "Masking",
    # merge
    "Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum", "Concatenate", "Dot",
    # normalization
    "BatchNormalization", "LayerNormalization", "GroupNormalization", "UnitNormalization",
    # preprocessing
    "Rescaling", "Normalization",
    # applications
    "LayerScale", "CustomScaleLayer",
}  # fmt: skip
TRAINING_SENSITIVE = {
    "Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "GaussianNoise",
    "GaussianDropout", "AlphaDropout", "BatchNormalization",
}  # fmt: skip


def version_tuple(text: str) -> tuple[int, int, int]:
    parts = [int("".join(ch for ch in p if ch.isdigit()) or 0) for p in text.split(".")[:3]]
    major, minor, patch = (parts + [0, 0, 0])[:3]
    return (major, minor, patch)


def load(path: Path):
    with np.load(path, allow_pickle=False) as z:
        data = {k: z[k] for k in z.files}
    config = json.loads(str(data["config"]))
    class_name = str(data["class_name"])
    weights = {k[len("weights/") :]: v for k, v in data.items() if k.startswith("weights/")}
    n_in = len([k for k in data if k.startswith("inputs/")])
    inputs = [data[f"inputs/{i}"] for i in range(n_in)]
    kwargs = {k[len("kwargs/") :]: v for k, v in data.items() if k.startswith("kwargs/")}
    spec = KernelSpec(
        name=path.stem,
        class_name=class_name,
        config=config,
        weights=weights,
        keras_version=version_tuple(str(data["keras_version"])),
    )
    return spec, inputs, kwargs, str(data["call"]), data["outputs/0"]


def run_spec(spec: KernelSpec, inputs, kwargs, call: str):
    fn = get_kernel(spec.class_name)(spec)
    return fn(list(inputs), **kwargs) if call == "list" else fn(*inputs, **kwargs)


def test_goldens_exist():
    assert len(CASES) >= 150
    classes = {str(np.load(p)["class_name"]) for p in CASES}
    assert classes >= OUR_CLASSES, sorted(OUR_CLASSES - classes)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_golden(path: Path):
    spec, inputs, kwargs, call, expected = load(path)
    got = run_spec(spec, inputs, kwargs, call)
    assert isinstance(got, np.ndarray)
    assert got.shape == expected.shape
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    np.testing.assert_allclose(got, expected, atol=ATOL, rtol=RTOL)


def test_registered():
    keys = set(supported())
    assert keys >= OUR_CLASSES
    for name in OUR_CLASSES:
        assert get_entry(name).training_sensitive == (name in TRAINING_SENSITIVE), name


def test_float32_stays_float32():
    for path in CASES:
        spec, inputs, kwargs, call, expected = load(path)
        if expected.dtype == np.float32 and all(x.dtype == np.float32 for x in inputs):
            assert run_spec(spec, inputs, kwargs, call).dtype == np.float32, path.stem


# --- unsupported options ---------------------------------------------------------------------


def _spec(class_name, config, weights=None, version=(3, 15, 1)):
    return KernelSpec("layer_x", class_name, config, weights or {}, version)


DENSE_W = {"kernel": np.ones((3, 2), np.float32), "bias": np.zeros(2, np.float32)}


@pytest.mark.parametrize(
    ("class_name", "config", "weights", "key"),
    [
        ("Dense", {"units": 2, "activation": "no_such_activation"}, DENSE_W, "activation"),
        ("Dense", {"units": 2, "mystery_option": 1}, DENSE_W, "mystery_option"),
        ("Dense", {"units": 2, "quantization_config": {"mode": "int8"}}, DENSE_W, "quantization_config"),
        (
            "Dense",
            {
                "units": 2,
                "dtype": {"class_name": "QuantizedDTypePolicy", "config": {"name": "int8_from_float32"}},
            },
            DENSE_W,
            "dtype",
        ),
        ("Dense", {"units": 2, "dtype": "int8_from_float32"}, DENSE_W, "dtype"),
        ("Dense", {"units": 2, "use_bias": "yes"}, DENSE_W, "use_bias"),
        ("ReLU", {"max_value": "big"}, None, "max_value"),
        ("LeakyReLU", {"negative_slope": None}, None, "negative_slope"),
        ("Softmax", {"axis": "last"}, None, "axis"),
        (
            "Embedding",
            {"input_dim": 3, "output_dim": 2, "sparse": True},
            {"embeddings": np.ones((3, 2))},
            "sparse",
        ),
        ("Concatenate", {"axis": [1, 2]}, None, "axis"),
        ("Dot", {"axes": [1, 2, 3]}, None, "axes"),
        ("Dot", {"axes": 1, "normalize": 1}, None, "normalize"),
        ("Add", {"something_new": True}, None, "something_new"),
        ("BatchNormalization", {"axis": -1, "virtual_batch_size": 4}, None, "virtual_batch_size"),
        ("BatchNormalization", {"axis": "channels"}, None, "axis"),
        ("LayerNormalization", {"axis": -1, "rms_scaling": "sometimes"}, None, "rms_scaling"),
        ("GroupNormalization", {"groups": 0}, None, "groups"),
        ("Rescaling", {"scale": "half"}, None, "scale"),
        ("Normalization", {"axis": -1, "mean": [1.0], "variance": None}, None, "variance"),
        ("Normalization", {"axis": "x", "mean": [1.0], "variance": [1.0]}, None, "axis"),
        ("CustomScaleLayer", {"scale": None}, None, "scale"),
        ("Dropout", {"rate": 0.5, "new_dropout_mode": "x"}, None, "new_dropout_mode"),
    ],
)
def test_unsupported_option_names_key(class_name, config, weights, key):
    with pytest.raises(UnsupportedConfigError) as info:
        get_kernel(class_name)(_spec(class_name, config, weights))
    assert info.value.key == key
    assert info.value.class_name == class_name
    assert info.value.layer == "layer_x"
    assert key in str(info.value)


def test_quantized_weights_refused():
    w = {"kernel": np.ones((3, 2), np.int8), "bias": np.zeros(2, np.float32)}
    with pytest.raises(UnsupportedConfigError):
        get_kernel("Dense")(_spec("Dense", {"units": 2}, w))


def test_missing_weight_names_what_exists():
    with pytest.raises(WeightsError, match="kernel"):
        get_kernel("Dense")(_spec("Dense", {"units": 2}, {"bias": np.zeros(2, np.float32)}))


def test_inert_keys_accepted():
    config = {
        "name": "d",
        "trainable": False,
        "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}},
        "units": 2,
        "activation": "linear",
        "use_bias": True,
        "kernel_initializer": {"class_name": "GlorotUniform", "config": {}},
        "bias_regularizer": None,
        "kernel_constraint": None,
        "activity_regularizer": None,
        "batch_input_shape": [None, 3],
        # Keras merges LoRA into the saved kernel (Dense.save_own_variables), so it is accepted
        "lora_rank": 2,
        "lora_alpha": 2,
        "quantization_config": None,
    }
    fn = get_kernel("Dense")(_spec("Dense", config, DENSE_W))
    assert fn(np.ones((1, 3), np.float32)).tolist() == [[3.0, 3.0]]


# --- behaviour the goldens do not pin down ------------------------------------------------------


def test_dense_n_d_and_int_input():
    fn = get_kernel("Dense")(_spec("Dense", {"units": 2}, DENSE_W))
    assert fn(np.ones((2, 4, 5, 3), np.float32)).shape == (2, 4, 5, 2)
    assert fn(np.ones((1, 3), np.int32)).dtype == np.float32


def test_embedding_out_of_range_raises():
    fn = get_kernel("Embedding")(
        _spec("Embedding", {"input_dim": 3, "output_dim": 2}, {"embeddings": np.ones((3, 2), np.float32)})
    )
    with pytest.raises(IndexError):
        fn(np.array([[0, 3]]))
    with pytest.raises(IndexError):
        fn(np.array([[-1, 0]]))


def test_custom_scale_accepts_two_args():
    fn = get_kernel("CustomScaleLayer")(_spec("CustomScaleLayer", {"scale": 0.5}))
    a, b = np.ones((1, 2), np.float32), np.full((1, 2), 4, np.float32)
    assert fn([a, b]).tolist() == [[3.0, 3.0]]
    assert fn(a, b).tolist() == [[3.0, 3.0]]


def test_layer_scale_keras3_auto_name():
    gamma = np.array([1.0, 2.0], np.float32)
    fn = get_kernel("LayerScale")(
        _spec("LayerScale", {"init_values": 1e-6, "projection_dim": 2}, {"variable_17": gamma})
    )
    assert fn(np.ones((1, 2), np.float32)).tolist() == [[1.0, 2.0]]


def test_float16_inputs_keep_dtype():
    x = np.linspace(-3, 3, 12, dtype=np.float16).reshape(2, 6)
    bn = get_kernel("BatchNormalization")(
        _spec(
            "BatchNormalization",
            {"axis": -1},
            {
                "gamma": np.ones(6, np.float32),
                "beta": np.zeros(6, np.float32),
                "moving_mean": np.zeros(6, np.float32),
                "moving_variance": np.ones(6, np.float32),
            },
        )
    )
    assert bn(x).dtype == np.float16
    ln = get_kernel("LayerNormalization")(
        _spec(
            "LayerNormalization",
            {"axis": -1},
            {"gamma": np.ones(6, np.float32), "beta": np.zeros(6, np.float32)},
        )
    )
    assert ln(x).dtype == np.float16
    sm = get_kernel("Softmax")(_spec("Softmax", {"axis": -1}))
    out = sm(x)
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float32).sum(-1), 1.0, atol=2e-3)


@pytest.mark.parametrize("invert", [False, True])
@pytest.mark.parametrize(
    "x",
    [
        np.random.default_rng(0).uniform(0, 255, (2, 5, 7, 3)).astype(np.float32),  # rows of W * C
        np.random.default_rng(1).uniform(0, 255, (2, 7, 5, 3)).astype(np.float32).transpose(0, 2, 1, 3),
        np.random.default_rng(2).uniform(0, 255, (4, 3)).astype(np.float32),
    ],
    ids=["contiguous", "strided", "rank2"],
)
def test_per_channel_normalization_on_rows_is_the_broadcast_formula_bit_for_bit(x, invert):
    """Normalization's per-channel mean and variance run on rows of W x C values (a long inner loop)
    where the input is C-contiguous; the values are those of Keras's formula as NumPy broadcasts it."""
    mean = np.array([123.7, 116.3, 103.5])
    variance = np.array([58.4, 57.1, 57.4]) ** 2
    config = {"axis": -1, "mean": mean.tolist(), "variance": variance.tolist(), "invert": invert}
    got = get_kernel("Normalization")(_spec("Normalization", config))(x)
    m = mean.astype(np.float32)
    d = np.maximum(np.sqrt(variance), 1e-7).astype(np.float32)
    expected = m + x * d if invert else (x - m) / d
    assert got.shape == x.shape and got.dtype == np.float32
    np.testing.assert_array_equal(got, expected)
