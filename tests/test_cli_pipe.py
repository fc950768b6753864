"""A closed stdout pipe (``modelgraph ... | head``) ends quietly with the documented code 141."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "k3" / "cnn.keras"


def test_closed_pipe_is_quiet(tmp_path: Path) -> None:
    code = (
        "import sys; from modelgraph.cli.main import cli; "
        f"sys.argv = ['modelgraph', 'inspect', {str(SAMPLE)!r}, '--expand-nested']; cli.main(prog_name='modelgraph')"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path
    )
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()  # the reader leaves after one line
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 141, err
    assert b"error" not in err
