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

from modelgraph.errors import ToolMissingError, UnsupportedError, UsageError
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
        options.log_severity_level = 3
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

    def run(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """The model's outputs, in order, for the inputs in model order."""
        feeds = {name: np.ascontiguousarray(a) for name, a in zip(self.input_names, arrays, strict=True)}
        return list(self.session.run(self.output_names, feeds))


def select_backend(name: str, graph: ModelGraph, *, threads: int | None = None) -> OnnxRuntimeSession | None:
    """The session for ``name`` (None for NumPy). ``onnxruntime`` raises when onnxruntime or onnx is
    missing or the model does not export (naming every layer); ``auto`` falls back to NumPy then.
    ``threads`` pins the session's intra-op threads."""
    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r}; choose one of {list(BACKENDS)}")
    if name == "numpy":
        return None
    if name == "onnxruntime":
        return OnnxRuntimeSession(graph, threads=threads)
    try:
        return OnnxRuntimeSession(graph, threads=threads)
    except UnsupportedError:  # onnx/onnxruntime missing (ToolMissingError) or a layer that does not map
        return None
