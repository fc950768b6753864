"""Keras's graph-mapping algorithm: the iterative version against a direct recursive transcription."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelgraph.errors import CycleError
from modelgraph.topology import map_graph


def keras_reference(outputs, parents, model_inputs=()):
    """Keras 3 ``map_graph``/``_build_map_helper`` transcribed literally (recursive), as an oracle."""
    finished, in_progress, order, indices = set(), set(), [], {}

    def helper(node):
        if node in finished:
            return
        if node in in_progress:
            raise ValueError("cycle")
        if node[0] not in indices:
            indices[node[0]] = len(indices)
        in_progress.add(node)
        if node not in model_inputs:
            for parent in parents(node):
                helper(parent)
        finished.add(node)
        in_progress.remove(node)
        order.append(node)

    for out in outputs:
        helper(out)
    node_depths, op_depths = {}, {}
    for node in reversed(order):
        depth = node_depths.setdefault(node, 0)
        depth = max(depth, op_depths.get(node[0], 0))
        op_depths[node[0]] = depth
        node_depths[node] = depth
        for parent in parents(node) if node not in model_inputs else ():
            node_depths[parent] = max(depth + 1, node_depths.get(parent, 0))
    for node in model_inputs:
        if node[0] not in op_depths:
            op_depths[node[0]], indices[node[0]], node_depths[node] = 0, -1, 0
    layer_order = sorted(op_depths, key=lambda name: (-op_depths[name], indices[name]))
    return order, node_depths, op_depths, layer_order


@st.composite
def random_dags(draw):
    """Random layer graphs with shared layers (several nodes per layer) and several outputs."""
    n_layers = draw(st.integers(2, 12))
    nodes = [("in0", 0)]
    parents = {("in0", 0): []}
    for i in range(1, n_layers):
        name = f"l{draw(st.integers(1, max(1, i)))}"  # reuse names -> shared layers
        index = sum(1 for n in nodes if n[0] == name)
        node = (name, index)
        k = draw(st.integers(1, min(3, len(nodes))))
        chosen = draw(st.lists(st.sampled_from(nodes), min_size=k, max_size=k))
        parents[node] = chosen
        nodes.append(node)
    outs = draw(st.lists(st.sampled_from(nodes[1:] or nodes), min_size=1, max_size=3))
    return outs, parents


@settings(max_examples=300, derandomize=True, deadline=None)
@given(random_dags())
def test_iterative_equals_keras_reference(dag):
    outputs, parents = dag
    topo = map_graph(outputs, parents.__getitem__, [("in0", 0)])
    order, node_depths, op_depths, layer_order = keras_reference(outputs, parents.__getitem__, [("in0", 0)])
    assert list(topo.node_order) == order
    assert topo.node_depths == node_depths
    assert topo.layer_depths == op_depths
    assert list(topo.layer_order) == layer_order


@settings(max_examples=200, derandomize=True, deadline=None)
@given(random_dags())
def test_depth_invariants(dag):
    outputs, parents = dag
    topo = map_graph(outputs, parents.__getitem__, [("in0", 0)])
    for node in topo.node_order:
        for parent in parents[node]:
            assert topo.node_depths[parent] > topo.node_depths[node]
        assert topo.layer_depths[node[0]] >= topo.node_depths[node]
    position = {n: i for i, n in enumerate(topo.node_order)}
    for node in topo.node_order:
        assert all(position[p] < position[node] for p in parents[node])


def test_cycle_is_reported_with_a_node_name():
    parents = {("a", 0): [("b", 0)], ("b", 0): [("c", 0)], ("c", 0): [("a", 0)]}
    with pytest.raises(CycleError, match=r"\[0\] is part of a cycle"):
        map_graph([("a", 0)], parents.__getitem__)


def test_100k_chain_needs_no_recursion():
    n = 100_000
    parents = {(f"l{i}", 0): [(f"l{i - 1}", 0)] if i else [] for i in range(n)}
    limit = sys.getrecursionlimit()
    topo = map_graph([(f"l{n - 1}", 0)], parents.__getitem__, [("l0", 0)])
    assert sys.getrecursionlimit() == limit
    assert topo.layer_depths["l0"] == n - 1
    assert topo.layer_order[0] == "l0" and topo.layer_order[-1] == f"l{n - 1}"


def test_20k_wide_model():
    width = 20_000
    parents = {("in", 0): []}
    for i in range(width):
        parents[(f"b{i}", 0)] = [("in", 0)]
    parents[("merge", 0)] = [(f"b{i}", 0) for i in range(width)]
    topo = map_graph([("merge", 0)], parents.__getitem__, [("in", 0)])
    assert topo.layer_depths["in"] == 2
    assert topo.layer_order[1:4] == ("b0", "b1", "b2")
