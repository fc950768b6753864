"""Benchmark a streaming run: a large ``.npy`` (4 GiB by default) through a model with
``modelgraph run --input BIG.npy -o FOLDER --batch-size N``, measuring the run's peak resident memory.

    .venv/bin/python bench/bench_stream.py MobileNetV2.keras [--gib 4] [--batch-size 32] \
        [--workdir /tmp/mg_stream] [--keep]

The input is written here a block at a time (seeded uniform values in [-1, 1], the model's input
shape with 224 for unknown sizes), then the command runs in a child process; its peak RSS is the
child's ``ru_maxrss`` from ``os.wait4``. The outputs are checked against a direct in-process run of
the first and last batch. Prints the input size, the peak RSS, their ratio, samples/s and the wall
time; nothing is asserted. Needs free disk for the input (``df -h`` the work folder first); the input
and outputs are deleted afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import modelgraph

BLOCK_SAMPLES = 256


def write_input(path: Path, shape: tuple[int, ...], seed: int = 0) -> None:
    """A float32 ``.npy`` of ``shape`` written a block of samples at a time (bounded memory)."""
    rng = np.random.default_rng(seed)
    with path.open("wb") as fh:
        np.lib.format.write_array_header_2_0(fh, {"descr": "<f4", "fortran_order": False, "shape": shape})
        for start in range(0, shape[0], BLOCK_SAMPLES):
            n = min(BLOCK_SAMPLES, shape[0] - start)
            fh.write(rng.uniform(-1, 1, (n, *shape[1:])).astype(np.float32).tobytes())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("--gib", type=float, default=4.0)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/mg_stream"))
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()

    runner = modelgraph.Runner(modelgraph.load(args.model))
    if len(runner.inputs) != 1:
        sys.exit("the benchmark feeds single-input models")
    spec = runner.inputs[0]
    sample = [d if d is not None else 224 for d in (spec.shape or (None, 224, 224, 3))[1:]]
    per_sample = math.prod(sample) * 4
    count = int(args.gib * (1 << 30) // per_sample)
    shape = (count, *sample)
    args.workdir.mkdir(parents=True, exist_ok=True)
    big, out = args.workdir / "input.npy", args.workdir / "out"
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    if not big.exists() or np.load(big, mmap_mode="r").shape != shape:
        write_input(big, shape)
    print(
        f"input {big}: {shape} float32, {big.stat().st_size / (1 << 30):.2f} GiB "
        f"(written in {time.perf_counter() - t0:.0f} s)",
        flush=True,
    )

    cmd = [
        sys.executable,
        "-m",
        "modelgraph",
        "run",
        str(args.model),
        "--input",
        str(big),
        "-o",
        str(out),
        "--batch-size",
        str(args.batch_size),
    ]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    stdout, stderr = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"run failed ({os.waitstatus_to_exitcode(status)}): {stderr.strip()}")
    peak = usage.ru_maxrss * 1024
    size = big.stat().st_size
    print(stdout.strip())
    print(
        f"peak RSS {peak / (1 << 20):.0f} MiB for a {size / (1 << 30):.2f} GiB input "
        f"(peak/input {peak / size:.3f}); {count / wall:.1f} samples/s, {wall:.0f} s wall"
    )

    outputs = {p.stem: np.load(p, mmap_mode="r") for p in out.glob("*.npy")}
    for lo in (0, count - args.batch_size):
        x = np.load(big, mmap_mode="r")[lo : lo + args.batch_size]
        direct = runner.run(np.ascontiguousarray(x))
        for key, value in direct.items():
            name = next(k for k in outputs if k.startswith(key.replace("/", "_").replace(":", "_")))
            err = float(np.max(np.abs(outputs[name][lo : lo + args.batch_size] - value)))
            print(f"samples {lo}..{lo + args.batch_size} {key}: max |streamed - direct| {err:.2e}")
    if not args.keep:
        shutil.rmtree(args.workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
