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
from modelgraph.runner.threads import decide_threads, thread_count

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


# Sessions an OnnxRuntimeSession keeps, by intra-op thread count. onnxruntime fixes a session's pool
# when it is built, while a run's count follows the machine's load (modelgraph.runner.threads): a
# session built while the machine was busy would otherwise run on one thread for the rest of the
# process, and one built idle on all cores beside busy processes. (NASNetMobile at batch 1 takes 1.32x
# as long on one thread as on two; bench/bench_runner.py's modelgraph-ort worker, its session built
# while the other workers were loading, once ran it at 1.41x onnxruntime's time, 0.96-1.09x in other
# runs.) Two kept: the first and the latest other, so a load that comes and goes on a 2-core machine
# builds each once.
MAX_SESSIONS = 2


class OnnxRuntimeSession:
    """A graph exported to ONNX in memory and run by onnxruntime, on as many intra-op threads as the
    run in progress has (pinned, or the policy's count at that run)."""

    name = "onnxruntime"

    def __init__(self, graph: ModelGraph, *, threads: int | None = None) -> None:
        self._ort = _import_onnxruntime()
        self._graph = graph
        self._pinned = threads
        start = time.perf_counter()
        data, self.dequantized = self._export()
        self.export_seconds = time.perf_counter() - start
        count = threads or decide_threads()
        start = time.perf_counter()
        self.session = self._session(data, count)
        self.load_seconds = time.perf_counter() - start
        self._sessions: dict[int, Any] = {count: self.session}
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        self._run_options = self._ort.RunOptions()
        self._run_options.log_severity_level = 4  # a failed run is one RunError line, not a log dump

    def _export(self) -> tuple[bytes, Any]:
        from modelgraph.saving.onnx import to_onnx

        result = to_onnx(self._graph, check=False)
        return result.model.SerializeToString(), result.dequantized

    def _session(self, data: bytes, count: int) -> Any:
        options = self._ort.SessionOptions()
        options.graph_optimization_level = self._ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 4  # fatal only: failures become one line of ours
        options.intra_op_num_threads = count
        options.inter_op_num_threads = 1
        return self._ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])

    @property
    def thread_counts(self) -> list[int]:
        """The intra-op thread counts of the sessions kept, oldest first."""
        return list(self._sessions)

    def session_for(self, count: int) -> Any:
        """The session with ``count`` intra-op threads: kept, or exported and built now (the model is
        not kept serialized: a second session is rare and the export takes about a second)."""
        session = self._sessions.get(count)
        if session is None:
            session = self._session(self._export()[0], count)
            others = [c for c in self._sessions if self._sessions[c] is not self.session]
            if len(self._sessions) >= MAX_SESSIONS and others:
                del self._sessions[others[0]]
            self._sessions[count] = session
        return session

    def run(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """The model's outputs, in order, for the inputs in model order."""
        session = self.session_for(self._pinned or thread_count())
        feeds = {name: np.ascontiguousarray(a) for name, a in zip(self.input_names, arrays, strict=True)}
        return list(session.run(self.output_names, feeds, self._run_options))


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
