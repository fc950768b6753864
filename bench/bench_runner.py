"""Benchmark the NumPy runner against Keras 3 (TensorFlow) and onnxruntime on the same models.

Run with the Keras venv, with modelgraph importable::

    /work/venvs/k3/bin/pip install -e /work/main --no-deps
    KERAS_BACKEND=tensorflow /work/venvs/k3/bin/python bench/bench_runner.py [--models resnet50,mobilenetv2]

For each model (``keras.applications`` with random weights, saved as ``.keras`` and exported to ONNX
with ``model.export(path, format="onnx")``) and batch size it prints the median latency of
modelgraph, Keras ``predict_on_batch`` and onnxruntime, their ratios, modelgraph's achieved GFLOP/s
(MACs counted from the graph: Conv/Depthwise/Dense output positions x kernel size), that as a
fraction of NumPy's own float32 matmul peak on this machine, and the runner's peak memory (tracemalloc
over the plan + one run) against weights + the largest simultaneously-live activation set. The slowest
layers of modelgraph are listed by class, so a slow kernel family is visible. Nothing asserts a time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

MIB = 1024 * 1024


def sgemm_peak(n: int = 2048, repeat: int = 5) -> float:
    """NumPy's float32 matmul throughput on this machine, GFLOP/s (best of ``repeat``)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(repeat))
    return 2 * n**3 / best / 1e9


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def median_time(fn, warmup: int, repeat: int) -> float:
    for _ in range(warmup):
        fn()
    return statistics.median(_timed(fn) for _ in range(repeat))


def count_macs(runner, x: np.ndarray) -> int:
    """Multiply-accumulates of Conv*/DepthwiseConv*/SeparableConv*/Dense layers for input ``x``."""
    out = runner.run(x, all_intermediates=True)
    macs = 0
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
            macs += positions * int(np.prod(shapes["kernel"]))
        elif layer.class_name in ("SeparableConv1D", "SeparableConv2D"):
            # depthwise then pointwise, both at the output positions (strides act on the depthwise part)
            macs += positions * (
                int(np.prod(shapes["depthwise_kernel"])) + int(np.prod(shapes["pointwise_kernel"]))
            )
    return macs


def _layer_at(graph, path: str):
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


