"""Published Keras security advisories, the rules that find each one, and which Keras versions act on it.

One :class:`Advisory` per CVE (or GitHub advisory without a CVE): the rules (``SEC0xx``/``SEC1xx``) that
report the payload, the Keras versions whose loader acts on it (``affected``: half-open version ranges,
``fixed=None`` while no fixed release is known), and the containers it concerns (``formats``: ``keras``
for ``.keras`` archives and folders, ``h5`` for legacy HDF5 models; empty for any). Where public trackers
disagree on the fixed release, the later one is used.

:func:`judge` answers ``validate --target-keras VERSION``: a finding is raised to an error when an advisory
of its rule affects that version, lowered one step (error to warning, warning to info) when every advisory
of its rule that concerns that Keras line is fixed there, and left alone when no advisory speaks for that
version line (a Keras 2 version and an advisory about Keras 3 only, or a rule with no advisory).
``docs/security.md`` is the same table in prose; a test keeps both and one hostile file per row in step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from modelgraph.errors import UsageError
from modelgraph.validate.issue import Issue

Version = tuple[int, ...]

_FORMATS = {"keras": frozenset({"keras_zip", "keras_dir"}), "h5": frozenset({"legacy_h5"})}
_LOWER = {"error": "warning", "warning": "info", "info": "info"}


def parse_version(text: str) -> Version:
    """``"3.12"`` -> ``(3, 12, 0)``; :class:`UsageError` for anything that is not ``N[.N[.N]]``
    (a pre-release suffix such as ``rc1`` or ``.dev0`` is ignored)."""
    m = re.fullmatch(r"\s*v?(\d{1,4})(?:\.(\d{1,4}))?(?:\.(\d{1,4}))?(?:[.\-+]?[A-Za-z].*)?\s*", text)
    if not m:
        raise UsageError(f"--target-keras {text!r} is not a Keras version (expected e.g. 3.12 or 2.15.0)")
    return tuple(int(g or 0) for g in m.groups())


def _text(version: Version) -> str:
    return ".".join(map(str, version))


@dataclass(frozen=True, slots=True)
class Affected:
    """Keras versions ``introduced <= v < fixed`` (``fixed=None``: no fixed release known)."""

    introduced: str
    fixed: str | None

    def contains(self, version: Version) -> bool:
        low = parse_version(self.introduced)
        return low <= version and (self.fixed is None or version < parse_version(self.fixed))

    @property
    def majors(self) -> range:
        """The Keras major versions the range spans (``1.0``-``2.13``: 1 and 2)."""
        low = parse_version(self.introduced)[0]
        high = parse_version(self.fixed)[0] if self.fixed else low
        return range(low, high + 1)


@dataclass(frozen=True, slots=True)
class Advisory:
    """One published advisory: ``id`` (CVE or GHSA), ``ghsa`` alias, a one-line ``title``, the ``rules``
    that find its payload, the ``affected`` Keras ranges, the ``formats`` it concerns and a ``url``."""

    id: str
    ghsa: str
    title: str
    rules: tuple[str, ...]
    affected: tuple[Affected, ...]
    formats: tuple[str, ...] = ()
    url: str = ""
    on_load: bool = True  # False: reached through other Keras calls, not load_model (not used by judge)

    @property
    def link(self) -> str:
        """The advisory's page (its GHSA on GitHub when known, else the CVE record)."""
        if self.url:
            return self.url
        if self.ghsa:
            return f"https://github.com/advisories/{self.ghsa}"
        return f"https://www.cve.org/CVERecord?id={self.id}"

    def concerns(self, fmt: str) -> bool:
        """Whether the advisory is about files of loader format ``fmt`` (``keras_zip``, ``legacy_h5``...)."""
        return not self.formats or any(fmt in _FORMATS[f] for f in self.formats)

    def covers_line(self, version: Version) -> bool:
        """Whether the advisory says anything about the Keras major version of ``version``."""
        return any(version[0] in a.majors for a in self.affected)

    def affects(self, version: Version) -> bool:
        return any(a.contains(version) for a in self.affected)

    @property
    def versions(self) -> str:
        """The affected versions as pip specifiers: ``>=3.0,<3.12.1; >=3.13.0,<3.13.2`` (``>=3.14.0``
        while no fixed release is known)."""
        return "; ".join(f">={a.introduced}" + (f",<{a.fixed}" if a.fixed else "") for a in self.affected)


