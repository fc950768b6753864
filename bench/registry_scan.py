"""Registry-scale ``validate``: a synthetic registry scanned with ``--jobs 2`` and on a 2-worker Dask cluster.

Makes (in /tmp by default) a registry of copies and variants of the small Keras-made samples
(``.json`` configs padded so each is distinct bytes, ``.h5``, ``.keras``, configs paired with their
weights files, TF.js folders) plus the hostile files of tests/validate/_hostile.py (Lambda bytecode,
zip bombs, HDF5 external links and cycles, a FIFO, ...) and a few non-model files, then runs the CLI:

1. ``validate REG --results R --jobs 2`` and ``--executor dask --workers 2`` at 2k and at N models:
   wall time, models/s, the client's peak RSS (VmHWM of the command's own process);
2. the Dask scan at N with one worker process SIGKILLed halfway: records per model must be exactly 1;
3. a ``--jobs 2`` scan whose client is SIGKILLed halfway, then ``--resume``: how many models the
   resumed run checks again that were already recorded (must be 0).

Prints ratios (Dask / --jobs throughput; RSS at N / RSS at 2k), because the machine may be shared.
Run: ``nice python bench/registry_scan.py [--models 20000] [--root /tmp/registry_bench]`` (the
modelgraph command and dask[distributed] installed in the same environment).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
K2 = ROOT / "samples" / "k2"
K3 = ROOT / "samples" / "k3"
TFJS = ROOT / "samples" / "tfjs"
sys.path.insert(0, str(ROOT / "tests" / "validate"))

JSONS = ["seq_noin", "single_bare", "seq_in", "seq_input_shape", "random_ids", "mha"]
H5S = ["seq_in", "seq_noin", "single_bare"]
KERAS = ["seq_in", "single_bare", "seq_noin"]
PAIRS = ["seq_in", "seq_noin"]
PER_FOLDER = 500


def hostile_files(folder: Path) -> int:
    """The hostile files of the test suite's builders; the number of models written."""
    import _hostile as H

    folder.mkdir(parents=True, exist_ok=True)
    code = H.lambda_code("lambda x: __import__('os').system('echo pwned') or x * 2")
    H.keras_zip(folder / "lambda.keras", H.functional([H.keras3_lambda("lam", code)]))
    H.declared_size_bomb(folder / "bomb.keras")
    H.lying_size_zip(folder / "lying.keras")
    H.duplicate_zip(folder / "duplicate.keras")
    H.symlink_zip(folder / "symlink.keras")
    H.many_members_zip(folder / "many.keras")
    H.external_link_h5(folder / "external_link.h5")
    H.soft_cycle_h5(folder / "soft_cycle.h5")
    H.hard_cycle_h5(folder / "hard_cycle.h5")
    H.virtual_dataset_h5(folder / "virtual.h5")
    H.shape_bomb_h5(folder / "shape_bomb.h5")
    (folder / "deep.json").write_text('{"class_name": "Functional", "config": ' + H.deep_json(50_000) + "}")
    (folder / "truncated.keras").write_bytes((K3 / "seq_in.keras").read_bytes()[:3000])
    (folder / "png.h5").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 100)
    os.mkfifo(folder / "fifo.h5")
    return 15


def make_registry(root: Path, models: int) -> int:
    """Write a registry of ``models`` models under ``root``; the number actually written."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    written = hostile_files(root / "hostile")
    jsons = {m: (K2 / f"{m}.json").read_text() for m in JSONS}
    i = 0
    while written < models:
        folder = root / f"part{i // PER_FOLDER:04d}"
        folder.mkdir(exist_ok=True)
        kind = i % 20
        if kind < 11:  # a to_json() config, made distinct by trailing whitespace
            m = JSONS[i % len(JSONS)]
            (folder / f"{m}_{i}.json").write_text(jsons[m] + " " * (i % 997) + "\n")
        elif kind < 14:
            m = H5S[i % len(H5S)]
            shutil.copy(K2 / f"{m}.h5", folder / f"{m}_{i}.h5")
        elif kind < 17:
            m = KERAS[i % len(KERAS)]
            shutil.copy(K3 / f"{m}.keras", folder / f"{m}_{i}.keras")
        elif kind < 19:  # a config beside its weights file: one model
            m = PAIRS[i % len(PAIRS)]
            shutil.copy(K2 / f"{m}.json", folder / f"{m}_{i}.json")
            shutil.copy(K2 / f"{m}_weights.h5", folder / f"{m}_{i}_weights.h5")
        elif i % 100 == 19:  # a TF.js folder: one model
            shutil.copytree(TFJS / "seq_in", folder / f"tfjs_{i}")
        else:
            m = JSONS[i % len(JSONS)]
            (folder / f"{m}_{i}.json").write_text(jsons[m] + "\n" * (i % 13))
        if i % 1000 == 0:
            (folder / f"README_{i}.md").write_text("not a model\n")
        written += 1
        i += 1
    return written


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


def _hwm_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


class _LineCounter:
    """Lines of a growing file, reading only what was appended since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.lines = 0

    def __call__(self) -> int:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return self.lines
        self.offset += len(data)
        self.lines += data.count(b"\n")
        return self.lines


