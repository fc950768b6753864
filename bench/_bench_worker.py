"""Worker process for ``bench_runner.py``: runs ONE engine on one model, in a process of its own.

Started by ``bench_runner.py`` with ``sys.executable``; not meant to be run by hand. Usage::

    python _bench_worker.py ENGINE MODEL_PATH --size 224    # ENGINE: modelgraph | modelgraph-ort | keras | onnxruntime
    python _bench_worker.py sgemm                           # prints NumPy's float32 matmul peak, exits

A worker imports only its own engine (modelgraph: NumPy + modelgraph; modelgraph-ort: modelgraph's
``Runner(graph, backend="onnxruntime")``, i.e. ``modelgraph run --backend onnxruntime``: modelgraph's
own ONNX export run by onnxruntime, no TensorFlow; keras: Keras + TensorFlow; onnxruntime:
onnxruntime on Keras's own ONNX export), so no other runtime's thread pool competes with it for the cores. It loads
the model once, writes one JSON line ``{"ready": ...}`` and then answers one JSON line per request
line on stdin:

``{"cmd": "output", "batch": b, "path": p}``  runs once, saves the first output to ``p`` (``.npy``)
``{"cmd": "warmup", "batch": b, "n": n}``     runs ``n`` times (untimed)
``{"cmd": "time", "batch": b, "repeat": r}``  -> ``{"times": [seconds, ...]}`` (warms up first if needed)
``{"cmd": "macs"}``                           (modelgraph) multiply-accumulates per image
``{"cmd": "depthwise", "batch": b}``         (modelgraph) ``{"macs", "seconds", "gflops"}`` of the
                                              unfused plan's depthwise conv steps
``{"cmd": "breakdown", "batch": b}``          (modelgraph) ``{"classes": [[class, seconds, fraction]]}``
``{"cmd": "memory", "batch": b}``             (modelgraph) tracemalloc peak vs weights + live activations
``{"cmd": "export", "path": p}``              (modelgraph-ort) ``modelgraph export``'s work, timed:
                                              load the .keras file, build, check and write the ONNX file
``{"cmd": "quit"}``

The input of batch ``b`` is always ``np.random.default_rng(b).standard_normal((b, size, size, 3))``
as float32, the same array the parent uses for its reference outputs. A failing request is answered
with ``{"error": traceback}``; an engine that cannot run the model at all (the onnxruntime engine on
an export whose graph has inputs beyond the model's) answers ``{"unavailable": reason}`` instead of
``ready`` and exits. Anything a library prints to stdout is sent to stderr, so stdout carries
only the protocol.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

ENGINES = ("modelgraph", "modelgraph-ort", "keras", "keras-eigen", "onnxruntime")
# Runtimes a worker must not have imported (checked after loading and reported in "ready").
FORBIDDEN = {
    "modelgraph": ("tensorflow", "keras", "onnxruntime"),
    "modelgraph-ort": ("tensorflow", "keras"),
    "keras": ("onnxruntime",),
    "keras-eigen": ("onnxruntime",),
    "onnxruntime": ("tensorflow", "keras"),
}


def batch_input(b: int, size: int) -> np.ndarray:
    """The deterministic benchmark input of batch size ``b`` (shared with the parent)."""
    return np.random.default_rng(b).standard_normal((b, size, size, 3)).astype(np.float32)


def blas_kernels() -> str:
    """Which BLAS NumPy runs and which kernel set it picked (threadpoolctl), with a warning when the
    environment chose the kernel set: ``OPENBLAS_CORETYPE`` pins OpenBLAS to an older one on some
    machines (Haswell's AVX2 kernels on an AVX-512 CPU ran sgemm at 250 instead of 467 GFLOP/s).
    Unset it, with ``OPENBLAS_L2_SIZE``, for the benchmark command alone to time a current NumPy."""
    from modelgraph.runner.threads import blas_libraries

    libs = blas_libraries()
    if not libs:
        return "no BLAS threadpoolctl knows"
    text = f"{libs[0].library} {libs[0].version}, {libs[0].kernels} kernels"
    forced = {v: os.environ[v] for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if v in os.environ}
    if forced:
        text += (
            " -- set by the environment ("
            + ", ".join(f"{k}={v}" for k, v in forced.items())
            + "); unset both for this command to time NumPy's own choice"
        )
    return text


def sgemm_peak(n: int = 2048, repeat: int = 5, rounds: int = 4, pause: float = 0.3) -> float:
    """NumPy's float32 matmul throughput on this machine, GFLOP/s: the best of ``rounds`` rounds of
    ``repeat`` products, ``pause`` seconds apart, so that a neighbour busy for a moment on a shared
    host does not halve the figure."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    a @ b
    best = float("inf")
    for i in range(rounds):
        if i:
            time.sleep(pause)
        best = min(best, *(_timed(lambda: a @ b) for _ in range(repeat)))
    return 2 * n**3 / best / 1e9


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def macs_by_step(graph: Any, x: np.ndarray) -> dict[str, tuple[str, int]]:
    """Multiply-accumulates of each Conv*/DepthwiseConv*/SeparableConv*/Dense step for input ``x``,
    keyed by the step's path: ``(class name, MACs)``.

    Counted on the unfused plan, where every layer of the graph is a step of its own (fused steps such
    as a whole inverted bottleneck would otherwise hide their convolutions).
    """
    from modelgraph.runner.interpreter import Runner

    runner = Runner(graph, fuse=False)
    out = runner.run(x, all_intermediates=True)
    macs: dict[str, tuple[str, int]] = {}
    for step in runner.steps:
        if step.kind != "kernel":
            continue
        layer = _layer_at(runner.graph, step.path)
        if layer is None:
            continue
        shapes = {w.name: w.shape for w in layer.weights}
        key = f"tap/{step.path}" if not step.shared else f"tap/{step.path}:{step.node_index}"
        if key not in out:
            continue
        positions = int(np.prod(out[key].shape[:-1]))
        if layer.class_name in ("Conv1D", "Conv2D", "Conv3D", "DepthwiseConv2D", "DepthwiseConv1D", "Dense"):
            n = positions * int(np.prod(shapes["kernel"]))
        elif layer.class_name in ("SeparableConv1D", "SeparableConv2D"):
            # depthwise then pointwise, both at the output positions (strides act on the depthwise part)
            n = positions * (
                int(np.prod(shapes["depthwise_kernel"])) + int(np.prod(shapes["pointwise_kernel"]))
            )
        else:
            continue
        macs[step.path] = (layer.class_name, macs.get(step.path, ("", 0))[1] + n)
    return macs


def count_macs(graph: Any, x: np.ndarray) -> int:
    """Multiply-accumulates of Conv*/DepthwiseConv*/SeparableConv*/Dense layers for input ``x``."""
    return sum(n for _, n in macs_by_step(graph, x).values())


def depthwise_rate(graph: Any, x: np.ndarray, repeat: int = 5) -> dict[str, float]:
    """GFLOP/s of the DepthwiseConv1D/2D steps of the unfused plan (their fast kernel, the same
    depthwise code the fused inverted bottlenecks run): MACs x 2 over their median summed time.
    ``{"macs": 0, ...}`` when the model has none."""
    from modelgraph.runner.interpreter import Profile, Runner

    depthwise = {
        path: n for path, (cls, n) in macs_by_step(graph, x[:1]).items() if cls.startswith("DepthwiseConv")
    }
    if not depthwise:
        return {"macs": 0, "seconds": 0.0, "gflops": 0.0}
    runner = Runner(graph, fuse=False)
    runner.run(x)
    totals = []
    for _ in range(repeat):
        prof = Profile(steps=[])
        runner.run(x, profile=prof)
        totals.append(sum(s.seconds for s in prof.steps if s.path in depthwise))
    seconds = sorted(totals)[len(totals) // 2]
    macs = sum(depthwise.values()) * x.shape[0]
    return {"macs": macs, "seconds": seconds, "gflops": 2 * macs / seconds / 1e9}


def _layer_at(graph: Any, path: str) -> Any:
    g = graph
    parts = path.split("/")
    for i, seg in enumerate(parts):
        name = seg.split(":", 1)[0]
        if not g.has_layer(name):
            return None
        layer = g.layer(name)
        if i == len(parts) - 1:
            return layer
        g = layer.subgraph
        if g is None:
            return None
    return None


def memory_check(model_path: Path, x: np.ndarray) -> dict[str, int]:
    """Peak traced memory of a fresh plan + one run of ``x``, against the model's own activations
    (call it in a process that has not run a model: scratch kept from earlier runs is not counted).

    The budget's "largest set of simultaneously live activations" is the model's: every layer output
    of the Keras graph, each freed after its last reader (the unfused plan's accounting). The fused
    plan keeps fewer tensors alive (a merged block's widest tensors never exist whole), so its own
    live set is reported too, but it is not the yardstick.

    Libraries are loaded before tracing: NumPy by the import above, and, with the ``jit`` extra,
    Numba and its dispatcher, by one compiled call on a few bytes (``numba_bytes`` is what that
    call traced: the first compiled call of a process imports Numba's typing machinery, 14-28 MiB
    of Python objects whatever the model).
    """
    from modelgraph.loading import load
    from modelgraph.runner.fast import jit
    from modelgraph.runner.interpreter import Profile, Runner

    graph = load(model_path)
    numba_bytes = 0
    if jit.available():
        tracemalloc.start()
        tiny = np.zeros((1, 2, 2, 1), np.float32)
        jit.pad_clamp(tiny, np.zeros((1, 3, 3, 1), np.float32), 1, 1, (-np.inf, np.inf))
        numba_bytes = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    runner = Runner(graph)
    after_plan = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    runner.run(x)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    fused_profile = Profile(steps=[])
    runner.run(x, profile=fused_profile)
    model_profile = Profile(steps=[])
    Runner(graph, fuse=False).run(x, profile=model_profile)
    return {
        "weights_file_bytes": runner.weight_bytes,
        "plan_bytes": after_plan - base,
        "peak_bytes": peak - base,
        "live_activation_bytes": model_profile.peak_live_bytes,
        "plan_live_activation_bytes": fused_profile.peak_live_bytes,
        "numba_bytes": numba_bytes,
    }


def class_breakdown(runner: Any, x: np.ndarray, repeat: int = 2) -> list[tuple[str, float, float]]:
    """Seconds per run and fraction of the total, by layer class, slowest first."""
    from modelgraph.runner.interpreter import Profile

    prof = Profile(steps=[])
    for _ in range(repeat):
        runner.run(x, profile=prof)
    by_class: dict[str, float] = {}
    for s in prof.steps:
        by_class[s.class_name] = by_class.get(s.class_name, 0.0) + s.seconds / repeat
    total = sum(by_class.values()) or 1.0
    return sorted(((k, v, v / total) for k, v in by_class.items()), key=lambda r: -r[1])


def timed_export(model_path: Path, out: Path) -> dict[str, float]:
    """What ``modelgraph export MODEL -o out`` does (load, map, full onnx.checker, write), timed."""
    from modelgraph.loading import load
    from modelgraph.saving.onnx import export_onnx

    t0 = time.perf_counter()
    graph = load(model_path)
    t1 = time.perf_counter()
    export_onnx(graph, out)
    t2 = time.perf_counter()
    return {"load_seconds": t1 - t0, "export_seconds": t2 - t1, "total_seconds": t2 - t0}


class EngineUnavailable(Exception):
    """The engine cannot run this model at all (its one-line reason is reported, not a traceback)."""


class Engine:
    """One loaded model behind ``run(x) -> first output``; ``info`` goes into the ready message."""

    def __init__(self, engine: str, model_path: Path) -> None:
        self.name = engine
        self.model_path = model_path
        self.info: dict[str, Any] = {}
        t0 = time.perf_counter()
        if engine == "modelgraph":
            from modelgraph.loading import load
            from modelgraph.runner.interpreter import Runner

            self.runner = Runner(load(model_path))
            out_key = self.runner.output_keys[0]
            self._run: Callable[[np.ndarray], np.ndarray] = lambda x: self.runner.run(x)[out_key]
        elif engine == "modelgraph-ort":
            from modelgraph.loading import load
            from modelgraph.runner.interpreter import Runner

            self.runner = Runner(load(model_path), backend="onnxruntime")
            session = self.runner.backend_session
            assert session is not None
            self.info["export_seconds"] = session.export_seconds
            self.info["session_seconds"] = session.load_seconds
            out_key = self.runner.output_keys[0]
            self._run = lambda x: self.runner.run(x)[out_key]
        elif engine in ("keras", "keras-eigen"):  # the parent sets TF_ENABLE_ONEDNN_OPTS for each
            import keras

            model = keras.saving.load_model(model_path, compile=False)
            self._run = lambda x: np.asarray(model.predict_on_batch(x))
        elif engine == "onnxruntime":
            import onnxruntime as ort

            sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
            inputs = sess.get_inputs()
            if len(inputs) != 1:
                # tf2onnx turned some of the model's variables (EfficientNetB0: the Normalization
                # layer's mean and variance) into graph inputs that only Keras knows the values of.
                extra = ", ".join(i.name for i in inputs[1:])
                raise EngineUnavailable(
                    f"Keras's ONNX export (tf2onnx) has {len(inputs)} graph inputs for the model's 1 "
                    f"(extra: {extra}): it cannot be run without Keras"
                )
            name = inputs[0].name
            self._run = lambda x: sess.run(None, {name: x})[0]
        else:
            raise ValueError(f"unknown engine {engine!r}; expected one of {ENGINES}")
        self.info["load_seconds"] = time.perf_counter() - t0
        self.info["pid"] = os.getpid()
        self.info["foreign_modules"] = [m for m in FORBIDDEN[engine] if m in sys.modules]

    def run(self, x: np.ndarray) -> np.ndarray:
        """The model's first output for ``x``."""
        return self._run(x)


def serve(engine: Engine, size: int, warmup: int, proto_out: Any) -> None:
    """Answer JSON requests from stdin until ``quit`` or end of input."""
    inputs: dict[int, np.ndarray] = {}
    warmed: set[int] = set()

    def x_of(b: int) -> np.ndarray:
        if b not in inputs:
            inputs[b] = batch_input(b, size)
        return inputs[b]

    def reply(obj: dict[str, Any]) -> None:
        proto_out.write(json.dumps(obj) + "\n")
        proto_out.flush()

    reply({"ready": engine.info})
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        cmd = req.get("cmd")
        if cmd == "quit":
            reply({"ok": True})
            return
        try:
            if cmd == "output":
                np.save(req["path"], np.asarray(engine.run(x_of(req["batch"]))))
                reply({"ok": True})
            elif cmd == "warmup":
                b = req["batch"]
                for _ in range(req.get("n", warmup)):
                    engine.run(x_of(b))
                warmed.add(b)
                reply({"ok": True})
            elif cmd == "time":
                b = req["batch"]
                x = x_of(b)
                if b not in warmed:
                    for _ in range(warmup):
                        engine.run(x)
                    warmed.add(b)
                reply({"times": [_timed(lambda x=x: engine.run(x)) for _ in range(req["repeat"])]})
            elif cmd == "macs" and engine.name == "modelgraph":
                reply({"macs": count_macs(engine.runner.graph, x_of(1))})
            elif cmd == "depthwise" and engine.name == "modelgraph":
                reply(depthwise_rate(engine.runner.graph, x_of(req["batch"])))
            elif cmd == "breakdown" and engine.name == "modelgraph":
                reply({"classes": class_breakdown(engine.runner, x_of(req["batch"]))})
            elif cmd == "memory" and engine.name == "modelgraph":
                reply({"memory": memory_check(engine.model_path, x_of(req["batch"]))})
            elif cmd == "export" and engine.name == "modelgraph-ort":
                reply(timed_export(engine.model_path, Path(req["path"])))
            else:
                reply({"error": f"{engine.name} worker: unknown request {req!r}"})
        except Exception:
            reply({"error": traceback.format_exc()})


def main() -> None:
    """Parse the command line and serve (or print the sgemm peak)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("engine", choices=(*ENGINES, "sgemm"))
    ap.add_argument("model_path", nargs="?", type=Path)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()
    # The protocol owns the real stdout; library prints go to stderr.
    proto_out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    if args.engine == "sgemm":
        proto_out.write(
            json.dumps({"sgemm_gflops": sgemm_peak(), "numpy": np.__version__, "blas": blas_kernels()}) + "\n"
        )
        proto_out.flush()
        return
    if args.model_path is None:
        ap.error("model_path is required for an engine")
    try:
        engine = Engine(args.engine, args.model_path)
    except EngineUnavailable as exc:
        proto_out.write(json.dumps({"unavailable": str(exc)}) + "\n")
        proto_out.flush()
        return
    except Exception:
        proto_out.write(json.dumps({"error": traceback.format_exc()}) + "\n")
        proto_out.flush()
        raise SystemExit(1) from None
    serve(engine, args.size, args.warmup, proto_out)


if __name__ == "__main__":
    main()
