"""Architecture-only JSON: ``model.to_json()`` (an envelope) or ``model.get_config()`` (a bare body)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from modelgraph.errors import ConfigError
from modelgraph.graph import ModelGraph
from modelgraph.loading.envelope import model_envelope
from modelgraph.loading.files import read_json_file
from modelgraph.loading.normalize import build_graph


def envelope_of(doc: Any, where: str) -> Mapping[str, Any]:
    """The model envelope of a JSON document: itself, or a bare ``get_config()`` body wrapped."""
    if not isinstance(doc, Mapping):
        raise ConfigError(f"expected a JSON object, found {type(doc).__name__}", where)
    found = model_envelope(doc, "json_config")
    envelope = found[0] if found is not None else None
    if not (isinstance(envelope, Mapping) and "class_name" in envelope and "config" in envelope):
        raise ConfigError(
            "neither a model object ({class_name, config}) nor a get_config() body with 'layers'", where
        )
    return envelope


def load_json_config(path: Path, problems: list | None = None) -> ModelGraph:
    """Read an architecture-only JSON file (no weights)."""
    doc = read_json_file(path)
    envelope = envelope_of(doc, "$")
    version = doc.get("keras_version") if isinstance(doc, Mapping) else None
    return build_graph(
        envelope,
        keras_version=version or _guess_version(envelope),
        format="json_config",
        source=str(path),
        problems=problems,
    )


def _guess_version(envelope: Mapping[str, Any]) -> str | None:
    """to_json() records no version: Keras 3 writes dict nodes and module paths under keras.src."""
    module = envelope.get("module")
    if isinstance(module, str) and module.startswith("keras.src.models"):
        return "3"
    if module == "keras" and envelope.get("class_name") == "Sequential":
        return "3"
    return None
