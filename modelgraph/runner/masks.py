"""Implicit masks, one mechanism for every Keras version: who produces, consumes, passes or drops one.

Both tf.keras and Keras 3 attach a mask to a tensor at run time (``_keras_mask``): ``Embedding
(mask_zero=True)`` and ``Masking`` create one, layers that support masking carry it over or compute
a new one (``compute_mask``), every other layer drops it, and a layer whose ``call`` takes masks
receives them without the caller naming them. Keras 3 also records a ``mask=`` keyword in a node
when the call had one tensor argument and no keywords (it then runs like any other argument, and
wins over the implicit one), but not for list inputs (Attention, merges), several tensor arguments
(MultiHeadAttention(q, v)) or calls with keywords: those get their masks at run time only, so the
graph must propagate them (docs/masks.md).

Each class's catalogue entry states in its ``masks`` field, per Keras version (2: Keras 1/2 and
tf.keras, 3: Keras 3), how the class consumes masks and how it produces its output masks
(:class:`modelgraph.catalogue.spec.MaskBehaviour`); a class or version without one drops masks and
takes none. :func:`rule_for` (tf.keras) and :func:`rule_for_node` (any version, one node
of a graph) turn that into the functions the interpreter calls. Nested models are inlined by the
interpreter, so a mask crosses a nested model's boundary like any other layer's: in tf.keras its
``compute_mask`` runs the inner graph, in Keras 3 the inner layer's output tensor is the model's
output and keeps its mask. The tf.keras rules are checked node by node against the masks real
tf_keras attached (``tests/runner/test_masks_k2.py``), the Keras 3 ones by the outputs of real Keras
3 models whose masks no config records (``samples/goldens/k3_mask_implicit``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from modelgraph import catalogue
from modelgraph.catalogue.spec import K2, K3, MaskBehaviour
from modelgraph.graph import TensorRef, flatten_structure, map_structure
from modelgraph.runner.fast.fused import ADD_ACTIVATION, FUSED_PREFIX

Array = np.ndarray
MaskFn = Callable[[list[Array | None], list[Any], list[Any]], list[Array | None]]


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


def _concat_parts(
    masks: list[Array | None], inputs: list[Any], fit: Callable[[Array, tuple[int, ...]], Array]
) -> list[Array]:
    """The masks of a Concatenate's inputs as booleans, each ``fit`` to its input's shape; an unmasked
    input's is all True. Both Keras versions start this way and differ in ``fit`` and what follows."""
    parts = []
    for m, x in zip(masks, inputs, strict=False):
        shape = np.shape(x)
        parts.append(np.ones(shape, dtype=bool) if m is None else fit(np.asarray(m, dtype=bool), shape))
    return parts


def _expand_to_rank(m: Array, shape: tuple[int, ...]) -> Array:
    while m.ndim < len(shape):
        m = np.expand_dims(m, -1)
    return m


def _concat_mask(axis: int) -> MaskFn:
    def produce(masks: list[Array | None], inputs: list[Any], outputs: list[Any]) -> list[Array | None]:
        if all(m is None for m in masks):
            return [None]
        parts = _concat_parts(masks, inputs, _expand_to_rank)
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


def _attention_scores_mask(config: Mapping[str, Any]) -> MaskFn:
    """Keras 3 MultiHeadAttention output masks (see :func:`keras3_rule` for the ``parts``).

    The output gets the query's mask. Returned scores keep the mask the layer's inner ``Softmax``
    applied to them: ``query[:, :, None] & value[:, None, :] & key[:, None, :]``, the
    ``attention_mask`` argument cast to bool, the causal and sliding-window bands, expanded at the
    head axis. ``config`` carries the call's ``use_causal_mask`` beside the layer's own keys.
    """
    axes = config.get("attention_axes")
    n_axes = len(axes) if isinstance(axes, (list, tuple)) else 1
    expansion_axis = -2 * n_axes - 1  # Keras's _masked_softmax: the num_heads axis
    causal = bool(config.get("use_causal_mask"))
    window = config.get("sliding_window")

    def produce(parts: list[Array | None], values: list[Any], outputs: list[Any]) -> list[Array | None]:
        query_mask, value_mask, key_mask, given = (list(parts) + [None] * 4)[:4]
        out: list[Array | None] = [query_mask] + [None] * (len(outputs) - 1)
        if len(outputs) < 2:
            return out
        pieces = [] if given is None else [np.asarray(given) != 0]
        if query_mask is not None:
            pieces.append(np.asarray(query_mask, dtype=bool)[:, :, None])
        pieces += [np.asarray(m, dtype=bool)[:, None, :] for m in (value_mask, key_mask) if m is not None]
        if causal or isinstance(window, int):
            rows = np.arange(np.shape(values[0])[1])[:, None]
            cols = np.arange(np.shape(values[1])[1])[None, :]
            if causal:
                pieces.append((rows >= cols)[None])
            if isinstance(window, int):
                pieces.append((np.abs(rows - cols) < window)[None])
        scores_mask = _and_all(list(pieces))
        if scores_mask is not None:
            while scores_mask.ndim < np.ndim(outputs[1]):
                scores_mask = np.expand_dims(scores_mask, expansion_axis)
            out[1] = scores_mask
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


