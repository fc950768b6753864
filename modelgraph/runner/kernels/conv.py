"""Reference kernels: conv family (see modelgraph/runner/registry.py for the contract).

Plain NumPy that states Keras's semantics; the speed paths (im2col/GEMM blocking, Winograd, fused
bottlenecks, threading) live in ``modelgraph/runner/fast/conv.py`` and are chosen at plan time in
place of these (``modelgraph run --reference``, ``Runner(graph, reference=True)`` runs these only).

Semantics (docs/runner.md, "Convolutions"): TF ``SAME`` padding puts the extra pixel after;
``causal`` pads ``(k-1)*d`` on the left; kernels are ``(k..., in/groups, filters)`` with the
filters of group g at ``g*filters/groups ...``, transposed kernels ``(k..., filters, in)``, depthwise
``(k..., in, depth_multiplier)`` with output channel ``c*dm + m``; a separable conv is a depthwise
conv (no bias) then a 1x1 conv. The bias is added, then the activation applied, to the output as
laid out (a ``channels_first`` conv's ``softmax`` normalises its last, spatial axis).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from modelgraph.catalogue.conv import check_groups
from modelgraph.layer_params import check_keys, data_format, depthwise_weight_name, int_tuple
from modelgraph.runner.activations import activation_name, get_activation
from modelgraph.runner.kernels.conv_utils import (
    WindowParams,
    channels_last_input,
    float_dtype,
    from_last,
    out_sizes,
    pad_spatial,
    ranked_factory,
    taps,
    window_params,
)
from modelgraph.runner.registry import Kernel, KernelSpec, register

CONV_KEYS = (
    "filters",
    "kernel_size",
    "strides",
    "padding",
    "data_format",
    "dilation_rate",
    "groups",
    "activation",
    "use_bias",
)
# tf.keras DepthwiseConv* configs also carry Conv's "filters" (None) and "groups" (1).
DEPTHWISE_KEYS = (
    "kernel_size",
    "strides",
    "padding",
    "data_format",
    "dilation_rate",
    "depth_multiplier",
    "activation",
    "use_bias",
    "filters",
    "groups",
)


def weight(spec: KernelSpec, name: str, dtype: np.dtype) -> np.ndarray:
    """A float weight in the kernel's compute dtype."""
    return np.asarray(spec.weight(name), dtype=dtype)


def bias_of(spec: KernelSpec, dtype: np.dtype, size: int) -> np.ndarray | None:
    """The layer's bias (None with ``use_bias=False``), checked to hold ``size`` values."""
    use_bias = spec.get("use_bias", True)
    if use_bias not in (True, False, None):
        raise spec.unsupported("use_bias", use_bias)
    if use_bias is False:
        return None
    bias = weight(spec, "bias", dtype).reshape(-1)
    if bias.shape != (size,):
        raise ValueError(
            f"{spec.class_name} layer '{spec.name}': bias shape {bias.shape}, expected ({size},)"
        )
    return bias


def check_kernel(spec: KernelSpec, kernel: np.ndarray, kernel_size: tuple[int, ...], rank: int) -> None:
    """A kernel of rank ``rank + 2`` whose leading axes are ``kernel_size``."""
    if kernel.ndim != rank + 2 or tuple(kernel.shape[:rank]) != kernel_size:
        raise ValueError(
            f"{spec.class_name} layer '{spec.name}': kernel shape {kernel.shape} does not match "
            f"kernel_size {kernel_size}"
        )


def groups_of(spec: KernelSpec, filters: int | None = None) -> int:
    """The ``groups`` option (1 when absent), checked by the one rule shape inference uses
    (:func:`modelgraph.catalogue.conv.check_groups`), with the kernel's ``filters`` when given."""
    try:
        groups = check_groups(spec.get("groups"), None, None)
    except TypeError:
        raise spec.unsupported("groups", spec.get("groups")) from None
    try:
        return check_groups(groups, None, filters)
    except ValueError as exc:
        raise ValueError(f"{spec.class_name} layer '{spec.name}': {exc}") from None


def depthwise_params(spec: KernelSpec, rank: int) -> tuple[Any, ...]:
    """``(data_format, kernel_size, strides, dilation, padding mode, depth_multiplier)``."""
    w = window_params(spec, rank, conv_modes(rank))
    mult = spec.get("depth_multiplier", 1)
    if not isinstance(mult, int) or isinstance(mult, bool) or mult < 1:
        raise spec.unsupported("depth_multiplier", mult)
    return w.fmt, w.kernel_size, w.strides, w.dilation, w.mode, mult


