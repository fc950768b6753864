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
assert len(results) == 1 and results[0].ok and not results, results  # falsy: no findings
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


# --- modelgraph.run: every form of model argument gives Keras's outputs ------------------------------

GOLDENS = SAMPLE.parents[1] / "goldens"
K3 = SAMPLE.parent


def _golden(name: str) -> tuple[dict, list]:
    import numpy as np

    data = np.load(GOLDENS / f"{name}.npz")
    feeds = {k[len("input/") :]: data[k] for k in data.files if k.startswith("input/")}
    outputs = [data[f"output/{i}"] for i in range(sum(k.startswith("output/") for k in data.files))]
    return feeds, outputs


def _assert_keras_outputs(result: dict, expected: list) -> None:
    import numpy as np

    got = [v for k, v in result.items() if not k.startswith("tap/")]
    assert len(got) == len(expected)
    for actual, want in zip(got, expected, strict=True):
        np.testing.assert_allclose(actual, want, atol=1e-5, rtol=1e-4)


def test_run_takes_a_path_a_graph_or_a_runner() -> None:
    import modelgraph

    feeds, expected = _golden("k3_multi_io_dict")
    path = K3 / "multi_io_dict.keras"
    graph = modelgraph.load(path)
    for model in (path, str(path), graph, modelgraph.Runner(graph)):
        _assert_keras_outputs(modelgraph.run(model, feeds), expected)


def test_run_with_a_weights_file_taps_and_batches() -> None:
    import numpy as np

    import modelgraph

    feeds, expected = _golden("k3_cnn")
    (name,) = feeds
    # A config-only JSON has no weights: the weights file supplies them.
    result = modelgraph.run(K3 / "cnn.json", feeds, weights=K3 / "cnn.weights.h5", batch_size=1)
    _assert_keras_outputs(result, expected)
    graph = modelgraph.load(K3 / "cnn.keras")
    first_layer = next(layer.name for layer in graph.layers if layer.name != name)
    tapped = modelgraph.run(graph, feeds[name], taps=[first_layer])
    _assert_keras_outputs(tapped, expected)
    (tap,) = [k for k in tapped if k.startswith("tap/")]
    assert first_layer in tap and np.asarray(tapped[tap]).shape[0] == feeds[name].shape[0]


def test_run_refuses_a_weights_file_it_would_ignore() -> None:
    import pytest

    import modelgraph

    feeds, _ = _golden("k3_cnn")
    graph = modelgraph.load(K3 / "cnn.keras")
    for model in (graph, modelgraph.Runner(graph)):
        with pytest.raises(modelgraph.errors.UsageError, match="weights="):
            modelgraph.run(model, feeds, weights=K3 / "cnn.weights.h5")
    with pytest.raises(modelgraph.errors.ModelGraphError):
        modelgraph.run(K3 / "cnn.json", feeds)  # a config-only file and no weights file
