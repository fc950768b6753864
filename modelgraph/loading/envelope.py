"""Where the model envelope (``{"class_name", "config", ...}``) sits in each container's config.

One answer for the loaders and for validate's schema check: a ``.keras`` ``config.json`` and a
``to_json()`` file are the envelope; a ``get_config()`` body (``layers`` without ``class_name``) is
wrapped as Functional or Sequential; a legacy ``.h5`` keeps it in the ``model_config`` attribute; a
TF.js ``model.json`` under ``modelTopology`` (``model_config`` inside it, or the topology itself).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def model_envelope(doc: Any, fmt: str) -> tuple[Any, str] | None:
    """``(envelope, JSON path)`` of a container's parsed config document; None when it holds none.

    ``fmt`` is the detected format (``keras_zip``, ``keras_dir``, ``legacy_h5``, ``json_config``,
    ``tfjs_layers``); for ``legacy_h5`` ``doc`` is the file's attributes. The envelope is returned
    as found (it may be malformed: the caller checks it).
    """
    if not isinstance(doc, Mapping):
        return (doc, "$")
    if fmt == "legacy_h5":
        return (doc.get("model_config"), "$") if "model_config" in doc else None
    if fmt == "tfjs_layers":
        topology = doc.get("modelTopology")
        if not isinstance(topology, Mapping):
            return None
        if "model_config" in topology:
            return (topology["model_config"], "$.modelTopology.model_config")
        return (topology, "$.modelTopology")
    if "class_name" not in doc and "layers" in doc:  # a bare get_config() body
        kind = "Functional" if "input_layers" in doc and "output_layers" in doc else "Sequential"
        return ({"class_name": kind, "config": doc}, "$")
    return (doc, "$")
