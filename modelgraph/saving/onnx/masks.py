"""Implicit masks, carried beside the tensors of the exported graph (every Keras version).

The rules are the runner's: each class's catalogue entry says (``masks``, a
:class:`~modelgraph.catalogue.spec.MaskBehaviour` per Keras version) how a layer consumes masks and
which kind of output mask it produces (docs/masks.md); both versions dispatch on those kinds, never on
the class name.
tf.keras: Embedding(mask_zero) and Masking create a mask, mask-preserving layers carry it, RNNs keep
it only with ``return_sequences``, merges AND their inputs' masks. Keras 3: merges OR them,
Concatenate takes any() over the last axis, a layer's ``__call__`` fills ``mask`` / ``<arg>_mask``
from its tensor arguments (the runner's :func:`~modelgraph.runner.masks.rule_for_node` binding is
reused as is, with :func:`rule_for` and :func:`k3_producer` from here), and MultiHeadAttention clears
its inputs' masks. Here a mask is a bool ONNX tensor in Keras's layout, and each kind of rule emits
the nodes that compute it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from modelgraph.catalogue.spec import K2
from modelgraph.errors import UnsupportedConfigError
from modelgraph.runner.masks import behaviour
from modelgraph.saving.onnx._onnx import numpy_helper
from modelgraph.saving.onnx.emitter import Emitter, Value

Masks = list[Value | None]
Produce = Callable[[Emitter, Masks, list[Value], list[Value]], Masks]


@dataclass(frozen=True)
class MaskRule:
    consume: Callable[[Masks], dict[str, Any]] | None
    produce: Produce | None
    source: bool = False


def _first(masks: Masks) -> Value | None:
    """The first input's mask (None when the first input has none)."""
    return masks[0] if masks else None


def _and_all(e: Emitter, masks: Masks) -> Value | None:
    present = [m for m in masks if m is not None]
    if not present:
        return None
    out = present[0]
    for m in present[1:]:
        out = Value(e.op("And", [out.name, m.name], "mask_and"), out.rank, None, "bool")
    return out


def _pass_first(e: Emitter, masks: Masks, inputs: list[Value], outputs: list[Value]) -> Masks:
    return [_first(masks)] + [None] * (len(outputs) - 1)


def _merge_and(e: Emitter, masks: Masks, inputs: list[Value], outputs: list[Value]) -> Masks:
    return [_and_all(e, masks)]


def _concat(axis: int) -> Produce:
    def produce(e: Emitter, masks: Masks, inputs: list[Value], outputs: list[Value]) -> Masks:
        if all(m is None for m in masks):
            return [None]
        rank = inputs[0].rank
        if rank is None or (axis != -1 and axis != rank - 1):
            if any(m is None for m in masks):
                raise UnsupportedConfigError("Concatenate", "mask with axis", axis)
            out_rank = None if rank is None else rank - 1
            return [
                Value(
                    e.op("Concat", [m.name for m in masks], "mask_concat", axis=axis), out_rank, None, "bool"
                )
            ]  # type: ignore[union-attr]
        return [_and_all(e, masks)]

    return produce


def _rnn(return_sequences: bool, n_seq: int = 1) -> Produce:
    def produce(e: Emitter, masks: Masks, inputs: list[Value], outputs: list[Value]) -> Masks:
        m = _first(masks) if return_sequences else None
        return [m] * n_seq + [None] * (len(outputs) - n_seq)

    return produce


def _time_distributed(inner_produce: Produce | None) -> Produce:
    """tf.keras TimeDistributed.compute_mask: the inner layer's mask of the folded input, unfolded
    (the carried-over and RNN rules are the same on folded and unfolded masks, so they run on the
    unfolded one); when the inner layer gives none, the input mask reduced with any() after time."""

    def produce(e: Emitter, masks: Masks, inputs: list[Value], outputs: list[Value]) -> Masks:
        m = _first(masks)
        rest: Masks = [None] * (len(outputs) - 1)
        if m is None:
            return [None] + rest
        if inner_produce is not None:
            inner = _first(inner_produce(e, [m], inputs, outputs[:1]))
            if inner is not None:
                return [inner] + rest
        if m.rank is not None and m.rank > 2:
            f = e.cast(m.name, "float32")
            m = Value(e.cast(e.reduce("ReduceMax", f, list(range(2, m.rank)), 0), "bool"), 2, None, "bool")
        return [m] + rest

    return produce


def _embedding(e: Emitter, masks: Masks, inputs: list[Value], outputs: list[Value]) -> Masks:
    x = inputs[0]
    zero = e.const(np.zeros((), dtype=x.dtype if x.dtype != "bfloat16" else "float32"), "zero")
    return [Value(e.op("Not", [e.op("Equal", [e.logical(x), zero])], "mask"), x.rank, None, "bool")]


