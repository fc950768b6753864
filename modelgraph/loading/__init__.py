"""Loaders, one module per container format; :func:`load` picks one by content."""

from __future__ import annotations

from pathlib import Path

from modelgraph._gc import gc_paused
from modelgraph.errors import FormatError, LoadError
from modelgraph.graph import ModelGraph
from modelgraph.loading.detect import detect


def load(
    path: str | Path, weights: str | Path | None = None, problems: list[LoadError] | None = None
) -> ModelGraph:
    """Read any Keras model file into a :class:`ModelGraph`; ``weights`` attaches a weights file.

    With a ``problems`` list, structural problems of the config are collected there instead of
    raised (see :func:`modelgraph.loading.normalize.build_graph`); container errors still raise.
    """
    with gc_paused():
        return _load(Path(path), weights, problems)


def _load(p: Path, weights: str | Path | None, problems: list[LoadError] | None) -> ModelGraph:
    fmt = detect(p)
    if fmt == "keras_zip":
        from modelgraph.loading.keras_zip import load_keras_zip

        graph = load_keras_zip(p, problems)
    elif fmt == "keras_dir":
        from modelgraph.loading.keras_zip import load_keras_dir

        graph = load_keras_dir(p, problems)
    elif fmt == "legacy_h5":
        from modelgraph.loading.legacy_h5 import load_legacy_h5

        graph = load_legacy_h5(p, problems)
    elif fmt == "json_config":
        from modelgraph.loading.json_config import load_json_config

        graph = load_json_config(p, problems)
    elif fmt == "tfjs_layers":
        from modelgraph.loading.tfjs import load_tfjs

        graph = load_tfjs(p, problems)
    elif fmt == "savedmodel":
        from modelgraph.loading.savedmodel import load_savedmodel

        graph = load_savedmodel(p, problems)
    else:
        raise FormatError(
            f"{p}: a weights-only file ({fmt}); give the architecture and attach it with --weights {p.name}"
        )
    if weights is not None:
        from modelgraph.loading.weights_files import attach_weights_file

        graph = attach_weights_file(graph, Path(weights))
    return graph
