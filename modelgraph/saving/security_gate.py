"""The writers' security gate: nothing is written from a model whose input ``validate`` flags.

``convert``, ``extract`` and ``export`` all end in :func:`modelgraph.saving.save` or
:func:`modelgraph.saving.onnx.export_onnx`, and both call :func:`refuse_unsafe_input` before
they write a byte. The gate runs the security rules (``SEC``) on the files the graph was read from
(the model file or folder and an attached weights file); a graph built in memory, with no file
behind it, has its layer configs scanned instead. Any error-severity finding refuses the whole
write with :class:`~modelgraph.errors.SecurityRefusedError` (exit 4), which names each finding's
rule and location and says how to see them all.

Why refuse rather than clean: a fresh file written by modelgraph carries its own writer metadata and
would launder the payload (a TFSMLayer path, a pickled torch module, a vocabulary path, a gadget
reference, a layer name that walks out of a folder) into something that looks trustworthy.
"""

from __future__ import annotations

import os
from pathlib import Path

from modelgraph.errors import SecurityRefusedError
from modelgraph.graph import ModelGraph
from modelgraph.validate.issue import Issue

# The member name the .keras loader records as its weights file (inside the archive, not a file).
_ARCHIVE_WEIGHTS = "model.weights.h5"


def input_files(graph: ModelGraph) -> list[tuple[Path, Path | None]]:
    """The files ``graph`` was read from, as ``(path, folder it must stay in)``: the model file (a
    TF.js ``model.json`` stays inside its folder) and an attached weights file."""
    out: list[tuple[Path, Path | None]] = []
    if graph.source and os.path.lexists(graph.source):
        src = Path(graph.source)
        out.append((src, src.parent if graph.format == "tfjs_layers" and not src.is_dir() else None))
    weights = graph.metadata.get("weights_file")
    attached = isinstance(weights, str) and weights not in ("", _ARCHIVE_WEIGHTS, graph.source)
    if attached and os.path.lexists(weights):
        out.append((Path(weights), None))
    return out


def security_errors(graph: ModelGraph) -> list[Issue]:
    """Every error-severity security finding of the input behind ``graph`` (see the module text)."""
    from modelgraph.validate import security

    files = input_files(graph)
    found: list[Issue] = []
    if files:
        for path, within in files:
            issues, _configs = security.scan_path_with_configs(path, within)
            found.extend(issues)
    else:
        for layer_path, layer in graph.walk():
            where = "/".join(layer_path)
            record = {"class_name": layer.class_name, "config": dict(layer.config)}
            found.extend(security.scan_config(record, root=f"layer {where!r}"))
    return [i for i in found if i.severity == "error" and i.rule.startswith("SEC")]


def refuse_unsafe_input(graph: ModelGraph, target: str | os.PathLike[str]) -> None:
    """Raise :class:`SecurityRefusedError` (nothing written) when the input behind ``graph`` has any
    error-severity security finding; return quietly otherwise."""
    errors = security_errors(graph)
    if errors:
        source = graph.source or graph.name or "the model"
        raise SecurityRefusedError(os.fspath(target), source, errors)