def _masking(value: float) -> Produce:
    def produce(e: Emitter, masks: Masks, inputs: list[Value], outputs: list[Value]) -> Masks:
        x = inputs[0]
        ne = e.cast(
            e.op("Not", [e.op("Equal", [e.logical(x), e.const(np.float32(value), "mask_value")])]), "float32"
        )
        m = e.cast(e.reduce("ReduceMax", ne, [-1], 0), "bool")
        return [Value(m, None if x.rank is None else x.rank - 1, None, "bool")]

    return produce


def _consume_first(masks: Masks) -> dict[str, Any]:
    m = _first(masks)
    return {} if m is None else {"mask": m}


def _consume_list(masks: Masks) -> dict[str, Any]:
    return {"mask": list(masks)} if any(m is not None for m in masks) else {}


def _consume_mha_masks(masks: Masks) -> dict[str, Any]:
    """tf.keras MultiHeadAttention reads the query's mask and the value's and key's (their AND)."""
    if not masks:
        return {}
    out: dict[str, Any] = {}
    if masks[0] is not None:
        out["query_mask"] = masks[0]
    rest = [m for m in masks[1:] if m is not None]
    if rest:
        out["value_mask"] = rest if len(rest) > 1 else rest[0]
    return out


# The catalogue's tf.keras consume kinds (MaskBehaviour.consume), as the runner dispatches them.
_K2_CONSUMERS: dict[str, Callable[[Masks], dict[str, Any]]] = {
    "first": _consume_first,
    "list": _consume_list,
    "mha": _consume_mha_masks,
}


def _inner_rule(config: Mapping[str, Any]) -> MaskRule | None:
    """The tf.keras rule of the layer a wrapper (TimeDistributed) holds, None when it names none."""
    inner = config.get("layer")
    if not isinstance(inner, Mapping) or not isinstance(inner.get("class_name"), str):
        return None
    inner_config = inner.get("config")
    return rule_for(inner["class_name"], inner_config if isinstance(inner_config, Mapping) else {})


def rule_for(class_name: str, config: Mapping[str, Any]) -> MaskRule:
    """The mask rule of one tf.keras layer class, from its catalogue entry's tf.keras mask behaviour
    (the runner's :func:`~modelgraph.runner.masks.rule_for`, emitting ONNX)."""
    b = behaviour(class_name, K2)
    consume = _K2_CONSUMERS.get(b.consume or "")
    if b.produce == "time_distributed":
        inner = _inner_rule(config)
        if inner is not None and inner.source:
            # The inner mask is elementwise over the folded (batch * time) axis: folding, computing
            # and unfolding equals computing it on the unfolded input.
            return MaskRule(consume, inner.produce, True)
        return MaskRule(consume, _time_distributed(inner.produce if inner is not None else None))
    produce = producer(b.produce, config)
    return MaskRule(consume, produce, b.produce in ("embedding", "masking") and produce is not None)


def producer(kind: str, config: Mapping[str, Any]) -> Produce | None:
    """The ONNX producer of one catalogue produce kind (``MaskBehaviour.produce``), either Keras version:
    the tf.keras-only kinds here, the others as :func:`k3_producer` makes them."""
    if kind == "and":
        return _merge_and
    if kind == "concat_all":
        axis = config.get("axis", -1)
        return _concat(int(axis) if isinstance(axis, int) else -1)
    if kind == "mha_scores":
        return _pass_first  # the output's mask; a call's scores mask: runner.masks.rule_for_node
    return k3_producer(kind, config)


# --- Keras 3: one node, the runner's table and call binding ----------------------------------------


def _merge_or(e: Emitter, masks: Masks, inputs: list[Value], outputs: list[Value]) -> Masks:
    """Keras 3 Merge.compute_mask: none when an input has none, else the OR of all of them."""
    if not masks or any(m is None for m in masks):
        return [None]
    out = masks[0]
    for m in masks[1:]:
        out = Value(e.op("Or", [out.name, m.name], "mask_or"), out.rank, None, "bool")  # type: ignore[union-attr]
    return [out]


def _concat_any(axis: int) -> Produce:
    """Keras 3 Concatenate.compute_mask: each mask expanded to its input's shape (all True for an
    unmasked input), concatenated along the layer's axis, then any() over the last axis."""

    def produce(e: Emitter, masks: Masks, inputs: list[Value], outputs: list[Value]) -> Masks:
        if all(m is None for m in masks):
            return [None]
        parts = []
        rank = None
        for m, x in zip(masks, inputs, strict=False):
            shape = e.op("Shape", [e.logical(x)], "mask_shape")
            rank = x.rank
            if m is None:
                ones = e.const(np.ones((1,), dtype=bool), "true")
                parts.append(e.op("Expand", [ones, shape], "mask_ones"))
                continue
            n = m.name
            if m.rank is not None and x.rank is not None and m.rank < x.rank:
                n = e.op("Unsqueeze", [n, e.ints([-1], "axes")])
            parts.append(e.op("Expand", [n, shape], "mask_full"))
        joined = e.cast(e.op("Concat", parts, "mask_concat", axis=axis), "float32")
        out_rank = None if rank is None else rank - 1
        return [Value(e.cast(e.reduce("ReduceMax", joined, [-1], 0), "bool"), out_rank, None, "bool")]

    return produce


