"""Optimisation passes over the emitted node list. Each says what it matches and what it produces.

* :func:`cancel_transposes`: ``Transpose(p)`` feeding only ``Transpose(q)`` becomes one
  ``Transpose(q . p)``, or nothing when the composition is the identity (the consumers read the
  first Transpose's input). The layout-aware emitter avoids most pairs in the first place; this
  catches the rest (a Permute next to a convolution, a layout change followed by its inverse).
* :func:`fold_pads_into_convs`: a zero ``Pad`` of the spatial axes read only by a ``Conv`` with
  explicit pads, directly or through one ``Transpose`` (a ZeroPadding2D of an NHWC model input),
  becomes part of that Conv's ``pads``; the Transpose then reads the unpadded tensor.
* :func:`name_outputs_at_source`: a graph output made by an ``Identity`` of a node's output becomes
  that node's output itself (the Identity goes).
* :func:`drop_dead_nodes`: nodes whose outputs nothing reads (and are no graph outputs) go.

What onnxruntime's own optimiser would do anyway, so that the file is as lean for runtimes that do not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from modelgraph.saving.onnx._onnx import helper, numpy_helper

# The ONNX operator types the passes match. They are ONNX's names, not Keras classes (a Keras
# ``Conv2D`` or ``Permute`` becomes these only when it is lowered), so no catalogue entry knows them.
TRANSPOSE = "Transpose"
PAD = "Pad"
CONV = "Conv"
IDENTITY = "Identity"


def _perm(node: Any) -> list[int] | None:
    for attr in node.attribute:
        if attr.name == "perm":
            return list(attr.ints)
    return None


def cancel_transposes(nodes: list[Any], outputs: set[str]) -> list[Any]:
    """Fold chains Transpose -> Transpose (see the module docstring)."""
    changed = True
    while changed:
        changed = False
        producer = {o: n for n in nodes for o in n.output}
        readers: dict[str, int] = {}
        for n in nodes:
            for i in n.input:
                readers[i] = readers.get(i, 0) + 1
        rename: dict[str, str] = {}
        keep: list[Any] = []
        for n in nodes:
            first = producer.get(n.input[0]) if n.op_type == TRANSPOSE and n.input else None
            if first is None or first.op_type != TRANSPOSE:
                keep.append(n)
                continue
            p, q = _perm(first), _perm(n)
            if p is None or q is None:
                keep.append(n)
                continue
            composed = [p[i] for i in q]
            if composed == list(range(len(composed))) and n.output[0] not in outputs:
                rename[n.output[0]] = first.input[0]
            else:
                keep.append(
                    helper.make_node(TRANSPOSE, [first.input[0]], list(n.output), name=n.name, perm=composed)
                )
            changed = True
        if rename:
            for n in keep:
                for i, name in enumerate(n.input):
                    while name in rename:
                        name = rename[name]
                    n.input[i] = name
        nodes = drop_dead_nodes(keep, outputs)
    return nodes


def drop_dead_nodes(nodes: list[Any], outputs: set[str]) -> list[Any]:
    """Remove nodes none of whose outputs is read (walking back from the graph outputs)."""
    needed = set(outputs)
    kept: list[Any] = []
    for n in reversed(nodes):
        if any(o in needed for o in n.output):
            kept.append(n)
            needed.update(i for i in n.input if i)
    kept.reverse()
    return kept


def _readers(nodes: list[Any]) -> dict[str, list[Any]]:
    table: dict[str, list[Any]] = {}
    for n in nodes:
        for i in n.input:
            table.setdefault(i, []).append(n)
    return table


def _attr(node: Any, name: str) -> Any:
    for attr in node.attribute:
        if attr.name == name:
            return helper.get_attribute_value(attr)
    return None


def _set_ints(node: Any, name: str, values: list[int]) -> None:
    for attr in node.attribute:
        if attr.name == name:
            node.attribute.remove(attr)
            break
    node.attribute.append(helper.make_attribute(name, values))


def _zero_pads(node: Any, constants: Mapping[str, np.ndarray]) -> list[int] | None:
    """A Pad node's ``pads`` (begins, then ends) when it pads with zeros, else None."""
    mode = _attr(node, "mode")
    if mode not in (None, b"constant") or len(node.input) < 2 or len(node.input) > 3:
        return None
    if len(node.input) == 3 and node.input[2]:
        fill = constants.get(node.input[2])
        if fill is None or fill.size != 1 or float(fill.reshape(-1)[0]) != 0.0:
            return None
    pads = constants.get(node.input[1])
    if pads is None or pads.ndim != 1 or pads.size % 2 or pads.size < 6 or (pads < 0).any():
        return None
    return [int(v) for v in pads]


