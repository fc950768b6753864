"""SARIF 2.1.0 output for GitHub code scanning (and any other SARIF consumer).

One run; the driver lists every rule of the registry (id, name, descriptions, help, default level,
``security-severity`` for the security family; a security rule's ``tags`` and each of its results'
``properties.tags`` name the Keras advisories it covers, and its ``helpUri`` links the first). Each finding becomes a result with a physical
location (the model file, relative to the current folder when it is below it, with
``region.startLine`` 1 because a model file has no meaningful lines), logical locations for the
layer/node/JSON path, and a stable ``partialFingerprints`` entry so that GitHub matches findings
across runs.
"""

from __future__ import annotations

import hashlib
import os
import urllib.parse
from pathlib import Path
from typing import Any

from modelgraph.validate.check import FileResult, parse_location
from modelgraph.validate.registry import RULES

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
INFORMATION_URI = "https://github.com/modelgraph/modelgraph"
_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
_SECURITY_SEVERITY = {"error": "8.0", "warning": "5.0", "info": "2.0"}


def _uri(path: str) -> tuple[str, str | None]:
    """(uri, uriBaseId): relative to %SRCROOT% (the current folder) when below it, else a file URI."""
    p = Path(path)
    try:
        rel = os.path.relpath(p.resolve(), Path.cwd().resolve())
    except ValueError:
        rel = ""
    if rel and not rel.startswith(".."):  # a relative URI reference: percent-encoded like as_uri()
        return urllib.parse.quote(Path(rel).as_posix(), safe="/"), "%SRCROOT%"
    return p.resolve().as_uri(), None


def _rule_descriptor(rule_id: str) -> dict[str, Any]:
    from modelgraph.validate.security.advisories import advisories_for, advisory_ids

    r = RULES[rule_id]
    props: dict[str, Any] = {"tags": [r.family, *advisory_ids(rule_id)]}
    if r.family == "security":
        props["security-severity"] = _SECURITY_SEVERITY[r.severity]
    advisories = advisories_for(rule_id)
    extra: dict[str, Any] = {"helpUri": advisories[0].link} if advisories else {}
    return {
        **extra,
        "id": r.id,
        "name": "".join(
            w.capitalize() for w in r.title.replace("-", " ").replace("/", " ").split() if w.isalnum()
        )
        or r.id,
        "shortDescription": {"text": r.title},
        "fullDescription": {"text": r.meaning},
        "help": {"text": f"{r.meaning}\n\nFix: {r.hint}", "markdown": f"{r.meaning}\n\n**Fix:** {r.hint}"},
        "defaultConfiguration": {"level": _LEVEL[r.severity]},
        "properties": props,
    }


def sarif_report(results: list[FileResult]) -> dict[str, Any]:
    """The SARIF 2.1.0 log of some validation results, as a JSON-ready dict."""
    from modelgraph._version import __version__
    from modelgraph.validate.security.advisories import advisory_ids

    rule_ids = sorted(RULES)
    index = {rid: i for i, rid in enumerate(rule_ids)}
    sarif_results: list[dict[str, Any]] = []
    artifacts: list[dict[str, Any]] = []
    artifact_index: dict[str, int] = {}

    def register(path: str) -> tuple[str, str | None]:
        uri, base = _uri(path)
        if uri not in artifact_index:
            artifact_index[uri] = len(artifacts)
            loc: dict[str, Any] = {"uri": uri}
            if base:
                loc["uriBaseId"] = base
            artifacts.append({"location": loc})
        return uri, base

    for r in results:
        register(r.path)
        for issue in r.issues:
            # A finding of an attached weights file (validate --weights) points at that file.
            uri, base = register(issue.path or r.path)
            parts = parse_location(issue.path or r.path, issue.where)
            artifact: dict[str, Any] = {"uri": uri, "index": artifact_index[uri]}
            if base:
                artifact["uriBaseId"] = base
            logical: list[dict[str, Any]] = []
            if parts.get("layer") is not None:
                name = str(parts["layer"])
                fq = name + (f"[{parts['node']}]" if parts.get("node") is not None else "")
                if parts.get("weight"):
                    fq += f"/{parts['weight']}"
                logical.append({"name": name.rsplit("/", 1)[-1], "fullyQualifiedName": fq, "kind": "object"})
            if parts.get("json_path"):
                logical.append({"fullyQualifiedName": str(parts["json_path"]), "kind": "element"})
            if parts.get("member"):
                logical.append({"fullyQualifiedName": str(parts["member"]), "kind": "member"})
            location: dict[str, Any] = {
                "physicalLocation": {"artifactLocation": artifact, "region": {"startLine": 1}},
            }
            if logical:
                location["logicalLocations"] = logical
            message = issue.message + (f" [at {issue.where}]" if issue.where else "")
            fingerprint = hashlib.sha256(f"{issue.rule}\0{uri}\0{issue.where}".encode()).hexdigest()
            result: dict[str, Any] = {
                "ruleId": issue.rule,
                "level": _LEVEL[issue.severity],
                "message": {"text": message + (f"\nFix: {issue.hint}" if issue.hint else "")},
                "locations": [location],
                "partialFingerprints": {"modelgraphLocation/v1": fingerprint},
            }
            if issue.rule in index:
                result["ruleIndex"] = index[issue.rule]
            advisories = advisory_ids(issue.rule)
            if advisories:  # the Keras advisories whose payload this finding is
                result["properties"] = {"tags": advisories}
            sarif_results.append(result)
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "modelgraph",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": INFORMATION_URI,
                "rules": [_rule_descriptor(rid) for rid in rule_ids],
            }
        },
        "artifacts": artifacts,
        "results": sarif_results,
        "columnKind": "unicodeCodePoints",
    }
    if any(a["location"].get("uriBaseId") for a in artifacts):
        run["originalUriBaseIds"] = {"%SRCROOT%": {"uri": Path.cwd().resolve().as_uri() + "/"}}
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}
