"""Keras activation functions in NumPy, attached as the kernels of the catalogue's built-in activations.

The catalogue registers each name (:mod:`modelgraph.catalogue.activations`) as a plugin registers its
own; :func:`get_activation` looks a config's activation up there, as the Keras version that wrote the
file means it: ``hard_sigmoid`` is ``clip(0.2x + 0.5, 0, 1)`` in Keras 1/2 and ``relu6(x + 3) / 6`` in
Keras 3 (one entry each); ``hard_silu``/``hard_swish`` follow the Keras 3 definition.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from modelgraph import catalogue
from modelgraph.errors import UnsupportedConfigError
from modelgraph.runner import rowwise

Activation = Callable[[np.ndarray], np.ndarray]

_SELU_ALPHA = 1.6732632423543772
_SELU_SCALE = 1.0507009873554805


def sigmoid(x: np.ndarray) -> np.ndarray:
    """Numerically stable logistic function that keeps the input dtype (accurate in both tails)."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


def softplus(x: np.ndarray) -> np.ndarray:
    """log(1 + exp(x)) without overflow."""
    return np.logaddexp(x.dtype.type(0), x)


def softmax(x: np.ndarray, axis: int | tuple[int, ...] = -1) -> np.ndarray:
    """Softmax over ``axis`` with the max subtracted first, like Keras."""
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax(x: np.ndarray, axis: int | tuple[int, ...] = -1) -> np.ndarray:
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def relu(x: np.ndarray) -> np.ndarray:
    return rowwise.relu_(x, np.empty_like(x))


def elu(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))).astype(x.dtype, copy=False)


def erf(z: np.ndarray) -> np.ndarray:
    """Vectorised erf in float64 (Chebyshev fit, relative error below 1.2e-7 everywhere)."""
    z = np.asarray(z, dtype=np.float64)
    a = np.abs(z)
    t = 1.0 / (1.0 + 0.5 * a)
    poly = -1.26551223 + t * (
        1.00002368
        + t
        * (
            0.37409196
            + t
            * (
                0.09678418
                + t
                * (
                    -0.18628806
                    + t
                    * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))
                )
            )
        )
    )
    erfc = t * np.exp(-a * a + poly)
    return np.where(z >= 0, 1.0 - erfc, erfc - 1.0)


def gelu_exact(x: np.ndarray) -> np.ndarray:
    """0.5 x (1 + erf(x / sqrt(2))), the Keras activation ``gelu`` (approximate=False)."""
    x64 = x.astype(np.float64)
    return (0.5 * x64 * (1.0 + erf(x64 / np.sqrt(2.0)))).astype(x.dtype)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """The tanh approximation of GELU (the Keras 3 op ``Gelu`` with ``approximate=True``)."""
    c = np.sqrt(2.0 / np.pi)
    return (0.5 * x * (1 + np.tanh(c * (x + 0.044715 * x**3)))).astype(x.dtype, copy=False)


def hard_sigmoid_keras2(x: np.ndarray) -> np.ndarray:
    return np.clip(0.2 * x + 0.5, 0, 1).astype(x.dtype, copy=False)


def hard_sigmoid_keras3(x: np.ndarray) -> np.ndarray:
    return (np.clip(x + 3, 0, 6) / 6).astype(x.dtype, copy=False)


def sparsemax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Sparsemax over ``axis`` exactly as Keras 3 computes it (every backend, 3.15.1).

    Keras's threshold is ``tau = (sum of the cumulative sums over the support - 1) / k``, not the
    paper's ``(cumsum[k] - 1) / k`` (``keras/src/backend/*/nn.py::sparsemax``); the two agree when
    the support has one element. We follow Keras, since the runner must match it.
    """
    moved = np.moveaxis(x, axis, -1)
    z = -np.sort(-moved, axis=-1)
    cumsum = np.cumsum(z, axis=-1)
    r = np.arange(1, z.shape[-1] + 1, dtype=x.dtype)
    support = z - (cumsum - 1) / r > 0
    k = np.sum(support, axis=-1, keepdims=True).astype(x.dtype)
    tau = (np.sum(np.where(support, cumsum, 0), axis=-1, keepdims=True) - 1) / k
    out = np.maximum(moved - tau, 0)
    return np.moveaxis(out, -1, axis).astype(x.dtype, copy=False)


def _glu(x: np.ndarray, axis: int = -1) -> np.ndarray:
    a, b = np.split(x, 2, axis=axis)
    return a * sigmoid(b)


def _lowp_safe(fn: Activation) -> Activation:
    """Run ``fn`` in float32 for float16/bfloat16 (and integer) inputs, returning the input's float dtype.

    NumPy has no bfloat16 and several of the formulas above would lose too much precision (or overflow)
    in float16; TensorFlow's CPU kernels also compute half-precision activations in float32.
    """

    def wrapped(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        dtype = x.dtype
        if dtype == np.float32 or dtype == np.float64:
            return fn(x)
        if dtype.kind in "iub":
            return fn(x.astype(np.float32))
        return fn(x.astype(np.float32)).astype(dtype)

    wrapped.__name__ = getattr(fn, "__name__", "activation")
    wrapped.__doc__ = fn.__doc__
    return wrapped


def _relu6(x: np.ndarray) -> np.ndarray:
    return rowwise.relu6_(x, np.empty_like(x))


def leaky_relu(x: np.ndarray, negative_slope: float = 0.2) -> np.ndarray:
    # The function form (keras.activations.leaky_relu / tf.nn.leaky_relu) defaults to 0.2;
    # the LeakyReLU *layer* defaults to 0.3 (see kernels/core.py).
    return np.where(x > 0, x, negative_slope * x).astype(x.dtype, copy=False)


def celu(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    return (np.maximum(x, 0) + alpha * np.expm1(np.minimum(x, 0) / alpha)).astype(x.dtype, copy=False)


def squareplus(x: np.ndarray, b: float = 4) -> np.ndarray:
    return ((x + np.sqrt(x * x + b)) / 2).astype(x.dtype, copy=False)


def _sparse_plus(x: np.ndarray) -> np.ndarray:
    return np.where(x <= -1, 0, np.where(x < 1, 0.25 * (x + 1) ** 2, x)).astype(x.dtype, copy=False)


def soft_shrink(x: np.ndarray, threshold: float = 0.5) -> np.ndarray:
    t = threshold
    return np.where(x > t, x - t, np.where(x < -t, x + t, 0)).astype(x.dtype, copy=False)


def hard_shrink(x: np.ndarray, threshold: float = 0.5) -> np.ndarray:
    return np.where(np.abs(x) > threshold, x, 0).astype(x.dtype, copy=False)


def _sparse_sigmoid(x: np.ndarray) -> np.ndarray:
    return np.where(x <= -1, 0, np.where(x >= 1, 1, 0.5 * (x + 1))).astype(x.dtype, copy=False)


def _silu(x: np.ndarray) -> np.ndarray:
    """``x * sigmoid(x)``, for float32/float64 as ``x / (1 + exp(-x))`` (:func:`rowwise.silu_`: four
    in-place passes chunk by chunk in cache instead of sigmoid's eight over the whole tensor; as
    accurate: largest relative error against float64 2.3e-7, sigmoid's way 2.9e-7). float16 (which
    would overflow below -11) keeps sigmoid's way."""
    if x.dtype not in (np.float32, np.float64):
        return x * sigmoid(x)
    return rowwise.silu_(x, np.empty_like(x))


