"""The committed samples as test cases (shared by the test modules that walk every golden)."""

from __future__ import annotations

import json
from pathlib import Path

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
GOLDENS = sorted((SAMPLES / "goldens").glob("*.json")) if (SAMPLES / "goldens").is_dir() else []
_FORMATS = ("keras", "h5", "json", "legacy_h5", "config_json")


def golden_model_files() -> list[tuple[str, str]]:
    """(golden file name, model file relative to samples/) for every container each golden lists."""
    cases = []
    for golden in GOLDENS:
        files = json.loads(golden.read_text()).get("files", {})
        for key, value in files.items():
            if key in _FORMATS and isinstance(value, str):
                cases.append((golden.name, value))
            elif key == "tfjs" and isinstance(value, dict):
                cases.extend((golden.name, v) for v in value.values() if isinstance(v, str))
    return cases
