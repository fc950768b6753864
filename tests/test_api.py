"""The public Python API: lazy exports, and names that are both a module and a function."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "k3" / "nested.keras"


def test_functions_work_before_and_after_their_module_is_imported(tmp_path: Path) -> None:
    code = f"""
import modelgraph
graph = modelgraph.load({str(SAMPLE)!r})
assert not modelgraph.diff(graph, graph)               # lazily exported function
import modelgraph.diff, modelgraph.render, modelgraph.validate   # now the package attributes are modules
assert not modelgraph.diff(graph, graph)
assert modelgraph.render(graph, {str(tmp_path / "m.dot")!r}, format="dot").startswith(b"digraph")
results = modelgraph.validate({str(SAMPLE)!r})
assert results and results[0].ok, results
"""
    # cwd outside the repository: the source tree must not shadow the installed package
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)


def test_import_is_light(tmp_path: Path) -> None:
    code = "import sys, modelgraph; assert 'numpy' not in sys.modules and 'pydantic' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)


def test_run_and_summarize_are_exported() -> None:
    import modelgraph

    graph = modelgraph.load(SAMPLE)
    report = modelgraph.summarize(graph)
    assert report.totals.total_params == graph.param_count
    assert callable(modelgraph.run) and modelgraph.Runner is not None
