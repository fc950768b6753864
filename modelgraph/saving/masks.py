"""Keras 1/2 implicit masks written explicitly, as Keras 3 records them.

tf.keras never wrote masks: an ``Embedding(mask_zero=True)`` or ``Masking`` layer attached a mask
to its output at run time and the layers after it picked it up. Keras 3 graphs carry the mask as
op nodes and ``mask=`` call arguments instead (``Embedding`` -> ``NotEqual(tokens, 0)``,
``Masking`` -> ``Any(NotEqual(x, mask_value), axis=-1)``), so a converted file must too: Keras 3
and modelgraph then read the same computation from it.

:func:`plan_masks` follows each mask from its source through the layers that carry it unchanged
(element-wise layers, Dropout, Dense, ...; an RNN with ``return_sequences``) to the RNN and
Bidirectional layers that consume it. A mask that reaches anything else (merge layers, attention,
TimeDistributed) is refused rather than guessed: it is not written explicitly yet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from modelgraph.graph import ModelGraph, TensorRef
from modelgraph.saving.upgrades import NotConvertible
from modelgraph.shapes import ShapeResult

# Layers that carry their input's mask to their output unchanged (tf.keras supports_masking with
# the default compute_mask, which Keras 3's layers share).
_PASS_THROUGH = frozenset(
    {
        "Activation", "ActivityRegularization", "AlphaDropout", "BatchNormalization", "Dense", "Dropout",
        "ELU", "GaussianDropout", "GaussianNoise", "LayerNormalization", "LeakyReLU", "PReLU", "ReLU",
        "SpatialDropout1D", "UnitNormalization",
    }
)  # fmt: skip
_RNN = frozenset({"SimpleRNN", "LSTM", "GRU", "RNN"})
# Layers whose output has no mask whatever their input's (tf.keras and Keras 3 agree).
_DROPS = frozenset({"Flatten", "Reshape", "Conv1D", "Conv2D", "MaxPooling1D", "AveragePooling1D"})


@dataclass
class MaskOp:
    """A new op node computing a mask: its name, class, config and call arguments."""

    name: str
    class_name: str
    config: dict[str, Any]
    args: list[Any]
    after: str  # the layer whose entry it follows in the config
    shape: tuple[Any, ...] | None = None  # of its (boolean) output


@dataclass
class MaskPlan:
    """The op nodes to add and the ``mask=`` argument of each consuming node."""

    ops: list[MaskOp] = field(default_factory=list)
    kwargs: dict[tuple[str, int], TensorRef] = field(default_factory=dict)
    refusals: list[tuple[str, str, str]] = field(default_factory=list)  # (layer, class, reason)


def plan_masks(graph: ModelGraph, shapes: ShapeResult | None = None) -> MaskPlan:
    """Where ``graph``'s implicit masks come from and go (nodes in topological order)."""
    plan = MaskPlan()

    def shape_of(ref: TensorRef) -> tuple[Any, ...] | None:
        shape = shapes.shape(ref) if shapes is not None else None
        return None if shape is None else tuple(shape)

    mask_of: dict[TensorRef, TensorRef] = {}
    taken = {layer.name for layer in graph.layers}

    def new_name(base: str) -> str:
        name, n = base, 1
        while name in taken:
            name, n = f"{base}_{n}", n + 1
        taken.add(name)
        return name

    for node in graph.nodes:
        layer = graph.layer(node.layer)
        cls = layer.class_name
        incoming = [mask_of[r] for r in node.inputs if r in mask_of]
        first = mask_of.get(node.inputs[0]) if node.inputs else None
        out = TensorRef(node.layer, node.index, 0)
        try:
            if cls == "Embedding" and layer.config.get("mask_zero"):
                name = new_name(f"{node.layer}_not_equal")
                plan.ops.append(
                    MaskOp(name, "NotEqual", {}, [node.inputs[0], 0], node.layer, shape_of(node.inputs[0]))
                )
                mask_of[out] = TensorRef(name, 0, 0)
                continue
            if cls == "Masking":
                value = layer.config.get("mask_value", 0.0)
                ne = new_name(f"{node.layer}_not_equal")
                anyop = new_name(f"{node.layer}_any")
                full = shape_of(node.inputs[0])
                plan.ops.append(MaskOp(ne, "NotEqual", {}, [node.inputs[0], value], node.layer, full))
                reduced = None if full is None else full[:-1]
                any_config = {"axis": -1, "keepdims": False}
                plan.ops.append(MaskOp(anyop, "Any", any_config, [TensorRef(ne, 0, 0)], ne, reduced))
                mask_of[out] = TensorRef(anyop, 0, 0)
                continue
            if not incoming:
                continue
            if len(incoming) != 1 or first is None:
                raise NotConvertible("an implicit Keras 2 mask reaches it together with other tensors")
            if cls in _RNN:
                if node.kwargs.get("mask") is None:
                    plan.kwargs[node.key] = first
                if layer.config.get("return_sequences"):
                    mask_of[out] = first
            elif cls == "Bidirectional" and layer.config.get("merge_mode", "concat") is not None:
                if node.kwargs.get("mask") is None:
                    plan.kwargs[node.key] = first
                inner = layer.config.get("layer") or {}
                if (inner.get("config") or {}).get("return_sequences"):
                    mask_of[out] = first
            elif cls in _PASS_THROUGH:
                mask_of[out] = first
            elif cls not in _DROPS:
                raise NotConvertible(
                    "an implicit Keras 2 mask reaches it; writing that mask is not supported"
                )
        except NotConvertible as exc:
            plan.refusals.append((node.layer, cls, str(exc)))
    return plan
