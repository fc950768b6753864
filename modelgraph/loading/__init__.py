"""Loaders, one module per container format; :func:`load` picks one by content."""

from __future__ import annotations

from pathlib import Path

from modelgraph._gc import gc_paused
from modelgraph.errors import LoadError
from modelgraph.graph import ModelGraph
from modelgraph.loading.architecture import load_architecture


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
    graph = load_architecture(p, problems)
    if weights is not None:
        from modelgraph.loading.weights_files import attach_weights_file

        graph = attach_weights_file(graph, Path(weights))
    return graph
