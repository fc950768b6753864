"""Legacy HDF5 files: full models (``model_config`` attribute) and ``save_weights('x.h5')`` files."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from modelgraph import safe_io
from modelgraph.errors import FormatError, SecurityError
from modelgraph.graph import ModelGraph
from modelgraph.loading.h5store import stored_array
from modelgraph.loading.normalize import build_graph
from modelgraph.loading.training import TRAINING_KEY, legacy_h5_training
from modelgraph.loading.weights import StoredArray, bind_named


def load_legacy_h5(path: Path, problems: list | None = None) -> ModelGraph:
    """Read a full-model legacy ``.h5``: architecture from ``model_config``, weights from ``model_weights``."""
    f = safe_io.open_h5(path)
    raw_config = safe_io.read_attr(f, "model_config", None)
    if raw_config is None:
        raise FormatError(f"{path}: no model_config attribute (a weights-only file? pass it with --weights)")
    config = safe_io.parse_json(_text(raw_config), where=f"{path}:model_config").value
    keras_version = _text(safe_io.read_attr(f, "keras_version", None))
    info: dict[str, Any] = {"backend": _text(safe_io.read_attr(f, "backend", None))}
    training = safe_io.read_attr(f, "training_config", None)
    if training is not None:
        info["training_config"] = safe_io.parse_json(_text(training), where=f"{path}:training_config").value
        record = legacy_h5_training(f, str(path), info["training_config"], keras_version)
        if record is not None:
            info[TRAINING_KEY] = record
    graph = build_graph(
        config, keras_version=keras_version, format="legacy_h5", source=str(path), problems=problems
    )
    weights_root = safe_io.safe_group(f, "model_weights", required=False)
    if weights_root is not None:
        graph, notes = bind_named(graph, legacy_groups(weights_root, str(path)))
        info["weight_notes"] = notes
    info["_handles"] = (f,)
    return replace(graph, metadata=MappingProxyType(info))


def legacy_groups(root: Any, source: str) -> list[tuple[str, StoredArray]]:
    """``(layer group, array)`` for every weight listed in ``layer_names`` / ``weight_names``."""
    arrays: list[tuple[str, StoredArray]] = []
    for layer_name, group, weight_names in legacy_layout(root, source):
        for weight_name in weight_names:
            dset = safe_io.safe_dataset(group, weight_name, required=False)
            if dset is None:
                raise FormatError(f"{source}: weight '{weight_name}' of layer '{layer_name}' is missing")
            arrays.append(
                (
                    layer_name,
                    stored_array(dset, weight_name, f"{source}:/{group.name.lstrip('/')}/{weight_name}"),
                )
            )
    return arrays


def legacy_layout(root: Any, source: str) -> list[tuple[str, Any, list[str]]]:
    """``(layer name, its group, its weight names)`` for every name in ``layer_names``.

    A name listed twice (in ``layer_names`` or one layer's ``weight_names``) is a SecurityError, found
    before any group or dataset is opened: Keras writes each once, and 300,000 copies of one name
    would otherwise cost minutes of lookups. More names than ``safe_io.MAX_H5_LINKS`` likewise.
    """
    layer_names = _unique_names(safe_io.read_attr(root, "layer_names", []), "layer_names", source)
    out: list[tuple[str, Any, list[str]]] = []
    for layer_name in layer_names:
        group = safe_io.safe_group(root, layer_name, required=False)
        if group is None:
            raise FormatError(f"{source}: layer_names lists '{layer_name}' but the file has no such group")
        weight_names = _unique_names(
            safe_io.read_attr(group, "weight_names", []), f"weight_names of '{layer_name}'", source
        )
        out.append((layer_name, group, weight_names))
    return out


def _unique_names(value: Any, what: str, source: str) -> list[str]:
    names = [_text(n) for n in _as_list(value)]
    if len(names) > safe_io.MAX_H5_LINKS:
        raise SecurityError(
            f"{source}: {what} lists {len(names):,} names, over the {safe_io.MAX_H5_LINKS:,} bound"
        )
    if len(set(names)) != len(names):
        counts = Counter(names)
        name, times = counts.most_common(1)[0]
        raise SecurityError(f"{source}: {what} lists '{name}' {times:,} times; Keras writes each name once")
    return names


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    if value is None or (hasattr(value, "size") and value.size == 0):
        return []
    return [value]


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)
