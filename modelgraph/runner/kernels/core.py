"""Kernels: core family (see modelgraph/runner/registry.py for the contract).

Dense, EinsumDense, the activation layers, the inference-time identities (Dropout and the noise
layers), Embedding and Masking. The small helpers at the top (config key checking, dtype policy,
weights, axes) are shared by the other families this module's owner writes (merge, normalization,
preprocessing, applications).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from modelgraph.errors import UnsupportedConfigError, WeightsError
from modelgraph.runner.activations import elu, get_activation, softmax
from modelgraph.runner.registry import Kernel, KernelSpec, register

# --- shared helpers --------------------------------------------------------------------------

# Keys that never change what a layer computes at inference time.
_INERT_KEYS = frozenset(
    {
        "name",
        "trainable",
        "dtype",  # checked separately by check_dtype_policy
        "batch_input_shape",
        "batch_shape",
        "input_shape",
        "input_dtype",  # Keras 1: the dtype of the input a first layer declares
        "batch_size",
        "build_config",
        "activity_regularizer",
        "input_dim_hint",
    }
)
_INERT_SUFFIXES = ("_initializer", "_regularizer", "_constraint")
_QUANTIZED_PREFIXES = ("int8", "int4", "float8", "gptq", "awq")


def check_dtype_policy(spec: KernelSpec) -> None:
    """Refuse quantized dtype policies (int8/int4/float8/GPTQ/AWQ weights need dequantization)."""
    value = spec.get("dtype")
    name: Any = value
    if isinstance(value, Mapping):
        class_name = str(value.get("class_name") or "")
        inner = value.get("config")
        name = inner.get("name") if isinstance(inner, Mapping) else None
        if "Quantized" in class_name:
            raise UnsupportedConfigError(spec.class_name, "dtype", value, spec.name)
    if isinstance(name, str) and name.startswith(_QUANTIZED_PREFIXES):
        raise UnsupportedConfigError(spec.class_name, "dtype", value, spec.name)


def check_keys(spec: KernelSpec, handled: Iterable[str]) -> None:
    """Raise for any config key the kernel neither handles nor knows to be inert at inference."""
    check_dtype_policy(spec)
    handled = frozenset(handled)
    for key, value in spec.config.items():
        if key in handled or key in _INERT_KEYS or key.endswith(_INERT_SUFFIXES):
            continue
        raise UnsupportedConfigError(spec.class_name, key, value, spec.name)


def require(spec: KernelSpec, key: str, ok: bool) -> None:
    """Raise UnsupportedConfigError for ``key`` unless ``ok``."""
    if not ok:
        raise UnsupportedConfigError(spec.class_name, key, spec.get(key), spec.name)


def check_not_quantized(spec: KernelSpec) -> None:
    """Refuse Keras 3 ``quantization_config`` (set on quantized Dense/EinsumDense/Embedding)."""
    require(spec, "quantization_config", spec.get("quantization_config") is None)


def as_float(x: np.ndarray) -> np.ndarray:
    """Integer/bool inputs become float32 (Keras casts them to the compute dtype); floats stay as they are."""
    x = np.asarray(x)
    return x if x.dtype.kind == "f" else x.astype(np.float32)


def at_least_float32(x: np.ndarray) -> np.ndarray:
    """The input as floats of at least float32: where Keras computes statistics and softmax of
    half-precision inputs (``result_type(x.dtype, "float32")``)."""
    x = as_float(x)
    return x if x.dtype.itemsize >= 4 else x.astype(np.float32)


def float_kernel(fn: Callable[[np.ndarray], np.ndarray]) -> Kernel:
    """A kernel applying ``fn`` to its input as floats (see ``as_float``), returning that float dtype."""

    def run(x: np.ndarray) -> np.ndarray:
        x = as_float(x)
        return fn(x).astype(x.dtype, copy=False)

    return run


def l2_normalize(x: np.ndarray, axis: int | tuple[int, ...], keras3: bool, keras3_cap: float) -> np.ndarray:
    """``x`` divided by its L2 norm over ``axis``, as the Keras version that wrote the file does it.

    Keras 3 (``keras.ops.normalize``): ``x * min(rsqrt(sum x^2), keras3_cap)``, the cap being
    ``1 / epsilon``; tf.keras (``tf.math.l2_normalize``): ``x * rsqrt(max(sum x^2, 1e-12))``.
    """
    square_sum = np.sum(np.square(x), axis=axis, keepdims=True)
    if keras3:
        with np.errstate(divide="ignore"):
            inv = np.minimum(1 / np.sqrt(square_sum), x.dtype.type(keras3_cap))
    else:
        inv = 1 / np.sqrt(np.maximum(square_sum, x.dtype.type(1e-12)))
    return x * inv


def number(spec: KernelSpec, key: str, default: float | None, *, allow_none: bool = False) -> float | None:
    """A numeric config value (bool refused); None only when ``allow_none``."""
    value = spec.get(key, default)
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UnsupportedConfigError(spec.class_name, key, value, spec.name)
    return float(value)


def flag(spec: KernelSpec, key: str, default: bool) -> bool:
    value = spec.get(key, default)
    if not isinstance(value, bool):
        raise UnsupportedConfigError(spec.class_name, key, value, spec.name)
    return value


def axes_list(spec: KernelSpec, key: str, default: Any) -> list[int]:
    """An ``axis`` value that may be an int or a list of ints (tf.keras writes lists)."""
    value = spec.get(key, default)
    items = value if isinstance(value, list | tuple) else [value]
    if not items or any(isinstance(a, bool) or not isinstance(a, int) for a in items):
        raise UnsupportedConfigError(spec.class_name, key, value, spec.name)
    return list(items)


def positive_axes(axes: Sequence[int], ndim: int, spec: KernelSpec, key: str = "axis") -> list[int]:
    """Axes made non-negative and checked against the input rank (batch axis 0 allowed)."""
    out = []
    for a in axes:
        b = a + ndim if a < 0 else a
        if not 0 <= b < ndim:
            raise ValueError(
                f"{spec.class_name} '{spec.name}': {key}={list(axes)} is out of range for rank {ndim}"
            )
        out.append(b)
    return out


def broadcast_param(param: np.ndarray, axes: Sequence[int], ndim: int) -> np.ndarray:
    """Reshape a parameter of shape ``[shape[a] for a in sorted(axes)]`` to broadcast over rank ``ndim``."""
    if param.ndim == ndim:
        return param
    sorted_axes = sorted(axes)
    if param.ndim != len(sorted_axes):
        raise ValueError(f"parameter of shape {param.shape} does not fit axes {list(axes)} of rank {ndim}")
    shape = [1] * ndim
    for a, n in zip(sorted_axes, param.shape, strict=True):
        shape[a] = n
    return param.reshape(shape)


def _activation(spec: KernelSpec) -> Any:
    return get_activation(spec.get("activation"), spec.keras_version, spec.class_name, spec.name)


# --- Dense / EinsumDense ---------------------------------------------------------------------


def dense_weights(spec: KernelSpec) -> tuple[np.ndarray, np.ndarray | None]:
    """A float Dense layer's checked ``(kernel, bias)`` (bias None with ``use_bias=False``)."""
    check_keys(spec, {"units", "activation", "use_bias", "lora_rank", "lora_alpha", "quantization_config"})
    check_not_quantized(spec)  # LoRA is merged into the kernel when Keras saves (Dense.save_own_variables)
    use_bias = flag(spec, "use_bias", True)
    kernel = spec.weight("kernel")
    bias = spec.weight("bias") if use_bias else None
    units = spec.get("units")
    if isinstance(units, int) and kernel.shape[-1] != units:
        raise WeightsError(f"Dense '{spec.name}': kernel {kernel.shape} does not give units={units}")
    return kernel, bias