def build_models(name: str, workdir: Path, size: int):
    import keras

    ctor = {"resnet50": keras.applications.ResNet50, "mobilenetv2": keras.applications.MobileNetV2}[name]
    model = ctor(weights=None, input_shape=(size, size, 3))
    # Non-trivial BatchNormalization statistics, so no layer is an identity.
    rng = np.random.default_rng(1)
    for layer in model.layers:
        if layer.__class__.__name__ == "BatchNormalization":
            mean, var = layer.moving_mean, layer.moving_variance
            mean.assign(rng.normal(0, 0.1, mean.shape).astype("float32"))
            var.assign(rng.uniform(0.5, 1.5, var.shape).astype("float32"))
    model.predict_on_batch(np.zeros((1, size, size, 3), np.float32))  # export needs a called model
    keras_path = workdir / f"{name}.keras"
    model.save(keras_path)
    onnx_path = workdir / f"{name}.onnx"
    t0 = time.perf_counter()
    try:
        model.export(str(onnx_path), format="onnx", verbose=False)
    except TypeError:
        model.export(str(onnx_path), format="onnx")
    print(f"  exported ONNX in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return model, keras_path, onnx_path


def memory_check(keras_path: Path, x: np.ndarray) -> dict:
    from modelgraph.loading import load
    from modelgraph.runner.interpreter import Profile, Runner

    graph = load(keras_path)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    runner = Runner(graph)
    after_plan = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    runner.run(x)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    prof = Profile(steps=[])
    runner.run(x, profile=prof)
    return {
        "weights_file_bytes": runner.weight_bytes,
        "plan_bytes": after_plan - base,
        "peak_bytes": peak - base,
        "live_activation_bytes": prof.peak_live_bytes,
    }


def class_breakdown(runner, x: np.ndarray, repeat: int = 2) -> list[tuple[str, float, float]]:
    from modelgraph.runner.interpreter import Profile

    prof = Profile(steps=[])
    for _ in range(repeat):
        runner.run(x, profile=prof)
    by_class: dict[str, float] = {}
    for s in prof.steps:
        by_class[s.class_name] = by_class.get(s.class_name, 0.0) + s.seconds / repeat
    total = sum(by_class.values()) or 1.0
    return sorted(((k, v, v / total) for k, v in by_class.items()), key=lambda r: -r[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="resnet50,mobilenetv2")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()

    import keras
    import onnxruntime as ort
    import tensorflow as tf

    from modelgraph.loading import load
    from modelgraph.runner.interpreter import Runner

    peak = sgemm_peak()
    print(f"machine: {os.cpu_count()} cores; numpy {np.__version__} float32 matmul peak {peak:.1f} GFLOP/s")
    print(f"keras {keras.__version__} / tensorflow {tf.__version__}; onnxruntime {ort.__version__}")
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            print(f"{name}: building, saving, exporting ...", file=sys.stderr)
            model, keras_path, onnx_path = build_models(name, Path(tmp), args.size)
            t0 = time.perf_counter()
            runner = Runner(load(keras_path))
            plan_s = time.perf_counter() - t0
            sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
            ort_input = sess.get_inputs()[0].name
            x1 = np.random.default_rng(0).standard_normal((1, args.size, args.size, 3)).astype(np.float32)
            macs = count_macs(runner, x1)
            for b in (int(v) for v in args.batches.split(",")):
                x = np.random.default_rng(b).standard_normal((b, args.size, args.size, 3)).astype(np.float32)
                ours = runner.run(x)
                out_key = runner.output_keys[0]
                ref = np.asarray(model.predict_on_batch(x))
                ort_out = sess.run(None, {ort_input: x})[0]
                err_keras = float(np.max(np.abs(ours[out_key] - ref)))
                err_ort = float(np.max(np.abs(ort_out - ref)))
                t_mg = median_time(lambda x=x, r=runner: r.run(x), args.warmup, args.repeat)
                t_k = median_time(lambda x=x, m=model: m.predict_on_batch(x), args.warmup, args.repeat)
                t_o = median_time(
                    lambda x=x, s=sess, i=ort_input: s.run(None, {i: x}), args.warmup, args.repeat
                )
                gflops = 2 * macs * b / t_mg / 1e9
                rows.append((name, b, t_mg, t_k, t_o, gflops, err_keras, err_ort))
                print(
                    f"{name} b={b}: modelgraph {t_mg * 1e3:8.1f} ms | keras {t_k * 1e3:8.1f} ms "
                    f"(mg/keras {t_mg / t_k:.2f}x) | onnxruntime {t_o * 1e3:8.1f} ms (mg/ort {t_mg / t_o:.2f}x) | "
                    f"{gflops:.1f} GFLOP/s = {gflops / peak:.0%} of sgemm peak | max|mg-keras| {err_keras:.2e}, "
                    f"max|ort-keras| {err_ort:.2e}"
                )
            print(f"{name}: {macs / 1e9:.2f} GMACs per image; plan compiled in {plan_s:.2f} s")
            for b in (1, 8):
                x = np.random.default_rng(b).standard_normal((b, args.size, args.size, 3)).astype(np.float32)
                print(f"{name} b={b} time by layer class (modelgraph):")
                for cls, secs, frac in class_breakdown(runner, x)[:6]:
                    print(f"    {cls:24s} {secs * 1e3:8.1f} ms  {frac:6.1%}")
            for b in (1, 8):
                x = np.random.default_rng(b).standard_normal((b, args.size, args.size, 3)).astype(np.float32)
                m = memory_check(keras_path, x)
                budget = m["weights_file_bytes"] + 1.3 * m["live_activation_bytes"]
                total = m[
                    "peak_bytes"
                ]  # traced from before the plan: weights held + activations + temporaries
                print(
                    f"{name} b={b} memory: peak {total / MIB:.1f} MiB (of which plan/weights "
                    f"{m['plan_bytes'] / MIB:.1f} MiB); weights {m['weights_file_bytes'] / MIB:.1f} MiB + 1.3 x "
                    f"largest live activation set {m['live_activation_bytes'] / MIB:.1f} MiB = budget "
                    f"{budget / MIB:.1f} MiB -> {total / budget:.2f}x of budget"
                )
            keras.backend.clear_session()
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
