"""Keras 3 quantized layers: ``model.quantize("int8")`` (Dense, EinsumDense, Embedding) and
``model.quantize("int4")`` (Dense, EinsumDense, Embedding).

int8: Keras stores the kernel (or embedding table) as int8 with a float32 scale per output unit
(per row for Embedding). Dense and EinsumDense also quantize their *input* on every call: an abs-max
quantizer over the contracted axes gives int8 values and a scale, the integer product is taken
(exact here in float64), cast to float32 and divided by ``input_scale * kernel_scale``; then the
bias and the activation. Embedding gathers int8 rows and divides by their row scales.

int4: two values per stored int8 along the output axis (low nibble first). With ``block_size > 0``
(Keras's default, 128) weights are asymmetric per group of input rows: ``(w - zero[g]) * scale[g]``
with ``g = g_idx[row]``, and the float input multiplies the dequantized kernel. With
``block_size = -1`` they are symmetric per output channel, divided by the scale (the input is
quantized as for int8 only when the config names an activation quantizer).

Keras 3.15.1 cannot quantize ellipsis EinsumDense equations, nor reload a quantized
MultiHeadAttention; the float kernels refuse integer weights, so such files are refused, not run
with int8 values read as numbers.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from modelgraph import catalogue
from modelgraph.errors import UnsupportedConfigError, WeightsError
from modelgraph.runner.activations import get_activation
from modelgraph.runner.kernels.core import embedding_ids
from modelgraph.runner.registry import Kernel, KernelSpec

_F32 = np.float32


def abs_max_quantize(
    x: np.ndarray,
    axes: int | Sequence[int] = -1,
    value_range: tuple[float, float] = (-127, 127),
    epsilon: float = 1e-7,
) -> tuple[np.ndarray, np.ndarray]:
    """Keras's ``AbsMaxQuantizer`` over ``axes``: ``(int values as float32, scale with those axes
    kept as 1)``, in float32 as Keras computes it."""
    x = np.asarray(x, dtype=_F32)
    axes = (axes,) if isinstance(axes, int) else tuple(axes)
    scale = _F32(value_range[1]) / (np.max(np.abs(x), axis=axes, keepdims=True) + _F32(epsilon))
    q = np.clip(np.round(x * scale), value_range[0], value_range[1])
    return q.astype(_F32), scale.astype(_F32)


_ABS_MAX_DEFAULT: tuple[tuple[float, float], float] = ((-127, 127), 1e-7)


def activation_quantizer(
    spec: KernelSpec, default: tuple[tuple[float, float], float] | None
) -> tuple[tuple[float, float], float] | None:
    """``(value_range, epsilon)`` of the layer's ``AbsMaxQuantizer`` for its inputs, ``default`` when
    ``quantization_config`` does not say, None when it names no activation quantizer."""
    qc = spec.get("quantization_config")
    if not isinstance(qc, Mapping):
        return default
    inner = qc.get("config") or {}
    if "activation_quantizer" not in inner:
        return default
    act_q = inner.get("activation_quantizer")
    if act_q is None:
        return None
    if not isinstance(act_q, Mapping) or act_q.get("class_name") != "AbsMaxQuantizer":
        raise spec.unsupported("quantization_config", act_q)
    cfg = act_q.get("config") or {}
    value_range = tuple(cfg.get("value_range", _ABS_MAX_DEFAULT[0]))
    epsilon = float(cfg.get("epsilon", _ABS_MAX_DEFAULT[1]))
    entry = catalogue.spec_for(spec.class_name)
    fixed = entry.input_quantizer_axis if entry is not None else None
    if fixed is not None and cfg.get("axis", fixed) not in (fixed, None, [fixed], (fixed,)):
        raise spec.unsupported("activation_quantizer.axis", cfg.get("axis"))
    return value_range, epsilon  # type: ignore[return-value]


def int8_input_quantizer(spec: KernelSpec) -> tuple[tuple[float, float], float]:
    """``(value_range, epsilon)`` of an int8 layer's input quantizer (a weight-only int8 layer is refused)."""
    quantizer = activation_quantizer(spec, _ABS_MAX_DEFAULT)
    if quantizer is None:
        raise spec.unsupported("quantization_config", "weight-only int8")
    return quantizer


