"""The Keras metadata of a tf.keras SavedModel directory (``keras_metadata.pb``).

tf.keras 2.4+ writes one protobuf message, ``SavedMetadata``, beside ``saved_model.pb``: a list of
nodes, one per Keras object it saved (the model, every layer, nested models, metrics). Each node
has its id in the SavedModel object graph, its path from the root (``root``,
``root.layer_with_weights-0``, ``root.layer-3.forward_layer``), a Keras identifier
(``_tf_keras_network``, ``_tf_keras_layer``, ...) and a JSON document; the root's JSON carries the
model's ``class_name`` and ``config`` (the same config a legacy ``.h5`` stores), ``keras_version``,
``backend`` and ``training_config``. See docs/formats.md ("SavedModel directories"). TF 2.0-2.3
kept the same documents inside ``saved_model.pb`` (:mod:`modelgraph.loading.saved_object_graph`).

The message is decoded with the ``protobuf`` package from ``protos/keras_metadata.proto``; the JSON
goes through safe_io's caps.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelgraph import safe_io
from modelgraph.errors import FormatError, SecurityError

METADATA_FILE = "keras_metadata.pb"
MAX_METADATA_BYTES = safe_io.MAX_JSON_BYTES
"""Largest keras_metadata.pb accepted: its JSON documents are under the same cap as other configs."""
MAX_NODES = 250_000
"""Most nodes accepted (a Keras object each: NASNetLarge has about 1,300 layers)."""


@dataclass(frozen=True)
class MetadataNode:
    """One Keras object of a SavedModel: its object-graph id and path, identifier and JSON text."""

    node_id: int
    node_path: str
    identifier: str
    metadata: str


def read_keras_metadata(folder: Path) -> list[MetadataNode]:
    """The nodes of ``folder/keras_metadata.pb``, read inside ``folder``; FormatError when unreadable."""
    path = folder / METADATA_FILE
    blob = safe_io.read_file(path, max_bytes=MAX_METADATA_BYTES, within=folder)
    if len(blob) > MAX_METADATA_BYTES:
        raise SecurityError(f"{path}: over the {MAX_METADATA_BYTES:,}-byte limit")
    return parse_keras_metadata(blob, str(path))


def parse_keras_metadata(blob: bytes, where: str) -> list[MetadataNode]:
    """Decode a ``SavedMetadata`` message; FormatError naming ``where`` when it is not one."""
    from modelgraph.loading.protos import keras_metadata_pb2, parse_message

    message = parse_message(keras_metadata_pb2.SavedMetadata, blob, where, "a Keras metadata protobuf")
    if len(message.nodes) > MAX_NODES:
        raise SecurityError(f"{where}: {len(message.nodes):,} nodes, over the {MAX_NODES:,} bound")
    return [MetadataNode(int(n.node_id), n.node_path, n.identifier, n.metadata) for n in message.nodes]


def root_document(nodes: list[MetadataNode], where: str) -> dict[str, Any]:
    """The parsed JSON of the root node (``node_path == 'root'``): the model's own metadata."""
    roots = [n for n in nodes if n.node_path == "root"]
    if not roots:
        raise FormatError(f"{where}: no 'root' node (the model's metadata is missing)")
    doc = safe_io.parse_json(roots[0].metadata, where=f"{where}:root").value
    if not isinstance(doc, dict):
        raise FormatError(f"{where}:root: the metadata is not a JSON object")
    return doc


_SEQUENCE_CLASSES = frozenset({"__tuple__", "TensorShape"})


def decode_keras_json(value: Any) -> Any:
    """``value`` with tf.keras's SavedModel JSON encodings undone: a tuple (``{"class_name":
    "__tuple__", "items": [...]}``) and a ``TensorShape`` (same form) become lists, as a ``.h5``
    config stores them. Iterative: a hostile nesting depth is already bounded by safe_io's parse."""
    holder = [value]
    stack: list[tuple[Any, Any]] = [(holder, 0)]
    while stack:
        parent, key = stack.pop()
        item = parent[key]
        if isinstance(item, dict):
            if (
                item.get("class_name") in _SEQUENCE_CLASSES
                and isinstance(item.get("items"), list)
                and len(item) == 2
            ):
                item = list(item["items"])
                parent[key] = item
            else:
                stack.extend((item, k) for k in item)
                continue
        if isinstance(item, list):
            stack.extend((item, i) for i in range(len(item)))
    return holder[0]
