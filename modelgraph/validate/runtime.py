"""Runtime-support rules (``RUN``): what the NumPy runner cannot execute, found without running.

The runner's planner (:class:`modelgraph.runner.interpreter.Runner` with ``strict=False``) lists
every problem at once. Findings are ``info`` by default and ``error`` with ``require_runnable``.
"""

from __future__ import annotations

from dataclasses import replace

from modelgraph.errors import UnsupportedConfigError, UnsupportedLayerError
from modelgraph.graph import ModelGraph, Weight
from modelgraph.validate.issue import Issue
from modelgraph.validate.registry import make_issue


def runtime_issues(graph: ModelGraph, *, path: str = "", require_runnable: bool = False) -> list[Issue]:
    """One finding per layer or option the runner cannot plan."""
    from modelgraph.runner.interpreter import Runner

    issues: list[Issue] = []
    if not graph.has_weights:
        return _class_support(graph, path, require_runnable)
    runner = Runner(_zero_weights(graph), strict=False)
    for problem in runner.check():
        err = problem.error
        if isinstance(err, UnsupportedLayerError):
            rule_id = "RUN001"
            message = f"no NumPy kernel for {err.class_name} (layer '{problem.path}')"
        elif isinstance(err, UnsupportedConfigError):
            rule_id = "RUN002"
            message = f"{err.class_name} layer '{problem.path}': {err.key}={err.value!r} is not supported"
        else:
            rule_id = "RUN003"
            message = f"{problem.class_name} layer '{problem.path}': {err}"
        issue = make_issue(rule_id, message, f"layer '{problem.path}'", path=path)
        if require_runnable:
            issue = Issue(issue.rule, "error", issue.message, issue.where, issue.hint, issue.path)
        issues.append(issue)
    return issues


def _zero_weights(graph: ModelGraph) -> ModelGraph:
    """The graph with every weight read as zeros of its stored shape: planning needs the shapes and
    dtypes, not the values (those are checked by WGT006/WGT007), and reading them costs file I/O."""
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


def _class_support(graph: ModelGraph, path: str, require_runnable: bool) -> list[Issue]:
    """Without stored weights the kernels cannot be built: check only that every class has one."""
    from modelgraph.errors import UnsupportedError
    from modelgraph.runner.registry import get_entry

    issues: list[Issue] = []
    stack: list[tuple[str, ModelGraph]] = [("", graph)]
    while stack:
        prefix, g = stack.pop()
        for layer in g.layers:
            label = f"{prefix}{layer.name}"
            if layer.subgraph is not None:
                stack.append((f"{label}/", layer.subgraph))
                continue
            if layer.kind == "input":
                continue
            key = layer.key
            try:
                get_entry(key, label)
            except UnsupportedError:
                issue = make_issue(
                    "RUN001", f"no NumPy kernel for {key} (layer '{label}')", f"layer '{label}'", path=path
                )
                if require_runnable:
                    issue = Issue(issue.rule, "error", issue.message, issue.where, issue.hint, issue.path)
                issues.append(issue)
    return issues
