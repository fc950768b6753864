"""Keras 1/2 implicit masks written explicitly, so that Keras 3 computes what Keras 2 computed.

tf.keras never wrote masks: an ``Embedding(mask_zero=True)`` or ``Masking`` layer attached a mask
to its output at run time and the layers after it picked it up. Keras 3 graphs carry a mask as op
nodes and ``mask=`` call arguments instead (``Embedding`` -> ``NotEqual(tokens, 0)``, ``Masking``
-> ``Any(NotEqual(x, mask_value), axis=-1)``), and Keras 3 also attaches implicit masks of its own,
by its own rules (merge layers OR the masks where Keras 2 ANDed them; ``Multiply``, ``Maximum``,
``Minimum`` and ``MultiHeadAttention`` read them from their input tensors). So a converted file:

* computes every mask Keras 2 computed with op nodes, following each class's Keras 2 rule in the
  catalogue (``masks`` field, :class:`~modelgraph.catalogue.spec.MaskBehaviour`): ``pass``,
  ``and`` (``LogicalAnd``), ``concat_all``, ``rnn``, ``bidirectional``, ``time_distributed``,
  ``query``, ``mha_scores``, ``embedding``, ``masking``;
* hands each consuming call the mask Keras 2 handed it, by the Keras 2 way of consuming
  (``first`` -> ``mask=``, ``list`` -> ``mask=[...]``, ``mha`` -> the attention mask Keras 2 built
  from the query/value/key masks, as ``attention_mask=``);
* feeds a layer that would read a Keras 3 implicit mask Keras 2 did not give it (a Keras 3 mask
  consumer without an explicit argument, a ``merge``/``MultiHeadAttention`` input) a ``Copy`` of the
  tensor: an op's output carries no implicit mask.

:func:`plan_masks` returns those edits; the config writer applies them. Masks that cross a nested
model, or that Keras 2 attached to attention scores, are refused rather than guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from modelgraph import catalogue
from modelgraph.catalogue.spec import K2, K3, MaskBehaviour
from modelgraph.graph import ModelGraph, Node, TensorRef, flatten_structure
from modelgraph.saving.upgrades import NotConvertible, keras3_class_name
from modelgraph.shapes import ShapeResult

_DROP = MaskBehaviour(None, "drop")
_DIFFERENT = (
    "Keras 3 treats the implicit Keras 2 mask that reaches it differently; only .keras writes it explicitly"
)
# A mask Keras 2 attached that the writer does not compute (attention scores).
_UNWRITTEN = TensorRef("", -1, -1)


@dataclass
class AddedOp:
    """A new op node: its name, class, config and call arguments (TensorRefs at tensor positions)."""

    name: str
    class_name: str
    config: dict[str, Any]
    args: list[Any]
    after: str | None = None  # the entry it follows in the config; None: after its last argument's
    shape: tuple[Any, ...] | None = None  # of its output
    dtype: str = "bool"


@dataclass
class WritePlan:
    """What the writer adds to a graph: op nodes, and how each consuming node changes (implicit masks
    made explicit here, time-major transposes in :mod:`modelgraph.saving.time_major`)."""

    ops: list[AddedOp] = field(default_factory=list)
    # node key -> keyword arguments to set (mask tensors, lists of them)
    kwargs: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    # node key -> {input tensor: the tensor it reads instead} (Copy nodes)
    inputs: dict[tuple[str, int], dict[TensorRef, TensorRef]] = field(default_factory=dict)
    refusals: list[tuple[str, str, str]] = field(default_factory=list)  # (layer, class, reason)
    # model output -> the tensor written in its place (a time-major RNN's transposed-back output)
    outputs: dict[TensorRef, TensorRef] = field(default_factory=dict)
    # tensors whose written shape differs from the source's (a time-major RNN's own output), or that
    # the source has not (an added call's outputs)
    shapes: dict[TensorRef, tuple[Any, ...] | None] = field(default_factory=dict)
    # layer -> added calls of it: (the node whose input replacements they share, args, kwargs)
    calls: dict[str, list[tuple[tuple[str, int], tuple[Any, ...], dict[str, Any]]]] = field(
        default_factory=dict
    )
    # masks that are only right when written explicitly (a legacy .h5 refuses these layers)
    explicit_only: list[tuple[str, str, str]] = field(default_factory=list)


def _behaviour(class_name: str, version: int) -> MaskBehaviour:
    spec = catalogue.spec_for(class_name)
    return _DROP if spec is None else spec.masks.get(version, _DROP)


@dataclass
class _Planner:
    graph: ModelGraph
    shapes: ShapeResult | None
    plan: WritePlan = field(default_factory=WritePlan)
    mask2: dict[TensorRef, TensorRef] = field(default_factory=dict)  # Keras 2's mask of a tensor
    may3: set[TensorRef] = field(default_factory=set)  # may carry a Keras 3 implicit mask
    copies: dict[TensorRef, TensorRef] = field(default_factory=dict)
    taken: set[str] = field(default_factory=set)
    read: set[TensorRef] = field(default_factory=set)  # every tensor a node or the model reads
    op_shapes: dict[str, tuple[Any, ...] | None] = field(default_factory=dict)
    redirect: dict[TensorRef, TensorRef] = field(default_factory=dict)  # read this written tensor instead

    # --- op nodes ---------------------------------------------------------------------------
    def shape(self, ref: TensorRef) -> tuple[Any, ...] | None:
        if ref.layer in self.op_shapes:
            return self.op_shapes[ref.layer]
        shape = self.shapes.shape(ref) if self.shapes is not None else None
        return None if shape is None else tuple(shape)

    def op(
        self,
        base: str,
        class_name: str,
        config: dict[str, Any],
        args: list[Any],
        shape: tuple[Any, ...] | None,
        *,
        after: str | None = None,
        dtype: str = "bool",
    ) -> TensorRef:
        name, n = base, 1
        while name in self.taken:
            name, n = f"{base}_{n}", n + 1
        self.taken.add(name)
        self.plan.ops.append(AddedOp(name, class_name, config, args, after, shape, dtype))
        self.op_shapes[name] = shape
        return TensorRef(name, 0, 0)

    def logical_and(self, base: str, masks: list[TensorRef]) -> TensorRef:
        out = masks[0]
        for m in masks[1:]:
            a, b = self.shape(out), self.shape(m)
            shape = _broadcast(a, b)
            out = self.op(f"{base}_and", "LogicalAnd", {}, [out, m], shape)
        return out

    def copy(self, ref: TensorRef) -> TensorRef:
        """The tensor without its Keras 3 implicit mask (one Copy per tensor, shared)."""
        if ref not in self.copies:
            dtype = self.shapes.dtype(ref) if self.shapes is not None else None
            source = self.redirect.get(ref, ref)
            self.copies[ref] = self.op(
                f"{ref.layer}_unmasked", "Copy", {}, [source], self.shape(ref), dtype=dtype or "float32"
            )
        return self.copies[ref]

    # --- one node -----------------------------------------------------------------------------
    def node(self, node: Node) -> None:
        layer = self.graph.layer(node.layer)
        cls = layer.class_name
        masks = [self.mask2.get(r) for r in node.inputs]
        outputs = self._outputs(node)
        for ref in node.inputs:
            if ref in self.redirect:
                self.plan.inputs.setdefault(node.key, {})[ref] = self.redirect[ref]
        if layer.kind == "model":
            if any(m is not None for m in masks):
                raise NotConvertible("an implicit Keras 2 mask crosses into a nested model")
            if layer.subgraph is not None and _masked_outputs(layer.subgraph):
                raise NotConvertible("an implicit Keras 2 mask made inside the nested model leaves it")
            return
        b2, b3 = _behaviour(cls, K2), _behaviour(keras3_class_name(cls), K3)
        if any(m is _UNWRITTEN for m in masks):
            raise NotConvertible("a mask Keras 2 attached to attention scores reaches it")
        if any(m is not None for m in masks) and not _same_in_both(b2, b3, layer.config):
            self.plan.explicit_only.append((node.layer, cls, _DIFFERENT))
        covered = self._consume(node, layer.config, b2, b3, masks)
        if b3.consume is not None:
            for ref in node.inputs:
                if ref in self.may3 and ref not in covered:
                    self.plan.inputs.setdefault(node.key, {})[ref] = self.copy(ref)
                    self.plan.explicit_only.append((node.layer, cls, _DIFFERENT))
        for ref, mask in zip(outputs, self._produce(node, layer.config, b2, masks, outputs), strict=True):
            if mask is not None:
                self.mask2[ref] = mask
        if self._may_mask_in_keras3(node, layer.config, b3):
            self.may3.update(outputs)

    def _outputs(self, node: Node) -> list[TensorRef]:
        known = self.shapes.outputs.get(node.key) if self.shapes is not None else None
        count = (
            len(known)
            if known
            else 1 + max((r.tensor_index for r in self.read if r.node_key == node.key), default=0)
        )
        return [TensorRef(node.layer, node.index, i) for i in range(count)]

    def _consume(
        self,
        node: Node,
        config: Mapping[str, Any],
        b2: MaskBehaviour,
        b3: MaskBehaviour,
        masks: list[TensorRef | None],
    ) -> set[TensorRef]:
        """Set the Keras 2 masks as explicit arguments; the inputs whose Keras 3 masks they override."""
        kind = b2.consume
        if kind == "mha":
            if any(m is not None for m in masks) or _returns_masked_scores(node):
                self._mha(node, masks)
            return set()
        if kind is None or not any(m is not None for m in masks):
            return set()
        if kind == "first":
            if b3.consume != "call" or "mask" not in b3.call:
                raise NotConvertible("Keras 3's class takes no mask argument for the Keras 2 mask")
            if masks[0] is None:
                return set()
            if node.kwargs.get("mask") is None:
                self.plan.kwargs.setdefault(node.key, {})["mask"] = masks[0]
            return set(node.inputs)
        if kind == "list":
            first = node.args[0] if node.args else None
            if not isinstance(first, list | tuple) or node.kwargs.get("mask") is not None:
                raise NotConvertible("an attention call whose masks cannot be written")
            by_ref = dict(zip(node.inputs, masks, strict=True))
            self.plan.kwargs.setdefault(node.key, {})["mask"] = [by_ref.get(r) for r in first]
            return set(node.inputs)
        raise NotConvertible(f"Keras 2 mask consumption '{kind}' is not written")  # pragma: no cover

    def _mha(self, node: Node, masks: list[TensorRef | None]) -> None:
        """tf.keras MultiHeadAttention ANDed ``query[:, :, None]``, ``value[:, None, :]``,
        ``key[:, None, :]`` and ``attention_mask``: that AND, passed as ``attention_mask=``."""
        names = ("query", "value", "key", "attention_mask")
        bound = dict(zip(names, node.args, strict=False))
        if len(node.args) > 3:
            raise NotConvertible("an attention_mask passed positionally")
        bound.update({k: v for k, v in node.kwargs.items() if k in names})
        mask_of = dict(zip(node.inputs, masks, strict=True))
        parts: list[TensorRef] = []
        base = (
            f"{node.layer}_attention_mask" if node.index == 0 else f"{node.layer}_{node.index}_attention_mask"
        )
        for name, axis in (("query", -1), ("value", -2), ("key", -2)):
            ref = bound.get(name)
            if name == "key" and ref is None:
                continue  # tf.keras: key defaults to value, whose mask is already in
            mask = mask_of.get(ref) if isinstance(ref, TensorRef) else None
            if mask is None:
                continue
            shape = self.shape(mask)
            expanded = None if shape is None else _expand(shape, axis)
            parts.append(self.op(f"{base}_{name}", "ExpandDims", {"axis": axis}, [mask], expanded))
        given = bound.get("attention_mask")
        if isinstance(given, TensorRef):
            parts.append(self.op(f"{base}_given", "Cast", {"dtype": "bool"}, [given], self.shape(given)))
        elif given is not None:
            raise NotConvertible("an attention_mask that is not a tensor")
        if not parts:
            return  # only a causal band: Keras 3 computes it from the call's use_causal_mask
        attention_mask = self.logical_and(base, parts)
        self.plan.kwargs.setdefault(node.key, {})["attention_mask"] = attention_mask
        if node.kwargs.get("return_attention_scores") and parts:
            self._mha_scores(node, bound, attention_mask, base)

    def _mha_scores(self, node: Node, bound: Mapping[str, Any], attention_mask: TensorRef, base: str) -> None:
        """A masked call that returns its scores (masks from its inputs, an ``attention_mask``
        argument, or both): tf.keras spread a row whose every position is masked evenly (its softmax
        adds -1e9 to every score of the row), but Keras 3's masked softmax, which it uses when it
        returns the scores, zeroes that row, in the scores and in the attention output (measured).
        Its dot-product path, used without scores, spreads it evenly as tf.keras did. So the written
        model calls the layer a second time, without scores, for the attention output, and writes the
        scores as ``Where(any(mask, -1), scores, 1 / S)``. Keras 3 leaves the dot-product path with
        dropout (even when not training) or several attention axes, and a causal band can mask a
        row the mask alone does not: those are refused."""
        config = self.graph.layer(node.layer).config
        if config.get("attention_axes") not in (None, [1], (1,), 1, -2):
            raise NotConvertible("scores of a masked call over several attention axes")
        if config.get("dropout"):
            raise NotConvertible(
                "scores of a masked call with dropout (Keras 3 zeroes a fully masked row, tf.keras spreads it)"
            )
        if node.kwargs.get("use_causal_mask"):
            raise NotConvertible("scores of a masked causal call (a row the band masks fully is not written)")
        value = bound.get("key") or bound.get("value")
        shape = self.shape(value) if isinstance(value, TensorRef) else None
        if shape is None or len(shape) != 3 or not isinstance(shape[1], int):
            raise NotConvertible("scores of a masked call whose key length is unknown")
        output, scores = TensorRef(node.layer, node.index, 0), TensorRef(node.layer, node.index, 1)
        index = len(self.graph.nodes_of(node.layer)) + len(self.plan.calls.get(node.layer, []))
        kwargs = {k: v for k, v in node.kwargs.items() if k != "return_attention_scores"}
        self.plan.calls.setdefault(node.layer, []).append(
            (node.key, node.args, {**kwargs, "attention_mask": attention_mask})
        )
        second = TensorRef(node.layer, index, 0)
        self.plan.shapes[second] = self.shape(output)
        mask_shape = self.shape(attention_mask)
        if mask_shape is None or len(mask_shape) != 3:
            raise NotConvertible("scores of a masked call whose mask shape is unknown")
        row = self.op(
            f"{base}_row", "Any", {"axis": -1, "keepdims": False}, [attention_mask], mask_shape[:-1]
        )
        row = self.op(f"{base}_row", "ExpandDims", {"axis": 1}, [row], _expand(mask_shape[:-1], 1))
        row = self.op(f"{base}_row", "ExpandDims", {"axis": -1}, [row], (*_expand(mask_shape[:-1], 1), 1))
        dtype = (self.shapes.dtype(scores) if self.shapes is not None else None) or "float32"
        even = self.op(
            f"{node.layer}_scores",
            "Where",
            {},
            [row, scores, 1.0 / shape[1]],
            self.shape(scores),
            dtype=dtype,
        )
        for old, new in ((output, second), (scores, even)):
            self.redirect[old] = new
            self.plan.outputs[old] = new

    def _produce(
        self,
        node: Node,
        config: Mapping[str, Any],
        b2: MaskBehaviour,
        masks: list[TensorRef | None],
        outputs: list[TensorRef],
    ) -> list[TensorRef | None]:
        """Keras 2's output masks of this node, as tensors of the graph or new op nodes."""
        none: list[TensorRef | None] = [None] * len(outputs)
        kind = b2.produce
        first = masks[0] if masks else None
        masked = any(m is not None for m in masks)
        if kind == "mha_scores" and len(outputs) > 1 and (masked or _returns_masked_scores(node)):
            return [first] + [_UNWRITTEN] * (len(outputs) - 1)
        if kind == "embedding":
            if not config.get("mask_zero"):
                return none
            ids = node.inputs[0]
            return [
                self.op(
                    f"{node.layer}_not_equal", "NotEqual", {}, [ids, 0], self.shape(ids), after=node.layer
                )
            ]
        if kind == "masking":
            x = node.inputs[0]
            full = self.shape(x)
            ne = self.op(
                f"{node.layer}_not_equal",
                "NotEqual",
                {},
                [x, config.get("mask_value", 0.0)],
                full,
                after=node.layer,
            )
            reduced = None if full is None else full[:-1]
            anyop = self.op(
                f"{node.layer}_any", "Any", {"axis": -1, "keepdims": False}, [ne], reduced, after=ne.layer
            )
            return [anyop] + none[1:]
        if not any(m is not None for m in masks):
            if kind == "time_distributed":
                return self._time_distributed(node, config, None, outputs)
            return none
        if kind in ("pass", "query", "mha_scores"):
            return [first] + none[1:]
        if kind == "and":
            present = [m for m in masks if m is not None]
            return [self.logical_and(node.layer, present)]
        if kind == "concat_all":
            return [self._concat(node, config, masks)]
        if kind == "rnn":
            return [first if config.get("return_sequences") else None] + none[1:]
        if kind == "bidirectional":
            inner = config.get("layer") or {}
            seq = bool((inner.get("config") or {}).get("return_sequences"))
            n_seq = 2 if config.get("merge_mode", "concat") is None else 1
            return [first if seq else None] * n_seq + none[n_seq:]
        if kind == "time_distributed":
            return self._time_distributed(node, config, first, outputs)
        return none

    def _concat(self, node: Node, config: Mapping[str, Any], masks: list[TensorRef | None]) -> TensorRef:
        """tf.keras Concatenate: each mask expanded to its input (all True when unmasked), concatenated
        on the layer's axis, all() over the last axis. On the last axis that is the AND of the masks;
        on another axis, the masks concatenated along it."""
        shape = self.shape(node.inputs[0])
        rank = len(shape) if shape is not None else None
        axis = config.get("axis", -1)
        if rank is None or not isinstance(axis, int):
            raise NotConvertible("a Concatenate whose axis or rank is unknown")
        axis = axis % rank
        if axis == rank - 1:
            return self.logical_and(node.layer, [m for m in masks if m is not None])
        if any(m is None for m in masks):
            raise NotConvertible("a Concatenate of masked and unmasked tensors along a non-feature axis")
        parts = [m for m in masks if m is not None]
        shapes = [self.shape(m) for m in parts]
        out_shape = None
        if all(s is not None for s in shapes):
            dims = [s[axis] for s in shapes]  # type: ignore[index]
            total = None if any(d is None for d in dims) else sum(dims)
            out_shape = (*shapes[0][:axis], total, *shapes[0][axis + 1 :])  # type: ignore[index]
        return self.op(f"{node.layer}_mask", "Concatenate", {"axis": axis}, [parts], out_shape)

    def _time_distributed(
        self, node: Node, config: Mapping[str, Any], mask: TensorRef | None, outputs: list[TensorRef]
    ) -> list[TensorRef | None]:
        """tf.keras TimeDistributed.compute_mask: the inner layer's mask on the (folded) input when it
        makes one (an inner Embedding/Masking, or one that passes the mask on), else the input mask
        reduced with any() over the axes after time."""
        none: list[TensorRef | None] = [None] * len(outputs)
        inner = config.get("layer")
        if not isinstance(inner, Mapping) or not isinstance(inner.get("class_name"), str):
            return none
        inner_config = inner.get("config") or {}
        b = _behaviour(inner["class_name"], K2)
        if b.produce in ("embedding", "masking"):
            return self._produce(node, inner_config, b, [mask], outputs)
        if mask is None:
            return none
        if b.produce in ("pass", "query") or (b.produce == "rnn" and inner_config.get("return_sequences")):
            return [mask] + none[1:]
        shape = self.shape(mask)
        if shape is None or len(shape) <= 2:
            return [mask] + none[1:]
        axes = list(range(2, len(shape)))
        reduced = self.op(
            f"{node.layer}_mask",
            "Any",
            {"axis": axes if len(axes) > 1 else axes[0], "keepdims": False},
            [mask],
            shape[:2],
        )
        return [reduced] + none[1:]

    def _may_mask_in_keras3(self, node: Node, config: Mapping[str, Any], b3: MaskBehaviour) -> bool:
        """Whether Keras 3 may attach an implicit mask to this node's outputs (an over-estimate)."""
        if b3.produce == "embedding":
            return bool(config.get("mask_zero"))
        if b3.produce == "masking":
            return True
        if b3.produce in ("drop", "time_distributed"):
            return False
        replaced = self.plan.inputs.get(node.key, {})
        reads = [r for r in node.inputs if r not in replaced]
        return node.key in self.plan.kwargs or any(r in self.may3 for r in reads)


