"""Merge layers: Add, Subtract, Multiply, Average, Maximum, Minimum, Concatenate, Dot.

Semantics: ``modelgraph/runner/kernels/merge.py``. Elementwise merges of same-rank inputs keep the
stored layout of the first stored-transposed input (the others are brought to it: in a residual
block both branches are already channels-first, so nothing moves); inputs of lower rank get axes
inserted at 1, as Keras does. Concatenate maps its axis through the common stored layout.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from modelgraph.runner.kernels.core import check_keys, flag
from modelgraph.saving.onnx.emitter import Value
from modelgraph.saving.onnx.mappings.core import as_float
from modelgraph.saving.onnx.registry import MapContext, register


def as_list(args: tuple[Any, ...]) -> list[Value]:
    items = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else list(args)
    if not items:
        raise ValueError("called without inputs")
    return items


def common_layout(ctx: MapContext, xs: list[Value]) -> tuple[list[str], tuple[int, ...] | None]:
    """The inputs' names in one shared stored layout (the first non-logical one when all share a rank)."""
    e = ctx.e
    ranks = [x.rank for x in xs]
    if None not in ranks and len(set(ranks)) == 1:
        perm = next((x.perm for x in xs if not x.is_logical), None)
        if perm is not None:
            return [e.in_layout(x, perm) for x in xs], perm
        return [x.name for x in xs], None
    names = [e.logical(x) for x in xs]
    if None in ranks:
        return names, None
    top = max(ranks)  # type: ignore[type-var]
    out = []
    for n, r in zip(names, ranks, strict=True):
        if r < top:  # type: ignore[operator]
            n = e.op("Unsqueeze", [n, e.ints(list(range(1, 1 + top - r)), "axes")])  # type: ignore[operator]
        out.append(n)
    return out, None


def _elementwise(op: str, exactly: int | None = None, average: bool = False):
    def fn(ctx: MapContext, *args: Any, input_masks: list[Value | None] | None = None) -> Value:
        check_keys(ctx.spec, set())
        xs = [as_float(ctx, x) if x.dtype == "bool" else x for x in as_list(args)]
        if exactly is not None and len(xs) != exactly:
            raise ValueError(f"A {ctx.class_name} layer takes exactly {exactly} inputs; got {len(xs)}")
        if input_masks is not None and any(m is not None for m in input_masks):
            return _masked_merge(ctx, op, xs, list(input_masks))
        names, perm = common_layout(ctx, xs)
        e = ctx.e
        out = names[0]
        for n in names[1:]:
            out = e.op(op, [out, n], ctx.class_name.lower())
        if average:
            out = e.op("Div", [out, e.const(np.float32(len(names)), "n")], "average")
        rank = max((x.rank or 0) for x in xs) or None
        return Value(out, rank, perm, xs[0].dtype)

    return fn


def _masked_merge(ctx: MapContext, op: str, xs: list[Value], masks: list[Value | None]) -> Value:
    """Keras 3 Multiply / Maximum / Minimum reading their inputs' masks (``Merge`` with masks; the
    runner's kernels/merge.py): Multiply counts a masked position as 1 (0 where every input is masked
    and none keeps it), Maximum / Minimum give a masked position the other operand's value."""
    if len(masks) != len(xs):
        raise ValueError(f"{ctx.class_name}: {len(masks)} input masks for {len(xs)} inputs")
    e = ctx.e
    names, _ = common_layout(ctx, [Value(e.logical(x), x.rank, None, x.dtype) for x in xs])

    def full(m: Value | None, like: str) -> str | None:
        if m is None:
            return None
        n = m.name if m.dtype == "bool" else e.cast(m.name, "bool")
        n = e.op("Unsqueeze", [n, e.ints([-1], "axes")], "mask")
        return e.op("Expand", [n, e.op("Shape", [like])], "mask")

    full_masks = [full(m, n) for m, n in zip(masks, names, strict=True)]
    if op == "Mul":
        one = e.const(np.float32(1.0), "one")
        every = all(m is not None for m in full_masks)
        out = keep = None
        for n, m in zip(names, full_masks, strict=True):
            if m is not None:
                n = e.op("Where", [m, n, one], "masked")
                if every:
                    keep = m if keep is None else e.op("Or", [keep, m])
            out = n if out is None else e.op("Mul", [out, n], "multiply")
        if every and keep is not None:
            out = e.op("Where", [keep, out, e.const(np.float32(0.0), "zero")], "multiply")
    else:
        out, out_mask = names[0], full_masks[0]
        for n, m in zip(names[1:], full_masks[1:], strict=True):
            if m is not None:
                n = e.op("Where", [m, n, out], "masked")
            if out_mask is not None:
                out = e.op("Where", [out_mask, out, n], "masked")
            out_mask = None if m is None or out_mask is None else e.op("Or", [out_mask, m])
            out = e.op(op, [out, n], ctx.class_name.lower())
    rank = max((x.rank or 0) for x in xs) or None
    return Value(out, rank, None, xs[0].dtype)  # type: ignore[arg-type]


