"""Implicit mask propagation for Keras 1/2 graphs (KERAS-FORMATS §5.3).

Keras 3 records masks as explicit op nodes and ``mask=`` call kwargs, so its graphs need nothing
from here. tf.keras attaches a ``_keras_mask`` to tensors at run time instead: ``Embedding
(mask_zero=True)`` and ``Masking`` create one, layers that support masking carry it over
(``compute_mask`` returns the input mask), RNNs keep it only with ``return_sequences``, merge layers
combine the masks of their inputs, and every other layer drops it. A layer whose ``call`` has a
``mask`` argument receives the mask of its inputs automatically.

:func:`rule_for` gives, per layer, how it *consumes* masks (what to pass the kernel) and how it
*produces* them (a function of the input masks, the inputs and the outputs); a layer without a
``produce`` drops the mask. The rules are checked node by node against the masks real tf_keras
attached (goldens ``samples/goldens/k2_mask_*``, ``tests/runner/test_masks_k2.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from modelgraph.runner.fast.fused import FUSED_PREFIX

Array = np.ndarray
MaskFn = Callable[[list[Array | None], list[Any], list[Any]], list[Array | None]]

# tf.keras layers with supports_masking=True and the default compute_mask (carry the mask over).
# Not Identity: tf_keras's Identity never sets supports_masking, so it drops the mask (Keras 3's keeps
# it, but Keras 3 graphs carry masks explicitly).
PASS_THROUGH = frozenset(
    {
        "Activation",
        "ActivityRegularization",
        "AlphaDropout",
        "BatchNormalization",
        "Dense",
        "Dropout",
        "ELU",
        "GaussianDropout",
        "GaussianNoise",
        "LayerNormalization",
        "LeakyReLU",
        "PReLU",
        "ReLU",
        "Softmax",
        "SpatialDropout1D",
        "SpatialDropout2D",
        "SpatialDropout3D",
        "ThresholdedReLU",
        "UnitNormalization",
    }
)
MERGE_AND = frozenset({"Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum"})
RNN_CLASSES = frozenset(
    {"SimpleRNN", "LSTM", "GRU", "RNN", "ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D", "CuDNNLSTM", "CuDNNGRU"}
)
# Layers whose call() takes ``mask``: what the kernel is given (see _consumer).
MASK_CONSUMERS = RNN_CLASSES | {
    "Bidirectional",
    "TimeDistributed",
    "GlobalAveragePooling1D",
    "GlobalAvgPool1D",
    "Softmax",
    "Attention",
    "AdditiveAttention",
    "MultiHeadAttention",
}


@dataclass(frozen=True)
class MaskRule:
    """How one layer treats masks: ``consume`` builds extra kwargs, ``produce`` the output masks."""

    consume: Callable[[list[Array | None]], dict[str, Any]] | None
    produce: MaskFn | None
    source: bool = False
    """True when the layer creates a mask from nothing (Embedding with mask_zero, Masking)."""


def _first(masks: list[Array | None]) -> Array | None:
    return masks[0] if masks else None


def _consume_first(masks: list[Array | None]) -> dict[str, Any]:
    m = _first(masks)
    return {} if m is None else {"mask": m}


def _consume_list(masks: list[Array | None]) -> dict[str, Any]:
    if all(m is None for m in masks):
        return {}
    return {"mask": list(masks)}


def _and_all(masks: list[Array | None]) -> Array | None:
    present = [np.asarray(m, dtype=bool) for m in masks if m is not None]
    if not present:
        return None
    out = present[0]
    for m in present[1:]:
        out = np.logical_and(out, m)
    return out


def _mha_masks(masks: list[Array | None]) -> tuple[Array | None, Array | None]:
    """(query mask, AND of the value and key masks) of a tf.keras MultiHeadAttention node.

    tf.keras records the query as the first call argument and every other tensor as a keyword
    (``value``, ``key``, ``attention_mask``), which the graph flattens by sorted name (tf.keras up
    to 2.18) or in call order (tf_keras 2.19+), so the positions after the first do not say which
    tensor is the value and which the key. Keras ANDs both masks into the attention mask the same
    way (``[B, 1, S]``), so their AND is all it needs.
    """
    if not masks:
        return None, None
    return masks[0], _and_all(list(masks[1:]))


def _consume_mha(masks: list[Array | None]) -> dict[str, Any]:
    # tf.keras MultiHeadAttention reads query._keras_mask, value._keras_mask and key._keras_mask.
    query, rest = _mha_masks(masks)
    out: dict[str, Any] = {}
    if query is not None:
        out["query_mask"] = query
    if rest is not None:
        out["value_mask"] = rest
    return out


def _pass_first(masks: list[Array | None], inputs: list[Any], outputs: list[Any]) -> list[Array | None]:
    return [_first(masks)] + [None] * (len(outputs) - 1)


def _merge_and(masks: list[Array | None], inputs: list[Any], outputs: list[Any]) -> list[Array | None]:
    # tf.keras _Merge.compute_mask: all() over the stacked masks that exist; unmasked inputs don't count.
    return [_and_all(masks)]


def _concat_mask(axis: int) -> MaskFn:
    def produce(masks: list[Array | None], inputs: list[Any], outputs: list[Any]) -> list[Array | None]:
        if all(m is None for m in masks):
            return [None]
        parts = []
        for m, x in zip(masks, inputs, strict=False):
            x = np.asarray(x)
            if m is None:
                parts.append(np.ones(x.shape, dtype=bool))
            else:
                m = np.asarray(m, dtype=bool)
                while m.ndim < x.ndim:
                    m = np.expand_dims(m, -1)
                parts.append(m)
        # Keras: concatenate the (expanded) masks along the layer's axis, then all() over the last.
        target = parts[0].ndim
        ax = axis if axis >= 0 else target + axis
        shape = list(
            np.broadcast_shapes(*[tuple(p.shape[:ax]) + (1,) + tuple(p.shape[ax + 1 :]) for p in parts])
        )
        full = []
        for p in parts:
            s = list(shape)
            s[ax] = p.shape[ax]
            full.append(np.broadcast_to(p, s))
        return [np.all(np.concatenate(full, axis=ax), axis=-1)]

    return produce


def _rnn_mask(config: Mapping[str, Any]) -> MaskFn:
    return_sequences = bool(config.get("return_sequences", False))

    def produce(masks: list[Array | None], inputs: list[Any], outputs: list[Any]) -> list[Array | None]:
        m = _first(masks) if return_sequences else None
        return [m] + [None] * (len(outputs) - 1)

    return produce


def _bidirectional_mask(config: Mapping[str, Any]) -> MaskFn:
    inner = config.get("layer")
    inner_config = inner.get("config", {}) if isinstance(inner, Mapping) else {}
    return_sequences = bool(inner_config.get("return_sequences", False))
    merge_mode = config.get("merge_mode", "concat")

    def produce(masks: list[Array | None], inputs: list[Any], outputs: list[Any]) -> list[Array | None]:
        m = _first(masks) if return_sequences else None
        n_seq = 2 if merge_mode is None else 1
        return [m] * n_seq + [None] * (len(outputs) - n_seq)

    return produce


def _fold(a: Array) -> Array:
    """(batch, time, ...) -> (batch * time, ...), as TimeDistributed reshapes for its inner layer."""
    return a.reshape((a.shape[0] * a.shape[1], *a.shape[2:]))


def _time_distributed_mask(config: Mapping[str, Any]) -> tuple[MaskFn, bool]:
    """tf.keras TimeDistributed.compute_mask (unknown batch size, the functional-model case).

    The inner layer's compute_mask runs on the folded input and folded mask (also when there is no
    input mask, so an inner Embedding(mask_zero) or Masking creates one); a mask it returns is
    unfolded to (batch, time, ...). When it returns none, the input mask reduced with any() over the
    axes after time is the output mask. Returns the produce function and whether it is a source.
    """
    inner = config.get("layer")
    inner_class = inner.get("class_name") if isinstance(inner, Mapping) else None
    inner_config = inner.get("config", {}) if isinstance(inner, Mapping) else {}
    inner_rule = rule_for(inner_class, inner_config) if isinstance(inner_class, str) else None
    inner_produce = inner_rule.produce if inner_rule is not None else None
    source = bool(inner_rule is not None and inner_rule.source)

    def produce(masks: list[Array | None], inputs: list[Any], outputs: list[Any]) -> list[Array | None]:
        m = _first(masks)
        rest: list[Array | None] = [None] * (len(outputs) - 1)
        x = np.asarray(inputs[0])
        if inner_produce is not None and (m is not None or source):
            folded_mask = None if m is None else _fold(np.asarray(m))
            outs = [_fold(np.asarray(o)) for o in outputs]
            inner_mask = _first(inner_produce([folded_mask], [_fold(x)], outs))
            if inner_mask is not None:
                inner_mask = np.asarray(inner_mask)
                return [inner_mask.reshape((x.shape[0], x.shape[1], *inner_mask.shape[1:]))] + rest
        if m is None:
            return [None] + rest
        m = np.asarray(m)
        while m.ndim > 2:
            m = np.any(m, axis=-1)
        return [m] + rest

    return produce, source


def _attention_mask(masks: list[Array | None], inputs: list[Any], outputs: list[Any]) -> list[Array | None]:
    q = _first(masks)
    return [q] + [None] * (len(outputs) - 1)


def _mha_mask(config: Mapping[str, Any]) -> MaskFn:
    """tf.keras MultiHeadAttention output masks.

    The output gets the query's mask (the base compute_mask sees only the first call argument). With
    ``return_attention_scores`` the scores keep the mask their inner Softmax layer attached: the
    attention mask ``query[:, :, None] & value[:, None, :] & key[:, None, :]`` expanded at the head
    axis. ``use_causal_mask`` and an ``attention_mask`` tensor are call arguments this rule does not
    see, so for such calls the scores mask lacks their part.
    """
    axes = config.get("attention_axes")
    n_axes = len(axes) if isinstance(axes, (list, tuple)) else 1
    expansion_axis = -2 * n_axes - 1  # Keras's _masked_softmax: the num_heads axis

    def produce(masks: list[Array | None], inputs: list[Any], outputs: list[Any]) -> list[Array | None]:
        query, rest = _mha_masks(masks)
        out: list[Array | None] = [query] + [None] * (len(outputs) - 1)
        if len(outputs) > 1:
            auto = None if query is None else np.asarray(query, dtype=bool)[:, :, None]
            if rest is not None:
                kv = rest[:, None, :]
                auto = kv if auto is None else np.logical_and(auto, kv)
            if auto is not None:
                scores_ndim = np.ndim(outputs[1])
                while auto.ndim < scores_ndim:
                    auto = np.expand_dims(auto, expansion_axis)
                out[1] = auto
        return out

    return produce


def _embedding_mask(config: Mapping[str, Any]) -> MaskFn | None:
    if not config.get("mask_zero", False):
        return None

    def produce(masks: list[Array | None], inputs: list[Any], outputs: list[Any]) -> list[Array | None]:
        return [np.not_equal(np.asarray(inputs[0]), 0)]

    return produce


def _masking_mask(config: Mapping[str, Any]) -> MaskFn:
    value = config.get("mask_value", 0.0)

    def produce(masks: list[Array | None], inputs: list[Any], outputs: list[Any]) -> list[Array | None]:
        return [np.any(np.not_equal(np.asarray(inputs[0]), value), axis=-1)]

    return produce


def rule_for(class_name: str, config: Mapping[str, Any]) -> MaskRule:
    """The mask rule of one tf.keras layer class (nested models are inlined, so not needed here)."""
    consume: Callable[[list[Array | None]], dict[str, Any]] | None = None
    if class_name in ("Attention", "AdditiveAttention"):
        consume = _consume_list
    elif class_name == "MultiHeadAttention":
        consume = _consume_mha
    elif class_name in MASK_CONSUMERS:
        consume = _consume_first

    if class_name == "Embedding":
        fn = _embedding_mask(config)
        return MaskRule(None, fn, source=fn is not None)
    if class_name == "Masking":
        return MaskRule(None, _masking_mask(config), source=True)
    if class_name in RNN_CLASSES:
        return MaskRule(consume, _rnn_mask(config))
    if class_name == "Bidirectional":
        return MaskRule(consume, _bidirectional_mask(config))
    if class_name == "TimeDistributed":
        produce, source = _time_distributed_mask(config)
        return MaskRule(consume, produce, source=source)
    if class_name in ("Attention", "AdditiveAttention"):
        return MaskRule(consume, _attention_mask)
    if class_name == "MultiHeadAttention":
        return MaskRule(consume, _mha_mask(config))
    if class_name in MERGE_AND or class_name.startswith(FUSED_PREFIX):
        # A merged step (fusion.py) ends in a sum of its inputs, or starts with a conv (which tf.keras
        # never hands a mask): like Add, its mask is the AND of its inputs' masks.
        return MaskRule(consume, _merge_and)
    if class_name == "Concatenate":
        axis = config.get("axis", -1)
        return MaskRule(consume, _concat_mask(int(axis) if isinstance(axis, int) else -1))
    if class_name in PASS_THROUGH:
        return MaskRule(consume, _pass_first)
    return MaskRule(consume, None)