def conv_modes(rank: int) -> tuple[str, ...]:
    """The paddings a ConvND layer takes: ``causal`` only in 1-D."""
    return ("valid", "same", "causal") if rank == 1 else ("valid", "same")


# --- the reference computations (channels-last, already padded) --------------------------------


def reference_conv(
    x: np.ndarray, kernel: np.ndarray, strides: tuple[int, ...], dilation: tuple[int, ...], groups: int
) -> np.ndarray:
    """``y[b, o..., f] = sum over taps t and the channels c of f's group of
    x[b, o*s + t*d, c] * kernel[t, c, f]`` for a padded channels-last ``x``."""
    ks = kernel.shape[:-2]
    cin_g, filters = kernel.shape[-2:]
    f_g = filters // groups
    out = out_sizes(x.shape[1:-1], ks, strides, dilation)
    y = np.zeros((x.shape[0], *out, filters), dtype=x.dtype)
    for tap, window in taps(ks, strides, dilation, out):
        patch = x[(slice(None), *window)]
        for g in range(groups):
            y[..., g * f_g : (g + 1) * f_g] += (
                patch[..., g * cin_g : (g + 1) * cin_g] @ kernel[tap][:, g * f_g : (g + 1) * f_g]
            )
    return y


def reference_depthwise(
    x: np.ndarray, kernel: np.ndarray, strides: tuple[int, ...], dilation: tuple[int, ...]
) -> np.ndarray:
    """``y[b, o..., c*M + m] = sum over taps t of x[b, o*s + t*d, c] * kernel[t, c, m]``."""
    ks = kernel.shape[:-2]
    channels, mult = kernel.shape[-2:]
    out = out_sizes(x.shape[1:-1], ks, strides, dilation)
    y = np.zeros((x.shape[0], *out, channels, mult), dtype=x.dtype)
    for tap, window in taps(ks, strides, dilation, out):
        y += x[(slice(None), *window)][..., None] * kernel[tap]
    return y.reshape(*y.shape[:-2], channels * mult)


def transpose_length(
    size: int, kernel: int, stride: int, dilation: int, mode: str, output_padding: int | None
) -> int:
    """Output length of a transposed conv (Keras ``compute_conv_transpose_output_shape``)."""
    effective = (kernel - 1) * dilation + 1
    if mode == "valid":
        extra = max(effective, stride) - effective if output_padding is None else output_padding
        return (size - 1) * stride + effective + extra
    if output_padding is None:
        return size * stride
    return (size - 1) * stride + effective % 2 + output_padding


# --- kernels ------------------------------------------------------------------------------------


def _laid_out(
    spec: KernelSpec,
    rank: int,
    channels: int,
    bias: np.ndarray | None,
    compute: Callable[[np.ndarray], np.ndarray],
) -> Kernel:
    """``run(x)``: ``x`` moved to channels-last, ``compute`` (unpadded channels-last in and out), the
    bias, the output moved back to the layer's layout, then the activation on it as laid out."""
    dtype = float_dtype(spec)
    fmt = data_format(spec)
    value = spec.get("activation")
    act = (
        None
        if activation_name(value) == "linear"
        else get_activation(value, spec.keras_version, spec.class_name)
    )

    def run(inputs: Any) -> np.ndarray:
        x = channels_last_input(inputs, dtype, fmt, rank, channels)
        y = compute(x)
        if bias is not None:
            y = y + bias
        y = from_last(y, fmt)
        return y if act is None else act(y)

    return run


@dataclass(frozen=True)
class ConvParams(WindowParams):
    """A Conv layer's options and weights, read and checked once (the reference and fast kernels
    both build from this)."""

    groups: int
    kernel: np.ndarray
    cin_g: int
    filters: int
    bias: np.ndarray | None


def conv_params(spec: KernelSpec, rank: int) -> ConvParams:
    """The checked :class:`ConvParams` of a ConvND layer of spatial rank ``rank``."""
    check_keys(spec, CONV_KEYS)
    w = window_params(spec, rank, conv_modes(rank))
    dtype, kernel_size = w.dtype, w.kernel_size
    groups = groups_of(spec)
    kernel = weight(spec, "kernel", dtype)
    check_kernel(spec, kernel, kernel_size, rank)
    cin_g, filters = kernel.shape[-2:]
    groups_of(spec, filters)
    if spec.get("filters") not in (None, filters):
        raise ValueError(f"{spec.class_name} layer '{spec.name}': kernel {kernel.shape} vs filters")
    bias = bias_of(spec, dtype, filters)
    return ConvParams(**vars(w), groups=groups, kernel=kernel, cin_g=cin_g, filters=filters, bias=bias)


