"""Generate the JSON Schema documents of modelgraph's JSON reports from their Pydantic models.

``python -m modelgraph.schemas.export`` rewrites ``schemas/*.schema.json`` (beside this module);
``--check`` exits 1 when a file is missing or stale, which is what ``tests/test_schemas_sync.py``
asserts. A report whose model module does not exist yet is skipped.

Each document is ``model_json_schema()`` plus ``$schema``, ``$id`` and the report's
``schema_version`` as a ``const`` default, with sorted keys and a trailing newline so that the
files diff cleanly.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

#: file stem -> (module, report model, schema-version constant)
REPORTS: dict[str, tuple[str, str, str]] = {
    "inspect": ("modelgraph.schemas.reports", "InspectReport", "INSPECT_SCHEMA_VERSION"),
    "validate": ("modelgraph.schemas.validate_report", "ValidateReport", "VALIDATE_SCHEMA_VERSION"),
    "rules": ("modelgraph.schemas.validate_report", "RulesReport", "RULES_SCHEMA_VERSION"),
    "diff": ("modelgraph.schemas.diff_report", "DiffReport", "DIFF_SCHEMA_VERSION"),
    "run": ("modelgraph.schemas.run_report", "RunReport", "RUN_SCHEMA_VERSION"),
    "run_check": ("modelgraph.schemas.run_report", "CheckReport", "RUN_SCHEMA_VERSION"),
    "export": ("modelgraph.schemas.export_report", "ExportReport", "EXPORT_SCHEMA_VERSION"),
    "layers": ("modelgraph.schemas.layers_report", "LayersReport", "LAYERS_SCHEMA_VERSION"),
    "validate_record": ("modelgraph.schemas.validate_record", "ValidateRecord", "RECORD_SCHEMA_VERSION"),
    "scan_report": ("modelgraph.schemas.validate_record", "ScanReport", "SCAN_REPORT_SCHEMA_VERSION"),
}


def available() -> dict[str, tuple[str, str, str]]:
    """The reports whose model module exists (validate's may not yet)."""
    out = {}
    for stem, spec in REPORTS.items():
        if importlib.util.find_spec(spec[0]) is None:
            continue
        if stem == "rules" and not hasattr(importlib.import_module(spec[0]), spec[1]):
            continue
        out[stem] = spec
    return out


def _report_class(module_name: str, class_name: str) -> Any:
    module = importlib.import_module(module_name)
    cls = getattr(module, class_name, None)
    if cls is None:  # a validate_report module that names its report differently
        from pydantic import BaseModel

        candidates = [
            v
            for k, v in vars(module).items()
            if k.endswith("Report")
            and isinstance(v, type)
            and issubclass(v, BaseModel)
            and v.__module__ == module_name
            and "schema_version" in v.model_fields
        ]
        if len(candidates) != 1:
            raise LookupError(f"{module_name} has no {class_name}")
        cls = candidates[0]
    return cls


def schema_for(stem: str) -> dict[str, Any]:
    """The JSON Schema document of one report."""
    module_name, class_name, version_name = REPORTS[stem]
    cls = _report_class(module_name, class_name)
    schema = cls.model_json_schema(mode="serialization")
    version = getattr(importlib.import_module(module_name), version_name, None)
    if version is None:
        version = cls.model_fields["schema_version"].default
    props = schema.get("properties", {})
    if "schema_version" in props:
        props["schema_version"] = {**props["schema_version"], "const": version}
    return {
        "$schema": JSON_SCHEMA_DIALECT,
        "$id": f"https://modelgraph.invalid/schemas/{stem}/{version}",
        "x-schema-version": version,
        **schema,
    }


def render(stem: str) -> str:
    return json.dumps(schema_for(stem), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def path_for(stem: str, directory: Path = HERE) -> Path:
    return directory / f"{stem}.schema.json"


def stale(directory: Path = HERE) -> list[str]:
    """Stems whose file is missing or differs from what the models generate."""
    out = []
    for stem in available():
        p = path_for(stem, directory)
        if not p.exists() or p.read_text(encoding="utf-8") != render(stem):
            out.append(stem)
    return out


def write_all(directory: Path = HERE) -> list[Path]:
    written = []
    for stem in available():
        p = path_for(stem, directory)
        p.write_text(render(stem), encoding="utf-8")
        written.append(p)
    return written


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--check" in args:
        bad = stale()
        for stem in bad:
            print(f"stale: {path_for(stem)} (run python -m modelgraph.schemas.export)", file=sys.stderr)
        return 1 if bad else 0
    for p in write_all():
        print(p)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
