"""Attention: MultiHeadAttention, Attention (dot / concat scores), AdditiveAttention.

Semantics (including the masking rules that differ between Keras versions):
``modelgraph/runner/kernels/attention.py``. Projections are MatMuls on the flattened head axes;
scores and context are Einsums with the kernel's own equations; masks are combined into one bool
tensor like Keras's ``_compute_attention_mask``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from modelgraph.catalogue.attention import ATTENTION_CALL, MHA_CALL, MHA_CALL_K2
from modelgraph.layer_params import bind_call, positive_int
from modelgraph.runner.kernels.attention import mha_layout
from modelgraph.saving.onnx.emitter import Value
from modelgraph.saving.onnx.registry import MapContext, register

_LARGE_NEGATIVE = -1e9


def _bool(ctx: MapContext, m: Any) -> str | None:
    if m is None:
        return None
    if isinstance(m, list):
        parts = [_bool(ctx, x) for x in m if x is not None]
        out = None
        for p in parts:
            out = p if out is None else ctx.e.op("And", [out, p])
        return out
    n = ctx.e.logical(m)
    return (
        n
        if m.dtype == "bool"
        else ctx.e.op("Not", [ctx.e.op("Equal", [n, ctx.e.const(np.zeros((), m.dtype), "zero")])])
    )


def _and(ctx: MapContext, a: str | None, b: str | None) -> str | None:
    if a is None:
        return b
    if b is None:
        return a
    return ctx.e.op("And", [a, b], "mask")


def _unsqueeze(ctx: MapContext, n: str, axes: list[int]) -> str:
    return ctx.e.op("Unsqueeze", [n, ctx.e.ints(axes, "axes")])


def _band(ctx: MapContext, rows: int, cols: int, window: int | None) -> str:
    """(1, rows, cols): causal (j <= i), or |i - j| < window."""
    i, j = np.arange(rows)[:, None], np.arange(cols)[None, :]
    m = (i >= j) if window is None else (np.abs(i - j) < window)
    return ctx.e.const(m[None], "band")


def _static(ctx: MapContext, i: int, axis: int) -> int:
    shape = ctx.in_shapes[i] if i < len(ctx.in_shapes) else None
    if shape is None or not isinstance(shape[axis], int):
        raise ctx.unsupported("causal or sliding-window mask with unknown lengths", None)
    return shape[axis]


@register("MultiHeadAttention")
def multi_head_attention(ctx: MapContext, *args: Any, **kwargs: Any) -> Any:
    spec = ctx.spec
    num_heads = positive_int(spec, "num_heads", ctx.get("num_heads"))
    positive_int(spec, "key_dim", ctx.get("key_dim"))
    if ctx.flag("use_gate", False):
        raise ctx.unsupported("use_gate", True)
    if ctx.get("flash_attention"):
        raise ctx.unsupported("flash_attention", ctx.get("flash_attention"))
    window = ctx.get("sliding_window")
    dropout = ctx.get("dropout", 0.0) or 0.0
    axes_config = ctx.get("attention_axes")
    if isinstance(axes_config, int) and not isinstance(axes_config, bool):
        axes_config = (axes_config,)
    keras3 = spec.keras_version[0] >= 3
    use_bias = ctx.flag("use_bias", True)
    call = bind_call("MultiHeadAttention", MHA_CALL if keras3 else MHA_CALL_K2, args, kwargs)
    e = ctx.e
    query, value = call["query"], call["value"]
    key = call.get("key") or value
    return_scores = bool(call.get("return_attention_scores") or False)
    use_causal = bool(call.get("use_causal_mask") or False)
    rank_in = query.rank if query.rank is not None else ctx.rank(0)

    mask = None
    qm = _bool(ctx, call.get("query_mask"))
    if qm is not None:
        mask = _unsqueeze(ctx, qm, [-1])
    for name in ("value_mask", "key_mask"):
        m = _bool(ctx, call.get(name))
        if m is not None:
            mask = _and(ctx, mask, _unsqueeze(ctx, m, [-2]))
    if use_causal or window is not None:
        rows, cols = _static(ctx, 0, 1), _static(ctx, 1, 1)
        if use_causal:
            mask = _and(ctx, mask, _band(ctx, rows, cols, None))
        if window is not None:
            mask = _and(ctx, mask, _band(ctx, rows, cols, int(window)))
    mask = _and(ctx, _bool(ctx, call.get("attention_mask")), mask)

    def project(x: Value, part: str) -> str:
        kernel = ctx.weight(f"{part}/kernel")  # (d, N, H)
        d, n, h = kernel.shape
        y = e.op("MatMul", [e.logical(x), ctx.const(kernel.reshape(d, n * h), f"{part}_kernel")], part)
        if use_bias:
            y = e.op("Add", [y, ctx.const(ctx.weight(f"{part}/bias").reshape(n * h), f"{part}_bias")])
        return e.op("Reshape", [y, e.ints([0] * (rank_in - 1) + [n, h], "shape")], part)

    q, k, v = project(query, "query"), project(key, "key"), project(value, "value")
    head_dim = ctx.weight("query/kernel").shape[2]
    if ctx.weight("query/kernel").shape[1] != num_heads:
        raise ValueError("MultiHeadAttention: query kernel vs num_heads")
    inverse_sqrt = 1.0 / float(np.sqrt(float(ctx.get("key_dim") or head_dim)))
    rank = rank_in + 1
    layout = mha_layout(rank, axes_config)
    attn_axes = layout.attn_axes
    q_scaled = e.op("Mul", [q, e.const(np.float32(inverse_sqrt), "scale")])
    scores = e.op("Einsum", [k, q_scaled], "scores", equation=layout.scores_equation)
    norm = list(layout.norm_axes)
    score_rank = layout.score_rank
    if mask is not None:
        # (B, T, S) -> insert the head axes where Keras's _masked_softmax expands
        mask_rank = 3 if len(attn_axes) == 1 else None
        if mask_rank is None:
            raise ctx.unsupported("attention_axes with a mask", axes_config)
        expansion = -len(attn_axes) * 2 - 1
        m = mask
        for _ in range(score_rank - 3):
            m = _unsqueeze(ctx, m, [expansion])
        if keras3:
            scores = e.op("Where", [m, scores, e.const(np.float32(_LARGE_NEGATIVE), "neg")], "masked")
        else:
            add = e.op(
                "Mul",
                [
                    e.op("Sub", [e.const(np.float32(1.0), "one"), e.cast(m, "float32")]),
                    e.const(np.float32(_LARGE_NEGATIVE), "neg"),
                ],
            )
            scores = e.op("Add", [scores, add], "masked")
    if len(norm) == 1:
        probs = e.op("Softmax", [scores], "softmax", axis=norm[0])
    else:
        shifted = e.op("Sub", [scores, e.reduce("ReduceMax", scores, norm)])
        ex = e.op("Exp", [shifted])
        probs = e.op("Div", [ex, e.reduce("ReduceSum", ex, norm)], "softmax")
    fused = not (dropout > 0 or return_scores or rank != 4)
    if mask is not None and keras3 and not fused:
        probs = e.op("Where", [m, probs, e.const(np.float32(0.0), "zero")], "probs")
    context = e.op("Einsum", [probs, v], "context", equation=layout.context_equation)
    out_kernel = ctx.weight("attention_output/kernel")  # (N, Hv, *out)
    n, hv = out_kernel.shape[:2]
    out_dims = list(out_kernel.shape[2:])
    flat = e.op("Reshape", [context, e.ints([0] * (rank - 2) + [n * hv], "shape")])
    out = e.op("MatMul", [flat, ctx.const(out_kernel.reshape(n * hv, -1), "output_kernel")], "output")
    if use_bias:
        out = e.op("Add", [out, ctx.const(ctx.weight("attention_output/bias").reshape(-1), "output_bias")])
    if len(out_dims) != 1:
        out = e.op("Reshape", [out, e.ints([0] * (rank - 2) + out_dims, "shape")])
    result = Value(out, rank_in - 1 + len(out_dims))
    return (result, Value(probs, score_rank)) if return_scores else result


def _dense_attention(ctx: MapContext, args: tuple[Any, ...], kwargs: dict[str, Any], scores_fn: Any) -> Any:
    causal_config = ctx.flag("causal", False)
    call = bind_call(ctx.class_name, ATTENTION_CALL, args, kwargs)
    inputs = call.get("inputs")
    if not isinstance(inputs, (list, tuple)) or len(inputs) not in (2, 3):
        raise TypeError(f"{ctx.class_name} takes one list argument [query, value] or [query, value, key]")
    e = ctx.e
    q = e.logical(inputs[0])
    v = e.logical(inputs[1])
    k = e.logical(inputs[2]) if len(inputs) > 2 else v
    masks = call.get("mask") or [None, None]
    q_mask = _bool(ctx, masks[0]) if len(masks) > 0 else None
    v_mask = _bool(ctx, masks[1]) if len(masks) > 1 else None
    scores = scores_fn(q, k)
    scores_mask = None if v_mask is None else _unsqueeze(ctx, v_mask, [-2])
    if causal_config or call.get("use_causal_mask"):
        scores_mask = _and(ctx, scores_mask, _band(ctx, _static(ctx, 0, 1), _static(ctx, 1, 1), None))
    if scores_mask is not None:
        scores = e.op(
            "Where", [scores_mask, scores, e.op("Sub", [scores, e.const(np.float32(1e9), "big")])], "masked"
        )
    weights = e.op("Softmax", [scores], "softmax", axis=-1)
    out = e.op("MatMul", [weights, v], "attention")
    if q_mask is not None:
        out = e.op(
            "Where", [_unsqueeze(ctx, q_mask, [-1]), out, e.const(np.float32(0.0), "zero")], "attention"
        )
    rank = inputs[0].rank
    if call.get("return_attention_scores"):
        return Value(out, rank), Value(weights, 3)
    return Value(out, rank)


@register("Attention")
def attention(ctx: MapContext, *args: Any, **kwargs: Any) -> Any:
    score_mode = ctx.get("score_mode", "dot")
    if score_mode not in ("dot", "concat"):
        raise ctx.unsupported("score_mode", score_mode)
    e = ctx.e
    scale = ctx.const(ctx.weight("scale"), "scale") if ctx.flag("use_scale", False) else None
    concat_weight = (
        ctx.const(ctx.weight("concat_score_weight"), "concat_score_weight")
        if score_mode == "concat"
        else None
    )

    def scores(q: str, k: str) -> str:
        if concat_weight is None:
            s = e.op("MatMul", [q, e.op("Transpose", [k], perm=[0, 2, 1])], "scores")
            return e.op("Mul", [s, scale]) if scale is not None else s
        summed = e.op("Add", [_unsqueeze(ctx, q, [-2]), _unsqueeze(ctx, k, [-3])])
        if scale is not None:
            summed = e.op("Mul", [scale, summed])
        return e.op("Mul", [concat_weight, e.reduce("ReduceSum", e.op("Tanh", [summed]), [-1], 0)], "scores")

    return _dense_attention(ctx, args, kwargs, scores)


@register("AdditiveAttention")
def additive_attention(ctx: MapContext, *args: Any, **kwargs: Any) -> Any:
    e = ctx.e
    scale = ctx.const(ctx.weight("scale"), "scale") if ctx.flag("use_scale", True) else None

    def scores(q: str, k: str) -> str:
        t = e.op("Tanh", [e.op("Add", [_unsqueeze(ctx, q, [-2]), _unsqueeze(ctx, k, [-3])])])
        if scale is not None:
            t = e.op("Mul", [scale, t])
        return e.reduce("ReduceSum", t, [-1], 0, "scores")

    return _dense_attention(ctx, args, kwargs, scores)