def _hard_silu(x: np.ndarray) -> np.ndarray:
    return x * hard_sigmoid_keras3(x)


def _linear(x: np.ndarray) -> np.ndarray:
    return x


def _kernel(name: str, fn: Activation, keras_version: str | None = None) -> None:
    """Attach ``fn`` (run in float32 for half precision and integers) to the built-in activation ``name``."""
    catalogue.attach_function("activation", name, "kernel", _lowp_safe(fn), keras_version)


catalogue.attach_function("activation", "linear", "kernel", _linear)
_kernel("relu", relu)
_kernel("relu6", _relu6)
_kernel("sigmoid", sigmoid)
_kernel("tanh", np.tanh)
_kernel("softplus", softplus)
_kernel("softsign", lambda x: x / (1 + np.abs(x)))
_kernel("exponential", np.exp)
_kernel("elu", elu)
_kernel("selu", lambda x: (_SELU_SCALE * elu(x, _SELU_ALPHA)).astype(x.dtype, copy=False))
_kernel("softmax", softmax)
_kernel("log_softmax", log_softmax)
_kernel("hard_sigmoid", hard_sigmoid_keras2, keras_version="2")
_kernel("hard_sigmoid", hard_sigmoid_keras3, keras_version="3")
_kernel("hard_silu", _hard_silu)
_kernel("hard_swish", _hard_silu)
_kernel("swish", _silu)
_kernel("silu", _silu)
_kernel("gelu", gelu_exact)
_kernel("leaky_relu", leaky_relu)
_kernel("mish", lambda x: x * np.tanh(softplus(x)))
_kernel("celu", celu)
_kernel("glu", _glu)
_kernel("squareplus", squareplus)
_kernel("sparse_plus", _sparse_plus)
_kernel("soft_shrink", soft_shrink)
_kernel("hard_shrink", hard_shrink)
_kernel("hard_tanh", lambda x: np.clip(x, -1, 1).astype(x.dtype, copy=False))
_kernel("tanh_shrink", lambda x: x - np.tanh(x))
_kernel("log_sigmoid", lambda x: -softplus(-x))
_kernel("sparse_sigmoid", _sparse_sigmoid)
_kernel("sparsemax", sparsemax)

_KERAS_FUNCTION_MODULES = ("keras.activations", "keras.src.activations", "tf_keras.activations")


def activation_name(value: Any) -> str | None:
    """The activation name a config value denotes (a name, None for ``linear``, a Keras function
    record, or a registered custom function's record), or None when it names none of them."""
    if value is None:
        return "linear"
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and value.get("class_name") == "function":
        module = value.get("module") or ""
        name = value.get("config")
        if isinstance(name, str) and module.startswith(_KERAS_FUNCTION_MODULES):
            return name
        registered = catalogue.function_spec("activation", name, builtin=False)
        if registered is not None:
            return registered.name
    return None


def get_activation(
    value: Any,
    keras_version: tuple[int, int, int] = (3, 0, 0),
    class_name: str = "Activation",
    layer: str | None = None,
) -> Activation:
    """The activation a config value (name string, None, or Keras function dict) denotes, as the
    Keras version that wrote the file means it (``keras_version``: ``hard_sigmoid`` differs between 2
    and 3), from the catalogue's registered activations (modelgraph's own and plugins'); an unknown
    name raises :class:`UnsupportedConfigError` naming ``class_name``, ``activation`` and ``layer``."""
    name = activation_name(value)
    spec = catalogue.function_spec("activation", name, keras_version[0]) if name is not None else None
    if spec is None or not callable(spec.kernel):
        raise UnsupportedConfigError(class_name, "activation", value, layer)
    return spec.kernel


def known_activations() -> list[str]:
    """Every built-in activation name the runner implements."""
    return catalogue.builtin_activations()
