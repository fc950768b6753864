"""Convolutions: Conv1D/2D/3D, DepthwiseConv1D/2D, SeparableConv1D/2D, Conv1D/2D/3DTranspose.

Semantics: ``modelgraph/runner/kernels/conv.py``. Keras kernels are ``(k..., in/groups, filters)``;
ONNX's are ``(filters, in/groups, k...)``. A depthwise kernel ``(k..., in, multiplier)`` is a
grouped convolution with ``group = in`` whose output channel ``c * multiplier + m`` reads
``kernel[..., c, m]``. Inputs are taken channels-first (``_spatial.channels_first_perm``); the output
stays channels-first for the next window op.
"""

from __future__ import annotations

import numpy as np

from modelgraph.layer_params import check_keys, data_format, depthwise_weight_name, int_tuple, padding_mode
from modelgraph.runner.kernels.conv import depthwise_params, groups_of
from modelgraph.saving.onnx.emitter import Value
from modelgraph.saving.onnx.mappings._spatial import (
    channels_first_perm,
    out_value,
    spatial_sizes,
    window_pads,
)
from modelgraph.saving.onnx.mappings.core import activation_of, as_float
from modelgraph.saving.onnx.registry import MapContext, register_ranks

_CONV_KEYS = ("filters", "kernel_size", "strides", "padding", "data_format", "dilation_rate", "groups",
              "activation", "use_bias")  # fmt: skip
_DW_KEYS = ("kernel_size", "strides", "padding", "data_format", "dilation_rate", "depth_multiplier",
            "activation", "use_bias", "filters", "groups")  # fmt: skip


def onnx_kernel(kernel: np.ndarray) -> np.ndarray:
    """(k..., in/groups, filters) -> (filters, in/groups, k...)."""
    rank = kernel.ndim - 2
    return np.ascontiguousarray(np.transpose(kernel, (rank + 1, rank, *range(rank))))


def depthwise_as_grouped(kernel: np.ndarray) -> np.ndarray:
    """(k..., in, mult) -> (in * mult, 1, k...), output channel c * mult + m."""
    rank = kernel.ndim - 2
    flat = kernel.reshape(*kernel.shape[:rank], -1)
    return np.ascontiguousarray(np.moveaxis(flat, -1, 0)[:, None])


def _bias(ctx: MapContext) -> np.ndarray | None:
    use_bias = ctx.get("use_bias", True)
    if use_bias not in (True, False, None):
        raise ctx.unsupported("use_bias", use_bias)
    return None if use_bias is False else ctx.weight("bias").reshape(-1)


def emit_conv(
    ctx: MapContext,
    x: Value,
    rank: int,
    weight: np.ndarray,
    bias: np.ndarray | None,
    group: int,
    strides: tuple[int, ...],
    dilation: tuple[int, ...],
    mode: str,
    fmt: str,
    hint: str = "conv",
    sizes: tuple[int | None, ...] | None = None,
) -> Value:
    """A Conv on ``x`` taken channels-first; ``sizes`` (the input's spatial sizes, for explicit
    ``same`` pads) default to the node's input shape."""
    perm = channels_first_perm(fmt, rank)
    xin = ctx.e.in_layout(x, perm)
    if sizes is None:
        sizes = spatial_sizes(ctx, fmt)
    pads, auto_pad = window_pads(mode, sizes, weight.shape[2:], strides, dilation)
    inputs = [xin, ctx.const(weight, "kernel")]
    if bias is not None:
        inputs.append(ctx.const(bias, "bias"))
    y = ctx.e.op(
        "Conv",
        inputs,
        hint,
        kernel_shape=list(weight.shape[2:]),
        strides=list(strides),
        dilations=list(dilation),
        group=group,
        pads=pads,
        auto_pad=auto_pad,
    )
    return out_value(y, rank + 2, perm)


def _conv(ctx: MapContext, x: Value, rank: int) -> Value:
    check_keys(ctx.spec, _CONV_KEYS)
    fmt = data_format(ctx.spec)
    strides = int_tuple(ctx.spec, "strides", rank, 1)
    dilation = int_tuple(ctx.spec, "dilation_rate", rank, 1)
    mode = padding_mode(ctx.spec, ("valid", "same", "causal") if rank == 1 else ("valid", "same"))
    groups = groups_of(ctx.spec)
    kernel = ctx.weight("kernel")
    if kernel.ndim != rank + 2:
        raise ValueError(f"kernel shape {kernel.shape} is not rank {rank + 2}")
    y = emit_conv(
        ctx, as_float(ctx, x), rank, onnx_kernel(kernel), _bias(ctx), groups, strides, dilation, mode, fmt
    )
    return activation_of(ctx, y)


register_ranks(
    _conv, {1: ("Conv1D", "Convolution1D"), 2: ("Conv2D", "Convolution2D"), 3: ("Conv3D", "Convolution3D")}
)


