"""Checking one model file: every rule family on it, whatever the others found (never fail-fast).

Security (container + config), structure (schema, loader problems, graph), shapes, weights, runtime
support; a check that crashes becomes a finding (STR014) instead of stopping the run.
:func:`validate_file` is what ``modelgraph.validate(...)`` (:mod:`modelgraph.validate.api`) runs on each
file, in this process or in the scan's bounded child processes (:mod:`modelgraph.validate.bounded`).
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from modelgraph.errors import LoadError, SecurityError
from modelgraph.validate.config import ValidateConfig
from modelgraph.validate.issue import Issue, at_least, sort_issues
from modelgraph.validate.registry import make_issue

WEIGHTS_ONLY = ("legacy_weights_h5", "keras3_weights_h5", "keras3_sharded_weights", "tf_checkpoint")


@dataclass(frozen=True)
class ModelFacts:
    """What the check learnt about a model it could load, for inventories (a CycloneDX ML-BOM)."""

    name: str
    keras_version: str | None
    params: int
    layer_classes: tuple[str, ...]


@dataclass(frozen=True)
class FileResult:
    """The findings for one model file (or model directory); ``model``: its facts when it loaded."""

    path: str
    format: str
    issues: tuple[Issue, ...] = ()
    strict: bool = False
    model: ModelFacts | None = None

    @property
    def ok(self) -> bool:
        """No error-severity finding (no warning either when ``strict``)."""
        threshold = "warning" if self.strict else "error"
        return not any(at_least(i.severity, threshold) for i in self.issues)

    def count(self, severity: str) -> int:
        return sum(1 for i in self.issues if i.severity == severity)


@dataclass(frozen=True)
class Options:
    check_values: bool = True
    require_runnable: bool = False
    strict: bool = False
    config: ValidateConfig = field(default_factory=ValidateConfig)
    # A weights file attached to the (one) model checked, as ``inspect --weights`` does.
    weights: str | None = None
    # The Keras version the user loads with: security findings re-judged by the advisories' ranges.
    target_keras: tuple[int, ...] | None = None


_CONSEQUENCES = frozenset({"SHP006", "RUN003"})


def _crash(where: str, exc: BaseException, path: str) -> Issue:
    return make_issue("STR014", f"{where} crashed: {type(exc).__name__}: {exc}", "", path=path)


def _close_handles(graph: Any) -> None:
    try:
        handles = graph.metadata.get("_handles") or ()
    except Exception:  # noqa: BLE001
        return
    for h in handles:
        close = getattr(h, "close", None)
        if close is not None:
            with contextlib.suppress(Exception):  # closing is best effort
                close()


def validate_file(path: str, options: Options | None = None) -> FileResult:
    """Every finding for one model file or model directory (never raises for a bad file)."""
    from modelgraph._gc import gc_paused

    # The checks build many small acyclic objects per layer: with the cyclic collector running, its
    # generation-2 passes revisit the whole model again and again (superlinear in the layer count).
    with gc_paused():
        return _validate_file(path, options)


def _validate_file(path: str, options: Options | None) -> FileResult:
    from modelgraph.loading import load
    from modelgraph.loading.detect import detect
    from modelgraph.validate.structure import (
        graph_issues,
        load_error_issue,
        model_envelopes,
        problem_issue,
        schema_issues,
    )

    opts = options or Options()
    p = Path(path)
    issues: list[Issue] = []
    fmt = "unknown"
    detect_error: BaseException | None = None
    try:
        fmt = detect(p)
    except LoadError as exc:
        detect_error = exc
    except Exception as exc:  # noqa: BLE001 - a crash in format detection is a finding
        detect_error = exc

    # Security: container and every config it holds (and the attached weights file's container).
    if fmt == "tfjs_layers" and p.is_dir():
        configs = _scan(p / "model.json", path, issues, within=p)
    else:
        configs = _scan(p, path, issues)
    if opts.weights is not None:
        _scan(Path(opts.weights), opts.weights, issues)

    if detect_error is not None:
        if not _reported_by_scan(detect_error, issues, path):
            issues = _without_whole_file_scan_failure(issues, path)
            issues.append(load_error_issue(detect_error, path))
        return _finish(path, fmt, issues, opts)
    if fmt in WEIGHTS_ONLY:
        issues.append(
            make_issue(
                "STR013",
                f"a weights-only file ({fmt}): its container was checked; give the architecture file to "
                "check the model",
                "",
                path=path,
            )
        )
        return _finish(path, fmt, issues, opts)

    # Structure: the schema of every model record, then the loader's own problems.
    schema: list[Issue] = []
    try:
        for value, _root in configs:
            for envelope, where in model_envelopes(value, fmt):
                schema.extend(schema_issues(envelope, where, path))
    except Exception as exc:  # noqa: BLE001
        issues.append(_crash("the schema check", exc, path))
    issues.extend(schema)

    problems: list[LoadError] = []
    graph = None
    try:
        graph = load(p, problems=problems)
    except Exception as exc:  # noqa: BLE001 - every loader failure becomes a finding
        if not _reported_by_scan(exc, issues, path):
            issues = _without_whole_file_scan_failure(issues, path)
            issue = load_error_issue(exc, path)
            if not (issue.rule == "STR003" and any(s.where == issue.where for s in schema)):
                issues.append(issue)
    schema_where = {s.where for s in schema}
    for prob in problems:
        issue = problem_issue(prob, path)
        if issue.rule == "STR003" and issue.where in schema_where:
            continue
        issues.append(issue)
    if graph is None:
        return _finish(path, fmt, issues, opts)
    if opts.weights is not None:
        graph = _attach(graph, opts.weights, issues)

    facts = None
    try:
        try:
            facts = _facts(graph)
        except Exception as exc:  # noqa: BLE001
            issues.append(_crash("the inventory", exc, path))
        has_cycles = any(type(prob).__name__ == "CycleError" for prob in problems)
        try:
            issues.extend(graph_issues(graph, path, has_cycles))
        except Exception as exc:  # noqa: BLE001
            issues.append(_crash("the graph check", exc, path))

        from modelgraph.validate.shapes import declared_input_issues, infer, shape_issues, weight_shape_flags

        result = None
        try:
            issues.extend(declared_input_issues(graph, path))
            result = infer(graph)
            issues.extend(shape_issues(result, graph, path))
        except Exception as exc:  # noqa: BLE001
            issues.append(_crash("shape inference", exc, path))

        from modelgraph.validate.weights import weight_issues

        try:
            flags = weight_shape_flags(result) if result is not None else set()
            issues.extend(
                weight_issues(graph, result, path=path, skip_shapes=flags, check_values=opts.check_values)
            )
        except Exception as exc:  # noqa: BLE001
            issues.append(_crash("the weights check", exc, path))

        from modelgraph.validate.catalogue import catalogue_issues

        try:
            issues.extend(catalogue_issues(graph, path))
        except Exception as exc:  # noqa: BLE001
            issues.append(_crash("the catalogue check", exc, path))

        if opts.config.select is None or any(r.startswith("RUN") for r in opts.config.select):
            from modelgraph.validate.runtime import runtime_issues

            try:
                issues.extend(runtime_issues(graph, path=path, require_runnable=opts.require_runnable))
            except Exception as exc:  # noqa: BLE001
                issues.append(_crash("the runtime-support check", exc, path))
    finally:
        _close_handles(graph)
    return replace(_finish(path, fmt, issues, opts), model=facts)


def _facts(graph: Any) -> ModelFacts:
    classes = sorted({layer.class_name for _, layer in graph.walk()})
    version = graph.keras_version
    return ModelFacts(
        str(graph.name), None if version is None else str(version), int(graph.param_count), tuple(classes)
    )


def _attach(graph: Any, weights: str, issues: list[Issue]) -> Any:
    """``graph`` with the weights file attached; when it cannot be, a finding naming the weights
    file, and ``graph`` as it was (every other rule still runs)."""
    from modelgraph.loading.weights_files import attach_weights_file
    from modelgraph.validate.structure import load_error_issue

    try:
        return attach_weights_file(graph, Path(weights))
    except Exception as exc:  # noqa: BLE001 - a weights file that cannot be attached is a finding
        if not _reported_by_scan(exc, issues, weights):
            issues.append(load_error_issue(exc, weights))
        return graph


def _scan(target: Path, path: str, issues: list[Issue], within: Path | None = None) -> list[tuple[Any, str]]:
    """Add the security findings of the container ``target`` (attributed to file ``path``; a member of
    the model folder ``within``) to ``issues``; return the configs it holds (none when the scan
    itself failed, a finding too)."""
    from modelgraph.validate import security

    try:
        found, configs = security.scan_path_with_configs(target, within)
    except Exception as exc:  # noqa: BLE001
        issues.append(_crash("the security scan", exc, path))
        return []
    issues.extend(i.with_path(path) for i in found)
    return configs


def _without_whole_file_scan_failure(issues: list[Issue], path: str) -> list[Issue]:
    """``issues`` without the security scan's "could not scan" finding (SEC100) for the whole file
    ``path``: when the loader cannot read the file either, its error says what the file is (a PNG,
    a truncated zip) and the scan's failure would only repeat the cause, often less clearly."""
    return [i for i in issues if not (i.rule == "SEC100" and i.where in ("", "$") and i.path in ("", path))]


