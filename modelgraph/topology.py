"""Keras's graph-mapping algorithm (``map_graph`` / ``_map_graph_network``), iterative and linear.

1. Depth-first search from each output tensor (in output order) through each node's flattened
   input tensors; the post-order gives the nodes inputs-first; an operation's index is assigned at
   its first (pre-order) visit and breaks ties between layers of equal depth.
2. Depths, walking that order backwards: outputs start at 0, a shared layer keeps the largest depth
   of its nodes, and every producer of a node's inputs is at least one deeper.
3. Layer order: depth descending, ties by first-visit index. Model inputs that no output reaches
   get depth 0 and index -1, as in Keras.

Everything here works on plain keys so that it can be tested on random DAGs directly.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

from modelgraph.errors import CycleError

NodeKey = tuple[str, int]


@dataclass(frozen=True)
class Topology:
    """The result of mapping a graph: node order, node and layer depths, layer order."""

    node_order: tuple[NodeKey, ...]  # inputs first (Keras's nodes_in_decreasing_depth)
    node_depths: dict[NodeKey, int]
    layer_depths: dict[str, int]
    layer_order: tuple[str, ...]  # Keras's model.layers order (reachable layers only)
    first_visit: dict[str, int]


def map_graph(
    outputs: Sequence[NodeKey],
    parents: Callable[[NodeKey], Sequence[NodeKey]],
    model_inputs: Sequence[NodeKey] = (),
) -> Topology:
    """Run Keras's algorithm from the nodes producing ``outputs``.

    ``parents(node)`` returns the producer node of each flattened input tensor of ``node``, in
    order (duplicates allowed). Raises :class:`CycleError` naming a node on the cycle.
    """
    first_visit: dict[str, int] = {}
    finished: set[NodeKey] = set()
    in_progress: set[NodeKey] = set()
    order: list[NodeKey] = []
    input_set = set(model_inputs)

    for root in outputs:
        if root in finished:
            continue
        # Explicit stack of (node, its parents, next parent position): a recursion-free DFS.
        stack: list[tuple[NodeKey, Sequence[NodeKey], int]] = []
        _enter(root, first_visit, in_progress, stack, parents, input_set)
        while stack:
            node, node_parents, position = stack[-1]
            if position < len(node_parents):
                stack[-1] = (node, node_parents, position + 1)
                child = node_parents[position]
                if child in finished:
                    continue
                if child in in_progress:
                    raise CycleError(
                        f"node {_fmt(child)} is part of a cycle (reached again from {_fmt(node)})"
                    )
                _enter(child, first_visit, in_progress, stack, parents, input_set)
            else:
                stack.pop()
                in_progress.discard(node)
                finished.add(node)
                order.append(node)

    node_depths: dict[NodeKey, int] = {}
    layer_depths: dict[str, int] = {}
    for node in reversed(order):
        depth = node_depths.setdefault(node, 0)
        depth = max(depth, layer_depths.get(node[0], 0))
        layer_depths[node[0]] = depth
        node_depths[node] = depth
        for parent in parents(node) if node not in input_set else ():
            previous = node_depths.get(parent, 0)
            node_depths[parent] = max(depth + 1, previous)

    for node in model_inputs:
        if node[0] not in layer_depths:
            layer_depths[node[0]] = 0
            first_visit[node[0]] = -1
            node_depths[node] = 0

    by_depth: dict[int, list[str]] = {}
    for layer, depth in layer_depths.items():
        by_depth.setdefault(depth, []).append(layer)
    layer_order: list[str] = []
    for depth in sorted(by_depth, reverse=True):
        layer_order.extend(sorted(by_depth[depth], key=first_visit.__getitem__))
    return Topology(tuple(order), node_depths, layer_depths, tuple(layer_order), first_visit)


def _enter(
    node: NodeKey,
    first_visit: dict[str, int],
    in_progress: set[NodeKey],
    stack: list[tuple[NodeKey, Sequence[NodeKey], int]],
    parents: Callable[[NodeKey], Sequence[NodeKey]],
    input_set: set[NodeKey],
) -> None:
    if node[0] not in first_visit:
        first_visit[node[0]] = len(first_visit)
    in_progress.add(node)
    stack.append((node, () if node in input_set else parents(node), 0))


def _fmt(node: Hashable) -> str:
    if isinstance(node, tuple) and len(node) == 2:
        return f"{node[0]}[{node[1]}]"
    return str(node)


def find_cycles(parents: Mapping[NodeKey, Sequence[NodeKey]]) -> list[list[NodeKey]]:
    """Every cycle of the node graph, one strongly connected component each (iterative Tarjan)."""
    index: dict[NodeKey, int] = {}
    low: dict[NodeKey, int] = {}
    on_stack: set[NodeKey] = set()
    stack: list[NodeKey] = []
    cycles: list[list[NodeKey]] = []
    counter = 0
    for root in parents:
        if root in index:
            continue
        work: list[tuple[NodeKey, int]] = [(root, 0)]
        while work:
            node, position = work.pop()
            if position == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            children = [c for c in parents.get(node, ()) if c in parents]
            if position < len(children):
                work.append((node, position + 1))
                child = children[position]
                if child not in index:
                    work.append((child, 0))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in parents.get(node, ()):
                    cycles.append(list(reversed(component)))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return cycles
