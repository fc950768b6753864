"""Execution backends of :class:`~modelgraph.runner.interpreter.Runner`.

``numpy`` (the default and the reference) is the interpreter itself. ``onnxruntime`` exports the
graph to ONNX in memory (:mod:`modelgraph.saving.onnx`) and runs it with onnxruntime (an optional
dependency: ``pip install 'modelgraph[ort]'``); the Runner still binds, casts and batches the
feeds, so inputs, outputs and ``batch_size`` behave the same. ``auto`` picks onnxruntime when it is
installed and the model exports, else NumPy.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from modelgraph.errors import ModelGraphError, RunError, ToolMissingError, UnsupportedError, UsageError
from modelgraph.graph import ModelGraph

BACKENDS = ("numpy", "onnxruntime", "auto")


def _import_onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise ToolMissingError(
            "--backend onnxruntime needs the 'onnxruntime' package, which is not installed: "
            "pip install 'modelgraph[ort]'"
        ) from None
    return onnxruntime


class OnnxRuntimeSession:
    """A graph exported to ONNX in memory and loaded into an onnxruntime session."""

    name = "onnxruntime"

    def __init__(self, graph: ModelGraph, *, threads: int | None = None) -> None:
        ort = _import_onnxruntime()
        from modelgraph.saving.onnx import to_onnx

        start = time.perf_counter()
        result = to_onnx(graph, check=False)
        data = result.model.SerializeToString()
        self.export_seconds = time.perf_counter() - start
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 4  # fatal only: failures become one line of ours
        # Pinned, or the policy's count now (modelgraph.runner.threads): a session keeps its pool.
        from modelgraph.runner.threads import decide_threads

        options.intra_op_num_threads = threads or decide_threads()
        options.inter_op_num_threads = 1
        start = time.perf_counter()
        self.session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        self.load_seconds = time.perf_counter() - start
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.dequantized = result.dequantized
        self._run_options = ort.RunOptions()
        self._run_options.log_severity_level = 4  # a failed run is one RunError line, not a log dump

    def run(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """The model's outputs, in order, for the inputs in model order."""
        feeds = {name: np.ascontiguousarray(a) for name, a in zip(self.input_names, arrays, strict=True)}
        return list(self.session.run(self.output_names, feeds, self._run_options))


def first_line(exc: BaseException) -> str:
    """The first line of an exception's text (onnxruntime's errors run over several lines)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def select_backend(
    name: str, graph: ModelGraph, notes: list[str] | None = None, *, threads: int | None = None
) -> OnnxRuntimeSession | None:
    """The session for ``name`` (None for NumPy). ``onnxruntime`` raises when onnxruntime or onnx is
    missing or the model does not export (naming every layer), :class:`RunError` when onnxruntime
    refuses the exported model; ``auto`` falls back to NumPy in all these cases, with a one-line note
    appended to ``notes``. ``threads`` pins the session's intra-op threads."""
    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r}; choose one of {list(BACKENDS)}")
    if name == "numpy":
        return None
    if name == "onnxruntime":
        try:
            return OnnxRuntimeSession(graph, threads=threads)
        except ModelGraphError:
            raise
        except Exception as exc:  # noqa: BLE001 - onnxruntime's own errors (Fail, InvalidGraph, ...)
            raise RunError(f"onnxruntime refused the exported model: {first_line(exc)}") from exc
    try:
        return OnnxRuntimeSession(graph, threads=threads)
    except UnsupportedError as exc:  # onnx/onnxruntime missing or a layer that does not map
        reason = first_line(exc)
    except Exception as exc:  # noqa: BLE001 - onnxruntime refused the model: NumPy runs it
        reason = f"onnxruntime refused the exported model: {first_line(exc)}"
    if notes is not None:
        notes.append(f"--backend auto runs NumPy: {reason}")
    return None
