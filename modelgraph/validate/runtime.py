"""Runtime-support rules (``RUN``): what the NumPy runner cannot execute, found without running.

The answer is :func:`modelgraph.runner.support.support_problems`, the same one ``run --check``
gives, with or without stored weights. Findings are ``info`` by default and ``error`` with
``require_runnable``.
"""

from __future__ import annotations

from modelgraph.errors import UnsupportedConfigError, UnsupportedLayerError
from modelgraph.graph import ModelGraph
from modelgraph.validate.issue import Issue
from modelgraph.validate.registry import make_issue


def runtime_issues(graph: ModelGraph, *, path: str = "", require_runnable: bool = False) -> list[Issue]:
    """One finding per layer or option the runner cannot plan."""
    from modelgraph.runner.support import support_problems

    issues: list[Issue] = []
    _, problems = support_problems(graph)
    for problem in problems:
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
