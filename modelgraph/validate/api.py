"""``modelgraph.validate(...)``: every problem of one or more model files, in one pass.

Each file goes through every rule family, whatever the others found (never fail-fast):
security (container + config), structure (schema, loader problems, graph), shapes, weights,
runtime support. A check that crashes becomes a finding (STR014) instead of stopping the run.
One file is checked by :func:`modelgraph.validate.check.validate_file` (re-exported here with
:class:`FileResult`, :class:`ModelFacts` and :class:`Options`); this module finds the files, runs
them (in bounded child processes with ``jobs``) and reports.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from modelgraph.errors import UsageError
from modelgraph.validate.check import (
    FileResult,
    ModelFacts,
    Options,
    parse_location,
    validate_file,
)
from modelgraph.validate.config import ValidateConfig, find_config, read_config_file
from modelgraph.validate.discover import Target, iter_targets
from modelgraph.validate.issue import Issue

MODEL_SUFFIXES = (".keras", ".h5", ".hdf5", ".json")

__all__ = [
    "FileResult",
    "ModelFacts",
    "Options",
    "ValidationReport",
    "expand_paths",
    "find_targets",
    "json_report",
    "make_options",
    "parse_location",
    "validate",
    "validate_file",
    "with_strict",
]


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
