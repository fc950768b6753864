"""Keras 3 ``.keras`` archives (also written by tf.keras 2.13+), zipped or unzipped."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from modelgraph import safe_io
from modelgraph.errors import FormatError
from modelgraph.graph import ModelGraph
from modelgraph.loading.files import read_json_file
from modelgraph.loading.h5store import keras3_tree
from modelgraph.loading.normalize import build_graph
from modelgraph.loading.training import TRAINING_KEY, keras_zip_training
from modelgraph.loading.weights import bind_keras3
from modelgraph.schemas.keras_config import KerasMetadata

CONFIG = "config.json"
METADATA = "metadata.json"
WEIGHTS_H5 = "model.weights.h5"
WEIGHTS_NPZ = "model.weights.npz"


def load_keras_zip(path: Path, problems: list | None = None) -> ModelGraph:
    """Read a ``.keras`` zip: its config graph, its metadata and (lazily) its weights."""
    archive = safe_io.open_zip(path)
    names = set(archive.names())
    if CONFIG not in names:
        raise FormatError(
            f"{path}: a zip without config.json is not a .keras file (members: {sorted(names)[:10]})"
        )
    config = archive.read_json(CONFIG).value
    metadata = archive.read_json(METADATA).value if METADATA in names else {}
    weights_file = archive.open_member(WEIGHTS_H5) if WEIGHTS_H5 in names else None
    return _load(
        path,
        config,
        metadata,
        weights_file,
        WEIGHTS_NPZ in names,
        "keras_zip",
        keep=archive,
        problems=problems,
    )


def load_keras_dir(path: Path, problems: list | None = None) -> ModelGraph:
    """Read the unzipped form: a directory holding config.json, metadata.json, model.weights.h5.

    Every member is opened inside the folder only, and only when it is a regular file."""
    config = read_json_file(path / CONFIG, within=path)
    metadata = read_json_file(path / METADATA, within=path) if os.path.lexists(path / METADATA) else {}
    weights = path / WEIGHTS_H5
    return _load(
        path,
        config,
        metadata,
        safe_io.open_file(weights, within=path) if os.path.lexists(weights) else None,
        os.path.lexists(path / WEIGHTS_NPZ),
        "keras_dir",
        problems=problems,
    )


def _load(
    path: Path,
    config: Any,
    metadata: Any,
    weights_file: Any,
    has_npz: bool,
    fmt: str,
    keep: Any = None,
    problems: list | None = None,
) -> ModelGraph:
    meta = KerasMetadata.model_validate(metadata if isinstance(metadata, dict) else {})
    info: dict[str, Any] = {"metadata.json": metadata if isinstance(metadata, dict) else {}}
    graph = build_graph(
        config,
        keras_version=meta.keras_version,
        format=fmt,
        source=str(path),
        metadata=info,
        problems=problems,
    )
    tree = None
    if weights_file is not None:
        h5 = safe_io.open_h5(weights_file)
        tree = keras3_tree([h5], f"{path}/{WEIGHTS_H5}")
        graph, notes = bind_keras3(graph, tree)
        info["weights_file"] = WEIGHTS_H5
        info["weight_notes"] = notes
        info["_handles"] = (keep, h5, weights_file)
    elif has_npz:
        info["weights_unavailable"] = (
            "weights are in model.weights.npz, whose members are pickled objects; modelgraph never unpickles"
        )
    record = keras_zip_training(config, tree, meta.keras_version)
    if record is not None:
        info[TRAINING_KEY] = record
    return replace(graph, metadata=MappingProxyType(info))
