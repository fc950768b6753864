"""One Keras object used at several nesting levels (a nested model inside another nested model and
also directly in the outer model, or a layer shared that way).

A config serialises such an object once per place it is used, so the graph holds one ``Layer`` per
place; Keras holds one object. Keras's saver (``saving_lib._save_state``) walks ``model.layers``
depth first and skips objects it has visited, so the object's variables are stored once, at the
first path of that walk, and nothing is stored at the later ones; ``count_params()`` counts them
once. The places are recognised by name, class and config (Keras layer names are unique within a
model, and a config repeats the object's full config at each place).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # graph.py imports this module (ModelGraph.param_count)
    from modelgraph.graph import Layer, ModelGraph

LayerPath = tuple[str, ...]


def repeated_objects(graph: ModelGraph) -> dict[LayerPath, LayerPath]:
    """Every later place of an object used at several nesting levels -> its first place, in the
    order Keras's saver visits them (``model.layers`` order, nested models depth first). Places
    inside a repeated nested model are not listed: their model's entry covers them."""
    first: dict[tuple[str, str], list[tuple[LayerPath, Layer]]] = {}
    repeated: dict[LayerPath, LayerPath] = {}

    def visit(g: ModelGraph, prefix: LayerPath) -> None:
        for layer in g.layers:
            if layer.kind in ("input", "op"):
                continue
            path = (*prefix, layer.name)
            seen = first.setdefault((layer.name, layer.class_name), [])
            match = next((p for p, other in seen if _same_config(other.config, layer.config)), None)
            if match is not None:
                repeated[path] = match
                continue  # the object was walked at its first place
            seen.append((path, layer))
            if layer.subgraph is not None:
                visit(layer.subgraph, path)

    visit(graph, ())
    return repeated


def _same_config(a: Any, b: Any) -> bool:
    """Configs equal up to Keras 3's ``shared_object_id`` markers (which only some places carry)."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        keys_a = {k for k in a if k != "shared_object_id"}
        keys_b = {k for k in b if k != "shared_object_id"}
        return keys_a == keys_b and all(_same_config(a[k], b[k]) for k in keys_a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_config(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def is_repeated(path: LayerPath, repeated: dict[LayerPath, LayerPath]) -> bool:
    """True when ``path`` is a repeated place or lies inside one."""
    return any(path[:n] in repeated for n in range(1, len(path) + 1))