def _depthwise_params(ctx: MapContext, rank: int) -> tuple:
    """The runner's :func:`depthwise_params` (the same checks), less the kernel size and multiplier
    the weights carry."""
    fmt, _, strides, dilation, mode, _ = depthwise_params(ctx.spec, rank)
    if ctx.get("groups", 1) not in (1, None):
        raise ctx.unsupported("groups", ctx.get("groups"))
    return fmt, strides, dilation, mode


def _depthwise(ctx: MapContext, x: Value, rank: int) -> Value:
    check_keys(ctx.spec, _DW_KEYS)
    if ctx.get("filters") is not None:
        raise ctx.unsupported("filters", ctx.get("filters"))
    fmt, strides, dilation, mode = _depthwise_params(ctx, rank)
    kernel = ctx.weight(depthwise_weight_name(ctx.spec.weights))
    channels = kernel.shape[-2]
    y = emit_conv(ctx, as_float(ctx, x), rank, depthwise_as_grouped(kernel), _bias(ctx), channels, strides,
                  dilation, mode, fmt, "depthwise")  # fmt: skip
    return activation_of(ctx, y)


register_ranks(_depthwise, {1: ("DepthwiseConv1D",), 2: ("DepthwiseConv2D",)})


def _separable(ctx: MapContext, x: Value, rank: int) -> Value:
    check_keys(ctx.spec, _DW_KEYS)
    fmt, strides, dilation, mode = _depthwise_params(ctx, rank)
    depthwise = ctx.weight("depthwise_kernel")
    pointwise = ctx.weight("pointwise_kernel")
    channels = depthwise.shape[-2]
    mid = emit_conv(ctx, as_float(ctx, x), rank, depthwise_as_grouped(depthwise), None, channels, strides,
                    dilation, mode, fmt, "depthwise")  # fmt: skip
    filters = pointwise.shape[-1]
    pw = pointwise.reshape((1,) * rank + (-1, filters))
    ones = (1,) * rank
    y = emit_conv(ctx, mid, rank, onnx_kernel(pw), _bias(ctx), 1, ones, ones, "valid", fmt, "pointwise", ones)
    return activation_of(ctx, y)


register_ranks(
    _separable,
    {1: ("SeparableConv1D", "SeparableConvolution1D"), 2: ("SeparableConv2D", "SeparableConvolution2D")},
)


def _transpose_conv(ctx: MapContext, x: Value, rank: int) -> Value:
    from modelgraph.runner.kernels.conv import transpose_length

    check_keys(ctx.spec, (*_CONV_KEYS, "output_padding"))
    if ctx.get("groups", 1) not in (1, None):
        raise ctx.unsupported("groups", ctx.get("groups"))
    fmt = data_format(ctx.spec)
    strides = int_tuple(ctx.spec, "strides", rank, 1)
    dilation = int_tuple(ctx.spec, "dilation_rate", rank, 1)
    mode = padding_mode(ctx.spec, ("valid", "same"))
    output_padding = (
        None if ctx.get("output_padding") is None else int_tuple(ctx.spec, "output_padding", rank, 0)
    )
    kernel = ctx.weight("kernel")  # (k..., filters, in)
    ksize = kernel.shape[:rank]
    begins, ends, extras = [], [], []
    # Keras's output length is (n - 1) * stride + a constant, as is ConvTranspose's full output: the
    # pads and output padding do not depend on the input length n, so an unknown one is taken as 1.
    for i, n in enumerate(spatial_sizes(ctx, fmt) or (None,) * rank):
        n = 1 if n is None else n
        k, s, d = ksize[i], strides[i], dilation[i]
        op = None if output_padding is None else output_padding[i]
        length = transpose_length(n, k, s, d, mode, op)  # type: ignore[arg-type]
        full = (n - 1) * s + (k - 1) * d + 1  # type: ignore[operator]
        start = max(full - length, 0) // 2 if mode == "same" else 0
        extra = length - (full - start)
        begins.append(start)
        ends.append(max(-extra, 0))
        extras.append(max(extra, 0))
    weight = onnx_kernel(kernel)  # (k..., filters, in) -> (in, filters, k...)
    perm = channels_first_perm(fmt, rank)
    inputs = [ctx.e.in_layout(as_float(ctx, x), perm), ctx.const(weight, "kernel")]
    bias = _bias(ctx)
    if bias is not None:
        inputs.append(ctx.const(bias, "bias"))
    y = ctx.e.op("ConvTranspose", inputs, "conv_transpose", kernel_shape=list(ksize), strides=list(strides),
                 dilations=list(dilation), pads=begins + ends, output_padding=extras)  # fmt: skip
    return activation_of(ctx, out_value(y, rank + 2, perm))


register_ranks(
    _transpose_conv,
    {
        1: ("Conv1DTranspose", "Convolution1DTranspose"),
        2: ("Conv2DTranspose", "Convolution2DTranspose", "Deconvolution2D", "Deconv2D"),
        3: ("Conv3DTranspose", "Convolution3DTranspose", "Deconvolution3D", "Deconv3D"),
    },
)
