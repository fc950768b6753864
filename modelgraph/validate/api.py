"""``modelgraph.validate(...)``: every problem of one or more model files, in one pass.

Each file goes through every rule family, whatever the others found (never fail-fast):
security (container + config), structure (schema, loader problems, graph), shapes, weights,
runtime support. A check that crashes becomes a finding (STR014) instead of stopping the run.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from modelgraph.errors import LoadError, SecurityError, UsageError
from modelgraph.validate.config import ValidateConfig, find_config, read_config_file
from modelgraph.validate.discover import Target, iter_targets
from modelgraph.validate.issue import Issue, at_least, sort_issues
from modelgraph.validate.registry import make_issue

MODEL_SUFFIXES = (".keras", ".h5", ".hdf5", ".json")
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


class ValidationReport(list[FileResult]):
    """What :func:`validate` returns: one :class:`FileResult` per file (a list), falsy when no file
    has any finding, like the result of ``modelgraph.diff`` is falsy when the models are identical.

    >>> if not modelgraph.validate("model.keras"): print("clean")
    """

    def __bool__(self) -> bool:
        return any(result.issues for result in self)

    @property
    def issues(self) -> list[Issue]:
        """Every finding of every file, in file order."""
        return [issue for result in self for issue in result.issues]

    @property
    def ok(self) -> bool:
        """No file has an error (or, for files checked with ``strict``, a warning)."""
        return all(result.ok for result in self)


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


# --- finding the files ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Targets:
    """What :func:`find_targets` found: the model files and folders to check, and the files of the
    walked folders (or, with ``models_only``, the given files) that are not models."""

    models: list[str]
    skipped: list[str]
    targets: list[Target] = field(default_factory=list)


def expand_paths(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """The model files and model directories to check: files as given; directories that are models
    themselves (an unzipped ``.keras``, a TF.js folder) as one; other directories walked (sorted, no
    symlinks followed, hidden folders skipped) for files that are models by their content
    (:mod:`modelgraph.validate.discover`). ``UsageError`` for a path that does not exist."""
    return find_targets(paths).models


def find_targets(paths: Iterable[str | os.PathLike[str]], *, models_only: bool = False) -> Targets:
    """:func:`expand_paths` as a list, plus the files it skipped as unrecognised (a walked folder's
    README, an empty ``.json``) and the :class:`~modelgraph.validate.discover.Target` of each model
    (with the weights file paired with a config-only JSON). ``models_only``: a file given by name that
    is not a model (a ``package.json`` passed by a pre-commit hook) is skipped too, instead of checked
    and failed. A folder scan that must not hold every path uses :func:`iter_targets` instead."""
    skipped: list[str] = []
    targets = list(iter_targets(paths, models_only=models_only, skipped=skipped.append))
    seen: set[str] = set()
    unique = []
    for t in targets:
        if t.path not in seen:
            seen.add(t.path)
            unique.append(t)
    return Targets([t.path for t in unique], skipped, unique)


# --- one file ------------------------------------------------------------------------------------


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


_CONSEQUENCES = frozenset({"SHP006", "RUN003"})


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


# --- the public entry point ------------------------------------------------------------------------


def validate(
    path_or_paths: str | os.PathLike[str] | Target | Sequence[str | os.PathLike[str] | Target],
    *,
    check_values: bool | None = None,
    require_runnable: bool = False,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    config: ValidateConfig | str | os.PathLike[str] | None = None,
    strict: bool = False,
    jobs: int = 1,
    weights: str | os.PathLike[str] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    target_keras: str | None = None,
    bounds: tuple[float, int] | None = None,
) -> ValidationReport:
    """Validate model files (directories are walked) and return one :class:`FileResult` per file
    (a :class:`ValidationReport`: a list that is falsy when there is no finding at all).

    ``check_values`` (default: the config file's ``check-values``, else True) scans every float weight
    for NaN/Inf and all-zero kernels, streamed in chunks.

    ``select``/``ignore`` take rule ids, prefixes (``SEC``) or families (``security``); ``config`` is
    a :class:`ValidateConfig`, a path to a ``.modelgraph.toml``/``pyproject.toml``, or None to use the
    one found from the current folder. ``jobs`` > 1 checks files in that many processes. ``weights``
    attaches a weights file to the one model given (a config-only JSON, or a model whose weights it
    replaces); a :class:`UsageError` when the paths name several models. ``progress(done, total,
    path)`` is called after each file. ``target_keras`` (``"3.12"``): re-judge each security finding for
    a user loading with that Keras version, by the fixed-in versions of the advisories its rule covers
    (:func:`modelgraph.validate.security.advisories.judge`; ``docs/security.md``).
    With ``jobs`` > 1 each file is checked in a child process
    under ``bounds``: (seconds, MiB of address space), 300 s and 4096 MiB by default; a check that
    passes one is stopped and reported as STR015.
    """
    if isinstance(path_or_paths, str | os.PathLike | Target):
        paths: list[str | os.PathLike[str] | Target] = [path_or_paths]
    else:
        paths = list(path_or_paths)
    opts = make_options(
        check_values=check_values,
        require_runnable=require_runnable,
        select=select,
        ignore=ignore,
        config=config,
        strict=strict,
        weights=weights,
        target_keras=target_keras,
    )
    targets: list[Target] = []
    seen: set[Target] = set()
    for item in paths:
        for t in [item] if isinstance(item, Target) else find_targets([item]).targets:
            if t not in seen:
                seen.add(t)
                targets.append(t)
    if weights is not None and len(targets) != 1:
        raise UsageError(f"--weights attaches to one model; the paths name {len(targets)}")
    work = [
        (t.path, opts if t.weights is None or weights is not None else replace(opts, weights=t.weights))
        for t in targets
    ]
    results: list[FileResult] = []
    if jobs > 1 and len(targets) > 1:
        # The scan's bounded child processes (modelgraph.validate.scan), results back in input order.
        from modelgraph.validate.records import options_to_json, result_from_record
        from modelgraph.validate.scan import Bounds, LocalExecutor

        order = {t.path: i for i, t in enumerate(targets)}
        found: list[FileResult | None] = [None] * len(targets)
        executor = LocalExecutor(min(jobs, len(targets)))
        limits = Bounds() if bounds is None else Bounds(timeout=bounds[0], max_memory_mb=bounds[1])
        for done, record in enumerate(executor.run(targets, options_to_json(opts), limits), 1):
            found[order[record["path"]]] = result_from_record(record)
            if progress is not None:
                progress(done, len(targets), record["path"])
        return ValidationReport([r for r in found if r is not None])
    for path, o in work:
        results.append(validate_file(path, o))
        if progress is not None:
            progress(len(results), len(targets), path)
    return ValidationReport(results)


def make_options(
    *,
    check_values: bool | None = None,
    require_runnable: bool = False,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    config: ValidateConfig | str | os.PathLike[str] | None = None,
    strict: bool = False,
    weights: str | os.PathLike[str] | None = None,
    target_keras: str | None = None,
) -> Options:
    """The :class:`Options` of a check: flags first, then the config file (``config``: a
    :class:`ValidateConfig`, a path, or None to find one from the current folder), then defaults."""
    if config is None:
        cfg = find_config()
    elif isinstance(config, ValidateConfig):
        cfg = config
    else:
        cfg = read_config_file(config)
    cfg = cfg.merged(select=select, ignore=ignore)
    return Options(
        check_values=_first_set(check_values, cfg.check_values, True),
        require_runnable=require_runnable or bool(cfg.require_runnable),
        strict=strict or bool(cfg.strict),
        config=cfg,
        weights=None if weights is None else str(weights),
        target_keras=None if target_keras is None else _target(target_keras),
    )


def _target(version: str) -> tuple[int, ...]:
    from modelgraph.validate.security.advisories import parse_version

    return parse_version(version)


def _first_set(*values: bool | None) -> bool:
    """The first of ``values`` that is not None (a command-line flag, then the config file, then the
    default)."""
    return next(bool(v) for v in values if v is not None)


def with_strict(results: list[FileResult], strict: bool) -> list[FileResult]:
    """The same results judged with or without ``strict``."""
    return [replace(r, strict=strict) for r in results]


# --- reports -------------------------------------------------------------------------------------

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


def json_report(results: list[FileResult], strict: bool = False) -> Any:
    """The :class:`~modelgraph.schemas.validate_report.ValidateReport` of some results."""
    from modelgraph._version import __version__
    from modelgraph.schemas.validate_report import FileReport, IssueReport, Location, Summary, ValidateReport
    from modelgraph.validate.registry import RULES

    files = []
    by_rule: dict[str, int] = {}
    for r in with_strict(results, strict):
        issues = []
        for i in r.issues:
            by_rule[i.rule] = by_rule.get(i.rule, 0) + 1
            rule = RULES.get(i.rule)
            issues.append(
                IssueReport(
                    rule=i.rule,
                    severity=i.severity,
                    title=rule.title if rule else i.rule,
                    message=i.message,
                    location=Location(**parse_location(i.path or r.path, i.where)),
                    hint=i.hint,
                )
            )
        files.append(
            FileReport(
                path=r.path,
                format=r.format,
                ok=r.ok,
                errors=r.count("error"),
                warnings=r.count("warning"),
                infos=r.count("info"),
                issues=issues,
            )
        )
    summary = Summary(
        files=len(files),
        ok=sum(1 for f in files if f.ok),
        failed=sum(1 for f in files if not f.ok),
        errors=sum(f.errors for f in files),
        warnings=sum(f.warnings for f in files),
        infos=sum(f.infos for f in files),
        strict=strict,
        by_rule=dict(sorted(by_rule.items())),
    )
    return ValidateReport(tool_version=__version__, results=files, summary=summary)