def _reported_by_scan(exc: BaseException, issues: list[Issue], path: str) -> bool:
    """Whether a loader's SecurityError about file ``path`` repeats an error the security scan of
    that same file already reported (a SEC error of another file, e.g. the weights, does not)."""
    return isinstance(exc, SecurityError) and any(
        i.rule.startswith("SEC") and i.severity == "error" and i.path == path for i in issues
    )


def _drop_consequences(issues: list[Issue]) -> list[Issue]:
    """Drop the findings that only repeat a broken reference: a layer whose input the loader had
    to drop (STR004/STR005) is necessarily 'called without a tensor' and cannot be planned."""
    broken = {parse_location("", i.where).get("layer") for i in issues if i.rule in ("STR004", "STR005")}
    broken.discard(None)
    if not broken:
        return issues
    return [
        i
        for i in issues
        if not (i.rule in _CONSEQUENCES and parse_location("", i.where).get("layer") in broken)
    ]


def _finish(path: str, fmt: str, issues: list[Issue], opts: Options) -> FileResult:
    issues = _drop_consequences(issues)
    from modelgraph.validate.security.advisories import annotate, judge

    if opts.target_keras is not None:
        target = opts.target_keras
        issues = [judge(i, fmt, target) if i.rule.startswith("SEC") else i for i in issues]
    else:  # each security finding says which Keras versions act on it (docs/security.md)
        issues = [annotate(i, fmt) if i.rule.startswith("SEC") else i for i in issues]
    unique: list[Issue] = []
    seen: set[tuple[str, str, str]] = set()
    for i in issues:
        i = i if i.path else i.with_path(path)
        key = (i.rule, i.where, i.message)
        if key not in seen:
            seen.add(key)
            unique.append(i)
    kept = opts.config.apply(unique, path)
    return FileResult(path, fmt, tuple(sort_issues(kept)), opts.strict)


_LOC_LAYER = re.compile(
    r"^layer '(?P<layer>[^']*)'(?: weight '(?P<weight>[^']*)')?(?: node (?P<node>\d+))?(?: \((?P<json>\$[^)]*)\))?$"
)


def parse_location(file: str, where: str) -> dict[str, Any]:
    """The parts of an issue's ``where``: ``json_path``, ``layer``, ``node``, ``weight`` or ``member``."""
    loc: dict[str, Any] = {"file": file, "where": where}
    if not where:
        return loc
    if where.startswith("$"):
        loc["json_path"] = where
        return loc
    m = _LOC_LAYER.match(where)
    if m:
        loc["layer"] = m.group("layer")
        if m.group("weight"):
            loc["weight"] = m.group("weight")
        if m.group("node"):
            loc["node"] = int(m.group("node"))
        if m.group("json"):
            loc["json_path"] = m.group("json")
        return loc
    if not where.startswith(("model ", "layer ")):
        loc["member"] = where
    return loc
