"""Fixtures shared by the runner tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


@pytest.fixture(scope="session")
def rebuilt_apps(tmp_path_factory):
    """Rebuild manifest-backed keras.applications samples on first use, once per session."""
    spec = importlib.util.spec_from_file_location("mg_samples_rebuild", SAMPLES / "rebuild.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    root = tmp_path_factory.mktemp("apps")
    built: dict[str, Path] = {}

    def get(manifest: str) -> Path:
        app_dir = (SAMPLES / manifest).parent
        if manifest not in built:
            built[manifest] = Path(module.rebuild(app_dir, root / app_dir.name))
        return built[manifest]

    return get
