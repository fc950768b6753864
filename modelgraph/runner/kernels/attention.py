"""Kernels: attention family (see modelgraph/runner/registry.py for the contract).

MultiHeadAttention (any ``attention_axes``, ``output_shape``, ``value_dim``, ``use_bias``,
``sliding_window``), Attention (``dot``/``concat`` scores, ``use_scale``) and AdditiveAttention.

Masking follows the writing Keras version:

* Keras 3 MultiHeadAttention sets masked scores to -1e9 (``where``). When the attention weights go
  through its ``Softmax`` layer (scores returned, dropout configured, or inputs that are not 3-D) the
  probabilities at masked positions are then zeroed, so a fully masked query row attends to nothing;
  otherwise Keras 3.15 (TensorFlow backend) uses ``ops.dot_product_attention`` and such a row is a
  uniform average. tf.keras adds ``(1 - mask) * -1e9`` and never zeroes.
* Attention/AdditiveAttention subtract 1e9 at masked value positions and zero the output rows of
  masked query positions (both versions).
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any

import numpy as np

from modelgraph.catalogue.attention import ATTENTION_CALL, MHA_CALL, MHA_CALL_K2
from modelgraph.layer_params import bind_call, positive_int
from modelgraph.runner.activations import softmax
from modelgraph.runner.registry import KernelSpec, register

Array = np.ndarray

_LARGE_NEGATIVE = -1e9


def _weight(spec: KernelSpec, name: str) -> Array:
    value = spec.weight(name)
    return value.astype(np.float32) if value.dtype != np.float64 else value


def _bool_mask(mask: Any) -> Array | None:
    if mask is None:
        return None
    m = np.asarray(mask)
    return m if m.dtype == np.bool_ else m != 0


def _causal(rows: int, cols: int) -> Array:
    """(1, rows, cols): position i attends to j <= i."""
    return (np.arange(rows)[:, None] >= np.arange(cols)[None, :])[None]


def _and(a: Array | None, b: Array | None) -> Array | None:
    if a is None:
        return b
    if b is None:
        return a
    return a & b


# --- MultiHeadAttention -----------------------------------------------------------------------


@dataclass(frozen=True)
class MhaLayout:
    """How MultiHeadAttention's einsums lay out projected tensors of rank ``rank``
    (``(B, *T, N, H)``): the attention axes, the equations of ``scores = key . query`` and
    ``context = probs . value``, and the softmax axes of the scores (Keras's ``_build_attention``)."""

    attn_axes: tuple[int, ...]
    scores_equation: str
    context_equation: str
    norm_axes: tuple[int, ...]

    @property
    def score_rank(self) -> int:
        """The rank of the scores tensor."""
        return len(self.scores_equation.rsplit("->", 1)[1])


def mha_layout(rank: int, axes_config: Any) -> MhaLayout:
    """The :class:`MhaLayout` of projected tensors of rank ``rank`` with ``attention_axes=axes_config``."""
    attn_axes = tuple(range(1, rank - 2)) if axes_config is None else tuple(a % rank for a in axes_config)
    batch_dims = tuple(i for i in range(rank) if i not in attn_axes and i != rank - 1)
    letters = string.ascii_lowercase
    target = letters[:rank]
    source = list(target)
    extra = iter(letters[rank:])
    for axis in attn_axes:
        source[axis] = next(extra)
    source_str = "".join(source)
    product = (
        "".join(target[i] for i in batch_dims)
        + "".join(target[i] for i in attn_axes)
        + "".join(source[i] for i in attn_axes)
    )
    return MhaLayout(
        attn_axes,
        f"{source_str},{target}->{product}",
        f"{product},{source_str}->{target}",
        tuple(range(len(product) - len(attn_axes), len(product))),
    )


@register("MultiHeadAttention")
def multi_head_attention(spec: KernelSpec):
    num_heads = positive_int(spec, "num_heads", spec.get("num_heads"))
    positive_int(spec, "key_dim", spec.get("key_dim"))
    if spec.get("value_dim") is not None:
        positive_int(spec, "value_dim", spec.get("value_dim"))
    use_bias = spec.flag("use_bias", True)
    if spec.flag("use_gate", False):
        raise spec.unsupported("use_gate", True)  # its gate projection has no canonical weight names
    if spec.get("flash_attention"):
        raise spec.unsupported("flash_attention", spec.get("flash_attention"))
    sliding_window = spec.get("sliding_window")
    if sliding_window is not None:
        sliding_window = positive_int(spec, "sliding_window", sliding_window)
    dropout = spec.get("dropout", 0.0) or 0.0
    if not isinstance(dropout, (int, float)):
        raise spec.unsupported("dropout", dropout)
    output_shape = spec.get("output_shape")
    if output_shape is not None and not isinstance(output_shape, (int, list, tuple)):
        raise spec.unsupported("output_shape", output_shape)
    axes_config = spec.get("attention_axes")
    if isinstance(axes_config, int) and not isinstance(axes_config, bool):
        axes_config = (axes_config,)
    if axes_config is not None and (
        not isinstance(axes_config, (list, tuple)) or not all(isinstance(a, int) for a in axes_config)
    ):
        raise spec.unsupported("attention_axes", spec.get("attention_axes"))
    keras3 = spec.keras_version[0] >= 3
    order = MHA_CALL if keras3 else MHA_CALL_K2

    projections: dict[str, tuple[Array, Array | None]] = {}
    for part in ("query", "key", "value", "attention_output"):
        kernel = _weight(spec, f"{part}/kernel")
        bias = _weight(spec, f"{part}/bias") if use_bias else None
        projections[part] = (kernel, bias)
    if projections["query"][0].shape[1] != num_heads:
        raise ValueError(
            f"MultiHeadAttention: query kernel {projections['query'][0].shape} vs {num_heads} heads"
        )
    head_dim = projections["query"][0].shape[2]
    inverse_sqrt = 1.0 / float(np.sqrt(float(spec.get("key_dim") or head_dim)))

    def project(x: Array, part: str) -> Array:
        kernel, bias = projections[part]
        y = np.tensordot(x, kernel, axes=([-1], [0]))
        return y + bias if bias is not None else y

    def run(*args: Any, **kwargs: Any) -> Array | tuple[Array, Array]:
        call = bind_call("MultiHeadAttention", order, args, kwargs)
        if "query" not in call or "value" not in call:
            raise TypeError("MultiHeadAttention needs query and value")
        query = np.asarray(call["query"])
        value = np.asarray(call["value"])
        key = value if call.get("key") is None else np.asarray(call["key"])
        return_scores = bool(call.get("return_attention_scores") or False)
        use_causal = bool(call.get("use_causal_mask") or False)

        # Combined boolean mask, (B, T, S) style, built exactly like Keras's _compute_attention_mask.
        mask: Array | None = None
        query_mask = _bool_mask(call.get("query_mask"))
        if query_mask is not None:
            mask = query_mask[..., None]
        for name in ("value_mask", "key_mask"):
            m = _bool_mask(call.get(name))
            if m is not None:
                mask = _and(mask, m[..., None, :])
        if use_causal:
            mask = _and(mask, _causal(query.shape[1], value.shape[1]))
        if sliding_window is not None:
            rows, cols = np.arange(query.shape[1])[:, None], np.arange(value.shape[1])[None, :]
            mask = _and(mask, (np.abs(rows - cols) < sliding_window)[None])
        mask = _and(_bool_mask(call.get("attention_mask")), mask)

        q = project(query, "query")  # (B, *T, N, H)
        k = project(key, "key")  # (B, *S, N, H)
        v = project(value, "value")  # (B, *S, N, Hv)
        rank = q.ndim
        layout = mha_layout(rank, axes_config)
        attn_axes = layout.attn_axes
        scores = np.einsum(layout.scores_equation, k, q * q.dtype.type(inverse_sqrt))
        norm_axes = layout.norm_axes
        if mask is not None:
            expansion = -len(attn_axes) * 2 - 1
            while mask.ndim < scores.ndim:
                mask = np.expand_dims(mask, expansion)
            if keras3:
                scores = np.where(mask, scores, scores.dtype.type(_LARGE_NEGATIVE))
            else:
                scores = scores + (1.0 - mask.astype(scores.dtype)) * scores.dtype.type(_LARGE_NEGATIVE)
        probs = softmax(scores, axis=norm_axes)
        # Keras 3.15 uses ops.dot_product_attention (no zeroing) unless it must return the scores,
        # has dropout configured, or the projected inputs are not 4-D; then its Softmax layer zeroes
        # the masked probabilities.
        fused = not (dropout > 0 or return_scores or rank != 4)
        if mask is not None and keras3 and not fused:
            probs = np.where(mask, probs, probs.dtype.type(0))
        context = np.einsum(layout.context_equation, probs, v)  # (B, *T, N, Hv)
        out_kernel, out_bias = projections["attention_output"]
        out = np.tensordot(context, out_kernel, axes=([-2, -1], [0, 1]))
        if out_bias is not None:
            out = out + out_bias
        return (out, probs) if return_scores else out

    return run


# --- Attention / AdditiveAttention ------------------------------------------------------------


def _dense_attention(spec: KernelSpec, score_fn):
    causal_config = spec.flag("causal", False)  # tf.keras <= 2.9 config key
    dropout = spec.get("dropout", 0.0)
    if dropout is not None and not isinstance(dropout, (int, float)):
        raise spec.unsupported("dropout", dropout)  # a number is fine: dropout only acts in training

    def run(*args: Any, **kwargs: Any) -> Array | tuple[Array, Array]:
        call = bind_call(spec.class_name, ATTENTION_CALL, args, kwargs)
        inputs = call.get("inputs")
        if not isinstance(inputs, (list, tuple)) or len(inputs) not in (2, 3):
            raise TypeError(
                f"{spec.class_name} takes one list argument [query, value] or [query, value, key]"
            )
        q = np.asarray(inputs[0])
        v = np.asarray(inputs[1])
        k = np.asarray(inputs[2]) if len(inputs) > 2 else v
        masks = call.get("mask") or [None, None]
        if not isinstance(masks, (list, tuple)):
            raise TypeError(f"{spec.class_name}: mask must be a list [query_mask, value_mask]")
        q_mask = _bool_mask(masks[0]) if len(masks) > 0 else None
        v_mask = _bool_mask(masks[1]) if len(masks) > 1 else None
        scores = score_fn(q, k)  # (B, Tq, Tv)
        scores_mask = None if v_mask is None else v_mask[..., None, :]
        if causal_config or call.get("use_causal_mask"):
            scores_mask = _and(scores_mask, _causal(scores.shape[-2], scores.shape[-1]))
        if scores_mask is not None:
            scores = np.where(scores_mask, scores, scores - scores.dtype.type(1e9))
        weights = softmax(scores, axis=-1)
        out = weights @ v
        if q_mask is not None:
            out = np.where(q_mask[..., None], out, out.dtype.type(0))
        return (out, weights) if call.get("return_attention_scores") else out

    return run


@register("Attention")
def attention(spec: KernelSpec):
    score_mode = spec.get("score_mode", "dot")
    if score_mode not in ("dot", "concat"):
        raise spec.unsupported("score_mode", score_mode)
    scale = _weight(spec, "scale") if spec.flag("use_scale", False) else None
    concat_weight = _weight(spec, "concat_score_weight") if score_mode == "concat" else None

    def scores(q: Array, k: Array) -> Array:
        if concat_weight is None:
            s = q @ np.swapaxes(k, -1, -2)
            return s * scale if scale is not None else s
        summed = q[..., :, None, :] + k[..., None, :, :]
        if scale is not None:
            summed = scale * summed
        return concat_weight * np.sum(np.tanh(summed), axis=-1)

    return _dense_attention(spec, scores)


@register("AdditiveAttention")
def additive_attention(spec: KernelSpec):
    scale = _weight(spec, "scale") if spec.flag("use_scale", True) else None

    def scores(q: Array, k: Array) -> Array:
        t = np.tanh(q[..., :, None, :] + k[..., None, :, :])
        return np.sum(scale * t if scale is not None else t, axis=-1)

    return _dense_attention(spec, scores)