@dataclass(frozen=True)
class DepthwiseParams(WindowParams):
    """A DepthwiseConv layer's options and weights, read and checked once."""

    mult: int
    kernel: np.ndarray
    channels: int
    bias: np.ndarray | None


def depthwise_conv_params(spec: KernelSpec, rank: int) -> DepthwiseParams:
    """The checked :class:`DepthwiseParams` of a DepthwiseConvND layer."""
    check_keys(spec, DEPTHWISE_KEYS)
    if spec.get("filters") is not None:
        raise spec.unsupported("filters", spec.get("filters"))
    if spec.get("groups", 1) not in (1, None):
        raise spec.unsupported("groups", spec.get("groups"))
    dtype = float_dtype(spec)
    fmt, kernel_size, strides, dilation, mode, mult = depthwise_params(spec, rank)
    kernel = weight(spec, depthwise_weight_name(spec.weights), dtype)
    check_kernel(spec, kernel, kernel_size, rank)
    if kernel.shape[-1] != mult:
        raise ValueError(f"{spec.class_name} layer '{spec.name}': kernel {kernel.shape} vs depth_multiplier")
    channels = kernel.shape[-2]
    bias = bias_of(spec, dtype, channels * mult)
    return DepthwiseParams(dtype, fmt, kernel_size, strides, dilation, mode, mult, kernel, channels, bias)


@dataclass(frozen=True)
class SeparableParams(WindowParams):
    """A SeparableConv layer's options and weights, read and checked once; ``pointwise`` is the
    ``(channels * mult, filters)`` matrix."""

    mult: int
    depthwise: np.ndarray
    pointwise: np.ndarray
    channels: int
    filters: int
    bias: np.ndarray | None


def separable_params(spec: KernelSpec, rank: int) -> SeparableParams:
    """The checked :class:`SeparableParams` of a SeparableConvND layer."""
    check_keys(spec, DEPTHWISE_KEYS)
    if spec.get("groups", 1) not in (1, None):
        raise spec.unsupported("groups", spec.get("groups"))
    dtype = float_dtype(spec)
    fmt, kernel_size, strides, dilation, mode, mult = depthwise_params(spec, rank)
    depthwise = weight(spec, "depthwise_kernel", dtype)
    check_kernel(spec, depthwise, kernel_size, rank)
    channels = depthwise.shape[-2]
    pointwise = weight(spec, "pointwise_kernel", dtype)
    filters = pointwise.shape[-1]
    if depthwise.shape[-1] != mult or pointwise.size != channels * mult * filters:
        raise ValueError(
            f"{spec.class_name} layer '{spec.name}': kernels {depthwise.shape}, {pointwise.shape}"
        )
    if spec.get("filters") not in (None, filters):
        raise ValueError(
            f"{spec.class_name} layer '{spec.name}': filters vs pointwise kernel {pointwise.shape}"
        )
    pointwise = pointwise.reshape(channels * mult, filters)
    bias = bias_of(spec, dtype, filters)
    return SeparableParams(
        dtype, fmt, kernel_size, strides, dilation, mode, mult, depthwise, pointwise, channels, filters, bias
    )


def _make_conv(spec: KernelSpec, rank: int) -> Kernel:
    p = conv_params(spec, rank)

    def compute(x: np.ndarray) -> np.ndarray:
        return reference_conv(pad_spatial(x, p.pads(x)), p.kernel, p.strides, p.dilation, p.groups)

    return _laid_out(spec, rank, p.cin_g * p.groups, p.bias, compute)


def _make_depthwise(spec: KernelSpec, rank: int) -> Kernel:
    p = depthwise_conv_params(spec, rank)

    def compute(x: np.ndarray) -> np.ndarray:
        return reference_depthwise(pad_spatial(x, p.pads(x)), p.kernel, p.strides, p.dilation)

    return _laid_out(spec, rank, p.channels, p.bias, compute)


def _make_separable(spec: KernelSpec, rank: int) -> Kernel:
    p = separable_params(spec, rank)

    def compute(x: np.ndarray) -> np.ndarray:
        mid = reference_depthwise(pad_spatial(x, p.pads(x)), p.depthwise, p.strides, p.dilation)
        return mid @ p.pointwise

    return _laid_out(spec, rank, p.channels, p.bias, compute)


