"""Attach stored weights to a graph's layers, lazily, for every weights layout Keras has used.

* Keras 3 tree (``.keras``, ``.weights.h5``, sharded ``.weights.json``): groups named by
  ``snake_case(class)`` plus a per-class counter in ``model.layers`` order (ops excluded, a
  Sequential's InputLayer excluded), variables at ``vars/0, vars/1, ...`` (see
  :func:`modelgraph.weight_names.keras3_groups`).
* Named layouts (legacy ``.h5`` ``model_weights/<layer>/<weight_names>``, TF.js manifests): each
  stored name is matched to a layer (nested ones too) and canonicalised.

Nothing is read here: each :class:`Weight` carries a reader that loads its values on demand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from modelgraph.errors import WeightsError
from modelgraph.graph import Layer, ModelGraph, Weight
from modelgraph.loading.keras1 import is_keras1, keras1_notes, upgrade_weights
from modelgraph.sharing import repeated_objects
from modelgraph.weight_names import canonical_from_path, keras3_groups, own_weight_names, snake_case

LayerPath = tuple[str, ...]


# An array as a container stores it: a Weight whose name is still the stored name.
StoredArray = Weight


class Keras3Tree:
    """Read access to a Keras 3 weights tree: ``group(path) -> {key: StoredArray}``."""

    def __init__(
        self, lookup: Callable[[str], Mapping[str, StoredArray] | None], root: str = "layers"
    ) -> None:
        self._lookup = lookup
        self.root = root

    def vars_at(self, path: str) -> Mapping[str, StoredArray] | None:
        return self._lookup(path)


def attach(graph: ModelGraph, weights: Mapping[LayerPath, Sequence[Weight]]) -> ModelGraph:
    """A copy of ``graph`` whose layers (nested ones too) carry ``weights[path]``."""

    def rebuild(g: ModelGraph, prefix: LayerPath) -> ModelGraph:
        layers = []
        for layer in g.layers:
            path = (*prefix, layer.name)
            sub = rebuild(layer.subgraph, path) if layer.subgraph is not None else None
            layers.append(replace(layer, weights=tuple(weights.get(path, ())), subgraph=sub))
        return replace(g, layers=tuple(layers))

    return rebuild(graph, ())


def _weight(name: str, stored: StoredArray) -> Weight:
    """The stored array under its canonical name."""
    return replace(stored, name=name)


def _numeric_keys(group: Mapping[str, StoredArray]) -> list[str]:
    return sorted(group, key=lambda k: (0, int(k), "") if k.isdigit() else (1, 0, k))


# ------------------------------------------------------------------------------------------------
# Keras 3 tree


def keras3_layer_paths(graph: ModelGraph, prefix: str = "layers") -> list[tuple[LayerPath, Layer, str]]:
    """Every layer with weights-tree path, following Keras's saving walk (snake_case + counter)."""
    result: list[tuple[LayerPath, Layer, str]] = []

    def walk(g: ModelGraph, layer_prefix: LayerPath, tree_prefix: str) -> None:
        counters: dict[str, int] = {}
        sequential = g.class_name == "Sequential"
        for layer in g.layers:
            if layer.kind == "op" or (sequential and layer.kind == "input"):
                continue
            if layer.depth is None and g.class_name != "Sequential" and layer.kind != "input":
                continue  # Keras drops layers no output reaches; they own no weights group
            base = snake_case(layer.class_name)
            n = counters.get(base, 0)
            counters[base] = n + 1
            tree_path = f"{tree_prefix}/{base}" + (f"_{n}" if n else "")
            path = (*layer_prefix, layer.name)
            result.append((path, layer, tree_path))
            if layer.subgraph is not None:
                walk(layer.subgraph, path, f"{tree_path}/layers")

    walk(graph, (), prefix)
    return result