@register("Dense")
def dense(spec: KernelSpec) -> Kernel:
    kernel, bias = dense_weights(spec)
    act = _activation(spec)

    def run(x: np.ndarray) -> np.ndarray:
        y = np.matmul(as_float(x), kernel)
        if bias is not None:
            y += bias
        return act(y)

    return run


def einsum_dense_weights(spec: KernelSpec) -> tuple[str, np.ndarray, np.ndarray | None]:
    """A float EinsumDense layer's checked ``(equation, kernel, bias)`` (bias None without
    ``bias_axes``)."""
    check_keys(
        spec,
        {
            "equation",
            "output_shape",
            "bias_axes",
            "activation",
            "lora_rank",
            "lora_alpha",
            "quantization_config",
        },
    )
    check_not_quantized(spec)
    equation = spec.get("equation")
    if not isinstance(equation, str) or "->" not in equation or equation.count(",") != 1:
        raise UnsupportedConfigError(spec.class_name, "equation", equation, spec.name)
    bias_axes = spec.get("bias_axes")
    require(spec, "bias_axes", bias_axes is None or isinstance(bias_axes, str))
    kernel = spec.weight("kernel")
    bias = spec.weight("bias") if bias_axes else None
    # output_shape only fixes the kernel/bias shapes at build time; the stored weights carry them.
    require(
        spec,
        "output_shape",
        spec.get("output_shape") is None or isinstance(spec.get("output_shape"), int | list),
    )
    return equation, kernel, bias