def plan_masks(graph: ModelGraph, shapes: ShapeResult | None = None) -> WritePlan:
    """Where ``graph``'s implicit Keras 2 masks come from and go (nodes in topological order)."""
    read = {r for node in graph.nodes for r in node.inputs}
    read.update(r for r in flatten_structure(graph.output_structure, _is_ref) if isinstance(r, TensorRef))
    planner = _Planner(graph, shapes, taken={layer.name for layer in graph.layers}, read=read)
    for node in graph.nodes:
        if graph.layer(node.layer).depth is None:
            continue
        try:
            planner.node(node)
        except NotConvertible as exc:
            planner.plan.refusals.append((node.layer, graph.layer(node.layer).class_name, str(exc)))
    return planner.plan


def _masked_outputs(graph: ModelGraph) -> bool:
    """Whether tf.keras attached a mask to an output of this (nested) model."""
    planner = _Planner(graph, None, taken={layer.name for layer in graph.layers})
    for node in graph.nodes:
        if graph.layer(node.layer).depth is None:
            continue
        try:
            planner.node(node)
        except NotConvertible:
            return True  # whatever it is, it is refused where it sits
    refs = flatten_structure(graph.output_structure, _is_ref)
    return any(isinstance(r, TensorRef) and r in planner.mask2 for r in refs)