def _a(introduced: str, fixed: str | None) -> Affected:
    return Affected(introduced, fixed)


ADVISORIES: tuple[Advisory, ...] = (
    Advisory(
        "CVE-2024-3660",
        "",
        "Lambda bytecode runs at load: Keras < 2.13 has no safe_mode; tf.keras never checks it for .h5",
        ("SEC001", "SEC002", "SEC009"),
        (_a("1.0", "2.13"),),
        url="https://kb.cert.org/vuls/id/253266",
    ),
    Advisory(
        "CVE-2024-3660/h5",
        "",
        "the same bytecode Lambda in a legacy .h5: tf.keras 2.x loads it without safe_mode in every release",
        ("SEC001", "SEC002", "SEC009"),
        (_a("2.0", None),),
        formats=("h5",),
        url="https://kb.cert.org/vuls/id/253266",
    ),
    Advisory(
        "CVE-2025-1550",
        "GHSA-48g7-3x6r-xfhp",
        "config.json names any module and function; Keras imports and calls it even with safe_mode",
        ("SEC003",),
        (_a("3.0", "3.9"),),
        formats=("keras",),
    ),
    Advisory(
        "CVE-2025-8747",
        "GHSA-c9rc-mg46-23w3",
        "safe_mode bypass through Keras's own functions (get_file, load_model with safe_mode=False)",
        ("SEC007",),
        (_a("3.0", "3.11"),),
        formats=("keras",),
    ),
    Advisory(
        "CVE-2025-9906",
        "GHSA-36fq-jgmw-4r9c",
        "config.json calls keras.config.enable_unsafe_deserialization, then a Lambda runs",
        ("SEC007", "SEC115"),
        (_a("3.0", "3.11"),),
        formats=("keras",),
    ),
    Advisory(
        "CVE-2025-9905",
        "",
        "Keras 3 loads a legacy .h5 ignoring safe_mode: its Lambda bytecode runs",
        ("SEC001", "SEC002"),
        (_a("3.0", "3.11.3"),),
        formats=("h5",),
    ),
    Advisory(
        "CVE-2025-49655",
        "",
        "TorchModuleWrapper unpickles its module (torch.load) even with safe_mode",
        ("SEC005",),
        (_a("3.11.0", "3.11.3"),),
        formats=("keras",),
    ),
    Advisory(
        "CVE-2025-12058",
        "",
        "StringLookup/IntegerLookup/TextVectorization read a vocabulary path or URL at load (file read, SSRF)",
        ("SEC008",),
        (_a("3.0", "3.12.0"),),
        formats=("keras",),
    ),
    Advisory(
        "CVE-2025-12060",
        "",
        "keras.utils.get_file extracts archives with '..' members outside its folder (reached from a file "
        "only through a get_file reference)",
        ("SEC007", "SEC101"),
        (_a("3.0", "3.12.0"),),
    ),
    Advisory(
        "CVE-2025-12638",
        "",
        "keras.utils.get_file tar extraction path traversal (a second report of the same flaw)",
        ("SEC007", "SEC101"),
        (_a("3.0", "3.12.0"),),
    ),
    Advisory(
        "GHSA-hqp4-2352-xf5r",
        "GHSA-hqp4-2352-xf5r",
        "archive extraction checked member paths against the working directory, not the target folder",
        ("SEC101", "SEC102"),
        (_a("3.0", "3.14.0"),),
    ),
    Advisory(
        "CVE-2026-0897",
        "GHSA-xfhx-r7ww-5995",
        "a weights dataset declaring a huge shape exhausts memory at load",
        ("SEC113",),
        (_a("3.0", "3.12.1"), _a("3.13.0", "3.13.2")),
    ),
    Advisory(
        "CVE-2026-1669",
        "",
        "HDF5 external links and external-storage datasets read other local files at load",
        ("SEC108", "SEC111", "SEC112"),
        (_a("3.0", "3.13.2"),),
    ),
    Advisory(
        "CVE-2026-1462",
        "GHSA-4f3f-g24h-fr8m",
        "TFSMLayer in a .keras loads an attacker's SavedModel even with safe_mode",
        ("SEC006",),
        (_a("3.0", "3.12.1"), _a("3.13.0", "3.13.2")),
        formats=("keras",),
    ),
    Advisory(
        "CVE-2026-12479",
        "",
        "layer names with '../' make the directory store write outside its folder",
        ("SEC014",),
        (_a("3.14.0", None),),
        formats=("keras",),
    ),
    Advisory(
        "CVE-2026-12481",
        "",
        "Lambda.from_config treats safe_mode=None as off (keras.layers.deserialize, clone_model)",
        ("SEC001",),
        (_a("3.14.0", None),),
        on_load=False,
    ),
)
"""Every advisory, oldest first."""


