"""Keras 3 quantized layers (int8 and int4 Dense, EinsumDense, Embedding), dequantized at export.

Semantics: ``modelgraph/runner/quantized.py``. The weights are written as float32 (int codes as
floats with their scales, or fully dequantized kernels), and the export says so in the model's
doc_string and ``dequantized_layers`` metadata. What Keras computes at run time is kept: int8 layers
(and int4 layers whose config names an activation quantizer) quantize their input on every call
with an abs-max quantizer, ``clip(round(x * s), -127, 127)`` with ``s = 127 / (max|x| + eps)`` over
the contracted axes, multiply by the integer codes and divide by both scales.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from modelgraph.runner.quantized import (
    activation_quantizer,
    by_mode,
    int4_dense_weights,
    int4_einsum_kernel,
    int4_embedding_table,
    int4_flat_kernel,
    int8_einsum_kernel,
    int8_input_quantizer,
    int8_kernel,
    plain_equation,
)
from modelgraph.saving.onnx.emitter import Value
from modelgraph.saving.onnx.mappings.core import activation_of, as_float, ids
from modelgraph.saving.onnx.registry import MapContext

_F32 = np.float32


def _quantize_input(
    ctx: MapContext, x: str, axes: list[int], value_range: tuple[float, float], eps: float
) -> tuple[str, str]:
    """Keras's AbsMaxQuantizer: (the quantized values as float32, the scale with ``axes`` kept as 1)."""
    e = ctx.e
    absmax = e.reduce("ReduceMax", e.op("Abs", [x]), axes, 1)
    scale = e.op(
        "Div",
        [e.const(_F32(value_range[1]), "qmax"), e.op("Add", [absmax, e.const(_F32(eps), "eps")])],
        "x_scale",
    )
    q = e.op("Round", [e.op("Mul", [x, scale])])
    q = e.op("Clip", [q, e.const(_F32(value_range[0]), "qlo"), e.const(_F32(value_range[1]), "qhi")], "x_q")
    return q, scale


def _finish(ctx: MapContext, y: str, bias: np.ndarray | None, rank: int | None) -> Value:
    if bias is not None:
        y = ctx.e.op("Add", [y, ctx.const(bias, "bias")], "bias_add")
    return activation_of(ctx, Value(y, rank))


def int8_dense(ctx: MapContext, x: Value) -> Value:
    value_range, eps = int8_input_quantizer(ctx.spec)
    kernel, kernel_scale, bias = int8_kernel(ctx.spec)
    e = ctx.e
    n = e.logical(as_float(ctx, x))
    q, x_scale = _quantize_input(ctx, n, [-1], value_range, eps)
    y = e.op("MatMul", [q, ctx.const(kernel.astype(_F32), "kernel_codes")])
    y = e.op("Div", [y, e.op("Mul", [x_scale, ctx.const(kernel_scale, "kernel_scale")])], "dequantize")
    return _finish(ctx, y, bias, x.rank)


def _layout_dynamic(ctx: MapContext, scale: str, labels: str, out: str) -> str:
    """``_to_output_layout`` for a run-time scale: squeeze the contracted labels, order, insert 1s."""
    e = ctx.e
    reduced = [i for i, label in enumerate(labels) if label not in out]
    if reduced:
        scale = e.op("Squeeze", [scale, e.ints(reduced, "axes")])
    kept = [label for label in labels if label in out]
    perm = [kept.index(label) for label in out if label in kept]
    if perm != sorted(perm):
        scale = e.op("Transpose", [scale], perm=perm)
    missing = [i for i, label in enumerate(out) if label not in kept]
    if missing:
        scale = e.op("Unsqueeze", [scale, e.ints(missing, "axes")])
    return scale


