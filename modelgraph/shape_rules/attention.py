"""MultiHeadAttention, Attention and AdditiveAttention."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modelgraph import catalogue
from modelgraph.shape_rules._base import (
    Call,
    Shape,
    ShapeError,
    TensorSpec,
    Unknown,
    axis_index,
    fmt,
    need,
    same_dim,
    shape_rule,
    weight_rule,
)


@catalogue.provides("weight_inputs", "MultiHeadAttention")
def mha_inputs(call: Call) -> tuple[Shape, Shape, Shape]:
    """(query, value, key) shapes of a MultiHeadAttention call (key defaults to value): also the
    shapes its weights are built from (its entry's ``weight_inputs``)."""
    q = call.param(0, "query")
    v = call.param(1, "value")
    k = call.param(2, "key")
    if not isinstance(q, TensorSpec) or not isinstance(v, TensorSpec):
        raise ShapeError("MultiHeadAttention needs query and value tensors", "arity")
    key = k if isinstance(k, TensorSpec) else v
    return need(q), need(v), need(key)


def _scores_wanted(call: Call) -> bool:
    flag = call.kwargs.get("return_attention_scores", call.config.get("return_attention_scores"))
    return bool(flag)


def _out_dims(config: Mapping[str, Any], q: Shape) -> tuple[Any, ...]:
    out = config.get("output_shape")
    if out is None:
        return (q[-1],)
    if isinstance(out, int):
        return (out,)
    return tuple(out)


def _attention_axes(config: Mapping[str, Any], rank: int) -> list[int]:
    axes = config.get("attention_axes")
    if axes is None:
        return list(range(1, rank - 1))
    axes = axes if isinstance(axes, list | tuple) else [axes]
    return sorted(axis_index(a, rank, "attention_axes") for a in axes)


@shape_rule("MultiHeadAttention")
def _mha(call: Call) -> list[Shape]:
    q, v, k = mha_inputs(call)
    for name, s in (("query", q), ("value", v), ("key", k)):
        if len(s) < 3:
            raise ShapeError(f"MultiHeadAttention {name} must be rank >= 3, got {fmt(s)}", "rank")
    if len(k) != len(v) or not all(same_dim(a, b) for a, b in zip(k[:-1], v[:-1], strict=True)):
        raise ShapeError(
            f"MultiHeadAttention key {fmt(k)} and value {fmt(v)} differ before the last axis", "shape"
        )
    if len(q) != len(v):
        raise ShapeError(f"MultiHeadAttention query {fmt(q)} and value {fmt(v)} have different ranks", "rank")
    out: list[Shape] = [(*q[:-1], *_out_dims(call.config, q))]
    if _scores_wanted(call):
        heads = call.config.get("num_heads")
        axes = _attention_axes(call.config, len(q))
        batch_dims = [q[i] for i in range(len(q) - 1) if i not in axes]
        # scores: non-attention axes of the query (batch first), heads, query then key attention axes
        out.append((*batch_dims, heads, *(q[i] for i in axes), *(k[i] for i in axes)))
    return out


@weight_rule("MultiHeadAttention")
def _mha_weights(config: Mapping[str, Any], ins: list[Shape | None]) -> dict[str, Shape]:
    if len(ins) < 2:
        raise Unknown()
    q, v = need(ins[0]), need(ins[1])
    k = need(ins[2]) if len(ins) > 2 and ins[2] is not None else v
    heads = config.get("num_heads")
    key_dim = config.get("key_dim")
    value_dim = config.get("value_dim") or key_dim
    use_bias = config.get("use_bias", True) is not False
    out_dims = _out_dims(config, q)
    parts = {
        "query": ((q[-1], heads, key_dim), (heads, key_dim)),
        "key": ((k[-1], heads, key_dim), (heads, key_dim)),
        "value": ((v[-1], heads, value_dim), (heads, value_dim)),
        "attention_output": ((heads, value_dim, *out_dims), tuple(out_dims)),
    }
    result: dict[str, Shape] = {}
    for part, (kernel, bias) in parts.items():
        result[f"{part}/kernel"] = kernel
        if use_bias:
            result[f"{part}/bias"] = bias
    return result


def attention_inputs(call: Call) -> tuple[Shape, Shape, Shape]:
    tensors = call.arg_tensors()
    if len(tensors) not in (2, 3):
        raise ShapeError(
            f"{call.class_name} needs [query, value] or [query, value, key], got {len(tensors)}", "arity"
        )
    q, v = need(tensors[0]), need(tensors[1])
    k = need(tensors[2]) if len(tensors) == 3 else v
    return q, v, k


@shape_rule("Attention", "AdditiveAttention")
def _attention(call: Call) -> list[Shape]:
    q, v, k = attention_inputs(call)
    if len(q) < 3 or len(v) < 3:
        raise ShapeError(f"{call.class_name} query/value must be rank >= 3: {fmt(q)}, {fmt(v)}", "rank")
    if not same_dim(q[-1], k[-1]):
        raise ShapeError(f"{call.class_name} query dim {q[-1]} differs from key dim {k[-1]}", "shape")
    if not same_dim(k[-2], v[-2]):
        raise ShapeError(f"{call.class_name} key steps {k[-2]} differ from value steps {v[-2]}", "shape")
    out: list[Shape] = [(*q[:-1], v[-1])]
    if _scores_wanted(call):
        out.append((*q[:-1], v[-2]))
    return out


@weight_rule("Attention")
def _attention_weights(config: Mapping[str, Any], ins: list[Shape | None]) -> dict[str, Shape]:
    out: dict[str, Shape] = {}
    if config.get("use_scale"):
        out["scale"] = ()
    if config.get("score_mode") == "concat":
        out["concat_score_weight"] = ()
    return out


@weight_rule("AdditiveAttention")
def _additive_weights(config: Mapping[str, Any], ins: list[Shape | None]) -> dict[str, Shape]:
    if config.get("use_scale", True) is False:
        return {}
    q = need(ins[0] if ins else None)
    return {"scale": (q[-1],)}