def _merge_or(masks: list[Array | None], inputs: list[Any], outputs: list[Any]) -> list[Array | None]:
    # Keras 3 Merge.compute_mask: no mask when any input has none, else the OR of all of them.
    if not masks or any(m is None for m in masks):
        return [None]
    out = np.asarray(masks[0], dtype=bool)
    for m in masks[1:]:
        out = np.logical_or(out, np.asarray(m, dtype=bool))
    return [out]


def _broadcast_one_axis(m: Array, shape: tuple[int, ...]) -> Array:
    return np.broadcast_to(np.expand_dims(m, -1), shape) if m.ndim < len(shape) else m


def _concat_mask_k3(axis: int) -> MaskFn:
    """Keras 3 Concatenate.compute_mask: each mask broadcast to its input's shape (all True for an
    unmasked input), concatenated along the layer's axis, then any() over the last axis."""

    def produce(masks: list[Array | None], inputs: list[Any], outputs: list[Any]) -> list[Array | None]:
        if all(m is None for m in masks):
            return [None]
        parts = _concat_parts(masks, inputs, _broadcast_one_axis)
        return [np.any(np.concatenate(parts, axis=axis), axis=-1)]

    return produce


# --- the behaviours: one field of each catalogue entry ----------------------------------------------


_DROP = MaskBehaviour(None, "drop")


def behaviour(class_name: str, keras_major: int) -> MaskBehaviour:
    """The mask behaviour of a class key in a Keras version (merged plan steps included)."""
    version = K3 if keras_major >= 3 else K2
    if class_name.startswith(FUSED_PREFIX):
        # A merged step (fusion.py) ends in a sum of its inputs, or starts with a conv. tf.keras: like
        # Add, the AND of its inputs' masks (a conv is never handed one). Keras 3: the sum of two
        # masked tensors ORs them; a conv's output has no mask, so a sum with it has none.
        if version == K2:
            return MaskBehaviour(None, "and")
        return MaskBehaviour(None, "or") if class_name == ADD_ACTIVATION else _DROP
    spec = catalogue.spec_for(class_name)
    return _DROP if spec is None else spec.masks.get(version, _DROP)


def _producer(kind: str, config: Mapping[str, Any]) -> MaskFn | None:
    if kind == "pass":
        return _pass_first
    if kind == "and":
        return _merge_and
    if kind == "or":
        return _merge_or
    if kind in ("concat_all", "concat_any"):
        axis = config.get("axis", -1)
        axis = int(axis) if isinstance(axis, int) else -1
        return _concat_mask(axis) if kind == "concat_all" else _concat_mask_k3(axis)
    if kind == "rnn":
        return _rnn_mask(config)
    if kind == "bidirectional":
        return _bidirectional_mask(config)
    if kind == "time_distributed":
        return _time_distributed_mask(config)[0]
    if kind == "query":
        return _attention_mask
    if kind == "mha_scores":
        return _pass_first  # the output's mask; a call's scores mask: rule_for_node (_scores_rule)
    if kind == "attention_scores":
        return _attention_scores_mask(config)
    if kind == "embedding":
        return _embedding_mask(config)
    if kind == "masking":
        return _masking_mask(config)
    return None


_K2_CONSUMERS: dict[str, Callable[[list[Array | None]], dict[str, Any]]] = {
    "first": _consume_first,
    "list": _consume_list,
    "mha": _consume_mha,
}


def rule_for(class_name: str, config: Mapping[str, Any]) -> MaskRule:
    """The mask rule of one tf.keras layer class (nested models are inlined, so not needed here)."""
    b = behaviour(class_name, K2)
    consume = _K2_CONSUMERS.get(b.consume or "")
    produce = _producer(b.produce, config)
    source = b.produce in ("embedding", "masking") and produce is not None
    if b.produce == "time_distributed":
        source = _time_distributed_mask(config)[1]
    return MaskRule(consume, produce, source=source)


# --- Keras 3: one node ------------------------------------------------------------------------------


