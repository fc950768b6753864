"""One JSON record per checked model, as written to a ``--results`` JSONL file.

A record is plain JSON (it is what crosses a process or a network between a worker and the client):
the model's path, size and content hash, its format and Keras version, the verdict and findings, the
timings, the tool's version and the rule-set version. :func:`ruleset_version` names everything that
decides the findings (the tool version, the rule table, the options), so that ``--resume`` and
``--cache`` reuse a record only when the same check would give the same answer.

The JSONL file is appended one line at a time with a single ``write`` on an ``O_APPEND`` descriptor,
so a run killed at any moment leaves whole lines plus at most one partial last line, which the
readers here ignore (and :class:`ResultsWriter` cuts off before appending).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from modelgraph.errors import UsageError
from modelgraph.schemas.validate_record import RECORD_SCHEMA_VERSION
from modelgraph.validate.check import FileResult, ModelFacts, Options
from modelgraph.validate.config import ValidateConfig
from modelgraph.validate.discover import Target
from modelgraph.validate.issue import Issue

_CHUNK = 1 << 20
_MAX_DIR_FILES = 100_000


# --- options as plain JSON ------------------------------------------------------------------------


def options_to_json(opts: Options) -> dict[str, Any]:
    """``opts`` as a JSON-ready dict (sets as sorted lists), for a worker process or machine."""
    cfg = opts.config
    return {
        "check_values": opts.check_values,
        "require_runnable": opts.require_runnable,
        "strict": opts.strict,
        "weights": opts.weights,
        "target_keras": None if opts.target_keras is None else list(opts.target_keras),
        # Plugins change findings (CAT001) and must be loaded by every worker: named, never pickled.
        "plugins": _loaded_plugins(),
        "config": {
            "select": None if cfg.select is None else sorted(cfg.select),
            "ignore": sorted(cfg.ignore),
            "severity": dict(sorted(cfg.severity.items())),
            "per_file_ignores": [[pattern, sorted(rules)] for pattern, rules in cfg.per_file_ignores],
            "strict": cfg.strict,
            "check_values": cfg.check_values,
            "require_runnable": cfg.require_runnable,
            "base": cfg.base,
            "source": cfg.source,
        },
    }


def _loaded_plugins() -> list[str]:
    from modelgraph.plugins import loaded

    return loaded()


def options_from_json(doc: dict[str, Any]) -> Options:
    """The :class:`Options` that :func:`options_to_json` wrote."""
    c = doc["config"]
    cfg = ValidateConfig(
        select=None if c["select"] is None else frozenset(c["select"]),
        ignore=frozenset(c["ignore"]),
        severity=dict(c["severity"]),
        per_file_ignores=tuple((p, frozenset(r)) for p, r in c["per_file_ignores"]),
        strict=c["strict"],
        check_values=c["check_values"],
        require_runnable=c["require_runnable"],
        base=c["base"],
        source=c["source"],
    )
    return Options(
        check_values=bool(doc["check_values"]),
        require_runnable=bool(doc["require_runnable"]),
        strict=bool(doc["strict"]),
        config=cfg,
        weights=doc.get("weights"),
        target_keras=None if doc.get("target_keras") is None else tuple(doc["target_keras"]),
    )


def ruleset_version(opts: Options) -> str:
    """``<tool version>+<12 hex digits>``: the digest covers the rule table (ids, severities, titles)
    and every option that changes findings, so records made under other rules are not reused."""
    from modelgraph._version import __version__
    from modelgraph.validate.registry import RULES

    doc = options_to_json(opts)
    doc.pop("weights")
    doc["config"].pop("source")
    doc["rules"] = [[r.id, r.severity, r.title] for r in RULES.values()]
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:12]
    return f"{__version__}+{digest}"


# --- content hashes ---------------------------------------------------------------------------------


def content_hash(target: Target) -> tuple[str, int]:
    """(sha256 hex, bytes read) of a target's content: a file's bytes; a model directory's regular
    files with their relative names (symlinks by their text, never followed); a config and its
    weights file together. The name of the file or directory itself is not part of it."""
    h = hashlib.sha256()
    size = _feed(h, Path(target.path))
    if target.weights is not None:
        h.update(b"\0weights\0")
        size += _feed(h, Path(target.weights))
    return h.hexdigest(), size


def _feed(h: Any, p: Path) -> int:
    if p.is_dir() and not p.is_symlink():
        size = 0
        count = 0
        for dirpath, dirnames, filenames in os.walk(p, followlinks=False):
            dirnames.sort()
            for name in sorted(filenames):
                count += 1
                if count > _MAX_DIR_FILES:
                    h.update(b"\0more-files\0")
                    return size
                f = Path(dirpath) / name
                h.update(b"\0" + f.relative_to(p).as_posix().encode("utf-8", "surrogateescape") + b"\0")
                size += _feed_file(h, f)
        return size
    return _feed_file(h, p)


def _feed_file(h: Any, p: Path) -> int:
    try:
        st = os.lstat(p)
    except OSError:
        h.update(b"\0missing\0")
        return 0
    if stat.S_ISLNK(st.st_mode):
        h.update(b"\0link\0" + os.fsencode(os.readlink(p)))
        return 0
    if not stat.S_ISREG(st.st_mode):  # a FIFO or device is never opened
        h.update(b"\0special\0")
        return 0
    from modelgraph import safe_io

    size = 0
    with safe_io.open_file(p) as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
            size += len(chunk)
    return size


# --- records --------------------------------------------------------------------------------------


def make_record(
    target: Target,
    result: FileResult,
    *,
    sha256: str,
    size: int,
    ruleset: str,
    hash_s: float,
    check_s: float,
    cached: bool = False,
) -> dict[str, Any]:
    """The JSON record of one checked model (see ``schemas/validate_record.schema.json``)."""
    from modelgraph._version import __version__
    from modelgraph.validate.registry import RULES

    findings = []
    for i in result.issues:
        rule = RULES.get(i.rule)
        findings.append(
            {
                "rule": i.rule,
                "severity": i.severity,
                "title": rule.title if rule else i.rule,
                "message": i.message,
                "where": i.where,
                "hint": i.hint,
                "path": i.path or result.path,
            }
        )
    facts = result.model
    return {
        "schema_version": RECORD_SCHEMA_VERSION,
        "path": target.path,
        "weights": target.weights,
        "size": size,
        "sha256": sha256,
        "format": result.format,
        "keras_version": facts.keras_version if facts else None,
        "model": None if facts is None else {**asdict(facts), "layer_classes": list(facts.layer_classes)},
        "verdict": "ok" if result.ok else "failed",
        "errors": result.count("error"),
        "warnings": result.count("warning"),
        "infos": result.count("info"),
        "findings": findings,
        "timings": {"hash_s": round(hash_s, 6), "check_s": round(check_s, 6)},
        "cached": cached,
        "strict": result.strict,
        "tool_version": __version__,
        "ruleset_version": ruleset,
    }


def result_from_record(record: dict[str, Any]) -> FileResult:
    """The :class:`FileResult` a record was made from (for the in-memory reports)."""
    issues = tuple(
        Issue(f["rule"], f["severity"], f["message"], f["where"], f["hint"], f["path"])
        for f in record["findings"]
    )
    m = record.get("model")
    facts = None
    if m is not None:
        facts = ModelFacts(m["name"], m["keras_version"], m["params"], tuple(m["layer_classes"]))
    return FileResult(record["path"], record["format"], issues, bool(record.get("strict")), facts)


def moved(record: dict[str, Any], target: Target) -> dict[str, Any]:
    """A cached record of the same bytes, re-attributed to ``target``'s path and weights file."""
    names = {record["path"]: target.path}
    if record.get("weights") and target.weights:
        names[record["weights"]] = target.weights
    out = dict(record)
    out["path"] = target.path
    out["weights"] = target.weights
    out["findings"] = [{**f, "path": names.get(f["path"], f["path"])} for f in record["findings"]]
    return out


