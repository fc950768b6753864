"""Optimisation passes over the emitted node list. Each says what it matches and what it produces.

* :func:`cancel_transposes`: ``Transpose(p)`` feeding only ``Transpose(q)`` becomes one
  ``Transpose(q . p)``, or nothing when the composition is the identity (the consumers read the
  first Transpose's input). The layout-aware emitter avoids most pairs in the first place; this
  catches the rest (a Permute next to a convolution, a layout change followed by its inverse).
* :func:`drop_dead_nodes`: nodes whose outputs nothing reads (and are no graph outputs) go.
"""

from __future__ import annotations

from typing import Any

from modelgraph.saving.onnx._onnx import helper


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
            first = producer.get(n.input[0]) if n.op_type == "Transpose" and n.input else None
            if first is None or first.op_type != "Transpose":
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
                    helper.make_node(
                        "Transpose", [first.input[0]], list(n.output), name=n.name, perm=composed
                    )
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


def optimise(nodes: list[Any], outputs: set[str]) -> list[Any]:
    """Every pass, in order."""
    return cancel_transposes(drop_dead_nodes(nodes, outputs), outputs)
