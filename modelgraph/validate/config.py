"""Validation settings from ``[tool.modelgraph]`` in ``pyproject.toml`` or from ``.modelgraph.toml``.

.. code-block:: toml

    [tool.modelgraph]                 # in .modelgraph.toml the table header may be left out
    select = ["STR", "SHP", "SEC"]    # rule ids, id prefixes or families; default: every rule
    ignore = ["WGT005"]
    severity = { SEC004 = "error", STR009 = "info" }
    strict = false                    # defaults for --strict / --check-values / --require-runnable
    check-values = true
    require-runnable = false

    [tool.modelgraph.per-file-ignores]
    "legacy/*.h5" = ["SEC001"]        # globs relative to the folder holding the config file

Discovery: from the start folder upwards, the first ``.modelgraph.toml``, or ``pyproject.toml``
with a ``[tool.modelgraph]`` table, wins; the walk stops at a folder holding ``.git``.
Unknown keys, rules or severities are usage errors (:class:`modelgraph.errors.UsageError`).
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from modelgraph.errors import UsageError
from modelgraph.validate.issue import SEVERITIES, Issue
from modelgraph.validate.registry import expand_selectors

_KEYS = {"select", "ignore", "severity", "per-file-ignores", "strict", "check-values", "require-runnable"}


@dataclass(frozen=True)
class ValidateConfig:
    """Which rules run, their severities and per-path suppressions."""

    select: frozenset[str] | None = None
    ignore: frozenset[str] = frozenset()
    severity: dict[str, str] = field(default_factory=dict)
    per_file_ignores: tuple[tuple[str, frozenset[str]], ...] = ()
    strict: bool | None = None
    check_values: bool | None = None
    require_runnable: bool | None = None
    base: str = ""
    source: str = ""

    def enabled(self, rule_id: str, file: str = "") -> bool:
        """Is ``rule_id`` reported for ``file``?"""
        if self.select is not None and rule_id not in self.select:
            return False
        if rule_id in self.ignore:
            return False
        return not (file and rule_id in self.ignored_for(file))

    def ignored_for(self, file: str) -> frozenset[str]:
        if not self.per_file_ignores:
            return frozenset()
        base = Path(self.base or os.getcwd())
        p = Path(file)
        try:
            rel = os.path.relpath(p.resolve(), base.resolve()).replace(os.sep, "/")
        except ValueError:  # another drive on Windows
            rel = p.as_posix()
        out: set[str] = set()
        for pattern, rules in self.per_file_ignores:
            if (
                fnmatch.fnmatch(rel, pattern)
                or fnmatch.fnmatch(p.name, pattern)
                or fnmatch.fnmatch(p.as_posix(), pattern)
            ):
                out |= rules
        return frozenset(out)

    def apply(self, issues: list[Issue], file: str = "") -> list[Issue]:
        """``issues`` without the disabled rules, with severity overrides applied."""
        ignored = self.ignored_for(file) if file else frozenset()
        out = []
        for issue in issues:
            if (self.select is not None and issue.rule not in self.select) or issue.rule in self.ignore:
                continue
            if issue.rule in ignored:
                continue
            sev = self.severity.get(issue.rule)
            out.append(replace(issue, severity=sev) if sev else issue)
        return out

    def merged(self, *, select: list[str] | None = None, ignore: list[str] | None = None) -> ValidateConfig:
        """A copy with command-line ``select`` (replaces) and ``ignore`` (adds) applied."""
        sel = self.select
        if select:
            sel = frozenset(_expand(select, "--select"))
        ign = self.ignore | frozenset(_expand(ignore or [], "--ignore"))
        return replace(self, select=sel, ignore=ign)


def _expand(selectors: list[str], what: str) -> set[str]:
    items: list[str] = []
    for s in selectors:
        items.extend(part for part in str(s).split(",") if part.strip())
    try:
        return expand_selectors(items)
    except ValueError as exc:
        raise UsageError(f"{what}: {exc}") from None


def parse_config(table: Any, source: str = "", base: str = "") -> ValidateConfig:
    """A :class:`ValidateConfig` from the ``[tool.modelgraph]`` table (a dict)."""
    where = source or "config"
    if not isinstance(table, dict):
        raise UsageError(f"{where}: [tool.modelgraph] must be a table")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {unknown}; known keys are {sorted(_KEYS)}")

    def rule_list(key: str) -> list[str]:
        value = table.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise UsageError(f"{where}: '{key}' must be a list of rule ids")
        return value

    select = frozenset(_expand(rule_list("select"), f"{where}: select")) if "select" in table else None
    ignore = frozenset(_expand(rule_list("ignore"), f"{where}: ignore"))
    severity: dict[str, str] = {}
    raw_sev = table.get("severity", {})
    if not isinstance(raw_sev, dict):
        raise UsageError(f'{where}: \'severity\' must be a table of RULE = "error"|"warning"|"info"')
    for key, value in raw_sev.items():
        if value not in SEVERITIES:
            raise UsageError(f"{where}: severity of {key!r} is {value!r}; use one of {list(SEVERITIES)}")
        for rid in _expand([key], f"{where}: severity"):
            severity[rid] = value
    pfi: list[tuple[str, frozenset[str]]] = []
    raw_pfi = table.get("per-file-ignores", {})
    if not isinstance(raw_pfi, dict):
        raise UsageError(f"{where}: 'per-file-ignores' must be a table of \"glob\" = [rules]")
    for pattern, rules in raw_pfi.items():
        if isinstance(rules, str):
            rules = [rules]
        if not isinstance(rules, list):
            raise UsageError(f"{where}: per-file-ignores[{pattern!r}] must be a list of rule ids")
        pfi.append((pattern, frozenset(_expand(rules, f"{where}: per-file-ignores"))))
    flags: dict[str, bool | None] = {}
    for key in ("strict", "check-values", "require-runnable"):
        value = table.get(key)
        if value is not None and not isinstance(value, bool):
            raise UsageError(f"{where}: '{key}' must be true or false")
        flags[key.replace("-", "_")] = value
    return ValidateConfig(
        select=select,
        ignore=ignore,
        severity=severity,
        per_file_ignores=tuple(pfi),
        base=base,
        source=source,
        **flags,  # type: ignore[arg-type]
    )


def read_config_file(path: str | os.PathLike[str]) -> ValidateConfig:
    """Read ``.modelgraph.toml`` (top-level keys or ``[tool.modelgraph]``) or ``pyproject.toml``."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read config file {p}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{p}: invalid TOML: {exc}") from None
    tool = data.get("tool", {})
    table = tool.get("modelgraph") if isinstance(tool, dict) else None
    if table is None:
        if p.name == "pyproject.toml":
            table = {}
        else:
            table = {k: v for k, v in data.items() if k != "tool"}
    return parse_config(table, str(p), str(p.parent.resolve()))


def find_config(start: str | os.PathLike[str] | None = None) -> ValidateConfig:
    """The settings that apply in ``start`` (default: the current folder), or the defaults."""
    folder = Path(start or os.getcwd()).resolve()
    if folder.is_file():
        folder = folder.parent
    for d in (folder, *folder.parents):
        dot = d / ".modelgraph.toml"
        if dot.is_file():
            return read_config_file(dot)
        py = d / "pyproject.toml"
        if py.is_file():
            try:
                data = tomllib.loads(py.read_text(encoding="utf-8"))
            except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
                data = {}
            tool = data.get("tool", {})
            if isinstance(tool, dict) and "modelgraph" in tool:
                return parse_config(tool["modelgraph"], str(py), str(d))
        if (d / ".git").exists():
            break
    return ValidateConfig()
