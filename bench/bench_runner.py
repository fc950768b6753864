"""Benchmark the NumPy runner and ``run --backend onnxruntime`` against Keras 3 (TensorFlow) and
onnxruntime on Keras's own ONNX export, on the same models.

Run with the Keras venv, with modelgraph and its dependencies importable (``model.export`` to ONNX
needs tf2onnx and onnx; the onnxruntime worker needs onnxruntime)::

    python3 -m venv /work/venvs/k3
    /work/venvs/k3/bin/pip install keras==3.15.1 tensorflow-cpu==2.21.0 onnxruntime tf2onnx onnx
    /work/venvs/k3/bin/pip install -e '/work/main[jit]'
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE KERAS_BACKEND=tensorflow /work/venvs/k3/bin/python \
        bench/bench_runner.py [--models resnet50,mobilenetv2,efficientnetb0,nasnetmobile] [--batches 1,8] \
        [--repeat 5] [--rounds 5]

Where the environment sets ``OPENBLAS_CORETYPE`` (some machines pin OpenBLAS to an older kernel set,
for older builds that misdetect their CPU), NumPy's matmul runs those kernels, not the ones its
OpenBLAS would pick: on an AVX-512 machine Haswell's kernels ran sgemm at 250 instead of 467 GFLOP/s
and ResNet50 at batch 1 at 1.47x Keras's time instead of 0.99x. The first lines printed name the
kernel set the workers run and warn when the environment chose it.

This process builds each model (``keras.applications`` with random weights and randomised
BatchNormalization statistics), saves it as ``.keras``, exports it to ONNX with
``model.export(path, format="onnx")`` and computes the Keras reference outputs. It times nothing
itself: every engine runs in a worker process of its own (``bench/_bench_worker.py``, started with
``sys.executable``) that imports only that engine -- the modelgraph worker never imports TensorFlow,
Keras or onnxruntime, the Keras worker never imports onnxruntime, the onnxruntime worker never imports
TensorFlow. In one shared process the TensorFlow and onnxruntime thread pools keep spinning on the
cores after their own calls (modelgraph's ResNet50 batch 8 once measured 30-40% slower there than
alone); separate processes that sit idle on a pipe between requests do not.

Engines: ``modelgraph`` (the NumPy runner), ``modelgraph-ort`` (``Runner(graph,
backend="onnxruntime")``: modelgraph's own ONNX export, made without TensorFlow, run by onnxruntime;
its export time is reported apart), ``keras`` (TensorFlow's default, with its oneDNN ops),
``keras-eigen`` (``TF_ENABLE_ONEDNN_OPTS=0``) and ``onnxruntime`` (on ``model.export(format="onnx")``,
i.e. tf2onnx). Keras is compared at its faster setting, chosen round by round (``keras-best``): which
one wins depends on the CPU. The export times compared are Keras's ``model.export`` in this process against
``modelgraph export``'s work (load the ``.keras`` file, map, full ``onnx.checker``, write) in the
modelgraph-ort worker.

Workers are long-lived (one per engine per model) and talk one JSON line per request over
stdin/stdout. Each loads its model once and warms up per batch size. The timing is interleaved in
``--rounds`` rounds: in each round every engine in turn times ``--repeat`` runs of the batch (the
order alternates between rotations of the engine list and of its reverse, so no engine always
follows the same one), with a ``--settle`` pause (1 s) before each engine so the previous one's
spinning threads go idle (with 0.3 s, MobileNetV2 at batch 1 took 19 instead of 12 ms in the rounds
where it came first or right after onnxruntime; with 1 s, 12 ms in every round). This machine is
noisy (+-15-30% run to run), so for each model and batch size it prints:

* per engine the median and the min over all rounds x repeats, and the per-round medians;
* the ratios mg/keras and mg/ort of those medians, and the median of the per-round ratios (robust to
  drift of the machine's speed during the run);
* modelgraph's GFLOP/s (MACs counted from the graph on the unfused plan: Conv/Depthwise/Dense output
  positions x kernel size) at its median time, and that as a fraction of NumPy's float32 matmul peak (measured in a
  NumPy-only subprocess at start);
* max |mg - keras| and max |ort - keras| against this process's Keras outputs (the workers save
  their outputs as ``.npy``), and max |keras worker - keras| to show the reloaded ``.keras`` matches.

An engine that cannot run a model at all is skipped with its one-line reason (printed, and listed
under the summary): Keras's own ONNX export of EfficientNetB0 (tf2onnx) has the Normalization
layer's mean and variance as graph inputs besides the image, which only Keras knows the values of.

Then, from the modelgraph worker alone (the other workers have exited), the slowest layer classes
for batch 1 and 8 (so a slow kernel family is visible) and the runner's peak memory (tracemalloc over
the plan + one run) against weights + 1.3x the model's largest simultaneously-live activation set
(every layer output of the Keras graph, freed after its last reader; the fused plan's own, smaller
live set is printed alongside). The load
average is printed at start and end (with a warning when other jobs are running). It closes with one
table, a row per model and batch size: Keras and modelgraph median ms and their per-round ratio,
onnxruntime's, modelgraph's GFLOP/s and % of the sgemm peak, and the same for its depthwise convs
alone (the unfused plan's DepthwiseConv steps; ``-`` for a model without any). ``--no-memory`` skips
the memory check. Nothing asserts a time.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# Keras is timed both ways TensorFlow runs convolutions on x86 and compared at the faster one, round by
# round: "keras" with its oneDNN ops (TensorFlow's default) and "keras-eigen" without. Which wins
# depends on the CPU: on an AVX2 machine ResNet50 at batch 1 took 129.7 / 129.3 ms with oneDNN and
# 108.7 / 115.6 ms without; on an AVX-512 one (AMD EPYC) 30.9 / 28.9 ms with and 33.7 / 32.1 without,
# NASNetMobile at batch 8 63-68 ms with and 109-124 ms without.
KERAS_SETTINGS = {"keras": "1", "keras-eigen": "0"}

import numpy as np  # noqa: E402
from _bench_worker import batch_input  # noqa: E402  (bench/ is sys.path[0] when run as a script)

MIB = 1024 * 1024
WORKER = Path(__file__).resolve().with_name("_bench_worker.py")
ENGINES = ("modelgraph", "modelgraph-ort", "keras", "keras-eigen", "onnxruntime")
# The faster Keras setting of each round (see KERAS_SETTINGS): the yardstick of mg/keras.
KERAS_BEST = "keras-best"


class Unavailable(Exception):
    """An engine cannot run this model (its worker said why in one line and exited)."""


class Worker:
    """A long-lived engine subprocess, spoken to one JSON line per request."""

    def __init__(self, engine: str, model_path: Path, size: int, warmup: int) -> None:
        self.engine = engine
        cmd = [sys.executable, str(WORKER), engine, str(model_path), "--size", str(size)]
        env = dict(os.environ)
        if engine in KERAS_SETTINGS:
            env["TF_ENABLE_ONEDNN_OPTS"] = KERAS_SETTINGS[engine]
        self.proc = subprocess.Popen(
            [*cmd, "--warmup", str(warmup)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        first = self._read()
        if "unavailable" in first:
            self.proc.wait()
            raise Unavailable(first["unavailable"])
        self.info: dict[str, Any] = first["ready"]
        if self.info["foreign_modules"]:
            raise RuntimeError(f"{engine} worker imported {self.info['foreign_modules']}")

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.engine} worker exited (code {self.proc.wait()})")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"{self.engine} worker failed:\n{reply['error']}")
        return reply

    def request(self, **req: Any) -> dict[str, Any]:
        """Send one request and return the worker's reply; a worker-side error raises."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        """Ask the worker to quit; kill it if it does not within 30 s."""
        if self.proc.poll() is None:
            try:
                self.request(cmd="quit")
                self.proc.wait(timeout=30)
            except (OSError, RuntimeError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def sgemm_peak() -> tuple[float, str]:
    """NumPy's float32 matmul peak in GFLOP/s, measured in a NumPy-only subprocess, and which BLAS
    kernels it ran (the workers run the same)."""
    out = subprocess.run(
        [sys.executable, str(WORKER), "sgemm"], check=True, capture_output=True, text=True
    ).stdout
    got = json.loads(out)
    return float(got["sgemm_gflops"]), str(got["blas"])


def build_models(name: str, workdir: Path, size: int) -> tuple[Any, Path, Path, float]:
    """Build ``name`` with random weights and BN statistics; save ``.keras`` and export ONNX."""
    import keras

    ctor = {
        "resnet50": keras.applications.ResNet50,
        "mobilenetv2": keras.applications.MobileNetV2,
        "efficientnetb0": keras.applications.EfficientNetB0,
        "nasnetmobile": keras.applications.NASNetMobile,
    }[name]
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
    keras_export = time.perf_counter() - t0
    print(f"  exported ONNX in {keras_export:.1f} s", file=sys.stderr)
    return model, keras_path, onnx_path, keras_export


def round_order(r: int, engines: tuple[str, ...] = ENGINES) -> list[str]:
    """Engine order of round ``r``: rotations of ``engines`` on even rounds, of its reverse on odd ones."""
    base = list(engines) if r % 2 == 0 else list(engines[::-1])
    k = r % len(base)
    return base[k:] + base[:k]


def time_rounds(
    workers: dict[str, Worker], batch: int, rounds: int, repeat: int, settle: float
) -> dict[str, list[list[float]]]:
    """Interleaved timing: per engine, one list of ``repeat`` times (seconds) per round."""
    times: dict[str, list[list[float]]] = {e: [] for e in workers}
    for r in range(rounds):
        for engine in round_order(r, tuple(workers)):
            time.sleep(settle)
            times[engine].append(workers[engine].request(cmd="time", batch=batch, repeat=repeat)["times"])
    return times


def _flat(rounds: list[list[float]]) -> list[float]:
    return [t for rnd in rounds for t in rnd]


def _ratio_of(med: dict[str, float], key: str) -> float:
    x, y = key.split("/")
    return med[x] / med[y]


def _ms(med: dict[str, float], engine: str) -> str:
    return f"{med[engine] * 1e3:.1f}" if engine in med else "n/a"


def print_summary(
    summary: list[dict[str, Any]],
    exports: list[tuple[str, float, float]],
    unavailable: list[str],
    peak: float,
) -> None:
    """The closing table: one row per model and batch size."""
    print(
        "summary: median ms over all rounds; keras = the faster of Keras with oneDNN and without (eigen) in "
        "each round; mg/keras = median of the per-round ratios (below 1: modelgraph is faster); GFLOP/s and "
        "% of the sgemm peak for the whole model and for its depthwise convs alone"
    )
    head = (
        f"{'model':14s} {'batch':>5s} {'onednn':>7s} {'eigen':>7s} {'keras':>8s} {'modelgraph':>10s} "
        f"{'mg/keras':>8s} {'ort':>8s} "
        f"{'mg/ort':>7s} {'mg-ort':>8s} {'mg-ort/ort':>10s} {'GFLOP/s':>8s} {'%peak':>6s} {'dw GFLOP/s':>10s} "
        f"{'dw %peak':>8s}"
    )
    print(head)
    print("-" * len(head))
    for row in summary:
        med, ratios = row["med"], row["ratios"]
        dw = row.get("depthwise", {"macs": 0})
        dw_rate = (
            f"{dw['gflops']:10.1f} {dw['gflops'] / peak:8.1%}" if dw["macs"] else f"{'-':>10s} {'-':>8s}"
        )
        r_o = ratios.get("modelgraph/onnxruntime")
        r_xo = ratios.get("modelgraph-ort/onnxruntime")
        print(
            f"{row['model']:14s} {row['batch']:5d} {_ms(med, 'keras'):>7s} {_ms(med, 'keras-eigen'):>7s} "
            f"{_ms(med, KERAS_BEST):>8s} {_ms(med, 'modelgraph'):>10s} "
            f"{ratios[f'modelgraph/{KERAS_BEST}']:7.2f}x {_ms(med, 'onnxruntime'):>8s} "
            f"{f'{r_o:.2f}x' if r_o is not None else 'n/a':>7s} {_ms(med, 'modelgraph-ort'):>8s} "
            f"{f'{r_xo:.2f}x' if r_xo is not None else 'n/a':>10s} {row['gflops']:8.1f} "
            f"{row['gflops'] / peak:6.1%} {dw_rate}"
        )
    for line in unavailable:
        print(f"n/a: {line}")
    for name, keras_export, mg_export in exports:
        print(
            f"{name:14s} ONNX export: keras model.export {keras_export:.2f} s | modelgraph export "
            f"{mg_export:.2f} s | {mg_export / keras_export:.2f}x"
        )


def faster_per_round(a: list[list[float]], b: list[list[float]]) -> list[list[float]]:
    """Per round, the times of whichever of two engines had the lower median in that round."""
    return [x if statistics.median(x) <= statistics.median(y) else y for x, y in zip(a, b, strict=True)]


def _round_ratio(a: list[list[float]], b: list[list[float]]) -> float:
    """Median over rounds of median(a in round) / median(b in round)."""
    return statistics.median(statistics.median(x) / statistics.median(y) for x, y in zip(a, b, strict=True))


def main() -> None:
    """Build, check, time in isolated workers (interleaved rounds) and print the report."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="resnet50,mobilenetv2")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per engine per round")
    # Six: modelgraph settles each input shape's schedule in its first six runs (a warm-up, two timed
    # serial runs, three side-by-side trials; runner/schedule.py), Keras traces its function on the
    # first call; every engine gets the same count.
    ap.add_argument("--warmup", type=int, default=6, help="untimed runs per engine per batch size")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds per batch size")
    ap.add_argument("--settle", type=float, default=1.0, help="pause (s) before each engine's turn")
    ap.add_argument(
        "--no-memory", dest="memory", action="store_false", help="skip the peak-memory check per model"
    )
    args = ap.parse_args()
    batches = [int(v) for v in args.batches.split(",")]
    # Results appear as they are measured, also when stdout is a pipe or a file.
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]

    peak, blas = sgemm_peak()
    print(f"machine: {os.cpu_count()} cores; numpy {np.__version__} float32 matmul peak {peak:.1f} GFLOP/s")
    print(f"BLAS: {blas}")
    from modelgraph.runner.fast import jit

    loops = "compiled (numba, the jit extra)" if jit.available() else "NumPy einsum (no numba)"
    print(f"modelgraph depthwise loops: {loops}")

    import keras
    import tensorflow as tf

    print(
        f"keras {keras.__version__} / tensorflow {tf.__version__} "
        "(timed with TensorFlow's oneDNN ops, engine keras, and without, keras-eigen; mg/keras against "
        "the faster of the two in each round); "
        f"onnxruntime {importlib.metadata.version('onnxruntime')}"
    )
    print(
        f"timing: one worker process per engine; {args.rounds} rounds x {args.repeat} runs per engine "
        f"and batch size after {args.warmup} warm-up runs; {args.settle:.1f} s pause between engines"
    )
    load = os.getloadavg()[0]
    busy = " (other jobs are running: expect noisy timings)" if load > 0.5 else ""
    print(f"load average at start: {load:.2f}{busy}")
    summary: list[dict[str, Any]] = []
    exports: list[tuple[str, float, float]] = []
    unavailable: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            print(f"{name}: building, saving, exporting ...", file=sys.stderr)
            model, keras_path, onnx_path, keras_export = build_models(name, Path(tmp), args.size)
            refs = {b: np.asarray(model.predict_on_batch(batch_input(b, args.size))) for b in batches}
            # Nothing runs in this process while the workers are timed.
            del model
            keras.backend.clear_session()
            gc.collect()
            with ExitStack() as stack:
                workers: dict[str, Worker] = {}
                for engine in ENGINES:  # one at a time, so load/plan times are not disturbed
                    path = onnx_path if engine == "onnxruntime" else keras_path
                    try:
                        workers[engine] = Worker(engine, path, args.size, args.warmup)
                    except Unavailable as exc:
                        print(f"{name}: {engine} skipped: {exc}")
                        unavailable.append(f"{name}: {engine}: {exc}")
                        continue
                    stack.callback(workers[engine].close)
                plan_s = workers["modelgraph"].info["load_seconds"]
                macs = workers["modelgraph"].request(cmd="macs")["macs"]
                mo = workers["modelgraph-ort"]
                ex = mo.request(cmd="export", path=str(Path(tmp) / f"{name}-modelgraph.onnx"))
                print(
                    f"{name} ONNX export: keras model.export (tf2onnx) {keras_export:.2f} s | modelgraph export "
                    f"{ex['total_seconds']:.2f} s (load {ex['load_seconds']:.2f} + map, check, write "
                    f"{ex['export_seconds']:.2f}) -> {ex['total_seconds'] / keras_export:.2f}x; run --backend "
                    f"onnxruntime: in-memory export {mo.info['export_seconds']:.2f} s, session "
                    f"{mo.info['session_seconds']:.2f} s"
                )
                exports.append((name, keras_export, ex["total_seconds"]))
                for b in batches:
                    errs = {}
                    for engine, w in workers.items():
                        out_path = Path(tmp) / f"{name}-{engine}-b{b}.npy"
                        w.request(cmd="output", batch=b, path=str(out_path))
                        errs[engine] = float(np.max(np.abs(np.load(out_path) - refs[b])))
                    for w in workers.values():
                        time.sleep(args.settle)
                        w.request(cmd="warmup", batch=b, n=args.warmup)
                    t = time_rounds(workers, b, args.rounds, args.repeat, args.settle)
                    t[KERAS_BEST] = faster_per_round(t["keras"], t["keras-eigen"])
                    med = {e: statistics.median(_flat(t[e])) for e in t}
                    low = {e: min(_flat(t[e])) for e in t}
                    ratios = {
                        f"{x}/{y}": _round_ratio(t[x], t[y])
                        for x in ("modelgraph", "modelgraph-ort")
                        for y in (KERAS_BEST, "onnxruntime")
                        if x in t and y in t
                    }
                    wins = sum(best is k for best, k in zip(t[KERAS_BEST], t["keras"], strict=True))
                    gflops = 2 * macs * b / med["modelgraph"] / 1e9
                    summary.append(
                        {"model": name, "batch": b, "med": med, "ratios": ratios, "gflops": gflops}
                    )
                    print(
                        f"{name} b={b}: "
                        + " | ".join(f"{e} {med[e] * 1e3:.1f} ms (min {low[e] * 1e3:.1f})" for e in workers)
                    )
                    print(
                        "    "
                        + " | ".join(
                            f"{k} {_ratio_of(med, k):.2f}x (per-round {v:.2f}x)" for k, v in ratios.items()
                        )
                        + f" | modelgraph {gflops:.1f} GFLOP/s = {gflops / peak:.0%} of sgemm peak"
                    )
                    print(
                        f"    Keras's faster setting per round: oneDNN on in {wins} of {len(t['keras'])} rounds"
                    )
                    print(
                        "    per-round medians (ms): "
                        + " | ".join(
                            f"{e} " + "/".join(f"{statistics.median(x) * 1e3:.0f}" for x in t[e])
                            for e in workers
                        )
                    )
                    print("    " + ", ".join(f"max|{e}-keras| {err:.2e}" for e, err in errs.items()))
                print(f"{name}: {macs / 1e9:.2f} GMACs per image; plan compiled in {plan_s:.2f} s")
                # The rest is modelgraph alone: let the other engines exit first.
                for engine in [e for e in workers if e != "modelgraph"]:
                    workers.pop(engine).close()
                mg = workers["modelgraph"]
                for row in summary:
                    if row["model"] == name:
                        row["depthwise"] = mg.request(cmd="depthwise", batch=row["batch"])
                for b in batches:
                    print(f"{name} b={b} time by layer class (modelgraph):")
                    for cls, secs, frac in mg.request(cmd="breakdown", batch=b)["classes"][:6]:
                        print(f"    {cls:32s} {secs * 1e3:8.1f} ms  {frac:6.1%}")
                for b in batches if args.memory else ():
                    # In a worker that has not run anything: the per-thread scratch buffers a run
                    # keeps for the next one are then counted, as in a one-off `modelgraph run`.
                    fresh = Worker("modelgraph", keras_path, args.size, 0)
                    try:
                        m = fresh.request(cmd="memory", batch=b)["memory"]
                    finally:
                        fresh.close()
                    budget = m["weights_file_bytes"] + 1.3 * m["live_activation_bytes"]
                    # traced from before the plan: weights held + activations + temporaries
                    total = m["peak_bytes"]
                    print(
                        f"{name} b={b} memory: peak {total / MIB:.1f} MiB (of which plan/weights "
                        f"{m['plan_bytes'] / MIB:.1f} MiB); weights {m['weights_file_bytes'] / MIB:.1f} MiB + "
                        f"1.3 x the model's largest live activation set {m['live_activation_bytes'] / MIB:.1f} MiB "
                        f"= budget {budget / MIB:.1f} MiB -> {total / budget:.2f}x of budget (the fused plan's "
                        f"own live set: {m['plan_live_activation_bytes'] / MIB:.1f} MiB); loading Numba's "
                        f"dispatcher before the trace: {m['numba_bytes'] / MIB:.1f} MiB, not counted"
                    )
    # Measured again: a peak taken while a neighbour held a core would understate it (and overstate
    # every fraction above); the summary uses the higher of the two.
    end_peak = sgemm_peak()[0]
    best_peak = max(peak, end_peak)
    print(f"sgemm peak at start {peak:.1f}, at end {end_peak:.1f} GFLOP/s; the summary uses {best_peak:.1f}")
    print_summary(summary, exports, unavailable, best_peak)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
