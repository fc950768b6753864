"""The installed CLI, run in a subprocess with a time limit (a regression fails instead of hanging
the suite)."""

from __future__ import annotations

import subprocess
import sys
import tempfile


def run_cli(*args: object, text: bool = True) -> subprocess.CompletedProcess:
    """``python -m modelgraph ARGS...`` with captured output (``text=False``: bytes, to check the
    encoding). The working directory is outside the repository, so the source tree cannot shadow
    the installed package."""
    return subprocess.run(
        [sys.executable, "-m", "modelgraph", *map(str, args)],
        capture_output=True,
        text=text,
        timeout=120,
        cwd=tempfile.gettempdir(),
    )