def run_scan(
    reg: Path, results: Path, extra: list[str], *, kill_worker_at: int = 0, kill_client_at: int = 0
) -> dict:
    """One CLI scan; wall time, peak client RSS, what was killed."""
    cmd = [sys.executable, "-m", "modelgraph", "validate", str(reg), "--results", str(results), *extra]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    hwm = 0
    killed = ""
    count = _LineCounter(results)
    while proc.poll() is None:
        hwm = max(hwm, _hwm_kb(proc.pid) or 0)
        n = count() if (kill_worker_at or kill_client_at) and not killed else 0
        if kill_worker_at and not killed and n >= kill_worker_at:
            workers = [
                c
                for c in _children(proc.pid)
                if b"multiprocessing" in Path(f"/proc/{c}/cmdline").read_bytes()
            ]
            if workers:
                os.kill(workers[0], signal.SIGKILL)
                killed = f"worker {workers[0]} at {n} records"
        if kill_client_at and not killed and n >= kill_client_at:
            os.kill(proc.pid, signal.SIGKILL)  # the client only: its children see their pipes close
            killed = f"client at {n} records"
        time.sleep(0.2)
    out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
    wall = time.perf_counter() - t0
    summary = next((line for line in out.splitlines() if "model(s) checked" in line), "")
    return {
        "wall_s": round(wall, 1),
        "client_peak_rss_mb": round(hwm / 1024, 1),
        "killed": killed,
        "summary": summary,
    }


def check_records(results: Path) -> tuple[int, int]:
    """(records, distinct models) of a results file."""
    paths = [json.loads(line)["path"] for line in results.read_bytes().splitlines() if line.endswith(b"}")]
    return len(paths), len(set(paths))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=int, default=20_000)
    ap.add_argument("--small", type=int, default=2_000)
    ap.add_argument("--root", default="/tmp/registry_bench")
    ap.add_argument("--skip-big", action="store_true", help="only the small registry (a quick try)")
    args = ap.parse_args(argv)
    root = Path(args.root)
    root.mkdir(parents=True, exist_ok=True)
    report: dict = {"cpus": os.cpu_count(), "load_avg_start": os.getloadavg()}
    sizes = {"small": args.small} if args.skip_big else {"small": args.small, "big": args.models}
    regs = {}
    for name, n in sizes.items():
        t = time.perf_counter()
        regs[name] = (root / name, make_registry(root / name, n))
        print(f"registry {name}: {regs[name][1]} models in {time.perf_counter() - t:.0f} s", flush=True)
    runs: dict = {}
    for name, (reg, n) in regs.items():
        for label, extra in (("jobs2", ["--jobs", "2"]), ("dask2", ["--executor", "dask", "--workers", "2"])):
            results = root / f"{name}_{label}.jsonl"
            results.unlink(missing_ok=True)
            kill = (
                n // 2 if (label == "dask2" and name == "big") or (label == "dask2" and args.skip_big) else 0
            )
            r = run_scan(reg, results, extra, kill_worker_at=kill)
            r["models"] = n
            r["models_per_s"] = round(n / r["wall_s"], 1)
            r["records"], r["distinct"] = check_records(results)
            runs[f"{name}_{label}"] = r
            print(f"{name} {label}: {json.dumps(r)}", flush=True)
    # resume after killing the client halfway (small registry)
    reg, n = regs["small"]
    results = root / "resume.jsonl"
    results.unlink(missing_ok=True)
    first = run_scan(reg, results, ["--jobs", "2"], kill_client_at=n // 2)
    before = {json.loads(line)["path"] for line in results.read_bytes().splitlines() if line.endswith(b"}")}
    second = run_scan(reg, results, ["--jobs", "2", "--resume"])
    lines = [json.loads(line)["path"] for line in results.read_bytes().splitlines()]
    after = lines[len(before) :]
    runs["resume"] = {
        "killed": first["killed"],
        "recorded_before": len(before),
        "checked_on_resume": len(after),
        "rescanned_already_recorded": len(set(after) & before),
        "records": len(lines),
        "distinct": len(set(lines)),
        "models": n,
        "summary": second["summary"],
    }
    print(f"resume: {json.dumps(runs['resume'])}", flush=True)
    report["runs"] = runs
    report["load_avg_end"] = os.getloadavg()
    for name in regs:
        a, b = runs[f"{name}_jobs2"], runs[f"{name}_dask2"]
        report[f"{name}_dask_over_jobs2_throughput"] = round(b["models_per_s"] / a["models_per_s"], 3)
    if "big" in regs:
        for label in ("jobs2", "dask2"):
            report[f"rss_ratio_{label}_big_over_small"] = round(
                runs[f"big_{label}"]["client_peak_rss_mb"] / runs[f"small_{label}"]["client_peak_rss_mb"], 3
            )
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