register("Add")(_elementwise("Add"))
register("Subtract")(_elementwise("Sub", exactly=2))
register("Multiply")(_elementwise("Mul"))
register("Average")(_elementwise("Add", average=True))
register("Maximum")(_elementwise("Max"))
register("Minimum")(_elementwise("Min"))


@register("Concatenate")
def concatenate(ctx: MapContext, *args: Any) -> Value:
    check_keys(ctx.spec, {"axis"})
    axis = ctx.get("axis", -1)
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise ctx.unsupported("axis", axis)
    xs = as_list(args)
    rank = xs[0].rank if xs[0].rank is not None else ctx.rank()
    ax = axis + rank if axis < 0 else axis
    if all(x.rank == rank for x in xs):
        perm = next((x.perm for x in xs if not x.is_logical), None)
        if perm is not None:
            names = [ctx.e.in_layout(x, perm) for x in xs]
            return Value(ctx.e.op("Concat", names, "concat", axis=perm.index(ax)), rank, perm, xs[0].dtype)
    names = [ctx.e.logical(x) for x in xs]
    return Value(ctx.e.op("Concat", names, "concat", axis=ax), rank, None, xs[0].dtype)


def _l2_normalize(ctx: MapContext, n: str, axis: int, keras3: bool) -> str:
    e = ctx.e
    sq = e.reduce("ReduceSum", e.op("Mul", [n, n]), [axis], 1)
    if keras3:
        inv = e.op("Min", [e.op("Reciprocal", [e.op("Sqrt", [sq])]), e.const(np.float32(1e7), "c")])
    else:
        inv = e.op("Reciprocal", [e.op("Sqrt", [e.op("Max", [sq, e.const(np.float32(1e-12), "c")])])])
    return e.op("Mul", [n, inv])


@register("Dot")
def dot(ctx: MapContext, *args: Any) -> Value:
    check_keys(ctx.spec, {"axes", "normalize"})
    axes = ctx.get("axes")
    ok = (isinstance(axes, int) and not isinstance(axes, bool)) or (
        isinstance(axes, (list, tuple)) and len(axes) == 2 and all(isinstance(a, int) for a in axes)
    )
    if not ok:
        raise ctx.unsupported("axes", axes)
    xs = as_list(args)
    if len(xs) != 2:
        raise ValueError(f"A Dot layer takes exactly 2 inputs; got {len(xs)}")
    rx, ry = ctx.rank(0), ctx.rank(1)
    pair = [axes, axes] if isinstance(axes, int) else list(axes)
    ax, ay = pair[0] % rx, pair[1] % ry
    e = ctx.e
    x, y = e.logical(as_float(ctx, xs[0])), e.logical(as_float(ctx, xs[1]))
    if flag(ctx.spec, "normalize", False):
        keras3 = ctx.spec.keras_version[0] >= 3
        x, y = _l2_normalize(ctx, x, ax, keras3), _l2_normalize(ctx, y, ay, keras3)
    letters = "abcdefghijklmnop"
    xl = ["z"] + [letters[i] for i in range(rx - 1)]
    yl = ["z"] + [letters[rx - 1 + i] for i in range(ry - 1)]
    yl[ay] = xl[ax]
    out = (
        ["z"]
        + [c for i, c in enumerate(xl) if i not in (0, ax)]
        + [c for i, c in enumerate(yl) if i not in (0, ay)]
    )
    z = e.op("Einsum", [x, y], "dot", equation=f"{''.join(xl)},{''.join(yl)}->{''.join(out)}")
    if rx == 2 and ry == 2:
        z = e.op("Unsqueeze", [z, e.ints([1], "axes")], "dot")
    return Value(z, max(len(out), 2))
