"""A dilated Conv1D with padding="same" on a sequence of unknown length exports to ONNX that onnxruntime
runs, at every length, to Keras's own outputs (``samples/export/dilated_same_1d``, made by Keras 3.15.1
with ``samples/gen_export_samples.py``); and ``run --backend auto`` falls back to NumPy with a note
when onnxruntime is missing or fails at run time, while ``--backend onnxruntime`` fails with exit 5."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import modelgraph
from modelgraph.cli.main import cli
from modelgraph.errors import RunError, ToolMissingError

ort = pytest.importorskip("onnxruntime")

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "export" / "dilated_same_1d"
GOLDEN = np.load(SAMPLE.with_suffix(".npz"))
LENGTHS = (1, 5, 9, 16)


def test_onnxruntime_runs_the_export_at_every_length(tmp_path: Path) -> None:
    from modelgraph.saving.onnx import export_onnx

    out = tmp_path / "d.onnx"
    export_onnx(modelgraph.load(SAMPLE.with_suffix(".keras")), out)
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    for n in LENGTHS:
        [y] = session.run(None, {"seq": GOLDEN[f"x_{n}"]})
        np.testing.assert_allclose(y, GOLDEN[f"y_{n}"], atol=2e-5, rtol=1e-5, err_msg=f"length {n}")


def test_numpy_and_onnxruntime_backends_agree_with_keras() -> None:
    graph = modelgraph.load(SAMPLE.with_suffix(".keras"))
    for backend in ("numpy", "onnxruntime"):
        runner = modelgraph.Runner(graph, backend=backend)
        for n in LENGTHS:
            [y] = runner.run(GOLDEN[f"x_{n}"]).values()
            np.testing.assert_allclose(y, GOLDEN[f"y_{n}"], atol=2e-5, rtol=1e-5, err_msg=f"{backend} {n}")


def _old_same_upper(monkeypatch: pytest.MonkeyPatch) -> None:
    """The exporter as it was: SAME_UPPER for every unknown size, which onnxruntime cannot run with
    dilation (a real onnxruntime failure at run time, for the fallback under test)."""
    from modelgraph.saving.onnx.mappings import conv

    real = conv.window_pads

    def same_upper(mode, sizes, kernel, strides, dilation):
        if mode == "same" and (sizes is None or None in sizes):
            return None, "SAME_UPPER"
        return real(mode, sizes, kernel, strides, dilation)

    monkeypatch.setattr(conv, "window_pads", same_upper)


def test_auto_falls_back_to_numpy_when_onnxruntime_fails_while_running(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _old_same_upper(monkeypatch)
    graph = modelgraph.load(SAMPLE.with_suffix(".keras"))
    runner = modelgraph.Runner(graph, backend="auto")
    assert runner.backend == "onnxruntime"
    [y] = runner.run(GOLDEN["x_9"]).values()
    np.testing.assert_allclose(y, GOLDEN["y_9"], atol=2e-5, rtol=1e-5)
    assert runner.backend == "numpy"
    assert len(runner.notes) == 1 and "Dilation not supported" in runner.notes[0], runner.notes
    [y] = runner.run(GOLDEN["x_5"]).values()  # later runs stay on NumPy, without another note
    np.testing.assert_allclose(y, GOLDEN["y_5"], atol=2e-5, rtol=1e-5)
    assert len(runner.notes) == 1
    strict = modelgraph.Runner(graph, backend="onnxruntime")
    with pytest.raises(RunError, match="onnxruntime failed while running"):
        strict.run(GOLDEN["x_9"])


def test_auto_falls_back_to_numpy_when_onnxruntime_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from modelgraph.runner import backends

    def missing():
        raise ToolMissingError(
            "--backend onnxruntime needs the 'onnxruntime' package, which is not installed"
        )

    monkeypatch.setattr(backends, "_import_onnxruntime", missing)
    runner = modelgraph.Runner(SAMPLE.with_suffix(".keras").as_posix(), backend="auto")
    assert runner.backend == "numpy" and "not installed" in runner.notes[0]


def test_run_cli_says_auto_ran_numpy_and_exits_0(monkeypatch: pytest.MonkeyPatch) -> None:
    _old_same_upper(monkeypatch)
    args = ["run", str(SAMPLE.with_suffix(".keras")), "--random", "--shape", "seq=7x3"]
    auto = CliRunner().invoke(cli, [*args, "--backend", "auto"])
    assert auto.exit_code == 0, auto.output
    assert "modelgraph: note: --backend auto runs NumPy: onnxruntime failed while running" in auto.output
    strict = CliRunner().invoke(cli, [*args, "--backend", "onnxruntime"])
    assert strict.exit_code == 5, strict.output
