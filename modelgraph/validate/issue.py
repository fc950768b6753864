"""The finding data type shared by every validation rule family.

Findings are data, not exceptions: a rule returns a list of :class:`Issue` and the caller decides what
to do with them (print, JSON, SARIF, exit code). Each issue carries a stable rule id (``SEC001``),
a severity, a one-line message, a location inside the model (``where``: a JSON path such as
``$.config.layers[3].config.function``, an HDF5 path, or ``layer 'dense_1'``) and the file it came from.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal, get_args

from modelgraph.errors import printable

Severity = Literal["error", "warning", "info"]

SEVERITIES: tuple[Severity, ...] = get_args(Severity)
"""All severities, most severe first."""

_RANK: dict[str, int] = {"error": 2, "warning": 1, "info": 0}


def severity_rank(severity: str) -> int:
    """Numeric rank of a severity: error 2 > warning 1 > info 0; ``ValueError`` for unknown names."""
    try:
        return _RANK[severity]
    except KeyError:
        raise ValueError(f"unknown severity {severity!r}; expected one of {list(SEVERITIES)}") from None


def at_least(severity: str, threshold: str) -> bool:
    """True when ``severity`` is as severe as ``threshold`` or more (``at_least("error", "warning")``)."""
    return severity_rank(severity) >= severity_rank(threshold)


def max_severity(issues: Iterable[Issue]) -> Severity | None:
    """The highest severity among ``issues``, or ``None`` for no issues."""
    best: Severity | None = None
    for issue in issues:
        if best is None or severity_rank(issue.severity) > severity_rank(best):
            best = issue.severity
    return best


def sort_issues(issues: Iterable[Issue]) -> list[Issue]:
    """Issues ordered most severe first, then by file, rule id and location (stable for reports)."""
    return sorted(issues, key=lambda i: (-severity_rank(i.severity), i.path, i.rule, i.where, i.message))


@dataclass(frozen=True, slots=True)
class Issue:
    """One validation finding.

    ``rule`` is a stable id (``SEC001``); ``where`` locates the finding inside the model (JSON path,
    HDF5 path, zip member or ``layer 'name'``); ``hint`` says how to fix or what to check; ``path`` is
    the file the finding is about (empty when the input was not a file).
    """

    rule: str
    severity: Severity
    message: str
    where: str
    hint: str = ""
    path: str = ""

    def __post_init__(self) -> None:
        if self.severity not in _RANK:
            raise ValueError(f"unknown severity {self.severity!r}; expected one of {list(SEVERITIES)}")
        # Names from a file may hold bytes that were not UTF-8: keep every report printable.
        for name in ("message", "where", "hint", "path"):
            object.__setattr__(self, name, printable(getattr(self, name)))

    def with_path(self, path: str) -> Issue:
        """A copy of this issue attributed to file ``path``."""
        return replace(self, path=path)

    def __str__(self) -> str:
        loc = f"{self.path}: " if self.path else ""
        where = f" at {self.where}" if self.where else ""
        return f"{loc}{self.severity} {self.rule}{where}: {self.message}"
