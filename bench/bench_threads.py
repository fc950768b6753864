"""Benchmark the thread policy: each model idle and beside 1 and 2 busy processes, for every pinned
thread count 1..cores and the default, printing the default's time over the best setting's.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_threads.py \
        MODEL.keras [MODEL.keras ...] [--batch 1] [--loads 0,1,2] [--repeat 5] [--rounds 3]

(``env -u``: time the BLAS kernels NumPy picks, not ones the environment pinned; see
``bench_runner.py``.)

Models: any saved model modelgraph runs (``keras.applications`` models saved with random weights
are what the issue names: ResNet50, MobileNetV2, EfficientNetB0, NASNetMobile). The busy processes
are spawned by this script (``sys.executable`` spinning in a loop, one core each) and killed after
their load level. Within a load level the settings are timed in ``--rounds`` rounds, in an order
that rotates every round, ``--repeat`` runs each (after one warm-up run per setting), with a short
pause between settings; each setting's time is the median over all its runs. Nothing is asserted:
the printed ratio default/best (1.00 = the default picked as well as the best pin) is the result.
The issue's target is at most 1.2 at every load. The machine's other load (the 1-minute load
average) is printed with each level: on a shared machine the numbers drift.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from _bench_worker import blas_kernels  # bench/ is sys.path[0] when run as a script

import modelgraph
from modelgraph.runner import threads as policy

BUSY_LOOP = "while True: pass"


def busy(count: int) -> list[subprocess.Popen]:
    """``count`` processes each spinning one core until killed."""
    return [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(count)]


def stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        proc.kill()
    for proc in procs:
        proc.wait()


def feeds_for(runner: modelgraph.Runner, batch: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    arrays = []
    for spec in runner.inputs:
        shape = [batch, *(d if d is not None else 224 for d in (spec.shape or (None, 224, 224, 3))[1:])]
        arrays.append(rng.standard_normal(shape).astype(np.float32))
    return arrays


def time_setting(
    runner: modelgraph.Runner, feeds: list[np.ndarray], pin: int | None, repeat: int
) -> list[float]:
    """Seconds of ``repeat`` runs with ``pin`` threads (None: the policy's default)."""
    policy.set_threads(pin)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        runner.run(feeds)
        times.append(time.perf_counter() - start)
    policy.set_threads(None)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", type=Path)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--loads", default="0,1,2", help="busy processes beside the run, comma-separated")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--settle", type=float, default=0.3, help="pause before each setting (s)")
    args = ap.parse_args()
    for var in (policy.ENV_VAR, policy.LEGACY_ENV_VAR):
        if os.environ.get(var):
            sys.exit(f"unset {var}: it pins every setting")

    cores = policy.usable_cores()
    settings: list[int | None] = [None, *range(1, cores + 1)]
    names = ["default", *(f"pin {n}" for n in range(1, cores + 1))]
    loads = [int(v) for v in args.loads.split(",")]
    print(f"usable cores {cores}, batch {args.batch}, {args.rounds} rounds x {args.repeat} runs per setting")
    print(f"BLAS: {blas_kernels()}")
    summary: list[tuple[str, int, float]] = []
    for path in args.models:
        runner = modelgraph.Runner(modelgraph.load(path))
        feeds = feeds_for(runner, args.batch)
        for setting in settings:  # warm-up: transformed kernels, scratch arenas, BLAS pools
            time_setting(runner, feeds, setting, 1)
        for load in loads:
            procs = busy(load)
            try:
                time.sleep(1.0)  # the busy processes are running before anything is timed
                times: dict[int, list[float]] = {i: [] for i in range(len(settings))}
                for r in range(args.rounds):
                    order = list(range(len(settings)))
                    order = order[r % len(order) :] + order[: r % len(order)]
                    for i in order:
                        time.sleep(args.settle)
                        times[i] += time_setting(runner, feeds, settings[i], args.repeat)
                chosen = policy.decide_threads()
            finally:
                stop(procs)
            med = {i: statistics.median(t) for i, t in times.items()}
            best = min(med[i] for i in range(1, len(settings)))
            ratio = med[0] / best
            summary.append((path.stem, load, ratio))
            cells = "  ".join(f"{names[i]} {med[i] * 1e3:7.1f} ms" for i in range(len(settings)))
            print(
                f"{path.stem:16s} busy {load}: {cells}  default/best {ratio:.2f}  "
                f"(default chose {chosen} at the end; loadavg {os.getloadavg()[0]:.1f})",
                flush=True,
            )
    worst = max(summary, key=lambda s: s[2])
    print(f"worst default/best: {worst[2]:.2f} ({worst[0]}, busy {worst[1]}); target <= 1.2")


if __name__ == "__main__":
    main()
