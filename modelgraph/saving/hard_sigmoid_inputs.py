"""Keras 1/2's ``hard_sigmoid`` on a weightless layer, written exactly: its input scaled by 1.2.

See :mod:`modelgraph.saving.hard_sigmoid` for the maths; here the writer's plan gains one
``Multiply`` op node in front of each call (a ``.keras`` file only).
"""

from __future__ import annotations

from modelgraph.graph import ModelGraph, TensorRef
from modelgraph.saving.hard_sigmoid import SCALE, is_weightless
from modelgraph.saving.masks import AddedOp, WritePlan
from modelgraph.shapes import ShapeResult


def plan_scaled_inputs(graph: ModelGraph, shapes: ShapeResult | None, plan: WritePlan) -> None:
    """Add to ``plan`` a ``Multiply`` by 1.2 in front of every call of a weightless Keras 1/2 layer
    whose ``activation`` is ``hard_sigmoid``, so Keras 3's ``hard_sigmoid`` computes the old one."""
    taken = {layer.name for layer in graph.layers} | {op.name for op in plan.ops}
    for node in graph.nodes:
        layer = graph.layer(node.layer)
        if layer.config.get("activation") != "hard_sigmoid" or not is_weightless(layer.class_name):
            continue
        x = node.args[0] if node.args else None
        if not isinstance(x, TensorRef):
            continue
        name, n = f"{node.layer}_keras2_scale", 1
        while name in taken:
            name, n = f"{node.layer}_keras2_scale_{n}", n + 1
        taken.add(name)
        shape = shapes.shape(x) if shapes is not None else None
        dtype = (shapes.dtype(x) if shapes is not None else None) or "float32"
        plan.ops.append(AddedOp(name, "Multiply", {}, [x, SCALE], None, shape and tuple(shape), dtype))
        plan.inputs.setdefault(node.key, {})[x] = TensorRef(name, 0, 0)
