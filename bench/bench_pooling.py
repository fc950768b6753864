"""Pooling kernels of two modelgraph checkouts timed against each other, single-threaded, interleaved.

Usage (any Python with NumPy; each checkout's ``modelgraph`` package is imported from its folder)::

    python bench/bench_pooling.py --before /tmp/old-tree --after . [--rounds 5] [--batch 1 8]

Each round runs one worker process per checkout in turn (``MODELGRAPH_NUM_THREADS=1``, one BLAS
thread), each timing every layer as the best of ``--repeat`` calls of the plan's kernel (the fast one
where there is one; ``--after-reference`` adds the after checkout's reference kernels). Times are the
process's CPU time, not the wall clock: on a shared machine a call of a few milliseconds is nearly
always preempted, and single-threaded its CPU time is its work. The rounds interleave the checkouts
and each layer's time is its best over the rounds, so a busy spell (cache and memory contention)
slows both alike; the ratio after / before is what to read (< 1: faster).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

# (name, class, config, input shape without batch): the pooling of ResNet50 / MobileNetV2 at 224x224
# (ResNet50's stem pool reads a merged ZeroPadding2D), and the other paths at similar sizes.
LAYERS: list[tuple[str, str, dict, tuple[int, ...]]] = [
    ("resnet50 stem: pad1 + maxpool3x3 s2 114", "modelgraph/ZeroPadded",
     {"pads": [[1, 1], [1, 1]], "class_name": "MaxPooling2D",
      "layer": {"pool_size": [3, 3], "strides": [2, 2], "padding": "valid"}}, (112, 112, 64)),
    ("maxpool3x3 s2 same 112x112x64", "MaxPooling2D",
     {"pool_size": 3, "strides": 2, "padding": "same"}, (112, 112, 64)),
    ("maxpool2x2 56x56x64", "MaxPooling2D", {"pool_size": 2}, (56, 56, 64)),
    ("avgpool3x3 s1 same 28x28x64", "AveragePooling2D",
     {"pool_size": 3, "strides": 1, "padding": "same"}, (28, 28, 64)),
    ("avgpool2x2 s2 56x56x128", "AveragePooling2D", {"pool_size": 2, "strides": 2}, (56, 56, 128)),
    ("resnet50 global avg 7x7x2048", "GlobalAveragePooling2D", {}, (7, 7, 2048)),
    ("mobilenetv2 global avg 7x7x1280", "GlobalAveragePooling2D", {}, (7, 7, 1280)),
    ("maxpool1d 3 s2 same 1024x64", "MaxPooling1D", {"pool_size": 3, "strides": 2, "padding": "same"}, (1024, 64)),
    ("avgpool3d 3 s2 same 16x28x28x32", "AveragePooling3D",
     {"pool_size": 3, "strides": 2, "padding": "same"}, (16, 28, 28, 32)),
    ("maxpool3d 2 16x28x28x32", "MaxPooling3D", {"pool_size": 2}, (16, 28, 28, 32)),
]  # fmt: skip


def _worker(tree: str, reference: bool, batches: list[int], repeat: int, only: str) -> None:
    sys.path.insert(0, os.path.abspath(tree))
    import numpy as np

    from modelgraph.runner import fast
    from modelgraph.runner.heap import keep_freed_memory
    from modelgraph.runner.registry import KernelSpec

    keep_freed_memory()  # as a Runner does: outputs reuse freed memory instead of faulting pages in
    rng = np.random.default_rng(0)
    times = {}
    for name, cls, config, shape in LAYERS:
        if only not in name or (reference and cls.startswith("modelgraph/")):
            continue
        spec = KernelSpec(name=name, class_name=cls, config=config)
        fn = fast.kernel_for(cls, spec, reference=reference)
        for batch in batches:
            x = rng.standard_normal((batch, *shape), dtype=np.float32)
            fn(x)
            best = float("inf")
            for _ in range(repeat):
                t0 = time.process_time()
                fn(x)
                best = min(best, time.process_time() - t0)
            times[f"{name} b{batch}"] = best
    print(json.dumps(times))


def _run(tree: str, reference: bool, args: argparse.Namespace) -> dict[str, float]:
    env = dict(os.environ, MODELGRAPH_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    command = [sys.executable, __file__, "--worker", tree, "--repeat", str(args.repeat), "--batch"]
    command += [str(b) for b in args.batch] + (["--reference"] if reference else []) + ["--only", args.only]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", help="the checkout to compare against")
    p.add_argument("--after", default=".", help="the checkout measured (default: this folder)")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    p.add_argument("--repeat", type=int, default=5, help="best of this many calls per round (default 5)")
    p.add_argument("--batch", type=int, nargs="+", default=[1, 8], help="batch sizes (default 1 8)")
    p.add_argument("--after-reference", action="store_true", help="also time the after reference kernels")
    p.add_argument("--only", default="", help="time only the layers whose name contains this")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--reference", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        _worker(args.worker, args.reference, args.batch, args.repeat, args.only)
        return 0
    if not args.before:
        p.error("--before is required")
    runs = [("before", args.before, False), ("after", args.after, False)]
    if args.after_reference:
        runs.append(("reference", args.after, True))
    best: dict[str, dict[str, float]] = {label: {} for label, _, _ in runs}
    for _ in range(args.rounds):
        for label, tree, reference in runs:
            for key, t in _run(tree, reference, args).items():
                best[label][key] = min(best[label].get(key, t), t)
    print(f"load average: {os.getloadavg()}  rounds: {args.rounds}  best of {args.repeat} calls each")
    header = f"{'layer':44s} {'before ms':>10s} {'after ms':>9s} {'ratio':>6s}"
    print(header + (f" {'reference ms':>13s}" if args.after_reference else ""))
    for key, before in best["before"].items():
        after = best["after"][key]
        row = f"{key:44s} {before * 1e3:10.3f} {after * 1e3:9.3f} {after / before:6.2f}"
        if args.after_reference and key in best["reference"]:
            row += f" {best['reference'][key] * 1e3:13.3f}"
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
