"""tf.keras ``time_major=True`` recurrent layers written as Keras 3 ``Transpose`` op nodes around them.

A time-major LSTM/GRU/SimpleRNN/RNN read ``(time, batch, features)`` and returned its sequence
output the same way; its states were ``(batch, units)`` as usual. Keras 3 has no ``time_major``
option, so the converted file transposes the input to batch-major before the layer, calls the
layer without the key, and transposes its sequence output back for every reader (and model output).
States and a last-step output need nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modelgraph.graph import ModelGraph, TensorRef
from modelgraph.saving.masks import AddedOp, WritePlan
from modelgraph.saving.upgrades import keras3_rules
from modelgraph.shapes import ShapeResult

_SWAP = {"axes": [1, 0, 2]}


def is_time_major(class_name: str, config: Mapping[str, Any]) -> bool:
    """A recurrent layer with tf.keras's ``time_major`` option (its entry's ``keras3_rules``) saved
    with ``time_major: true``."""
    return keras3_rules(class_name).time_major and bool(config.get("time_major"))


def plan_time_major(graph: ModelGraph, shapes: ShapeResult | None, plan: WritePlan) -> None:
    """Add to ``plan`` the transposes around every time-major recurrent call of ``graph``."""
    taken = {layer.name for layer in graph.layers} | {op.name for op in plan.ops}

    def name(base: str) -> str:
        out, n = base, 1
        while out in taken:
            out, n = f"{base}_{n}", n + 1
        taken.add(out)
        return out

    def swapped(ref: TensorRef) -> tuple[Any, ...] | None:
        shape = shapes.shape(ref) if shapes is not None else None
        return None if shape is None or len(shape) != 3 else (shape[1], shape[0], shape[2])

    for node in graph.nodes:
        layer = graph.layer(node.layer)
        if layer.depth is None or not is_time_major(layer.class_name, layer.config):
            continue
        if node.key in plan.kwargs:
            plan.refusals.append(
                (node.layer, layer.class_name, "an implicit mask reaches a time-major layer")
            )
            continue
        x = node.args[0] if node.args else None
        if isinstance(x, list):  # tf.keras folded initial states into the first argument
            x = x[0] if x else None
        if not isinstance(x, TensorRef):
            plan.refusals.append(
                (node.layer, layer.class_name, "a time-major call without a sequence tensor")
            )
            continue
        dtype = (shapes.dtype(x) if shapes is not None else None) or "float32"
        before = name(f"{node.layer}_batch_major")
        plan.ops.append(AddedOp(before, "Transpose", dict(_SWAP), [x], None, swapped(x), dtype))
        plan.inputs.setdefault(node.key, {})[x] = TensorRef(before, 0, 0)
        if not layer.config.get("return_sequences"):
            continue
        out = TensorRef(node.layer, node.index, 0)
        shape = shapes.shape(out) if shapes is not None else None
        after = name(f"{node.layer}_time_major")
        plan.ops.append(AddedOp(after, "Transpose", dict(_SWAP), [out], None, shape and tuple(shape), dtype))
        plan.outputs[out] = TensorRef(after, 0, 0)
        plan.shapes[out] = None if shape is None else (shape[1], shape[0], *shape[2:])
        for reader in graph.nodes:
            if out in reader.inputs:
                plan.inputs.setdefault(reader.key, {})[out] = TensorRef(after, 0, 0)