def int8_einsum_dense(ctx: MapContext, x: Value) -> Value:
    equation, labels, ker, out = plain_equation(ctx.spec)
    value_range, eps = int8_input_quantizer(ctx.spec)
    kernel, kernel_scale, bias = int8_einsum_kernel(ctx.spec, equation, ker, out)
    reduced = [i for i, label in enumerate(labels) if label not in out]
    e = ctx.e
    n = e.logical(as_float(ctx, x))
    q, x_scale = _quantize_input(ctx, n, reduced, value_range, eps)
    y = e.op(
        "Einsum",
        [q, ctx.const(kernel.astype(_F32), "kernel_codes")],
        "einsum",
        equation=equation.replace(" ", ""),
    )
    denom = e.op("Mul", [_layout_dynamic(ctx, x_scale, labels, out), ctx.const(kernel_scale, "kernel_scale")])
    return _finish(ctx, e.op("Div", [y, denom], "dequantize"), bias, len(out))


def int8_embedding(ctx: MapContext, x: Value) -> Value:
    table = ctx.spec.weight("embeddings", integer=True)
    if table.dtype != np.int8:
        raise ctx.unsupported("embeddings dtype", str(table.dtype))
    scale = ctx.spec.weight("embeddings_scale", integer=True).astype(_F32).reshape(table.shape[0])
    dequantized = table.astype(_F32) / scale[:, None]
    return Value(
        ctx.e.op("Gather", [ctx.const(dequantized, "embeddings"), ids(ctx, x)], "embedding", axis=0),
        (x.rank or 0) + 1,
    )


def int4_dense(ctx: MapContext, x: Value) -> Value:
    spec = ctx.spec
    codes, kernel, bias = int4_dense_weights(spec)
    e = ctx.e
    n = e.logical(as_float(ctx, x))
    if kernel is not None:
        return _finish(ctx, e.op("MatMul", [n, ctx.const(kernel, "kernel")]), bias, x.rank)
    kernel_scale = spec.weight("kernel_scale", integer=True).astype(_F32)
    quantizer = activation_quantizer(spec, None)
    denom = ctx.const(kernel_scale, "kernel_scale")
    if quantizer is not None:
        n, x_scale = _quantize_input(ctx, n, [-1], *quantizer)
        denom = e.op("Mul", [denom, x_scale])
    y = e.op("Div", [e.op("MatMul", [n, ctx.const(codes, "kernel_codes")]), denom], "dequantize")
    return _finish(ctx, y, bias, x.rank)


def int4_einsum_dense(ctx: MapContext, x: Value) -> Value:
    spec = ctx.spec
    equation, labels, ker, out = plain_equation(spec)
    flat = int4_flat_kernel(spec)
    shape = ctx.in_shapes[0] if ctx.in_shapes else None
    if shape is None or any(d is None for d in shape[1:]):
        raise ctx.unsupported("input shape", shape)
    kernel = int4_einsum_kernel(spec, equation, flat, tuple(shape[1:]))
    bias = spec.weight("bias", integer=True).astype(_F32) if "bias" in spec.weights else None
    quantizer = activation_quantizer(spec, None)
    e = ctx.e
    n = e.logical(as_float(ctx, x))
    eq = equation.replace(" ", "")
    if quantizer is None:
        y = e.op("Einsum", [n, ctx.const(kernel, "kernel")], "einsum", equation=eq)
    else:
        reduced = [i for i, label in enumerate(labels) if label not in out]
        q, x_scale = _quantize_input(ctx, n, reduced, *quantizer)
        y = e.op("Einsum", [q, ctx.const(kernel, "kernel")], "einsum", equation=eq)
        y = e.op("Div", [y, _layout_dynamic(ctx, x_scale, labels, out)], "dequantize")
    return _finish(ctx, y, bias, len(out))


def int4_embedding(ctx: MapContext, x: Value) -> Value:
    dequantized = int4_embedding_table(ctx.spec)
    return Value(
        ctx.e.op("Gather", [ctx.const(dequantized, "embeddings"), ids(ctx, x)], "embedding", axis=0),
        (x.rank or 0) + 1,
    )


MAPPINGS: dict[tuple[str, str], Callable[..., Any]] = by_mode(sys.modules[__name__])


def quantized_mapping(key: str, mode: str) -> Callable[..., Any] | None:
    """The mapping of a layer saved with a quantized dtype policy (``mode``: "int8", "int4")."""
    return MAPPINGS.get((mode, key))
