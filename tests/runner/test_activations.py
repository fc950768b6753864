"""The activation table (modelgraph/runner/activations.py) against Keras goldens and known values."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from modelgraph.errors import UnsupportedConfigError
from modelgraph.runner.activations import (
    activation_name,
    erf,
    gelu_exact,
    gelu_tanh,
    get_activation,
    known_activations,
    sigmoid,
)

GOLDENS = Path(__file__).resolve().parents[2] / "samples" / "kernels" / "core"
ACTIVATION_CASES = sorted(GOLDENS.glob("*activation_*.npz"))

K3_NAMES = {
    "linear", "relu", "relu6", "sigmoid", "tanh", "softplus", "softsign", "exponential", "elu", "selu",
    "softmax", "log_softmax", "hard_sigmoid", "hard_silu", "hard_swish", "silu", "swish", "gelu",
    "leaky_relu", "mish", "celu", "glu", "squareplus", "sparse_plus", "soft_shrink", "hard_shrink",
    "hard_tanh", "tanh_shrink", "log_sigmoid", "sparse_sigmoid", "sparsemax",
}  # fmt: skip


def _version(text: str) -> tuple[int, int, int]:
    major, minor, patch = (int(p) for p in text.split(".")[:3])
    return (major, minor, patch)


def test_activation_goldens_cover_every_keras3_name():
    names = {json.loads(str(np.load(p)["config"]))["activation"] for p in ACTIVATION_CASES}
    # Keras 3 serialises swish as "silu" and hard_swish as "hard_silu"; tf.keras writes "swish".
    assert K3_NAMES - {"hard_swish"} <= names
    assert set(known_activations()) >= K3_NAMES


@pytest.mark.parametrize("path", ACTIVATION_CASES, ids=[p.stem for p in ACTIVATION_CASES])
def test_activation_golden(path: Path):
    with np.load(path) as z:
        config = json.loads(str(z["config"]))
        x, expected, version = z["inputs/0"], z["outputs/0"], _version(str(z["keras_version"]))
    got = get_activation(config["activation"], version)(x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-4)


def test_hard_sigmoid_depends_on_the_writing_version():
    x = np.array([-4.0, -2.0, 0.0, 1.0, 2.0, 4.0], np.float32)
    k2 = get_activation("hard_sigmoid", (2, 15, 0))(x)
    k1 = get_activation("hard_sigmoid", (1, 2, 2))(x)
    k3 = get_activation("hard_sigmoid", (3, 15, 1))(x)
    np.testing.assert_allclose(k2, [0.0, 0.1, 0.5, 0.7, 0.9, 1.0], atol=1e-7)
    np.testing.assert_array_equal(k1, k2)
    np.testing.assert_allclose(k3, [0.0, 1 / 6, 0.5, 4 / 6, 5 / 6, 1.0], atol=1e-7)


def test_gelu_is_exact_for_the_activation():
    x = np.array([-3.0, -1.0, 0.5, 1.0, 2.5], np.float32)
    exact = [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.tolist()]
    np.testing.assert_allclose(get_activation("gelu")(x), exact, rtol=2e-7, atol=1e-7)
    np.testing.assert_allclose(gelu_exact(x), exact, rtol=2e-7, atol=1e-7)
    # the tanh form differs visibly (that is Keras 3's ops.gelu default, not the activation)
    assert np.max(np.abs(gelu_tanh(x) - np.array(exact, np.float32))) > 1e-4


def test_erf_accuracy():
    z = np.linspace(-6, 6, 2001)
    ref = np.array([math.erf(v) for v in z])
    assert np.max(np.abs(erf(z) - ref)) < 2e-7


def test_sigmoid_tails_are_accurate():
    x = np.array([-80.0, -30.0, -10.0, 0.0, 10.0, 30.0, 80.0], np.float32)
    ref = np.array([1 / (1 + math.exp(-v)) for v in x.tolist()])
    got = sigmoid(x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=0)


def test_selu_elu_constants():
    x = np.array([-2.0, -0.5, 0.0, 1.5], np.float32)
    alpha, scale = 1.6732632423543772, 1.0507009873554805
    ref = [scale * (v if v > 0 else alpha * math.expm1(v)) for v in x.tolist()]
    np.testing.assert_allclose(get_activation("selu")(x), ref, rtol=1e-6)
    np.testing.assert_allclose(
        get_activation("elu")(x), [v if v > 0 else math.expm1(v) for v in x.tolist()], rtol=1e-6
    )


def test_function_leaky_relu_slope_is_02():
    np.testing.assert_allclose(get_activation("leaky_relu")(np.array([-1.0], np.float32)), [-0.2])


@pytest.mark.parametrize("name", sorted(K3_NAMES))
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_every_activation_keeps_float_dtypes(name, dtype):
    x = np.linspace(-5, 5, 24, dtype=np.float64).reshape(2, 12).astype(dtype)
    for version in ((2, 15, 0), (3, 15, 1)):
        y = get_activation(name, version)(x)
        assert y.dtype == dtype, (name, y.dtype)
        assert y.shape == ((2, 6) if name == "glu" else x.shape)
        assert np.all(np.isfinite(y.astype(np.float64))), name


def test_float16_matches_float32_closely():
    x = np.linspace(-5, 5, 64, dtype=np.float32)
    for name in ("gelu", "silu", "mish", "softplus", "selu", "sigmoid", "tanh"):
        f = get_activation(name)
        np.testing.assert_allclose(f(x.astype(np.float16)).astype(np.float32), f(x), atol=5e-3, rtol=5e-3)


def test_bfloat16_when_available():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.linspace(-3, 3, 8, dtype=np.float32).astype(ml_dtypes.bfloat16)
    for name in sorted(K3_NAMES):
        assert get_activation(name)(x).dtype == x.dtype, name


def test_config_value_forms():
    x = np.array([-1.0, 2.0], np.float32)
    assert activation_name(None) == "linear"
    np.testing.assert_array_equal(get_activation(None)(x), x)
    record = {
        "module": "keras.activations",
        "class_name": "function",
        "config": "relu",
        "registered_name": "relu",
    }
    np.testing.assert_array_equal(get_activation(record)(x), [0.0, 2.0])
    k3_record = {"module": "keras.src.activations.activations", "class_name": "function", "config": "tanh"}
    np.testing.assert_allclose(get_activation(k3_record)(x), np.tanh(x))
    tf_record = {"module": "tf_keras.activations", "class_name": "function", "config": "swish"}
    np.testing.assert_allclose(get_activation(tf_record, (2, 15, 0))(x), x / (1 + np.exp(-x)), rtol=1e-6)


@pytest.mark.parametrize(
    "value",
    [
        "no_such_activation",
        "threshold",  # Keras 3's threshold(x, threshold, default_value) has required arguments
        {"module": "my_project.acts", "class_name": "function", "config": "relu"},
        {"class_name": "LeakyReLU", "config": {"negative_slope": 0.1}},
        7,
    ],
)
def test_unknown_activation_raises(value):
    with pytest.raises(UnsupportedConfigError) as info:
        get_activation(value, (3, 15, 1), "Dense", "dense_3")
    assert info.value.key == "activation"
    assert info.value.class_name == "Dense"
    assert info.value.layer == "dense_3"
