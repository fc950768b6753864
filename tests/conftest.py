"""Fixtures shared by the whole suite."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import pytest

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


@pytest.fixture(scope="session")
def rebuilt_app(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``rebuilt_app(name)``: the keras.applications sample ``samples/apps/<name>`` written from its
    weights manifest (samples/rebuild.py, every array sha256-checked), once per session and shared
    read-only by every test that needs it (NASNetMobile alone takes seconds to rebuild, and five
    test files use it). Tests that change a model copy it first."""
    spec = importlib.util.spec_from_file_location("mg_samples_rebuild_session", SAMPLES / "rebuild.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    root = tmp_path_factory.mktemp("apps")
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            built[name] = Path(module.rebuild(SAMPLES / "apps" / name, root / name))
        return built[name]

    return get


@pytest.fixture(autouse=True)
def _terminal_width_from_the_code_not_the_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    """Text output written to a pipe takes its width from ``COLUMNS`` when set; pytest-xdist's
    workers (and a user's shell) may set it, so every test starts without it and sees the width
    the CLI uses by default. A test that wants a width sets it itself."""
    monkeypatch.delenv("COLUMNS", raising=False)