def _is_tensor_argument(value: Any) -> bool:
    """Keras 3 CallSpec: a tensor, or a non-empty structure of tensors (and Nones)."""
    if isinstance(value, TensorRef):
        return True
    if isinstance(value, (list, tuple, Mapping)) and len(value) > 0:
        flat = flatten_structure(value)
        return all(v is None or isinstance(v, TensorRef) for v in flat)
    return False


def rule_for_node(
    class_name: str,
    config: Mapping[str, Any],
    keras_major: int,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    inputs: tuple[TensorRef, ...],
    *,
    keras2: Callable[[str, Mapping[str, Any]], Any] | None = None,
    producer: Callable[[str, Mapping[str, Any]], Callable[..., Any] | None] | None = None,
) -> Any:
    """The mask rule of one node: tf.keras nodes get ``keras2(class_name, config)``, Keras 3 nodes
    :func:`keras3_rule` with ``producer``; by default this module's (:func:`rule_for`, arrays), the
    ONNX exporter passes its own (``modelgraph/saving/onnx/masks.py``, ONNX nodes)."""
    if keras_major < 3:
        rule = (keras2 or rule_for)(class_name, config)
        b = behaviour(class_name, K2)
        if b.produce == "mha_scores" and rule.produce is not None:
            bound = _bind(b.call, args, kwargs)
            if bound.get("return_attention_scores"):
                produce, source = _scores_rule(config, bound, inputs, producer or _producer)
                return replace(rule, produce=produce, source=source)
        return rule
    return keras3_rule(class_name, config, args, kwargs, inputs, producer or _producer)


