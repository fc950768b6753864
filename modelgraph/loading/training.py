"""What a model file says about training: its training/compile config and the optimizer's variables.

Keras 1/2 (and Keras 3's legacy writer) put a ``training_config`` attribute on a full-model ``.h5``
and the optimizer's variables under ``optimizer_weights`` (listed in order by its ``weight_names``
attribute). A ``.keras`` archive keeps a ``compile_config`` next to the model config and the
optimizer's variables, unnamed and in the optimizer's order, at ``optimizer/vars/<i>`` of
``model.weights.h5``. Both are read lazily like layer weights: nothing is read until a writer asks.
See ``docs/writing.md`` ("Training state").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from modelgraph import safe_io
from modelgraph.loading.h5store import stored_array
from modelgraph.loading.weights import Keras3Tree, StoredArray

TRAINING_KEY = "training"  # the key of a TrainingRecord in ModelGraph.metadata


@dataclass(frozen=True)
class TrainingRecord:
    """A model file's training state as stored.

    ``form`` is ``"training_config"`` (legacy ``.h5``: Keras 1/2, or Keras 3's legacy writer) or
    ``"compile_config"`` (``.keras``); ``writer`` the Keras version that wrote the file.
    ``variables`` are the optimizer's variables in the file's order; ``names`` their stored names
    (empty strings where the container does not name them, as in ``.keras``).
    """

    form: str
    config: Mapping[str, Any]
    writer: str | None
    names: tuple[str, ...] = ()
    variables: tuple[StoredArray, ...] = ()


def legacy_h5_training(f: Any, path: str, config: Any, keras_version: str | None) -> TrainingRecord | None:
    """The record of a full-model ``.h5`` whose ``training_config`` attribute parsed to ``config``."""
    if not isinstance(config, dict):
        return None
    group = safe_io.safe_group(f, "optimizer_weights", required=False)
    names: list[str] = []
    arrays: list[StoredArray] = []
    if group is not None:
        listed = safe_io.read_attr(group, "weight_names", [])
        for raw in listed if isinstance(listed, list | tuple) else list(listed):
            name = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
            dset = safe_io.safe_dataset(group, name, required=False)
            if dset is None:  # a listing without its data: carry no optimizer state
                return TrainingRecord("training_config", config, keras_version)
            names.append(name)
            arrays.append(stored_array(dset, name, f"{path}:/optimizer_weights/{name}"))
    return TrainingRecord("training_config", config, keras_version, tuple(names), tuple(arrays))


def keras_zip_training(
    config: Any, tree: Keras3Tree | None, keras_version: str | None
) -> TrainingRecord | None:
    """The record of a ``.keras`` archive whose ``config.json`` is ``config``."""
    compile_config = config.get("compile_config") if isinstance(config, dict) else None
    if not isinstance(compile_config, dict):
        return None
    found = tree.vars_at("optimizer/vars") if tree is not None else None
    ordered = _numbered(found or {})
    if ordered is None:
        return TrainingRecord("compile_config", compile_config, keras_version)
    return TrainingRecord(
        "compile_config", compile_config, keras_version, ("",) * len(ordered), tuple(ordered)
    )


def _numbered(found: Mapping[str, StoredArray]) -> list[StoredArray] | None:
    """``vars/0 .. vars/n-1`` in order, or None when the keys are not exactly that."""
    keys = [str(i) for i in range(len(found))]
    if set(found) != set(keys):  # compared as text: a hostile name of many digits is never parsed
        return None
    return [found[k] for k in keys]
