"""TensorFlow checkpoints as Keras weights: checkpoint keys mapped to layers through the object graph.

A TF-format checkpoint (``model.save_weights("ckpt")``, ``tf.train.Checkpoint(model=m).save()``, a
SavedModel's ``variables/variables``) stores each variable under a key that is *a* path through the
saved objects (``layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE``; in a SavedModel often
``variables/3/...``, the first path TensorFlow found). Keys therefore say little; the object graph
stored with the checkpoint (``_CHECKPOINTABLE_OBJECT_GRAPH``) says everything:

* the model's node has one child ``layer-N`` per entry of Keras's ``model.layers`` (a Sequential's
  own InputLayer excluded) and ``layer_with_weights-N`` aliases;
* every variable under a layer's node (its own, a wrapper's inner layer, an RNN's cell, a nested
  model's layers, MultiHeadAttention's dense layers) is reachable from it, and carries its original
  name (``bilstm/forward_lstm/lstm_cell/kernel``) and the key of its value.

So each variable is filed under its top-level layer with its original name, exactly the pair a legacy
``.h5`` stores (``model_weights/<layer>/<weight name>``), and bound by the same code
(:func:`modelgraph.loading.weights.bind_named`): a checkpoint gives the weights, in the order, the
``.h5`` of the same model gives. Variables outside the model (optimizer slots and counters,
``save_counter``) are left out and reported in the notes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from modelgraph import safe_io
from modelgraph.errors import FormatError, SecurityError, WeightsError
from modelgraph.graph import ModelGraph
from modelgraph.loading.weights import StoredArray, bind_named

VALUE_ATTRIBUTE = "VARIABLE_VALUE"
_LAYER_EDGE = re.compile(r"layer-(\d+)")
MAX_CHECKPOINT_FILE_BYTES = 1 << 20
"""The ``checkpoint`` state file is a few lines of text naming the latest prefix."""


def has_checkpoint(prefix: Path) -> bool:
    """Whether a checkpoint with this prefix exists (its ``.index`` file, by name)."""
    return os.path.lexists(f"{prefix}.index")


def checkpoint_prefix(path: Path) -> tuple[Path, Path]:
    """``(prefix, folder)`` of a checkpoint named by its ``.index`` file, a data shard, its prefix, or
    a folder holding a ``checkpoint`` state file (the prefix it names) or a single ``.index``."""
    if path.is_dir():
        state = path / "checkpoint"
        if os.path.lexists(state):
            return path / _latest(state, path), path
        if os.path.lexists(path / "variables" / "variables.index"):
            return path / "variables" / "variables", path
        indexes = sorted(p.name for p in path.iterdir() if p.name.endswith(".index"))
        if len(indexes) == 1:
            return path / indexes[0][: -len(".index")], path
        raise FormatError(
            f"{path}: a folder without a 'checkpoint' file and with {len(indexes)} .index files"
        )
    name = path.name
    if name.endswith(".index"):
        return path.with_name(name[: -len(".index")]), path.parent
    match = re.fullmatch(r"(.+)\.data-\d{5}-of-\d{5}", name)
    if match:
        return path.with_name(match.group(1)), path.parent
    return path, path.parent


def _latest(state: Path, folder: Path) -> str:
    """The prefix a ``checkpoint`` state file names (``model_checkpoint_path: "ckpt-3"``), which must
    be a plain name inside ``folder``."""
    raw = safe_io.read_file(state, max_bytes=MAX_CHECKPOINT_FILE_BYTES, within=folder)
    text = raw[:MAX_CHECKPOINT_FILE_BYTES].decode("utf-8", errors="replace")
    match = re.search(r'^model_checkpoint_path:\s*"((?:[^"\\]|\\.)*)"', text, re.MULTILINE)
    if match is None:
        raise FormatError(f"{state}: no model_checkpoint_path line")
    name = match.group(1)
    if not name or "/" in name or "\\" in name or name in (".", ".."):
        raise SecurityError(f"{state}: names '{name}', not a checkpoint in its own folder")
    return name


def bind_checkpoint(
    graph: ModelGraph,
    prefix: Path,
    *,
    within: Path | None = None,
    layer_names: Mapping[str, str] | None = None,
) -> tuple[ModelGraph, list[str], tuple[Any, ...]]:
    """``graph`` with the weights of the checkpoint at ``prefix``; notes on what was left out; the
    open handles. ``layer_names``: object path -> layer name from a SavedModel's Keras metadata
    (preferred over the ``layer-N`` position when present)."""
    from modelgraph.loading.tensor_bundle import open_bundle

    bundle = open_bundle(prefix, within=within) if within is not None else open_bundle(prefix)
    arrays, notes = checkpoint_arrays(bundle, graph, str(prefix), layer_names or {})
    graph, bind_notes = bind_named(graph, arrays)
    close = getattr(bundle, "close", None)
    return graph, notes + bind_notes, (bundle,) if close is not None else ()


def checkpoint_arrays(
    bundle: Any, graph: ModelGraph, source: str, layer_names: Mapping[str, str]
) -> tuple[list[tuple[str, StoredArray]], list[str]]:
    """``(top-level layer name, array under its original name)`` for every model variable of an
    open tensor bundle, and notes on the variables left out."""
    og = bundle.object_graph()
    if og is None:
        raise WeightsError(f"{source}: the checkpoint has no object graph (_CHECKPOINTABLE_OBJECT_GRAPH)")
    nodes = og.nodes
    model_id, model_path = _model_node(nodes, source)
    keras_layers = _keras_layers(graph)
    owner: dict[int, str] = {}  # variable node -> top-level layer name
    for child in _children(nodes, model_id, source):
        path = f"{model_path}{child.local_name}"
        name = layer_names.get(path)
        match = _LAYER_EDGE.fullmatch(child.local_name)
        if name is None and match is not None:
            index = int(match.group(1))
            if index >= len(keras_layers):
                raise WeightsError(
                    f"{source}: the checkpoint has layer {index} ('{child.local_name}'), the model "
                    f"{len(keras_layers)} layers"
                )
            name = keras_layers[index]
        if name is None:
            continue
        for var_id in _variables_under(nodes, child.node_id, source):
            owner.setdefault(var_id, name)
    arrays: list[tuple[str, StoredArray]] = []
    for var_id, layer in sorted(owner.items()):
        for attr in nodes[var_id].attributes:
            if attr.name != VALUE_ATTRIBUTE:
                continue
            arrays.append((layer, _stored(bundle, attr.checkpoint_key, attr.full_name, source)))
    used = {a.location.rsplit(":", 1)[-1] for _, a in arrays}
    left = [k for k in bundle.keys() if k and k not in used and k != "_CHECKPOINTABLE_OBJECT_GRAPH"]
    notes = [_left_out_note(left)] if left else []
    return arrays, notes


def _stored(bundle: Any, key: str, full_name: str, source: str) -> StoredArray:
    """The array of ``key``, named like the ``.h5`` names it (``layer/.../kernel:0``), read lazily."""
    entry = bundle.entry(key)
    name = (full_name or key.split("/.ATTRIBUTES/")[0]) + ":0"

    def reader(bundle: Any = bundle, key: str = key) -> Any:
        return bundle.read(key)

    # a string tensor reads as a NumPy object array
    dtype = "object" if entry.dtype_name == "string" else entry.dtype_name
    return StoredArray(name, entry.shape, dtype, f"{source}:{key}", reader)


def _left_out_note(keys: list[str]) -> str:
    optimizer = [k for k in keys if k.startswith("optimizer/") or ".OPTIMIZER_SLOT" in k]
    other = [k for k in keys if k not in optimizer]
    parts = []
    if optimizer:
        parts.append(f"{len(optimizer)} optimizer variable(s) (slots, iteration count)")
    if other:
        parts.append(
            f"{len(other)} other variable(s) ({', '.join(sorted(other)[:3])}{', ...' if len(other) > 3 else ''})"
        )
    return "checkpoint variables outside the model left out: " + "; ".join(parts)


def _model_node(nodes: Any, source: str) -> tuple[int, str]:
    """The node of the Keras model (root, or ``model`` under a ``tf.train.Checkpoint``) and its
    path prefix in object-path form."""
    if not len(nodes):
        raise WeightsError(f"{source}: the checkpoint's object graph is empty")
    if _has_layers(nodes, 0):
        return 0, ""
    candidates = [
        c for c in nodes[0].children if 0 <= c.node_id < len(nodes) and _has_layers(nodes, c.node_id)
    ]
    candidates.sort(key=lambda c: c.local_name != "model")  # tf.train.Checkpoint(model=...) first
    if candidates:
        return candidates[0].node_id, f"{candidates[0].local_name}/"
    raise WeightsError(f"{source}: no Keras model in the checkpoint (no object with layer-N children)")


def _has_layers(nodes: Any, node_id: int) -> bool:
    return any(_LAYER_EDGE.fullmatch(c.local_name) for c in nodes[node_id].children)


def _children(nodes: Any, node_id: int, source: str) -> list[Any]:
    out = []
    for child in nodes[node_id].children:
        if not 0 <= child.node_id < len(nodes):
            raise WeightsError(
                f"{source}: object graph node {node_id} names node {child.node_id}, out of range"
            )
        out.append(child)
    return out


def _variables_under(nodes: Any, start: int, source: str) -> list[int]:
    """Every variable node reachable from ``start`` (iterative; each node visited once)."""
    seen = {start}
    stack = [start]
    found = []
    while stack:
        node_id = stack.pop()
        if any(a.name == VALUE_ATTRIBUTE for a in nodes[node_id].attributes):
            found.append(node_id)
        for child in _children(nodes, node_id, source):
            if child.node_id not in seen:
                seen.add(child.node_id)
                stack.append(child.node_id)
    return found


def _keras_layers(graph: ModelGraph) -> list[str]:
    """Layer names in the order of Keras's ``model.layers`` (a Sequential's InputLayer left out)."""
    names = [lyr.name for lyr in graph.layers]
    # A Sequential's own input layer (its first layer, a model input) is not in model.layers.
    if graph.class_name == "Sequential" and graph.layers and graph.layers[0].name in graph.input_names:
        names = names[1:]
    return names
