"""Shape rules (``SHP``): static shape inference through the whole graph (:mod:`modelgraph.shapes`).

Inference records a problem per node instead of raising; each problem ``kind`` maps to one rule.
"""

from __future__ import annotations

from typing import Any

from modelgraph.graph import ModelGraph
from modelgraph.validate.issue import Issue, severity_rank
from modelgraph.validate.registry import RULES, make_issue

KIND_RULES: dict[str, str] = {
    "broadcast": "SHP001",
    "concat": "SHP001",
    "concatenate": "SHP001",
    "dot": "SHP001",
    "dot_axes": "SHP001",
    "matmul": "SHP001",
    "weight_shape": "SHP002",
    "reshape": "SHP003",
    "newshape": "SHP003",
    "bad_dim": "SHP004",
    "rank": "SHP005",
    "arity": "SHP006",
    "tensor_index": "SHP006",
    "axis": "SHP007",
    "index": "SHP007",
    "split": "SHP007",
    "num_or_size_splits": "SHP007",
    "slice_spec": "SHP007",
    "config": "SHP008",
    "input_shape": "SHP009",
    "unknown_class": "SHP010",
    "huge": "SHP012",
    "internal": "STR014",
}
"""Shape-problem kind -> rule id; any other kind is SHP011."""


def infer(graph: ModelGraph) -> Any:
    """Run shape inference (imported lazily: the shape rules are a sizeable import)."""
    from modelgraph.shapes import infer_shapes

    return infer_shapes(graph)


def shape_issues(result: Any, graph: ModelGraph, path: str = "") -> list[Issue]:
    """One finding per shape problem. A rule's severity is its default, lowered to the problem's
    own severity for notes that inference marks as warnings or infos."""
    issues: list[Issue] = []
    for p in result.problems:
        rule_id = KIND_RULES.get(p.kind, "SHP011")
        label = "/".join((*p.path, p.layer))
        json_path = ""
        if not p.path and graph.has_layer(p.layer):
            json_path = graph.layer(p.layer).json_path
        where = f"layer '{label}' node {p.node_index}" + (f" ({json_path})" if json_path else "")
        message = p.message
        if rule_id == "STR014":
            message = f"shape inference: {message}"
        issue = make_issue(rule_id, message, where, path=path)
        sev = p.severity if p.severity in ("error", "warning", "info") else "error"
        if severity_rank(sev) < severity_rank(RULES[rule_id].severity):
            issue = Issue(issue.rule, sev, issue.message, issue.where, issue.hint, issue.path)  # type: ignore[arg-type]
        issues.append(issue)
    return issues


def weight_shape_flags(result: Any) -> set[tuple[tuple[str, ...], str]]:
    """``(layer path, weight name)`` pairs already reported as SHP002, so that weights rules skip them."""
    out: set[tuple[tuple[str, ...], str]] = set()
    for p in result.problems:
        if p.kind == "weight_shape":
            text = p.message
            if text.startswith("weight '"):
                name = text[len("weight '") :].split("'", 1)[0]
                out.add(((*p.path, p.layer), name))
    return out


def declared_input_issues(graph: ModelGraph, path: str = "") -> list[Issue]:
    """SHP004 for a model input whose declared ``batch_shape`` (``batch_input_shape``) is not a list
    of non-negative integer sizes and nulls (``1e400`` parses as infinity, ``-0.0`` and ``2.5`` are
    floats): the same check ``run`` applies before it plans the model, which refuses such an input."""
    from modelgraph.shape_rules import is_size_list

    issues: list[Issue] = []
    for ref in graph.inputs:
        if not graph.has_layer(ref.layer):
            continue
        layer = graph.layer(ref.layer)
        shape = layer.config.get("batch_shape", layer.config.get("batch_input_shape"))
        if shape is None or is_size_list(shape):
            continue
        where = f"layer '{layer.name}'" + (f" ({layer.json_path})" if layer.json_path else "")
        issues.append(
            make_issue(
                "SHP004",
                f"input layer '{layer.name}' declares shape {shape!r}: not a list of sizes and nulls "
                "(run refuses it)",
                where,
                path=path,
            )
        )
    return issues