def bind_keras3(graph: ModelGraph, tree: Keras3Tree) -> tuple[ModelGraph, list[str]]:
    """Attach a Keras 3 weights tree; returns the graph and notes on anything that did not fit."""
    weights: dict[LayerPath, list[Weight]] = {}
    notes: list[str] = []
    places = keras3_layer_paths(graph, tree.root)
    tree_of = {path: tree_path for path, _, tree_path in places}
    repeated = repeated_objects(graph)
    for path, layer, tree_path in places:
        if layer.subgraph is not None:
            continue
        tree_path = _first_place(path, tree_path, repeated, tree_of, tree)
        groups = keras3_groups(layer.class_name, layer.config)
        if groups is None:
            found = tree.vars_at(f"{tree_path}/vars") or {}
            weights[path] = [_weight(f"var_{k}", found[k]) for k in _numeric_keys(found)]
            continue
        bound: list[Weight] = []
        for rel, names in groups:
            found = tree.vars_at(f"{tree_path}/{rel}")
            if found is None:  # tf.keras 2.13-2.15 named sub-layer groups by their private attribute
                found = tree.vars_at(f"{tree_path}/_{rel}")
            if not names:
                continue
            if found is None:
                notes.append(f"layer '{'/'.join(path)}': no weights group '{tree_path}/{rel}'")
                continue
            keys = _numeric_keys(found)
            for i, key in enumerate(keys):
                name = (
                    names[i] if i < len(names) and key == str(i) else f"{rel.rsplit('/vars', 1)[0]}:var_{key}"
                )
                bound.append(_weight(name, found[key]))
            if len(keys) != len(names):
                notes.append(
                    f"layer '{'/'.join(path)}': expected {len(names)} arrays {list(names)} at '{tree_path}/{rel}', "
                    f"found {len(keys)}"
                )
        weights[path] = bound
    return attach(graph, {p: tuple(ws) for p, ws in weights.items()}), notes


def _first_place(
    path: LayerPath,
    tree_path: str,
    repeated: Mapping[LayerPath, LayerPath],
    tree_of: Mapping[LayerPath, str],
    tree: Keras3Tree,
) -> str:
    """The tree path holding the variables of the layer at ``path``: its own, or, for an object used
    at several nesting levels whose later place Keras's saver skipped, the first place's
    (:mod:`modelgraph.sharing`)."""
    for n in range(len(path), 0, -1):
        first = repeated.get(path[:n])
        if first is None:
            continue
        own_model = tree_of.get(path[:n])
        if own_model is not None and tree.vars_at(f"{own_model}/vars") is not None:
            return tree_path  # stored at this place after all
        target = tree_of.get((*first, *path[n:]))
        return tree_path if target is None else target
    return tree_path


# ------------------------------------------------------------------------------------------------
# Named layouts (legacy h5, TF.js)


def _layer_index(graph: ModelGraph) -> dict[str, list[tuple[LayerPath, Layer]]]:
    index: dict[str, list[tuple[LayerPath, Layer]]] = {}
    for path, layer in graph.walk():
        index.setdefault(layer.name, []).append((path, layer))
    return index


def _resolve(
    stored: str, group: str | None, graph: ModelGraph, index: Mapping[str, list[tuple[LayerPath, Layer]]]
) -> tuple[LayerPath, Layer] | None:
    """Find the layer a stored name belongs to: the deepest layer named along its path."""
    segments = [s for s in stored.split(":", 1)[0].split("/") if s]
    start: tuple[LayerPath, Layer] | None = None
    if group is not None and graph.has_layer(group):
        start = ((group,), graph.layer(group))
    current = start
    for segment in segments[:-1]:
        if current is not None and current[1].subgraph is not None and current[1].subgraph.has_layer(segment):
            sub = current[1].subgraph.layer(segment)
            current = ((*current[0], segment), sub)
        elif current is None and segment in index and len(index[segment]) == 1:
            current = index[segment][0]
    if current is not None and current[1].subgraph is not None:
        # A weight of a nested model whose stored name skipped the sub-layer name: find it by suffix.
        candidates = [
            (p, lyr)
            for p, lyr in current[1].subgraph.walk(current[0])
            if lyr.subgraph is None and lyr.name in segments
        ]
        if len(candidates) == 1:
            return candidates[0]
        return None
    return current


