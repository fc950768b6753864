"""Reading a model file's own contents: one reader per container format, picked by content."""

from __future__ import annotations

from pathlib import Path

from modelgraph.errors import FormatError, LoadError
from modelgraph.graph import ModelGraph
from modelgraph.loading.detect import detect


def load_architecture(p: Path, problems: list[LoadError] | None = None) -> ModelGraph:
    """The model in ``p`` (any container format but a weights-only file), without attaching weights
    from another file: what :func:`modelgraph.loading.load` reads first, and what a model file given
    as the weights of another model is read with (:mod:`modelgraph.loading.weights_files`)."""
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
    return graph
