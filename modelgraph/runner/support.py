"""Is this model runnable? One answer for ``run --check`` and ``validate`` (with or without weights).

The planner (:class:`~modelgraph.runner.interpreter.Runner` with ``strict=False``) builds every
kernel and lists every problem at once: unsupported layers and options first. Weight values do not
matter for that, so stored weights are read as zeros of their stored shape (no file I/O); a
config-only model has no weights, so the problems of kernels that miss them are not support problems
and are left out (the layers were still checked by class and by the config keys read before the
weights).
"""

from __future__ import annotations

from dataclasses import replace

from modelgraph.errors import WeightsError
from modelgraph.graph import ModelGraph, Weight
from modelgraph.runner.interpreter import Problem, Runner


def support_problems(
    graph: ModelGraph, *, fuse: bool = True, reference: bool = False
) -> tuple[Runner, list[Problem]]:
    """The planner (for its step count) and every problem that stops the graph from running
    (``reference``: as planned with the reference kernels only)."""
    runner = Runner(_zero_weights(graph), strict=False, fuse=fuse, reference=reference)
    problems = runner.check()
    if not graph.has_weights:
        problems = [p for p in problems if not isinstance(p.error, WeightsError)]
    return runner, problems


def _zero_weights(graph: ModelGraph) -> ModelGraph:
    """The graph with every weight read as zeros of its stored shape and dtype."""
    import numpy as np

    def zeros(w: Weight) -> Weight:
        dtype = "float32" if w.dtype == "bfloat16" else w.dtype
        try:
            np.dtype(dtype)
        except TypeError:
            return w
        return replace(w, reader=lambda shape=w.shape, dtype=dtype: np.zeros(shape, dtype))

    def rebuild(g: ModelGraph) -> ModelGraph:
        layers = tuple(
            replace(
                layer,
                weights=tuple(zeros(w) for w in layer.weights),
                subgraph=rebuild(layer.subgraph) if layer.subgraph is not None else None,
            )
            for layer in g.layers
        )
        return replace(g, layers=layers)

    return rebuild(graph)