def bind_named(
    graph: ModelGraph, arrays: Iterable[tuple[str | None, StoredArray]]
) -> tuple[ModelGraph, list[str]]:
    """Attach arrays whose stored names say where they belong (``bn/gamma:0``, ``lstm/lstm_cell/kernel``).

    Each item is ``(group, array)``, where ``group`` is the top-level layer the container filed the
    array under (legacy h5) or None (TF.js). Returns the graph and notes on arrays that did not fit.
    """
    index = _layer_index(graph)
    weights: dict[LayerPath, list[Weight]] = {}
    notes: list[str] = []
    for group, stored in arrays:
        target = _resolve(stored.name, group, graph, index)
        if target is None and group is None:
            target = _owner_of_bare_name(graph, stored.name, weights)
        if target is None:
            notes.append(f"stored weight '{stored.name}' ({stored.location}) matches no layer")
            continue
        path, layer = target
        canonical = canonical_from_path(layer.class_name, layer.name, stored.name, layer.config)
        weights.setdefault(path, []).append(_weight(canonical, stored))
    ordered: dict[LayerPath, tuple[Weight, ...]] = {}
    for path, ws in weights.items():
        layer = _layer_at(graph, path)
        ordered[path] = tuple(_order_like_keras(layer, ws))
    graph = attach(graph, ordered)
    if is_keras1(graph.keras_version):
        graph = upgrade_weights(graph)
        notes.extend(keras1_notes(graph))
    return graph, notes


def _owner_of_bare_name(
    graph: ModelGraph, stored: str, bound: Mapping[LayerPath, list[Weight]]
) -> tuple[LayerPath, Layer] | None:
    """The layer a weight stored under a bare name belongs to (``mean``, no layer prefix: tf_keras
    names a preprocessing layer's variables so when adapt() builds it outside any name scope, and
    TF.js keeps the name). The first layer, in model order, whose config creates a weight of that
    name and that has none bound yet; None for a name with a path or no such layer."""
    name = stored.split(":", 1)[0]
    if "/" in name:
        return None
    for path, layer in graph.walk():
        if layer.subgraph is not None or name not in (own_weight_names(layer.class_name, layer.config) or ()):
            continue
        if all(w.name != name for w in bound.get(path, ())):
            return path, layer
    return None


def _layer_at(graph: ModelGraph, path: LayerPath) -> Layer:
    g = graph
    layer = g.layer(path[0])
    for name in path[1:]:
        assert layer.subgraph is not None
        layer = layer.subgraph.layer(name)
    return layer


def _order_like_keras(layer: Layer, weights: list[Weight]) -> list[Weight]:
    groups = keras3_groups(layer.class_name, layer.config)
    if groups is None:
        return weights
    order = [n for _, names in groups for n in names]
    rank = {n: i for i, n in enumerate(order)}
    return sorted(weights, key=lambda w: rank.get(w.name, len(rank)))


def positional_bind(graph: ModelGraph, groups: Sequence[tuple[str, Sequence[StoredArray]]]) -> ModelGraph:
    """Keras's default ``load_weights`` for legacy files: weighted layers zipped with weighted groups."""
    targets = [lyr for lyr in graph.layers if _expects_weights(lyr)]
    stored = [(name, arrays) for name, arrays in groups if arrays]
    if len(targets) != len(stored):
        raise WeightsError(
            f"the weights file has {len(stored)} layer(s) with weights, the model {len(targets)}: "
            f"{[n for n, _ in stored][:8]} vs {[t.name for t in targets][:8]}"
        )
    mapped: dict[LayerPath, tuple[Weight, ...]] = {}
    for layer, (_, arrays) in zip(targets, stored, strict=True):
        mapped[(layer.name,)] = tuple(
            _weight(canonical_from_path(layer.class_name, layer.name, a.name, layer.config), a)
            for a in arrays
        )
    return attach(graph, mapped)


def _expects_weights(layer: Layer) -> bool:
    groups = keras3_groups(layer.class_name, layer.config)
    if layer.subgraph is not None:
        return any(_expects_weights(sub) for sub in layer.subgraph.layers)
    return bool(groups and any(names for _, names in groups))