@register("EinsumDense")
def einsum_dense(spec: KernelSpec) -> Kernel:
    equation, kernel, bias = einsum_dense_weights(spec)
    act = _activation(spec)

    def run(x: np.ndarray) -> np.ndarray:
        y = np.einsum(equation, as_float(x), kernel, optimize=True)
        if bias is not None:
            y = y + bias
        return act(y)

    return run


# --- activation layers ------------------------------------------------------------------------


@register("Activation")
def activation(spec: KernelSpec) -> Kernel:
    check_keys(spec, {"activation"})
    act = _activation(spec)

    def run(x: np.ndarray) -> np.ndarray:
        return act(np.asarray(x))

    return run


def _relu_general(
    x: np.ndarray, negative_slope: float, max_value: float | None, threshold: float
) -> np.ndarray:
    """Keras's ``relu(x, negative_slope, max_value, threshold)`` (same order of operations)."""
    if negative_slope != 0.0:
        if max_value is None and threshold == 0:
            return np.where(x > 0, x, negative_slope * x).astype(x.dtype, copy=False)
        negative_part = np.maximum(threshold - x, 0) if threshold != 0 else np.maximum(-x, 0)
    y = np.where(x > threshold, x, 0).astype(x.dtype, copy=False) if threshold != 0 else np.maximum(x, 0)
    if max_value is not None:
        y = np.clip(y, 0, max_value).astype(x.dtype, copy=False)
    if negative_slope != 0.0:
        y = (y - negative_slope * negative_part).astype(x.dtype, copy=False)
    return y


@register("ReLU")
def relu_layer(spec: KernelSpec) -> Kernel:
    # Keras 2 and 3 both write negative_slope; Keras 1 had no ReLU layer (an "alpha" key is accepted).
    check_keys(spec, {"max_value", "negative_slope", "threshold", "alpha"})
    slope_key = "negative_slope" if "negative_slope" in spec.config else "alpha"
    negative_slope = number(spec, slope_key, 0.0)
    max_value = number(spec, "max_value", None, allow_none=True)
    threshold = number(spec, "threshold", 0.0)
    assert negative_slope is not None and threshold is not None

    def run(x: np.ndarray) -> np.ndarray:
        return _relu_general(as_float(x), negative_slope, max_value, threshold)

    return run


@register("LeakyReLU")
def leaky_relu(spec: KernelSpec) -> Kernel:
    # Keras 3 writes negative_slope, tf.keras/Keras 2 alpha; the layer default is 0.3 in both.
    check_keys(spec, {"negative_slope", "alpha"})
    key = "negative_slope" if "negative_slope" in spec.config else "alpha"
    slope = number(spec, key, 0.3)
    return float_kernel(lambda x: np.where(x > 0, x, slope * x))


@register("PReLU")
def prelu(spec: KernelSpec) -> Kernel:
    check_keys(spec, {"shared_axes"})
    shared = spec.get("shared_axes")
    require(
        spec,
        "shared_axes",
        shared is None
        or isinstance(shared, int)
        or (isinstance(shared, list) and all(isinstance(a, int) for a in shared)),
    )
    alpha = spec.weight("alpha")  # shape of the input without batch, 1 on shared axes
    return float_kernel(lambda x: np.maximum(x, 0) - alpha * np.maximum(-x, 0))


@register("ELU")
def elu_layer(spec: KernelSpec) -> Kernel:
    check_keys(spec, {"alpha"})
    alpha = number(spec, "alpha", 1.0)
    assert alpha is not None
    return lambda x: elu(as_float(x), alpha)


