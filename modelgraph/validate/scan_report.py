"""Reports built from a ``--results`` JSONL file, streamed: text, JSON totals, SARIF, CycloneDX.

A results file may hold several records of one model (a file that changed and was checked again
under ``--resume``); the last one counts. A first pass keeps only the byte offset of each model's
last record (one integer per model, never the records), the second streams the records in file
order, so a report of a million-model scan never holds a million findings. Each function here
yields the report as text chunks; the command writes them.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from modelgraph.validate.records import iter_records

CYCLONEDX_SPEC = "1.6"
_CDX_SEVERITY = {"error": "high", "warning": "medium", "info": "info"}


@dataclass
class Latest:
    """The byte offset of the last record of each model in a results file."""

    offsets: set[int] = field(default_factory=set)
    superseded: int = 0


def latest(path: str | os.PathLike[str]) -> Latest:
    """First pass: which lines are the last record of their model."""
    by_path: dict[str, int] = {}
    out = Latest()
    for offset, rec in iter_records(path):
        if rec["path"] in by_path:
            out.superseded += 1
        by_path[rec["path"]] = offset
    out.offsets = set(by_path.values())
    return out


def records(path: str | os.PathLike[str], keep: Latest | None = None) -> Iterator[dict[str, Any]]:
    """The last record of each model, in file order."""
    keep = keep or latest(path)
    for offset, rec in iter_records(path):
        if offset in keep.offsets:
            yield rec


# --- text and JSON ----------------------------------------------------------------------------------


def text_report(path: str | os.PathLike[str]) -> Iterator[str]:
    """One line per error or warning of each model (in file order), then a summary line."""
    from modelgraph.errors import printable

    totals = _Totals()
    for rec in records(path):
        totals.add(rec)
        for f in rec["findings"]:
            if f["severity"] != "info":
                where = f" [{printable(f['where'])}]" if f["where"] else ""
                yield f"{printable(f['path'])}: {f['severity']:<7} {f['rule']}{where}: {printable(f['message'])}\n"
    t = totals
    verdict = "ok" if t.failed == 0 else f"{t.failed} model(s) failed"
    yield (
        f"{t.models} model(s) in {printable(os.fspath(path))}: {t.errors} error(s), {t.warnings} warning(s), "
        f"{t.infos} info; {verdict}\n"
    )


@dataclass
class _Totals:
    models: int = 0
    failed: int = 0
    errors: int = 0
    warnings: int = 0
    infos: int = 0
    bytes: int = 0
    formats: dict[str, int] = field(default_factory=dict)
    rules: dict[str, list[Any]] = field(default_factory=dict)

    def add(self, rec: dict[str, Any]) -> None:
        self.models += 1
        self.failed += rec["verdict"] != "ok"
        self.errors += rec["errors"]
        self.warnings += rec["warnings"]
        self.infos += rec["infos"]
        self.bytes += rec.get("size") or 0
        self.formats[rec["format"]] = self.formats.get(rec["format"], 0) + 1
        seen: set[str] = set()
        for f in rec["findings"]:
            entry = self.rules.setdefault(f["rule"], [f["severity"], f["title"], 0, 0])
            entry[2] += 1
            if f["rule"] not in seen:
                seen.add(f["rule"])
                entry[3] += 1


def json_report(path: str | os.PathLike[str]) -> Any:
    """The :class:`~modelgraph.schemas.validate_record.ScanReport` of a results file (totals and
    findings by rule: its size does not grow with the number of models)."""
    from modelgraph._version import __version__
    from modelgraph.schemas.validate_record import RuleCount, ScanReport

    keep = latest(path)
    t = _Totals()
    for rec in records(path, keep):
        t.add(rec)
    return ScanReport(
        tool_version=__version__,
        results_file=os.fspath(path),
        models=t.models,
        ok=t.models - t.failed,
        failed=t.failed,
        errors=t.errors,
        warnings=t.warnings,
        infos=t.infos,
        bytes=t.bytes,
        superseded=keep.superseded,
        formats=dict(sorted(t.formats.items())),
        by_rule=[
            RuleCount(rule=rule, severity=v[0], title=v[1], count=v[2], models=v[3])
            for rule, v in sorted(t.rules.items())
        ],
    )


# --- SARIF ------------------------------------------------------------------------------------------


def sarif_report(path: str | os.PathLike[str]) -> Iterator[str]:
    """A SARIF 2.1.0 log, its results streamed one model at a time (no artifacts table: each
    result names its file by URI)."""
    from modelgraph.validate.records import result_from_record
    from modelgraph.validate.sarif import sarif_report as sarif_of

    head = sarif_of([])
    run = head["runs"][0]
    run.pop("artifacts", None)
    run["results"] = []
    text = json.dumps(head, indent=2)
    cut = text.index('"results": []') + len('"results": [')
    yield text[:cut] + "\n"
    first = True
    base_ids = False
    for rec in records(path):
        doc = sarif_of([result_from_record(rec)])["runs"][0]
        base_ids = base_ids or "originalUriBaseIds" in doc
        for result in doc["results"]:
            for loc in result["locations"]:
                loc["physicalLocation"]["artifactLocation"].pop("index", None)
            yield ("" if first else ",\n") + json.dumps(result)
            first = False
    tail = text[cut:]
    if base_ids:
        extra = json.dumps({"%SRCROOT%": {"uri": _cwd_uri()}})
        tail = tail.replace("]", f'],\n"originalUriBaseIds": {extra}', 1)
    yield "\n" + tail + "\n"


def _cwd_uri() -> str:
    from pathlib import Path

    return Path.cwd().resolve().as_uri() + "/"


# --- CycloneDX ---------------------------------------------------------------------------------------


def cyclonedx_report(path: str | os.PathLike[str], *, serial: str | None = None) -> Iterator[str]:
    """A CycloneDX 1.6 ML-BOM (JSON): one ``machine-learning-model`` component per model (name,
    SHA-256 hash, format, framework and version, layer classes, parameters, verdict as properties)
    and one vulnerability per security finding, affecting its model. Two streamed passes over the
    results file (components, then vulnerabilities)."""
    from datetime import UTC, datetime

    from modelgraph._version import __version__

    keep = latest(path)
    head = {
        "$schema": "http://cyclonedx.org/schema/bom-1.6.schema.json",
        "bomFormat": "CycloneDX",
        "specVersion": CYCLONEDX_SPEC,
        "serialNumber": serial or uuid.uuid4().urn,
        "version": 1,
        "metadata": {
            "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tools": {
                "components": [
                    {
                        "type": "application",
                        "name": "modelgraph",
                        "version": __version__,
                        "bom-ref": "tool-modelgraph",
                    }
                ]
            },
        },
    }
    text = json.dumps(head, indent=2)
    yield text[:-2] + ',\n  "components": [\n'
    for i, rec in enumerate(records(path, keep)):
        yield ("" if i == 0 else ",\n") + json.dumps(_component(i, rec))
    yield '\n  ],\n  "vulnerabilities": [\n'
    first = True
    for i, rec in enumerate(records(path, keep)):
        for j, f in enumerate(rec["findings"]):
            if not f["rule"].startswith("SEC"):
                continue
            yield ("" if first else ",\n") + json.dumps(_vulnerability(i, j, f))
            first = False
    yield "\n  ]\n}\n"


def _ref(i: int) -> str:
    return f"model-{i}"


def _component(i: int, rec: dict[str, Any]) -> dict[str, Any]:
    model = rec.get("model") or {}
    props = [
        ("modelgraph:path", rec["path"]),
        ("modelgraph:format", rec["format"]),
        ("modelgraph:framework", "keras"),
        ("modelgraph:verdict", rec["verdict"]),
        ("modelgraph:errors", str(rec["errors"])),
        ("modelgraph:warnings", str(rec["warnings"])),
        ("modelgraph:size", str(rec["size"])),
        ("modelgraph:ruleset_version", rec["ruleset_version"]),
    ]
    if rec.get("weights"):
        props.append(("modelgraph:weights", rec["weights"]))
    if rec.get("keras_version"):
        props.append(("modelgraph:keras_version", rec["keras_version"]))
    if model:
        props.append(("modelgraph:params", str(model["params"])))
        props.extend(("modelgraph:layer_class", c) for c in model["layer_classes"])
    out: dict[str, Any] = {
        "type": "machine-learning-model",
        "bom-ref": _ref(i),
        "name": model.get("name") or os.path.basename(rec["path"].rstrip("/")) or rec["path"],
    }
    if rec.get("keras_version"):
        out["description"] = f"Keras {rec['keras_version']} model ({rec['format']})"
    if rec.get("sha256"):
        out["hashes"] = [{"alg": "SHA-256", "content": rec["sha256"]}]
    if model:
        out["modelCard"] = {"modelParameters": {"modelArchitecture": ", ".join(model["layer_classes"])}}
    out["properties"] = [{"name": k, "value": v} for k, v in props]
    return out


def _vulnerability(i: int, j: int, f: dict[str, Any]) -> dict[str, Any]:
    detail = f["message"] + (f" [at {f['where']}]" if f["where"] else "")
    return {
        "bom-ref": f"{_ref(i)}-finding-{j}",
        "id": f["rule"],
        "source": {
            "name": "modelgraph",
            "url": "https://github.com/modelgraph/modelgraph/blob/main/docs/rules.md",
        },
        "ratings": [{"severity": _CDX_SEVERITY[f["severity"]], "method": "other"}],
        "description": f["title"],
        "detail": detail,
        "recommendation": f["hint"],
        "affects": [{"ref": _ref(i)}],
    }
