"""The Python entry point: ``modelgraph.run(path_or_graph, feeds)``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from modelgraph.errors import UsageError
from modelgraph.graph import ModelGraph
from modelgraph.runner.interpreter import Runner


def run(
    model: ModelGraph | str | Path | Runner,
    feeds: Any,
    *,
    weights: str | Path | None = None,
    taps: Sequence[str] | None = None,
    all_intermediates: bool = False,
    batch_size: int | None = None,
    backend: str = "numpy",
    reference: bool = False,
    threads: int | None = None,
) -> dict[str, np.ndarray]:
    """Run a saved Keras model (path, :class:`ModelGraph` or :class:`Runner`) on ``feeds``.

    ``feeds``: a dict of arrays by input layer name, a list in model input order, or one array for a
    single-input model. Returns the outputs by output name (the output layer's name, or
    ``layer:node:tensor`` when one layer gives several outputs), plus ``tap/<layer>`` entries for
    the intermediates asked for. ``weights`` (a weights file for a config-only model) applies when
    ``model`` is a path; a graph or runner already holds its weights, so giving one is a UsageError.
    ``backend``: ``"numpy"`` (the reference), ``"onnxruntime"`` or ``"auto"`` (see :class:`Runner`);
    a given Runner keeps its own.
    ``reference`` runs every layer's plain reference kernel (no fast kernels, no fusion) when ``model``
    is a path or a graph (a :class:`Runner` keeps the plan it was built with).
    ``threads`` pins this run's thread count (runner and BLAS; see :mod:`modelgraph.runner.threads`);
    by default it follows the cores the process may use and the load on them.
    """
    if weights is not None and isinstance(model, (Runner, ModelGraph)):
        raise UsageError(
            "weights= applies when run() loads the model from a path; "
            "load the graph with modelgraph.load(path, weights=...) instead"
        )
    if isinstance(model, Runner):
        runner = model
    elif isinstance(model, ModelGraph):
        runner = Runner(model, backend=backend, reference=reference, threads=threads)
    else:
        from modelgraph.loading import load

        runner = Runner(load(model, weights=weights), backend=backend, reference=reference, threads=threads)
    if isinstance(model, Runner) and threads is not None:
        from modelgraph.runner.threads import run_threads

        with run_threads(threads):
            return runner.run(feeds, taps=taps, all_intermediates=all_intermediates, batch_size=batch_size)
    return runner.run(feeds, taps=taps, all_intermediates=all_intermediates, batch_size=batch_size)
