"""The Keras metadata of a SavedModel written by TensorFlow 2.0-2.3: kept inside ``saved_model.pb``.

Before tf.keras 2.4 wrote ``keras_metadata.pb``, each Keras object's JSON document was stored in the
SavedModel's own object graph: ``SavedModel.meta_graphs[0].object_graph_def`` lists the saved objects
(node 0 is the model), each with named edges to its children and, for a Python object saved by
identity, a ``SavedUserObject`` holding an identifier (``_tf_keras_network``, ``_tf_keras_layer``,
...) and the JSON metadata. The same documents a ``keras_metadata.pb`` holds are rebuilt from there:
one per Keras object, with its node id and its path from the root, the path being the one reached
first by a depth-first walk along the children edges in their stored order (as tf.keras did when it
read these directories).

Only the object graph is decoded (saved_model.proto declares nothing else): the function graphs,
signatures and assets stay undecoded bytes and are never run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from modelgraph import safe_io
from modelgraph.errors import SecurityError
from modelgraph.loading.keras_metadata import MAX_NODES, MetadataNode

SAVED_MODEL_FILE = "saved_model.pb"
MAX_SAVED_MODEL_PB = 1 << 30
"""Largest saved_model.pb read: it holds TensorFlow's function graphs, tens of MB for a large network."""
KERAS_IDENTIFIERS = frozenset(
    {
        "_tf_keras_input_layer",
        "_tf_keras_layer",
        "_tf_keras_metric",
        "_tf_keras_model",
        "_tf_keras_network",
        "_tf_keras_rnn_layer",
        "_tf_keras_sequential",
    }
)
"""The SavedUserObject identifiers of Keras objects (tf.keras's own list)."""
NO_KERAS_METADATA = (
    "{folder}: a TensorFlow SavedModel without Keras metadata (no keras_metadata.pb, no Keras objects "
    "with metadata in saved_model.pb): written by tf.saved_model.save or from a model without a config, "
    "it holds no layer graph; rebuild the model in Keras and save it as .keras or .h5"
)
"""The refusal of a SavedModel directory that has no Keras metadata (``{folder}`` filled in)."""


_last_read: tuple[tuple[Any, ...], Any] | None = None
"""The most recent decode, keyed by the file's identity: detection, the security scan and the loader
each ask for the object graph of the same file, which for a traced model is tens of MB to decode."""


def read_object_graph(folder: Path) -> Any:
    """The ``SavedObjectGraph`` of ``folder/saved_model.pb``'s first meta graph (an empty one when the
    file has none); FormatError/SecurityError when the file is unreadable, malformed or too large.

    The last decode is kept and returned again while the file is the same one (path, device, inode,
    size and modification time unchanged); callers only read it."""
    global _last_read
    path = folder / SAVED_MODEL_FILE
    try:
        st = os.stat(path, follow_symlinks=False)
        key: tuple[Any, ...] | None = (
            os.path.abspath(path),
            st.st_dev,
            st.st_ino,
            st.st_size,
            st.st_mtime_ns,
        )
    except OSError:
        key = None  # the read below names the problem
    last = _last_read
    if key is not None and last is not None and last[0] == key:
        return last[1]
    graph = _decode_object_graph(path, folder)
    if key is not None:
        _last_read = (key, graph)
    return graph


def _decode_object_graph(path: Path, folder: Path) -> Any:
    from modelgraph.loading.protos import parse_message, saved_model_pb2

    blob = safe_io.read_file(path, max_bytes=MAX_SAVED_MODEL_PB, within=folder)
    if len(blob) > MAX_SAVED_MODEL_PB:
        raise SecurityError(f"{path}: over the {MAX_SAVED_MODEL_PB:,}-byte limit")
    message = parse_message(saved_model_pb2.SavedModel, blob, str(path), "a TensorFlow SavedModel protobuf")
    del blob
    if not message.meta_graphs:
        return saved_model_pb2.SavedObjectGraph()
    graph = message.meta_graphs[0].object_graph_def
    if len(graph.nodes) > MAX_NODES:
        raise SecurityError(f"{path}: {len(graph.nodes):,} saved objects, over the {MAX_NODES:,} bound")
    # A copy of its own: a part of a decoded message keeps the whole message (the function graphs,
    # most of the file) alive for as long as it is held.
    standalone = saved_model_pb2.SavedObjectGraph()
    standalone.CopyFrom(graph)
    return standalone


def object_paths(graph: Any) -> dict[int, str]:
    """Node id -> path from the root (``root``, ``root.layer-1``, ``root.layer-1.cell``) of every node
    reachable from node 0, by a depth-first walk taking children in stored order; edges to ids
    outside the graph are ignored."""
    count = len(graph.nodes)
    if not count:
        return {}
    paths = {0: "root"}
    stack = [0]
    while stack:
        node = stack.pop()
        for child in graph.nodes[node].children:
            if child.node_id in paths or not 0 <= child.node_id < count:
                continue
            paths[child.node_id] = f"{paths[node]}.{child.local_name}"
            stack.append(child.node_id)
    return paths


def keras_objects(graph: Any) -> list[tuple[int, Any]]:
    """``(node id, SavedUserObject)`` of every Keras object of the graph, in node order."""
    return [
        (i, node.user_object)
        for i, node in enumerate(graph.nodes)
        if node.HasField("user_object") and node.user_object.identifier in KERAS_IDENTIFIERS
    ]


def legacy_metadata_nodes(graph: Any) -> list[MetadataNode]:
    """The metadata nodes a ``keras_metadata.pb`` would hold, rebuilt from the Keras objects of the
    object graph that carry JSON metadata and are reachable from the root."""
    paths = object_paths(graph)
    return [
        MetadataNode(node_id, paths[node_id], obj.identifier, obj.metadata)
        for node_id, obj in keras_objects(graph)
        if obj.metadata and node_id in paths
    ]


def has_legacy_metadata(graph: Any) -> bool:
    """Whether the root object is a Keras object with JSON metadata (a TF 2.0-2.3 Keras SavedModel)."""
    objects = keras_objects(graph)
    return bool(objects) and objects[0][0] == 0 and bool(objects[0][1].metadata)
