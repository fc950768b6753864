"""tf.keras SavedModel directories: the model config from the Keras metadata (``keras_metadata.pb``, or
in a TF 2.0-2.3 directory the object graph of ``saved_model.pb``), the weights from the
``variables/variables`` checkpoint (see :mod:`modelgraph.loading.checkpoint`).

Of ``saved_model.pb`` only the object graph is ever decoded, and only when there is no
``keras_metadata.pb``: its TensorFlow function graphs are never decoded or run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from modelgraph.errors import FormatError, UnsupportedFormatError
from modelgraph.graph import ModelGraph
from modelgraph.loading.keras_metadata import (
    METADATA_FILE,
    MetadataNode,
    decode_keras_json,
    read_keras_metadata,
    root_document,
)
from modelgraph.loading.normalize import build_graph
from modelgraph.loading.saved_object_graph import (
    NO_KERAS_METADATA,
    SAVED_MODEL_FILE,
    has_legacy_metadata,
    legacy_metadata_nodes,
    read_object_graph,
)

GRAPH_CLASSES = frozenset({"Functional", "Sequential", "Model"})
VARIABLES_PREFIX = ("variables", "variables")


def savedmodel_folder(path: Path) -> Path:
    """The SavedModel directory of a path naming it or one of its top-level files."""
    return path if path.is_dir() else path.parent


def load_savedmodel(path: Path, problems: list | None = None) -> ModelGraph:
    """Read a tf.keras SavedModel directory (or its ``saved_model.pb``) into a graph with its weights."""
    folder = savedmodel_folder(path)
    nodes, where = read_metadata_nodes(folder)
    doc = decode_keras_json(root_document(nodes, where))
    envelope = model_envelope_of(doc, where)
    keras_version = doc.get("keras_version") if isinstance(doc.get("keras_version"), str) else None
    graph = build_graph(
        envelope, keras_version=keras_version, format="savedmodel", source=str(folder), problems=problems
    )
    info: dict[str, Any] = {"backend": doc.get("backend") if isinstance(doc.get("backend"), str) else None}
    if isinstance(doc.get("training_config"), Mapping):
        info["training_config"] = doc["training_config"]
    prefix = folder.joinpath(*VARIABLES_PREFIX)
    from modelgraph.loading.checkpoint import bind_checkpoint, has_checkpoint

    if has_checkpoint(prefix):
        graph, notes, handles = bind_checkpoint(graph, prefix, within=folder, layer_names=layer_names(nodes))
        info["weight_notes"] = notes
        info["_handles"] = handles
    return replace(graph, metadata=MappingProxyType(info))


def read_metadata_nodes(folder: Path) -> tuple[list[MetadataNode], str]:
    """The Keras metadata nodes of a SavedModel directory and the file they came from:
    ``keras_metadata.pb`` when present (tf.keras 2.4+), else the Keras objects of ``saved_model.pb``'s
    object graph (TF 2.0-2.3); UnsupportedFormatError when the directory has neither."""
    if os.path.lexists(folder / METADATA_FILE):
        return read_keras_metadata(folder), str(folder / METADATA_FILE)
    graph = read_object_graph(folder)
    if not has_legacy_metadata(graph):
        raise UnsupportedFormatError(NO_KERAS_METADATA.format(folder=folder))
    return legacy_metadata_nodes(graph), str(folder / SAVED_MODEL_FILE)


def model_envelope_of(doc: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``{"class_name", "config"}`` of the root node's metadata; UnsupportedFormatError for a model
    that has no layer graph (a subclassed model without ``get_config``)."""
    class_name = doc.get("class_name")
    config = doc.get("config")
    if not isinstance(class_name, str):
        raise FormatError(f"{where}:root: the model's metadata has no class_name")
    if class_name not in GRAPH_CLASSES or not isinstance(config, Mapping) or "layers" not in config:
        raise UnsupportedFormatError(
            f"{where}: a subclassed Keras model ('{class_name}') without a layer graph: its metadata holds "
            "no Functional or Sequential config; rebuild it as a Functional model in Keras and save it as "
            ".keras or .h5"
        )
    return {"class_name": class_name, "config": config}


def layer_names(nodes: list[MetadataNode]) -> dict[str, str]:
    """Object-graph path (``layer_with_weights-1/forward_layer``) -> Keras layer name, for every
    layer node of the metadata whose JSON names it."""
    from modelgraph import safe_io

    out: dict[str, str] = {}
    for node in nodes:
        if not node.node_path.startswith("root.") or not node.identifier.startswith("_tf_keras_"):
            continue
        try:
            doc = safe_io.parse_json(node.metadata, where=node.node_path).value
        except FormatError:
            continue
        name = doc.get("name") if isinstance(doc, Mapping) else None
        if name is None and isinstance(doc, Mapping) and isinstance(doc.get("config"), Mapping):
            name = doc["config"].get("name")
        if isinstance(name, str):
            out[node.node_path[len("root.") :].replace(".", "/")] = name
    return out
