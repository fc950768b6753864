"""Fixtures shared by the runner tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def rebuilt_apps(rebuilt_app):
    """``rebuilt_apps("apps/<name>/manifest.json")``: the session's rebuilt application model
    (tests/conftest.py ``rebuilt_app``), by its manifest path relative to samples/."""
    return lambda manifest: rebuilt_app(Path(manifest).parent.name)