def _bind(params: tuple[str, ...], args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """A call's arguments by parameter name (``#i`` for a positional one past ``params``)."""
    bound: dict[str, Any] = {}
    for i, value in enumerate(args):
        bound[params[i] if i < len(params) else f"#{i}"] = value
    bound.update(kwargs)
    return bound


def _scores_rule(
    config: Mapping[str, Any],
    bound: Mapping[str, Any],
    inputs: tuple[TensorRef, ...],
    producer: Callable[[str, Mapping[str, Any]], Callable[..., Any] | None],
) -> tuple[Callable[..., list[Any]], bool]:
    """The output masks of a MultiHeadAttention call that returns its scores, either Keras version:
    the query's mask on the output, and on the scores the whole mask the layer's softmax applied
    (``producer("attention_scores", ...)``), from the masks of the bound query, value and key and the
    value of the ``attention_mask`` argument. Also whether the call makes a mask from nothing (an
    ``attention_mask`` tensor, a causal or sliding-window band). tf.keras and Keras 3 attach the same
    mask to the scores (measured: tf_keras 2.21 ``_keras_mask``, Keras 3.15.1 on both backends)."""
    config = {**config, "use_causal_mask": bound.get("use_causal_mask") is True}
    produce = producer("attention_scores", config)
    position = {ref: i for i, ref in reversed(list(enumerate(inputs)))}
    named = [bound.get(n) for n in ("query", "value", "key", "attention_mask")]
    slots = [position.get(r, -1) if isinstance(r, TensorRef) else -1 for r in named]

    def produce_scores(*call: Any) -> list[Any]:
        *context, masks, values, outputs = call
        parts = [masks[i] if i >= 0 else None for i in slots[:3]]
        parts.append(values[slots[3]] if slots[3] >= 0 else None)
        shaped = [values[i] if i >= 0 else None for i in slots[:2]]
        return produce(*context, parts, shaped, outputs)  # type: ignore[misc]

    source = slots[3] >= 0 or config["use_causal_mask"] or config.get("sliding_window") is not None
    return produce_scores, bool(source)


def keras3_rule(
    class_name: str,
    config: Mapping[str, Any],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    inputs: tuple[TensorRef, ...],
    producer: Callable[[str, Mapping[str, Any]], Callable[..., Any] | None],
) -> MaskRule:
    """The mask rule of one Keras 3 node, its output masks made by ``producer(kind, config)``'s function
    (this module's arrays, or the ONNX exporter's nodes).

    The functions it returns take the masks and values of the node's flat ``inputs`` (the
    interpreter's order). ``consume`` is what Keras 3's ``Layer.__call__`` adds to the call: ``mask``
    when the call has one tensor argument and did not give one, ``<arg>_mask`` for each of several
    tensor arguments whose name has such a parameter. ``produce(*context, masks, values, outputs)``
    calls the producer's function with the same ``context`` (none here, the emitter for the ONNX
    exporter) and the mask the call was given (given or filled in) or else the first argument's, as
    ``compute_mask`` does.
    """
    b = behaviour(class_name, K3)
    params = b.call
    bound = _bind(params, args, kwargs)
    scores = b.produce == "attention_scores"
    produce = producer(b.produce, config)
    if b.consume is None and produce is None:
        return MaskRule(None, None)
    position = {ref: i for i, ref in reversed(list(enumerate(inputs)))}

    def indices(value: Any) -> Any:
        return map_structure(value, lambda r: position.get(r, -1), lambda v: isinstance(v, TensorRef))

    given_mask = bound.get("mask")
    fills: list[tuple[str, Any]] = []
    if b.consume == "merge" and args:
        fills.append(("input_masks", indices(list(flatten_structure(args[0])))))
    elif b.consume == "call":
        tensor_args = [(k, v) for k, v in bound.items() if _is_tensor_argument(v)]
        if len(tensor_args) == 1 and "mask" in params and given_mask is None:
            fills.append(("mask", indices(tensor_args[0][1])))
        elif len(tensor_args) > 1:
            for k, v in tensor_args:
                if f"{k}_mask" in params and bound.get(f"{k}_mask") is None:
                    fills.append((f"{k}_mask", indices(v)))
    first = indices(args[0]) if args else None
    given = indices(given_mask) if given_mask is not None else None
    filled_mask = next((t for k, t in fills if k == "mask"), None)

    def pick(template: Any, values: list[Any]) -> Any:
        return map_structure(template, lambda i: values[i] if i >= 0 else None, lambda v: isinstance(v, int))

    consume = None
    if fills:

        def consume(masks: list[Array | None]) -> dict[str, Any]:
            out = {}
            for name, template in fills:
                value = pick(template, masks)
                if any(m is not None for m in flatten_structure(value)):
                    out[name] = value
            return out

    produce_k3 = None
    if produce is not None and scores:
        produce_k3, source = _scores_rule(config, bound, inputs, producer)
        return MaskRule(consume, produce_k3, source=bool(bound.get("return_attention_scores")) and source)
    if produce is not None:

        def produce_k3(*call: Any) -> list[Any]:
            *context, masks, values, outputs = call
            if given is not None:
                previous = flatten_structure(pick(given, values))
            elif filled_mask is not None:
                previous = flatten_structure(pick(filled_mask, masks))
            else:
                previous = flatten_structure(pick(first, masks))
            first_values = flatten_structure(pick(first, values))
            return produce(*context, previous, first_values, outputs)

    source = b.produce in ("embedding", "masking") and produce is not None
    return MaskRule(consume, produce_k3, source=source or given is not None)


def keras_run_order(graph: Any) -> dict[Any, int]:
    """The position of each node in the order a Keras Functional runs them (``_run_through_graph``):
    depth descending, ties in the order ``map_graph`` first gave a node its depth."""
    seen: dict[Any, None] = {}
    for node in reversed([n for n in graph.nodes if n.depth is not None]):
        seen.setdefault(node.key, None)
        for ref in node.inputs:
            seen.setdefault(ref.node_key, None)
    depth = {n.key: n.depth for n in graph.nodes if n.depth is not None}
    ordered = sorted((k for k in seen if k in depth), key=lambda k: -depth[k])
    return {k: i for i, k in enumerate(ordered)}


def cleared_masks(graph: Any) -> tuple[dict[TensorRef, int], dict[Any, int]]:
    """A Keras 3 layer whose entry's mask behaviour ``clears`` arguments (MultiHeadAttention: query,
    value, key) runs ``set_keras_mask(x, None)`` on the very tensors it was given, when no dtype cast
    copied them, so a layer that Keras runs after it reads them unmasked. Returns (tensor -> run
    position of the first layer that clears it, node key -> run position)."""
    position = keras_run_order(graph)
    cleared: dict[TensorRef, int] = {}
    for node in graph.nodes:
        layer = graph.layer(node.layer)
        if layer.kind != "layer" or node.key not in position:
            continue
        spec = catalogue.spec_for(layer.key)
        behaviour = spec.masks.get(K3) if spec is not None else None
        if behaviour is None or not behaviour.clears:
            continue
        if _is_half_policy(layer.config.get("dtype")):
            continue  # its inputs were cast: the copies lose their masks, the originals keep them
        bound = dict(zip(behaviour.call, node.args, strict=False))
        for name in behaviour.clears:
            ref = bound.get(name, node.kwargs.get(name))
            if isinstance(ref, TensorRef):
                here = position[node.key]
                cleared[ref] = min(cleared.get(ref, here), here)
    return cleared, position


def _is_half_policy(dtype: Any) -> bool:
    name = dtype.get("config", {}).get("name") if isinstance(dtype, Mapping) else dtype
    return isinstance(name, str) and ("float16" in name)