def int8_kernel(spec: KernelSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``(int8 kernel as float64, kernel_scale, bias)``."""
    kernel = spec.weight("kernel", integer=True)
    if kernel.dtype != np.int8:
        raise spec.unsupported("kernel dtype", str(kernel.dtype))
    scale = spec.weight("kernel_scale", integer=True).astype(_F32)
    bias = spec.weight("bias", integer=True).astype(_F32) if "bias" in spec.weights else None
    return kernel.astype(np.float64), scale, bias


def int8_dense(spec: KernelSpec) -> Kernel:
    """``(q(x) @ W) / (x_scale * kernel_scale) + bias``, then the activation; ``x`` quantized per row."""
    value_range, epsilon = int8_input_quantizer(spec)
    kernel, kernel_scale, bias = int8_kernel(spec)
    act = get_activation(spec.get("activation"), spec.keras_version, "Dense", spec.name)

    def run(x: np.ndarray) -> np.ndarray:
        q, x_scale = abs_max_quantize(x, -1, value_range, epsilon)
        y = (q.astype(np.float64) @ kernel).astype(_F32)  # exact integer sums
        y = y / (x_scale * kernel_scale)
        if bias is not None:
            y = y + bias
        return act(y)

    return run


def _to_output_layout(scale: np.ndarray, labels: str, out: str) -> np.ndarray:
    """A scale over ``labels`` (size 1 on the contracted ones) laid out to broadcast on ``out``."""
    kept = [label for label in labels if label in out]
    squeezed = scale.reshape([n for n, label in zip(scale.shape, labels, strict=True) if label in out])
    ordered = np.transpose(squeezed, [kept.index(label) for label in out if label in kept])
    return ordered.reshape([squeezed.shape[kept.index(label)] if label in kept else 1 for label in out])


def plain_equation(spec: KernelSpec) -> tuple[str, str, str, str]:
    """``(equation, input labels, kernel labels, output labels)`` of a quantized EinsumDense; its
    equation must have no ellipsis (Keras 3.15 cannot quantize those)."""
    equation = spec.get("equation")
    if not isinstance(equation, str) or "..." in equation or "->" not in equation or equation.count(",") != 1:
        raise spec.unsupported("equation", equation)
    operands, out = equation.replace(" ", "").split("->")
    labels, ker = operands.split(",")
    if not (labels.isalpha() and ker.isalpha() and out.isalpha()):
        raise spec.unsupported("equation", equation)
    return equation, labels, ker, out


def int8_einsum_kernel(
    spec: KernelSpec, equation: str, ker: str, out: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``(int8 kernel, kernel scale laid out on the output labels, bias)`` of an int8 EinsumDense
    whose kernel labels are ``ker`` and output labels ``out``."""
    kernel, kernel_scale, bias = int8_kernel(spec)
    if kernel.ndim != len(ker):
        raise WeightsError(f"EinsumDense '{spec.name}': kernel {kernel.shape} does not fit '{equation}'")
    if kernel_scale.ndim == len(ker) and kernel_scale.ndim != len(out):
        kernel_scale = _to_output_layout(kernel_scale, ker, out)
    elif kernel_scale.ndim != len(out):
        raise spec.unsupported("weights/kernel_scale shape", list(kernel_scale.shape))
    return kernel, kernel_scale, bias


def int8_einsum_dense(spec: KernelSpec) -> Kernel:
    """An int8 EinsumDense ``in,ker->out`` (no ellipsis): the input quantized over its contracted
    axes, the integer einsum, divided by both scales laid out on the output."""
    equation, labels, ker, out = plain_equation(spec)
    value_range, epsilon = int8_input_quantizer(spec)
    kernel, kernel_scale, bias = int8_einsum_kernel(spec, equation, ker, out)
    reduced = tuple(i for i, label in enumerate(labels) if label not in out)
    act = get_activation(spec.get("activation"), spec.keras_version, "EinsumDense", spec.name)

    def run(x: np.ndarray) -> np.ndarray:
        if np.ndim(x) != len(labels):
            raise ValueError(
                f"EinsumDense '{equation}' expects a rank-{len(labels)} input, got {np.shape(x)}"
            )
        q, x_scale = abs_max_quantize(x, reduced, value_range, epsilon)
        y = np.einsum(equation, q.astype(np.float64), kernel).astype(_F32)  # exact integer sums
        y = y / (_to_output_layout(x_scale, labels, out) * kernel_scale)
        if bias is not None:
            y = y + bias
        return act(y)

    return run


def int8_embedding(spec: KernelSpec) -> Kernel:
    """Rows of the int8 table divided by their row scales."""
    table = spec.weight("embeddings", integer=True)
    if table.dtype != np.int8:
        raise spec.unsupported("embeddings dtype", str(table.dtype))
    scale = spec.weight("embeddings_scale", integer=True).astype(_F32).reshape(table.shape[0])
    rows = table.shape[0]

    def run(x: np.ndarray) -> np.ndarray:
        ids = embedding_ids(x, rows, spec.name)
        return table[ids].astype(_F32) / scale[ids][..., None]

    return run


def unpack_int4(packed: np.ndarray, length: int) -> np.ndarray:
    """Signed int4 values (as int8) from two-per-byte storage along the last axis, low nibble
    first, cut to ``length``."""
    raw = np.asarray(packed)
    if raw.dtype not in (np.int8, np.uint8) or raw.ndim < 1 or raw.shape[-1] != (length + 1) // 2:
        # e.g. an older Keras layout packed along the input axis: refused, not misread.
        raise WeightsError(
            f"int4 weights {raw.dtype}{list(raw.shape)} are not {length} values packed two per byte "
            "along the last axis (Keras 3.15's layout)"
        )
    raw = raw.view(np.uint8)
    low, high = raw & 0x0F, raw >> 4
    pairs = np.stack([low, high], axis=-1).reshape(*raw.shape[:-1], 2 * raw.shape[-1])
    values = (pairs.astype(np.int8) ^ 8) - 8
    return values[..., :length]


def _grouped(
    spec: KernelSpec, scale: str, zero: str, length: int, axis: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(scale, zero, groups)`` of sub-channel int4 weights, or None for per-channel ones:
    ``g_idx`` maps each of ``length`` rows (Dense) or columns (Embedding) to a group along ``axis``
    of the scale and zero point; WeightsError unless it indexes them."""
    if zero not in spec.weights:
        return None
    groups = spec.weight("g_idx", integer=True).astype(np.int64)
    scales = spec.weight(scale, integer=True).astype(_F32)
    count = scales.shape[axis] if scales.ndim else 0
    if groups.shape != (length,) or groups.min(initial=0) < 0 or groups.max(initial=0) >= count:
        raise WeightsError(f"{spec.class_name} '{spec.name}': g_idx does not index the {count} groups")
    return scales, spec.weight(zero, integer=True).astype(_F32), groups


def int4_dense_weights(spec: KernelSpec) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """``(unpacked kernel codes, the dequantized kernel when quantized per group else None, bias)``
    of an int4 Dense; per output channel, the codes are divided by ``kernel_scale`` after the matmul."""
    units = spec.get("units")
    if not isinstance(units, int) or isinstance(units, bool) or units < 1:
        raise spec.unsupported("units", units)
    codes = unpack_int4(spec.weight("kernel", integer=True), units).astype(_F32)
    bias = spec.weight("bias", integer=True).astype(_F32) if "bias" in spec.weights else None
    grouped = _grouped(spec, "kernel_scale", "kernel_zero", codes.shape[0], axis=0)
    if grouped is None:
        return codes, None, bias
    scale, zero, groups = grouped
    return codes, (codes - zero[groups]) * scale[groups], bias


def int4_dense(spec: KernelSpec) -> Kernel:
    """An int4 Dense: the kernel dequantized per group (asymmetric) or per output channel."""
    codes, kernel, bias = int4_dense_weights(spec)
    act = get_activation(spec.get("activation"), spec.keras_version, "Dense", spec.name)
    if kernel is not None:

        def run(x: np.ndarray) -> np.ndarray:
            y = np.asarray(x, dtype=_F32) @ kernel
            return act(y if bias is None else y + bias)

        return run
    kernel_scale = spec.weight("kernel_scale", integer=True).astype(_F32)
    quantizer = activation_quantizer(spec, None)

    def run_per_channel(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=_F32)
        scale = kernel_scale
        if quantizer is not None:
            x, x_scale = abs_max_quantize(x, -1, *quantizer)
            scale = scale * x_scale
        y = (x.astype(np.float64) @ codes.astype(np.float64)).astype(_F32) / scale
        return act(y if bias is None else y + bias)

    return run_per_channel


def int4_flat_kernel(spec: KernelSpec) -> np.ndarray:
    """An int4 EinsumDense's dequantized ``(rows, columns)`` kernel, as Keras flattens it (see
    :func:`int4_einsum_dense`)."""
    scale = spec.weight("kernel_scale", integer=True).astype(_F32)
    if scale.ndim not in (1, 2):
        raise spec.unsupported("weights/kernel_scale shape", list(scale.shape))
    codes = unpack_int4(spec.weight("kernel", integer=True), scale.shape[-1]).astype(_F32)
    if codes.ndim != 2:
        raise WeightsError(f"EinsumDense '{spec.name}': int4 kernel {list(codes.shape)} is not 2-D")
    grouped = _grouped(spec, "kernel_scale", "kernel_zero", codes.shape[0], axis=0)
    if grouped is not None:
        group_scale, zero, groups = grouped
        flat = (codes - zero[groups]) * group_scale[groups]
    elif scale.shape != (codes.shape[1],):
        raise spec.unsupported("weights/kernel_scale shape", list(scale.shape))
    else:
        with np.errstate(divide="ignore", invalid="ignore"):  # a zero scale gives inf / NaN, as in Keras
            flat = codes / scale
    return flat


def int4_einsum_kernel(
    spec: KernelSpec, equation: str, flat: np.ndarray, sample: tuple[int, ...]
) -> np.ndarray:
    """The flattened int4 kernel ``flat`` reshaped back to the kernel shape that an input of sample
    shape ``sample`` gives the EinsumDense (checked to flatten to ``flat``)."""
    from modelgraph.shape_rules import einsum_int4_flat_shape
    from modelgraph.shape_rules.core import einsum_dense_analysis

    kernel_shape = einsum_dense_analysis(spec.config, (None, *sample))[1]
    if einsum_int4_flat_shape(equation, kernel_shape) != flat.shape:
        raise WeightsError(
            f"EinsumDense '{spec.name}': int4 kernel {list(flat.shape)} does not flatten a "
            f"{list(kernel_shape)} kernel for '{equation}' on an input of sample shape {list(sample)}"
        )
    return flat.reshape(kernel_shape)


def int4_einsum_dense(spec: KernelSpec) -> Kernel:
    """An int4 EinsumDense ``in,ker->out`` (no ellipsis). Keras flattens the kernel to ``(rows,
    columns)`` (the contracted axes, the others) by a plain reshape, quantizes that like an int4
    Dense kernel and, on every call, dequantizes it (per group, asymmetric; or divided by the
    per-column scale) and reshapes it back to the kernel's shape, which the input's shape and
    ``output_shape`` decide; then the float einsum (of the quantized input, divided by its scale,
    when the config names an activation quantizer), the bias and the activation."""
    equation, labels, ker, out = plain_equation(spec)
    flat = int4_flat_kernel(spec)
    bias = spec.weight("bias", integer=True).astype(_F32) if "bias" in spec.weights else None
    act = get_activation(spec.get("activation"), spec.keras_version, "EinsumDense", spec.name)
    quantizer = activation_quantizer(spec, None)
    reduced = tuple(i for i, label in enumerate(labels) if label not in out)
    # The kernel's shape depends on the input's sample shape: its reshaped view, by sample shape.
    kernels: dict[tuple[int, ...], np.ndarray] = {}

    def kernel_for(shape: tuple[int, ...]) -> np.ndarray:
        sample = shape[1:]
        if sample not in kernels:
            kernels[sample] = int4_einsum_kernel(spec, equation, flat, sample)
        return kernels[sample]

    def run(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=_F32)
        if x.ndim != len(labels):
            raise ValueError(f"EinsumDense '{equation}' expects a rank-{len(labels)} input, got {x.shape}")
        kernel = kernel_for(x.shape)
        if quantizer is None:
            y = np.einsum(equation, x, kernel, optimize=True)
        else:
            q, x_scale = abs_max_quantize(x, reduced, *quantizer)
            y = np.einsum(equation, q, kernel, optimize=True) / _to_output_layout(x_scale, labels, out)
        return act(y if bias is None else y + bias)

    return run


def int4_embedding_table(spec: KernelSpec) -> np.ndarray:
    """An int4 Embedding's table, dequantized per group (asymmetric) or divided by its row scale."""
    width = spec.get("output_dim")
    if not isinstance(width, int) or isinstance(width, bool) or width < 1:
        raise spec.unsupported("output_dim", width)
    table = unpack_int4(spec.weight("embeddings", integer=True), width).astype(_F32)
    grouped = _grouped(spec, "embeddings_scale", "embeddings_zero", width, axis=-1)
    if grouped is None:
        row_scale = spec.weight("embeddings_scale", integer=True).astype(_F32).reshape(table.shape[0])
        # The whole table is divided at plan time: a row whose scale is 0 (a row Keras quantized from
        # zeros) is NaN as Keras makes it, but only matters when an id looks it up; no warning here.
        with np.errstate(divide="ignore", invalid="ignore"):
            return table / row_scale[:, None]
    scale, zero, groups = grouped
    return (table - zero[:, groups]) * scale[:, groups]


def int4_embedding(spec: KernelSpec) -> Kernel:
    """An int4 Embedding: a lookup in the dequantized table (:func:`int4_embedding_table`)."""
    table = int4_embedding_table(spec)
    rows = table.shape[0]

    def run(x: np.ndarray) -> np.ndarray:
        return table[embedding_ids(x, rows, spec.name)]

    return run


#: The quantized layers modelgraph runs and exports, (mode, class name) -> the name of the function
#: that implements each, here (the kernel) and in ``saving/onnx/mappings/quantized.py`` (the mapping).
QUANTIZED_LAYERS: dict[tuple[str, str], str] = {
    ("int8", "Dense"): "int8_dense",
    ("int8", "EinsumDense"): "int8_einsum_dense",
    ("int8", "Embedding"): "int8_embedding",
    ("int4", "Dense"): "int4_dense",
    ("int4", "EinsumDense"): "int4_einsum_dense",
    ("int4", "Embedding"): "int4_embedding",
}


def by_mode(module: Any) -> dict[tuple[str, str], Callable[..., Any]]:
    """``module``'s implementation of every quantized layer, by (mode, class name)."""
    return {key: getattr(module, name) for key, name in QUANTIZED_LAYERS.items()}


KERNELS: dict[tuple[str, str], Callable[[KernelSpec], Kernel]] = by_mode(sys.modules[__name__])


def quantized_kernel(spec: KernelSpec, mode: str) -> Kernel:
    """The kernel of a layer saved with a quantized dtype policy (``mode``: "int8", "int4", ...)."""
    factory = KERNELS.get((mode, spec.class_name))
    if factory is None:
        raise UnsupportedConfigError(spec.class_name, "dtype", mode, spec.name)
    return factory(spec)