def _only_reader(readers: Mapping[str, list[Any]], name: str, op_type: str) -> Any:
    users = readers.get(name, [])
    if len(users) != 1 or users[0].op_type != op_type or list(users[0].input).count(name) != 1:
        return None
    return users[0]


def fold_pads_into_convs(
    nodes: list[Any], outputs: set[str], constants: Mapping[str, np.ndarray], reshaped: set[str]
) -> list[Any]:
    """Fold zero Pads into the Conv that alone reads them (see the module docstring); a Transpose
    between them now carries another shape, and its output is added to ``reshaped``."""
    readers = _readers(nodes)
    folded = False
    for n in nodes:
        pads = _zero_pads(n, constants) if n.op_type == PAD and n.output[0] not in outputs else None
        if pads is None:
            continue
        rank = len(pads) // 2
        transpose = _only_reader(readers, n.output[0], TRANSPOSE)
        perm = list(range(rank))
        if transpose is not None:
            perm = _perm(transpose) or []
            if transpose.output[0] in outputs or sorted(perm) != list(range(rank)):
                continue
            conv = _only_reader(readers, transpose.output[0], CONV)
        else:
            conv = _only_reader(readers, n.output[0], CONV)
        # The pads as the Conv's input sees them (axis j of the Conv's input is axis perm[j] here).
        begin = [pads[a] for a in perm]
        end = [pads[rank + a] for a in perm]
        if conv is None or conv.input[0] != (transpose or n).output[0] or begin[:2] + end[:2] != [0] * 4:
            continue
        if _attr(conv, "auto_pad") not in (None, b"NOTSET"):
            continue
        spatial = rank - 2
        own = list(_attr(conv, "pads") or [0] * (2 * spatial))
        if len(own) != 2 * spatial:
            continue
        _set_ints(conv, "pads", [o + p for o, p in zip(own, begin[2:] + end[2:], strict=True)])
        if transpose is not None:
            transpose.input[0] = n.input[0]
            reshaped.add(transpose.output[0])
        else:
            conv.input[0] = n.input[0]
        folded = True
    return drop_dead_nodes(nodes, outputs) if folded else nodes


def name_outputs_at_source(nodes: list[Any], outputs: set[str]) -> list[Any]:
    """Give a graph output's name to the node output its Identity copies (see the module docstring)."""
    producer = {o: n for n in nodes for o in n.output}
    renamed: dict[str, str] = {}
    keep: list[Any] = []
    for n in nodes:
        source = n.input[0] if n.op_type == IDENTITY and n.input else None
        if (
            source is None
            or n.output[0] not in outputs
            or source in outputs
            or source in renamed
            or source not in producer
        ):
            keep.append(n)
            continue
        renamed[source] = n.output[0]
    if not renamed:
        return nodes
    for n in keep:
        for i, name in enumerate(n.input):
            n.input[i] = renamed.get(name, name)
        for i, name in enumerate(n.output):
            n.output[i] = renamed.get(name, name)
    return keep


@dataclass
class Optimised:
    """The passes' result: the nodes, the initializers they read, and the tensors whose shapes
    changed (their recorded value_info no longer holds)."""

    nodes: list[Any]
    initializers: list[Any]
    reshaped: set[str] = field(default_factory=set)


def optimise(nodes: list[Any], outputs: set[str], initializers: list[Any] | None = None) -> Optimised:
    """Every pass, in order."""
    constants = {
        t.name: numpy_helper.to_array(t)
        for t in initializers or ()
        if t.data_type == 7
        and len(t.dims) <= 1  # int64 vectors: pads, shapes, axes
        or t.data_type == 1
        and (not t.dims or t.dims == [1])  # float scalars: a Pad's fill value
    }
    reshaped: set[str] = set()
    nodes = cancel_transposes(drop_dead_nodes(nodes, outputs), outputs)
    nodes = fold_pads_into_convs(nodes, outputs, constants, reshaped)
    nodes = name_outputs_at_source(nodes, outputs)
    read = {i for n in nodes for i in n.input}
    return Optimised(nodes, [t for t in initializers or () if t.name in read], reshaped)
