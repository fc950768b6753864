"""Weights-only files attached to an architecture (``--weights FILE``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from modelgraph import safe_io
from modelgraph.errors import ConfigError, FormatError, SecurityError, WeightsError
from modelgraph.graph import ModelGraph
from modelgraph.loading.detect import detect
from modelgraph.loading.files import read_json_file
from modelgraph.loading.h5store import keras3_tree
from modelgraph.loading.legacy_h5 import legacy_groups
from modelgraph.loading.weights import bind_keras3, bind_named, positional_bind


def attach_weights_file(graph: ModelGraph, path: Path) -> ModelGraph:
    """Replace ``graph``'s weights with those of a weights file (any Keras layout, or a full model file)."""
    fmt = detect(path)
    info: dict[str, Any] = {k: v for k, v in graph.metadata.items() if k not in ("weight_notes", "_handles")}
    # The architecture's own open files stay listed with the weights file's, so whoever closes the
    # graph's handles (validate does, when it is done) closes both.
    own_handles = tuple(graph.metadata.get("_handles") or ())
    if fmt in ("keras3_weights_h5", "keras3_sharded_weights"):
        if fmt == "keras3_sharded_weights":  # shards stay inside the index's folder, regular files only
            sources: list[Any] = [safe_io.open_file(f, within=path.parent) for f in _shards(path)]
        else:
            sources = [path]
        h5s = [safe_io.open_h5(s) for s in sources]
        graph, notes = bind_keras3(graph, keras3_tree(h5s, str(path)))
        handles = [*h5s, *(s for s in sources if not isinstance(s, Path))]  # HDF5 closes first
    elif fmt == "tf_checkpoint":
        from modelgraph.loading.checkpoint import bind_checkpoint, checkpoint_prefix

        prefix, folder = checkpoint_prefix(path)
        graph, notes, handles_t = bind_checkpoint(graph, prefix, within=folder)
        handles = list(handles_t)
    elif fmt in ("keras_zip", "keras_dir", "legacy_h5", "tfjs_layers", "savedmodel"):
        from modelgraph._gc import gc_paused
        from modelgraph.loading.architecture import load_architecture

        with gc_paused():
            donor = load_architecture(path)
        return _copy_weights(graph, donor, info, own_handles)
    elif fmt == "legacy_weights_h5":
        f = safe_io.open_h5(path)
        handles = [f]
        arrays = legacy_groups(f, str(path))
        names = {group for group, _ in arrays}
        if names <= {lyr.name for lyr in graph.layers}:
            graph, notes = bind_named(graph, arrays)
        else:  # Keras's default: topological order of the layers that have weights
            grouped: dict[str, list] = {}
            for group, array in arrays:
                grouped.setdefault(group, []).append(array)
            graph, notes = (
                positional_bind(graph, list(grouped.items())),
                ["weights matched by position (layer names differ)"],
            )
    else:
        raise WeightsError(f"{path}: a {fmt} file holds no weights to attach")
    info["weights_file"] = str(path)
    info["weight_notes"] = notes
    info["_handles"] = own_handles + tuple(handles)
    return replace(graph, metadata=MappingProxyType(info))


def _shards(index: Path) -> list[Path]:
    doc = read_json_file(index)
    weight_map = doc.get("weight_map") if isinstance(doc, Mapping) else None
    if not isinstance(weight_map, Mapping):
        raise ConfigError("a sharded weights index needs a 'weight_map' object", "$.weight_map")
    names: list[str] = []
    for value in weight_map.values():
        for name in value if isinstance(value, list) else [value]:
            if isinstance(name, str) and name not in names:
                names.append(name)
    files = []
    for name in names:
        shard = (index.parent / name).resolve()
        if index.parent.resolve() not in shard.parents:
            raise SecurityError(f"{index}: shard '{name}' points outside its folder")
        if not os.path.lexists(shard):
            raise FormatError(f"{index}: shard '{name}' is missing")
        files.append(shard)
    return files


def _copy_weights(
    graph: ModelGraph, donor: ModelGraph, info: dict[str, Any], own_handles: tuple[Any, ...]
) -> ModelGraph:
    from modelgraph.loading.weights import attach

    by_path = {path: lyr.weights for path, lyr in donor.walk() if lyr.weights}
    known = {path for path, _ in graph.walk()}
    missing = sorted("/".join(p) for p in by_path if p not in known)
    if missing:
        raise WeightsError(f"weights for layers the architecture does not have: {missing[:8]}")
    info["weights_file"] = donor.source
    info["_handles"] = own_handles + tuple(donor.metadata.get("_handles") or ())
    return replace(attach(graph, by_path), metadata=MappingProxyType(info))