@register("ThresholdedReLU")
def thresholded_relu(spec: KernelSpec) -> Kernel:
    check_keys(spec, {"theta"})
    theta = number(spec, "theta", 1.0)
    return float_kernel(lambda x: np.where(x > theta, x, 0))


@register("Softmax")
def softmax_layer(spec: KernelSpec) -> Kernel:
    check_keys(spec, {"axis"})
    axes = axes_list(spec, "axis", -1)
    keras3 = spec.keras_version[0] >= 3

    def run(x: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        x = as_float(x)
        dtype = x.dtype
        work = at_least_float32(x)
        axis = tuple(axes) if len(axes) > 1 else axes[0]
        if mask is None:
            return softmax(work, axis=axis).astype(dtype, copy=False)
        mask = np.asarray(mask)
        if keras3:
            # keras/src/layers/activations/softmax.py: where(mask, x, large negative), then zero the
            # masked positions (an all-masked row gives zeros, not a uniform distribution).
            keep = mask if mask.dtype == np.bool_ else mask > 0.5
            big = -3e4 if dtype == np.float16 else -1e9
            y = softmax(np.where(keep, work, work.dtype.type(big)), axis=axis)
            return np.where(keep, y, 0).astype(dtype, copy=False)
        # tf.keras: x += (1 - mask) * large negative (float16: its minimum), no zeroing afterwards.
        big = float(np.finfo(np.float16).min) if dtype == np.float16 else -1e9
        adder = (1.0 - mask.astype(work.dtype)) * work.dtype.type(big)
        return softmax(work + adder, axis=axis).astype(dtype, copy=False)

    return run


# --- identities at inference --------------------------------------------------------------------


def _identity_kernel(handled: set[str]) -> Any:
    def factory(spec: KernelSpec) -> Kernel:
        check_keys(spec, handled)

        def run(x: np.ndarray) -> np.ndarray:
            return x

        return run

    return factory


for _names, _keys in (
    (("Dropout",), {"rate", "noise_shape", "seed"}),
    (
        ("SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D"),
        {"rate", "noise_shape", "seed", "data_format"},
    ),
    (("GaussianNoise",), {"stddev", "seed"}),
    (("GaussianDropout",), {"rate", "seed"}),
    (("AlphaDropout",), {"rate", "noise_shape", "seed"}),
):
    register(*_names)(_identity_kernel(_keys))

register("ActivityRegularization")(_identity_kernel({"l1", "l2"}))
register("Identity")(_identity_kernel(set()))


# --- Embedding / Masking ------------------------------------------------------------------------


def embedding_ids(x: Any, rows: int, name: str) -> np.ndarray:
    """Token ids for an Embedding of ``rows`` rows: floats truncated to int32 as Keras casts them;
    IndexError naming the layer for ids outside ``[0, rows)``."""
    ids = np.asarray(x)
    if ids.dtype.kind == "f":
        ids = ids.astype(np.int32)
    elif ids.dtype.kind not in "iu":
        ids = ids.astype(np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= rows):
        raise IndexError(
            f"Embedding '{name}': ids must lie in [0, {rows}); got range [{ids.min()}, {ids.max()}]"
        )
    return ids


def embedding_table(spec: KernelSpec) -> np.ndarray:
    """A float Embedding layer's checked table."""
    check_keys(
        spec,
        {
            "input_dim",
            "output_dim",
            "mask_zero",  # the mask is a separate tensor; the output itself does not change
            "input_length",  # tf.keras shape hint
            "lora_rank",
            "lora_alpha",
            "quantization_config",
            "sparse",
        },
    )
    check_not_quantized(spec)
    flag(spec, "mask_zero", False)
    require(spec, "sparse", not spec.get("sparse", False))
    table = spec.weight("embeddings")
    return table


@register("Embedding")
def embedding(spec: KernelSpec) -> Kernel:
    table = embedding_table(spec)
    rows = table.shape[0]

    def run(x: np.ndarray) -> np.ndarray:
        return np.take(table, embedding_ids(x, rows, spec.name), axis=0)

    return run


@register("Masking")
def masking(spec: KernelSpec) -> Kernel:
    check_keys(spec, {"mask_value"})
    mask_value = number(spec, "mask_value", 0.0)

    def run(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        keep = np.any(x != mask_value, axis=-1, keepdims=True)
        return x * keep.astype(x.dtype)

    return run
