"""Calls of a pooling of the same config on the same tensor become one (passes/shared_layers.py), on
Keras's NASNetMobile, which pools the same tensor the same way twice in every cell."""

from __future__ import annotations

import json
from collections import defaultdict

from modelgraph.loading import load
from modelgraph.runner.fusion import PASSES, fuse
from modelgraph.runner.passes.shared_layers import merge_shared_layers

POOLS = ("AveragePooling2D", "MaxPooling2D")


def _pools_by_computation(graph) -> dict:
    """Pooling layers by (class, input, config without the name)."""
    found: dict = defaultdict(list)
    for node in graph.nodes:
        layer = graph.layer(node.layer)
        if layer.class_name in POOLS:
            config = json.dumps({k: v for k, v in layer.config.items() if k != "name"}, sort_keys=True)
            found[(layer.class_name, node.inputs[0], config)].append(node.layer)
    return found


def test_nasnet_pools_each_tensor_once_per_config(rebuilt_apps, plan_matches_plain) -> None:
    graph = load(rebuilt_apps("apps/k3_nasnetmobile/manifest.json"))
    twins = {key: names for key, names in _pools_by_computation(graph).items() if len(names) > 1}
    # Every normal cell averages its previous cell's output twice, every reduction cell max-pools its
    # padded input twice (and its average and max poolings of that input stay apart).
    assert sum(key[0] == "AveragePooling2D" for key in twins) == 12
    assert sum(key[0] == "MaxPooling2D" for key in twins) == 4
    assert all(len(names) == 2 for names in twins.values())
    shared = merge_shared_layers(graph)
    assert all(len(names) == 1 for names in _pools_by_computation(shared).values())
    kept = {layer.name for layer in shared.layers}
    assert len(graph.layers) - len(kept) == 16
    assert all(sum(name in kept for name in names) == 1 for names in twins.values())
    # The readers of a dropped pooling read the kept one, also once the paddings merge into the
    # poolings: the plan computes what the plain graph does.
    without = fuse(graph, tuple(p for p in PASSES if p is not merge_shared_layers))
    assert len(fuse(graph).layers) == len(without.layers) - 16
    plan_matches_plain(graph)