def _returns_masked_scores(node: Node) -> bool:
    """A tf.keras MultiHeadAttention call whose returned scores carry a mask without any input mask:
    its softmax's mask, from an ``attention_mask`` argument or the causal band."""
    kwargs = node.kwargs
    masked = kwargs.get("attention_mask") is not None or kwargs.get("use_causal_mask") is True
    return bool(kwargs.get("return_attention_scores")) and masked


def _same_in_both(b2: MaskBehaviour, b3: MaskBehaviour, config: Mapping[str, Any]) -> bool:
    """tf.keras and Keras 3 take and pass this class's implicit mask alike, so a legacy .h5 (where
    both loaders propagate masks themselves) may leave it implicit."""
    if b2.produce != b3.produce or (b2.consume, b3.consume) not in ((None, None), ("first", "call")):
        return False
    return not (b2.produce == "bidirectional" and config.get("merge_mode", "concat") is None)


def _expand(shape: tuple[Any, ...], axis: int) -> tuple[Any, ...]:
    at = axis % (len(shape) + 1)
    return (*shape[:at], 1, *shape[at:])


def _broadcast(a: tuple[Any, ...] | None, b: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
    if a is None or b is None or len(a) != len(b):
        return a if b is None else b if a is None else None
    return tuple(
        y if x == 1 else x if y == 1 else x if x is not None else y for x, y in zip(a, b, strict=True)
    )


def _is_ref(value: Any) -> bool:
    return isinstance(value, TensorRef)