def advisories_for(rule: str) -> list[Advisory]:
    """The advisories whose payload ``rule`` finds (empty for most non-security rules)."""
    return [a for a in ADVISORIES if rule in a.rules]


def advisory_ids(rule: str) -> list[str]:
    """The distinct advisory ids of ``rule``, for tags (``CVE-2024-3660/h5`` counts as ``CVE-2024-3660``)."""
    return list(dict.fromkeys(a.id.split("/", 1)[0] for a in advisories_for(rule)))


def annotate(issue: Issue, fmt: str) -> Issue:
    """``issue`` with the Keras versions that act on it when loading a file of format ``fmt``, by the
    advisories of its rule: ``[Keras acts on it when loading: CVE-2026-1462 >=3.0,<3.12.1; ...]``
    (unchanged when no advisory concerns that container)."""
    relevant = [a for a in advisories_for(issue.rule) if a.on_load and a.concerns(fmt)]
    if not relevant:
        return issue
    named = ", ".join(f"{a.id.split('/', 1)[0]} {a.versions}" for a in relevant)
    return replace(issue, message=f"{issue.message} [Keras acts on it when loading: {named}]")


def judge(issue: Issue, fmt: str, version: Version) -> Issue:
    """``issue`` re-judged for a user who loads the file with Keras ``version`` (see the module text)."""
    relevant = [
        a for a in advisories_for(issue.rule) if a.on_load and a.concerns(fmt) and a.covers_line(version)
    ]
    if not relevant:
        return issue
    target = _text(version)
    hits = [a for a in relevant if a.affects(version)]
    chosen = hits or relevant
    named = ", ".join(f"{a.id.split('/', 1)[0]} (affects {a.versions})" for a in chosen)
    if hits:
        return replace(
            issue,
            severity="error",
            message=f"{issue.message} [Keras {target} acts on it when loading: {named}]",
        )
    return replace(
        issue,
        severity=_LOWER[issue.severity],
        message=f"{issue.message} [Keras {target} is past the fix and refuses it when loading: {named}]",
    )


def advisories_markdown() -> str:
    """The advisory table of ``docs/security.md`` (a test keeps the file in step with :data:`ADVISORIES`)."""
    from modelgraph.validate.security.rules import SECURITY_RULES

    lines = [
        "| advisory | what a file does | Keras versions that act on it when loading | file | rules |",
        "|---|---|---|---|---|",
    ]
    for a in ADVISORIES:
        name = a.id.split("/", 1)[0]
        ident = f"[{name}]({a.link})" + (f" ({a.ghsa})" if a.ghsa and a.ghsa != a.id else "")
        versions = a.versions if a.on_load else f"{a.versions} (not through load_model)"
        kinds = ", ".join(f"`.{f}`" for f in a.formats) or "any"
        rules = ", ".join(f"{r} ({SECURITY_RULES[r].severity})" for r in a.rules)
        lines.append(f"| {ident} | {a.title} | `{versions}` | {kinds} | {rules} |")
    return "\n".join(lines) + "\n"