def _band(e: Emitter, query: Value, value: Value, lower: int | None, upper: int | None) -> str:
    """(1, T, S) bool: ``j - i <= lower`` (when given) and ``i - j <= upper`` (when given), from the
    sequence lengths of ``query`` and ``value`` (Trilu on a (T, S) block of ones)."""
    lengths = [
        e.op("Slice", [e.op("Shape", [e.logical(x)]), e.ints([1]), e.ints([2])]) for x in (query, value)
    ]
    ones = e.op(
        "ConstantOfShape",
        [e.op("Concat", lengths, axis=0)],
        "ones",
        value=numpy_helper.from_array(np.ones((1,), np.float32)),
    )
    band = ones
    if lower is not None:
        band = e.op("Trilu", [band, e.ints(lower, "k")], "band", upper=0)
    if upper is not None:
        band = e.op("Trilu", [band, e.ints(-upper, "k")], "band", upper=1)
    return e.op("Unsqueeze", [e.cast(band, "bool"), e.ints([0], "axes")], "band")


def _attention_scores(config: Mapping[str, Any]) -> Produce:
    """Keras 3 MultiHeadAttention: the query's mask on the output; on returned scores the mask its
    softmax applied (the runner's ``_attention_scores_mask``: parts are the query, value and key
    masks and the attention_mask tensor; values the query and value)."""
    axes = config.get("attention_axes")
    n_axes = len(axes) if isinstance(axes, (list, tuple)) else 1
    causal = bool(config.get("use_causal_mask"))
    window = config.get("sliding_window")

    def produce(e: Emitter, masks: Masks, inputs: list[Value], outputs: list[Value]) -> Masks:
        query_mask, value_mask, key_mask, given = (list(masks) + [None] * 4)[:4]
        out: Masks = [query_mask] + [None] * (len(outputs) - 1)
        if len(outputs) < 2:
            return out
        pieces: list[str] = []
        if given is not None:
            pieces.append(given.name if given.dtype == "bool" else e.cast(e.logical(given), "bool"))
        if query_mask is not None:
            pieces.append(e.op("Unsqueeze", [query_mask.name, e.ints([-1], "axes")]))
        for m in (value_mask, key_mask):
            if m is not None:
                pieces.append(e.op("Unsqueeze", [m.name, e.ints([-2], "axes")]))
        if causal:
            pieces.append(_band(e, inputs[0], inputs[1], 0, None))
        if isinstance(window, int):
            pieces.append(_band(e, inputs[0], inputs[1], window - 1, window - 1))
        if not pieces:
            return out
        mask = pieces[0]
        for p in pieces[1:]:
            mask = e.op("And", [mask, p], "mask_and")
        rank = outputs[1].rank
        if rank is None:
            raise UnsupportedConfigError("MultiHeadAttention", "attention scores of unknown rank", None)
        axes_to_add = [rank - 2 * n_axes - 1 - i for i in range(rank - 3)]
        if any(a < 0 for a in axes_to_add):
            raise UnsupportedConfigError(
                "MultiHeadAttention", "masked scores over several attention axes", axes
            )
        if axes_to_add:
            mask = e.op("Unsqueeze", [mask, e.ints(sorted(axes_to_add), "axes")], "scores_mask")
        out[1] = Value(mask, rank, None, "bool")
        return out

    return produce


def k3_producer(kind: str, config: Mapping[str, Any]) -> Produce | None:
    """The ONNX producer of one ``MASK_BEHAVIOUR`` produce kind (Keras 3 kinds)."""
    if kind in ("pass", "query"):
        return _pass_first
    if kind == "attention_scores":
        return _attention_scores(config)
    if kind == "or":
        return _merge_or
    if kind == "concat_any":
        axis = config.get("axis", -1)
        return _concat_any(int(axis) if isinstance(axis, int) else -1)
    if kind == "rnn":
        return _rnn(bool(config.get("return_sequences", False)))
    if kind == "bidirectional":
        inner = config.get("layer")
        inner_config = inner.get("config", {}) if isinstance(inner, Mapping) else {}
        n_seq = 2 if config.get("merge_mode", "concat") is None else 1
        return _rnn(bool(inner_config.get("return_sequences", False)), n_seq)
    if kind == "embedding":
        return _embedding if config.get("mask_zero") else None
    if kind == "masking":
        return _masking(float(config.get("mask_value", 0.0)))
    if kind == "drop":
        return None
    raise UnsupportedConfigError("mask rule", "produce", kind)
