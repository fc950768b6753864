"""Structure rules (``STR``): the container, the JSON, the config schema and the layer/node graph.

* :func:`schema_issues` validates every model and layer record of a raw config against the Pydantic
  config schemas and reports *every* error with its JSON path (the loader stops at the first).
* :func:`load_issues` turns the loader's collected structural problems (``load(..., problems=[])``)
  and its container-level exceptions into findings.
* :func:`graph_issues` checks the built graph: layers that reach no output, unused inputs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import ValidationError

from modelgraph.errors import (
    ConfigError,
    CycleError,
    DanglingReferenceError,
    DisconnectedGraphError,
    DuplicateNameError,
    FormatError,
    GraphError,
    IndexOutOfRangeError,
    LoadError,
    SecurityError,
    ToolMissingError,
    UnsupportedFormatError,
    WeightsError,
)
from modelgraph.graph import ModelGraph
from modelgraph.validate.issue import Issue
from modelgraph.validate.registry import make_issue

_LAYER_RE = re.compile(r"layer '([^']*)'")
_JSON_PATH_RE = re.compile(r"(\$[^\s,;:)]*)")
MAX_SCHEMA_ERRORS = 200
"""Schema errors reported per file at most (a hostile file could have millions)."""


# --- the raw config ----------------------------------------------------------------------------------


def model_envelopes(value: Any, fmt: str) -> list[tuple[Any, str]]:
    """The model envelope of a parsed config document, with its JSON path (none when it holds none)."""
    from modelgraph.loading.envelope import model_envelope

    found = model_envelope(value, fmt)
    return [] if found is None else [found]


def _loc(parent: str, parts: tuple[Any, ...]) -> str:
    out = parent
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def schema_issues(envelope: Any, root: str = "$", path: str = "") -> list[Issue]:
    """Every schema error of a model envelope and of the models nested in it, each with its JSON path.

    Iterative over nested models (no recursion on hostile nesting); bounded by ``MAX_SCHEMA_ERRORS``.
    """
    from modelgraph.loading.normalize import model_kind
    from modelgraph.schemas.keras_config import FunctionalConfig, LayerRecord, SequentialConfig

    issues: list[Issue] = []
    stack: list[tuple[Any, str]] = [(envelope, root)]

    def add(message: str, where: str) -> None:
        if len(issues) < MAX_SCHEMA_ERRORS:
            issues.append(make_issue("STR003", message, where, path=path))

    while stack and len(issues) < MAX_SCHEMA_ERRORS:
        env, where = stack.pop()
        if not isinstance(env, Mapping):
            add(f"expected a model object {{class_name, config}}, found {type(env).__name__}", where)
            continue
        class_name = env.get("class_name")
        if not isinstance(class_name, str):
            add("the model object has no string 'class_name'", f"{where}.class_name")
            continue
        config = env.get("config")
        kind = model_kind(class_name, config)
        if kind is None and class_name in ("Functional", "Model") and isinstance(config, Mapping):
            kind = "functional" if "layers" in config else None  # a Functional missing required keys
        if kind is None:
            continue  # a subclassed model or a bare layer: reported by the loader (STR012)
        body_where = f"{where}.config"
        body = {"layers": config} if isinstance(config, list) else config
        schema = FunctionalConfig if kind == "functional" else SequentialConfig
        try:
            schema.model_validate(body)
        except ValidationError as exc:
            for err in exc.errors()[:MAX_SCHEMA_ERRORS]:
                loc = tuple(err.get("loc", ()))
                if isinstance(config, list) and loc[:1] == ("layers",):
                    loc = loc[1:]
                add(
                    f"{err.get('msg', 'invalid value')} (found {_short(err.get('input'))})",
                    _loc(body_where, loc),
                )
        layers = body.get("layers") if isinstance(body, Mapping) else None
        if not isinstance(layers, list):
            continue
        prefix = body_where if isinstance(config, list) else f"{body_where}.layers"
        for i, record in enumerate(layers):
            lwhere = f"{prefix}[{i}]"
            if not isinstance(record, Mapping):
                continue  # already reported by the body's validation
            try:
                rec = LayerRecord.model_validate(record)
            except ValidationError:
                continue  # already reported by the body's validation
            if rec.layer_name() is None:
                add("layer record has no name (neither 'name' nor 'config.name')", lwhere)
            nested = model_kind(rec.class_name, rec.config) is not None or (
                rec.class_name in ("Functional", "Model")
                and isinstance(rec.config, Mapping)
                and "layers" in rec.config
            )
            if nested:
                stack.append((record, lwhere))
    return issues


def _short(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


# --- loader problems ---------------------------------------------------------------------------------

_PROBLEM_RULES: list[tuple[type[LoadError], str]] = [
    (DanglingReferenceError, "STR004"),
    (IndexOutOfRangeError, "STR005"),
    (CycleError, "STR006"),
    (DuplicateNameError, "STR007"),
    (DisconnectedGraphError, "STR008"),
    (ConfigError, "STR003"),
    (GraphError, "STR011"),
]


def _where_of(error: BaseException) -> str:
    where = getattr(error, "where", "") or ""
    if where:
        return where
    text = str(error)
    m = _JSON_PATH_RE.search(text)
    if m and len(m.group(1)) > 1:
        return m.group(1)
    m = _LAYER_RE.search(text)
    if m:
        return f"layer '{m.group(1)}'"
    if text.startswith("model output"):
        return "model outputs"
    if text.startswith("model input"):
        return "model inputs"
    return ""


def _message_of(error: BaseException) -> str:
    if isinstance(error, ConfigError) and error.where and error.args:
        text = str(error.args[0])
        prefix = f"{error.where}: "
        return text[len(prefix) :] if text.startswith(prefix) else text
    return str(error)


def problem_issue(error: LoadError, path: str = "") -> Issue:
    """The finding for one structural problem collected by the loader."""
    rule_id = next((rid for cls, rid in _PROBLEM_RULES if isinstance(error, cls)), "STR011")
    return make_issue(rule_id, _message_of(error), _where_of(error), path=path)


def load_error_issue(error: BaseException, path: str = "") -> Issue:
    """The finding for an exception that stopped the loader."""
    text = str(error)
    if isinstance(error, UnsupportedFormatError):
        return make_issue("STR012", text, "", path=path)
    if isinstance(error, ConfigError):
        return make_issue("STR003", _message_of(error), _where_of(error) or "$", path=path)
    if isinstance(error, GraphError):
        return problem_issue(error, path)
    if isinstance(error, (WeightsError, ToolMissingError)):  # missing: cramjam for snappy index blocks
        return make_issue("WGT009", text, "", path=path)
    if isinstance(error, FormatError) and (
        "invalid JSON" in text or "not valid UTF-8" in text or "JSON nesting" in text
    ):
        return make_issue("STR002", text, _where_of(error), path=path)
    if isinstance(error, SecurityError):
        return make_issue("STR001", f"the reader refused the file: {text}", "", path=path)
    if isinstance(error, LoadError):
        return make_issue("STR001", text, "", path=path)
    return make_issue(
        "STR001",
        f"the file could not be read ({type(error).__name__}: {text}); this is also a modelgraph bug, "
        "please report it",
        "",
        path=path,
    )


# --- graph checks ------------------------------------------------------------------------------------


def _models(graph: ModelGraph) -> Iterator[tuple[tuple[str, ...], ModelGraph]]:
    stack: list[tuple[tuple[str, ...], ModelGraph]] = [((), graph)]
    while stack:
        prefix, g = stack.pop()
        yield prefix, g
        for layer in reversed(g.layers):
            if layer.subgraph is not None:
                stack.append(((*prefix, layer.name), layer.subgraph))


def _label(prefix: tuple[str, ...], name: str) -> str:
    return "/".join((*prefix, name))


def graph_issues(graph: ModelGraph, path: str = "", has_cycles: bool = False) -> list[Issue]:
    """STR009 (layers and calls that reach no output) and STR010 (unused inputs), nested models too."""
    issues: list[Issue] = []  # reachability is computed here, so it works with cycles too
    for prefix, g in _models(graph):
        if not g.outputs:
            continue
        # Backward reachability from the outputs over node inputs.
        by_key = {n.key: n for n in g.nodes}
        reached: set[tuple[str, int]] = set()
        stack = [r.node_key for r in g.outputs]
        while stack:
            key = stack.pop()
            if key in reached:
                continue
            reached.add(key)
            node = by_key.get(key)
            if node is not None:
                stack.extend(r.node_key for r in node.inputs)
        model_inputs = {r.layer for r in g.inputs}
        for layer in g.layers:
            label = _label(prefix, layer.name)
            jp = f" ({layer.json_path})" if layer.json_path else ""
            if layer.kind == "input":
                if layer.name in model_inputs and (layer.name, 0) not in reached:
                    issues.append(
                        make_issue(
                            "STR010",
                            f"model input '{label}' is not used by any output (outputs are "
                            f"{[str(r) for r in g.outputs][:8]})",
                            f"layer '{label}'{jp}",
                            path=path,
                        )
                    )
                continue
            calls = [i for i in range(layer.node_count) if (layer.name, i) not in reached]
            if not calls:
                continue
            if len(calls) == layer.node_count:
                msg = f"{layer.class_name} layer '{label}' contributes to no model output; Keras drops it"
                where = f"layer '{label}'{jp}"
            else:
                msg = (
                    f"call(s) {calls} of shared {layer.class_name} layer '{label}' contribute to no model "
                    f"output (it has {layer.node_count} calls)"
                )
                where = f"layer '{label}' node {calls[0]}{jp}"
            issues.append(make_issue("STR009", msg, where, path=path))
    return issues