def _make_transpose(spec: KernelSpec, rank: int) -> Kernel:
    """``y[b, i*s + t*d - crop, f] += x[b, i, c] * kernel[t, f, c]``: every input pixel scatters one
    tap-weighted copy per kernel tap, then the result is cropped to Keras's output length (TF derives
    the crop from the forward conv of the output size back to the input size)."""
    check_keys(spec, (*CONV_KEYS, "output_padding"))
    if spec.get("groups", 1) not in (1, None):
        raise spec.unsupported("groups", spec.get("groups"))
    w = window_params(spec, rank, ("valid", "same"))
    dtype, kernel_size, strides, dilation, mode = w.dtype, w.kernel_size, w.strides, w.dilation, w.mode
    output_padding = (
        None if spec.get("output_padding") is None else int_tuple(spec, "output_padding", rank, 0)
    )
    kernel = weight(spec, "kernel", dtype)
    check_kernel(spec, kernel, kernel_size, rank)
    filters, cin = kernel.shape[-2:]
    if spec.get("filters") not in (None, filters):
        raise ValueError(f"{spec.class_name} layer '{spec.name}': kernel {kernel.shape} vs filters")
    ktot = int(np.prod(kernel_size))
    # (k..., F, Cin) -> (Cin, k..., F): one matmul gives every tap's contribution at once.
    flat = np.ascontiguousarray(np.moveaxis(kernel, -1, 0).reshape(cin, ktot * filters))
    ops = output_padding or (None,) * rank

    def compute(x: np.ndarray) -> np.ndarray:
        batch, sizes = x.shape[0], x.shape[1:-1]
        lengths = [
            transpose_length(n, k, s, d, mode, op)
            for n, k, s, d, op in zip(sizes, kernel_size, strides, dilation, ops, strict=True)
        ]
        starts = []
        for n, k, s, d, length in zip(sizes, kernel_size, strides, dilation, lengths, strict=True):
            full = (n - 1) * s + (k - 1) * d + 1
            starts.append(max(full - length, 0) // 2 if mode == "same" else 0)
        spans = [
            max((n - 1) * s + (k - 1) * d + 1, b + length)
            for n, k, s, d, b, length in zip(
                sizes, kernel_size, strides, dilation, starts, lengths, strict=True
            )
        ]
        contrib = (x.reshape(-1, cin) @ flat).reshape(batch, *sizes, *kernel_size, filters)
        buf = np.zeros((batch, *spans, filters), dtype=dtype)
        lead = (slice(None),) * (rank + 1)
        for tap, sl in taps(kernel_size, strides, dilation, sizes):
            buf[(slice(None), *sl)] += contrib[(*lead, *tap)]
        crop = tuple(slice(b, b + length) for b, length in zip(starts, lengths, strict=True))
        return buf[(slice(None), *crop)]

    return _laid_out(spec, rank, cin, bias_of(spec, dtype, filters), compute)


# --- the registered factories (``modelgraph/runner/fast/__init__.py`` keys the fast kernels by them) ---
conv1d = register("Conv1D", "Convolution1D")(ranked_factory(_make_conv, 1, name="conv1d"))
conv2d = register("Conv2D", "Convolution2D")(ranked_factory(_make_conv, 2, name="conv2d"))
conv3d = register("Conv3D", "Convolution3D")(ranked_factory(_make_conv, 3, name="conv3d"))
depthwise_conv1d = register("DepthwiseConv1D")(ranked_factory(_make_depthwise, 1, name="depthwise_conv1d"))
depthwise_conv2d = register("DepthwiseConv2D")(ranked_factory(_make_depthwise, 2, name="depthwise_conv2d"))
separable_conv1d = register("SeparableConv1D", "SeparableConvolution1D")(
    ranked_factory(_make_separable, 1, name="separable_conv1d")
)
separable_conv2d = register("SeparableConv2D", "SeparableConvolution2D")(
    ranked_factory(_make_separable, 2, name="separable_conv2d")
)
conv1d_transpose = register("Conv1DTranspose", "Convolution1DTranspose")(
    ranked_factory(_make_transpose, 1, name="conv1d_transpose")
)
conv2d_transpose = register("Conv2DTranspose", "Convolution2DTranspose", "Deconvolution2D", "Deconv2D")(
    ranked_factory(_make_transpose, 2, name="conv2d_transpose")
)
conv3d_transpose = register("Conv3DTranspose", "Convolution3DTranspose", "Deconvolution3D", "Deconv3D")(
    ranked_factory(_make_transpose, 3, name="conv3d_transpose")
)