# --- the JSONL file --------------------------------------------------------------------------------


def iter_records(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(byte offset, record) of every whole line of a results file, streamed; a partial last line
    (a run killed while writing) and lines that are not JSON objects are skipped."""
    with open(path, "rb") as fh:
        offset = 0
        for line in fh:
            start = offset
            offset += len(line)
            if not line.endswith(b"\n"):
                break
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict) and "path" in doc and "sha256" in doc:
                yield start, doc


class ResultsWriter:
    """Appends records to a JSONL file: one ``write`` per record on an ``O_APPEND`` descriptor, so a
    killed run leaves whole lines (the kernel has each line before the next model starts). A partial
    last line left by an earlier killed run is cut off first."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            raise UsageError(f"--results {self.path}: is a directory")
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise UsageError(f"--results {self.path}: cannot open for writing ({exc.strerror})") from None
        _cut_partial_line(self._fd)

    def write(self, record: dict[str, Any]) -> None:
        """Append one record as one line."""
        data = (json.dumps(record, separators=(",", ":")) + "\n").encode("ascii")
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _cut_partial_line(fd: int) -> None:
    end = os.lseek(fd, 0, os.SEEK_END)
    if end == 0:
        return
    pos = end
    while pos > 0:
        step = min(pos, 1 << 16)
        pos -= step
        chunk = os.pread(fd, step, pos)
        nl = chunk.rfind(b"\n")
        if nl >= 0:
            if pos + nl + 1 != end:
                os.ftruncate(fd, pos + nl + 1)
            return
    os.ftruncate(fd, 0)


class ResumeIndex:
    """The records already in a results file, by path: content hash, rule-set version and verdict of
    the last record of each path. Memory grows with the number of records (one short entry per model)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self._done: dict[str, tuple[str, str, bool]] = {}
        if path is not None and os.path.exists(path):
            for _, rec in iter_records(path):
                self._done[rec["path"]] = (
                    rec["sha256"],
                    rec.get("ruleset_version", ""),
                    rec["verdict"] == "ok",
                )

    def __len__(self) -> int:
        return len(self._done)

    def ok(self, path: str) -> bool:
        """The verdict of the last record of ``path`` (True when there is none)."""
        known = self._done.get(path)
        return known is None or known[2]

    def recorded(self, target: Target, ruleset: str) -> bool:
        """Whether ``target`` has a record made under ``ruleset`` for its current content (its
        content is hashed only when its path has a record)."""
        known = self._done.get(target.path)
        if known is None or known[1] != ruleset:
            return False
        try:
            digest, _ = content_hash(target)
        except Exception:  # noqa: BLE001 - unreadable now: check it again, the check reports why
            return False
        return digest == known[0]


# --- the cache ------------------------------------------------------------------------------------


class RecordCache:
    """Records keyed by content hash and rule-set version in a folder (``--cache DIR``): the same
    bytes under another name cost one hash, not a check. Entries are written to a temporary file
    and renamed, so concurrent workers sharing the folder never read half an entry."""

    def __init__(self, folder: str | os.PathLike[str], ruleset: str) -> None:
        self.root = Path(folder) / hashlib.sha256(ruleset.encode()).hexdigest()[:16]

    def _file(self, sha256: str) -> Path:
        return self.root / sha256[:2] / f"{sha256}.json"

    def get(self, sha256: str) -> dict[str, Any] | None:
        try:
            return json.loads(self._file(sha256).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def put(self, record: dict[str, Any]) -> None:
        f = self._file(record["sha256"])
        try:
            f.parent.mkdir(parents=True, exist_ok=True)
            tmp = f.with_name(f"{f.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(record, separators=(",", ":")), encoding="utf-8")
            os.replace(tmp, f)
        except OSError:
            pass  # a cache that cannot be written only costs time
