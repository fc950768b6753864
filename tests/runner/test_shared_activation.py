"""Several ReLUs of one tensor become one (passes/shared_activation.py), on Keras's NASNetMobile,
which activates every cell's output twice."""

from __future__ import annotations

from modelgraph.loading import load
from modelgraph.runner.fusion import PASSES, fuse
from modelgraph.runner.passes.shared_activation import merge_shared_activations


def _relus_by_input(graph) -> dict:
    found: dict = {}
    for node in graph.nodes:
        layer = graph.layer(node.layer)
        if layer.class_name == "Activation" and layer.config.get("activation") == "relu":
            found.setdefault(node.inputs[0], []).append(node.layer)
    return found


def test_nasnet_shares_one_relu_per_tensor(rebuilt_apps, plan_matches_plain) -> None:
    graph = load(rebuilt_apps("apps/k3_nasnetmobile/manifest.json"))
    without = fuse(graph, tuple(p for p in PASSES if p is not merge_shared_activations))
    shared = {ref: names for ref, names in _relus_by_input(without).items() if len(names) > 1}
    # Every concatenation (cell output) is activated for the next cell and for the one after it.
    assert len(shared) >= 14 and all(len(names) == 2 for names in shared.values())
    fused = fuse(graph)
    assert all(len(names) == 1 for names in _relus_by_input(fused).values())
    kept = {layer.name for layer in fused.layers}
    assert all(sum(name in kept for name in names) == 1 for names in shared.values())
    # The readers of a dropped ReLU read the kept one: the plan computes what the plain graph does.
    plan_matches_plain(graph)
