"""Structure-aware fuzzing of the container readers: zip headers, HDF5 structure, directory members.

Each case starts from a sample Keras wrote (``samples/k3/cnn.keras``, ``samples/k3/cnn_dir``,
``samples/k2/cnn.h5``), applies one or more mutations chosen by a seeded ``random.Random``, and runs
``inspect``, ``validate``, ``render --format dot`` and ``run --random`` on it in this process. Every
command must end with a documented exit code (never 70, never a traceback) within ``TIME_LIMIT``
seconds; the peak resident memory a case adds must stay under ``MEMORY_LIMIT``.

In the suite: ``tests/test_fuzz_readers.py`` runs 16 cases (``MODELGRAPH_FUZZ_CASES``
raises the count). A long run: ``python tests/_fuzz_readers.py --cases 3000 [--seed 0]`` prints the
exit codes seen per mutation family and the slowest case.
"""

from __future__ import annotations

import contextlib
import os
import random
import resource
import shutil
import signal
import struct
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
KERAS_ZIP = REPO / "samples" / "k3" / "cnn.keras"
KERAS_DIR = REPO / "samples" / "k3" / "cnn_dir"
LEGACY_H5 = REPO / "samples" / "k2" / "cnn.h5"
DOCUMENTED = {0, 1, 2, 3, 4, 5}
TIME_LIMIT = 20
MEMORY_LIMIT = 1024 * 1024 * 1024
COMMANDS = (["inspect"], ["validate"], ["render", "--format", "dot"], ["run", "--random"])


# --- zip headers ------------------------------------------------------------------------------------


def _zip_layout(data: bytes) -> tuple[list[int], list[int]]:
    """Offsets of the local headers and of the central-directory entries."""
    locals_, centrals = [], []
    at = data.find(b"PK\x03\x04")
    while at >= 0:
        locals_.append(at)
        at = data.find(b"PK\x03\x04", at + 4)
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        centrals.append(at)
        at = data.find(b"PK\x01\x02", at + 4)
    return locals_, centrals


def mutate_zip(rng: random.Random, work: Path) -> str:
    data = bytearray(KERAS_ZIP.read_bytes())
    locals_, centrals = _zip_layout(bytes(data))
    kind = rng.choice(
        ["local_field", "central_field", "local_name", "sizes", "method", "mode", "data", "truncate", "eocd"]
    )
    if kind == "local_field":
        at = rng.choice(locals_) + rng.randrange(4, 30)
        data[at] = rng.randrange(256)
    elif kind == "central_field":
        at = rng.choice(centrals) + rng.randrange(4, 46)
        data[at] = rng.randrange(256)
    elif kind == "local_name":
        at = rng.choice(locals_) + 30
        data[at] = rng.choice(b"X./\\\x00")
    elif kind == "sizes":
        at = rng.choice(centrals) + rng.choice([20, 24])  # compressed / uncompressed size
        struct.pack_into("<I", data, at, rng.choice([0, 1, 0xFFFFFFFF, rng.randrange(1 << 32)]))
    elif kind == "method":
        at = rng.choice(centrals + locals_)
        field = 10 if data[at + 2] == 1 else 8  # central entry: method at 10; local header: at 8
        struct.pack_into("<H", data, at + field, rng.choice([8, 12, 14, 93, 99]))
    elif kind == "mode":
        at = rng.choice(centrals) + 38  # external attributes: unix mode in the high 16 bits
        mode = rng.choice([0o120777, 0o010644, 0o020644, 0o040755, 0o140644])
        struct.pack_into("<I", data, at, mode << 16)
    elif kind == "data":
        for _ in range(rng.randrange(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif kind == "truncate":
        del data[rng.randrange(len(data)) :]
    else:
        at = bytes(data).rfind(b"PK\x05\x06") + rng.randrange(4, 22)
        data[at] = rng.randrange(256)
    path = work / "model.keras"
    path.write_bytes(bytes(data))
    return f"zip:{kind}"


# --- HDF5 structure ---------------------------------------------------------------------------------


def _h5_edit(rng: random.Random, f: Any) -> str:
    import h5py
    import numpy as np

    datasets: list[str] = []
    groups: list[str] = []
    f.visititems(lambda n, o: (datasets if isinstance(o, h5py.Dataset) else groups).append(n))
    kind = rng.choice(
        ["soft", "external", "hard_cycle", "nested", "hard_links", "attr", "dtype", "bomb", "delete", "names"]
    )
    target = rng.choice(groups or ["/"])
    if kind == "soft":
        f[f"{target}/soft"] = h5py.SoftLink(rng.choice(["/", "/nowhere", f"/{target}", f"/{target}/soft"]))
    elif kind == "external":
        f[f"{target}/ext"] = h5py.ExternalLink(rng.choice(["/etc/passwd", "other.h5"]), "/x")
    elif kind == "hard_cycle":
        f[f"{target}/up"] = f["/"]
    elif kind == "nested":
        group = f.require_group(target)
        for _ in range(rng.choice([10, 70, 300])):
            group = group.create_group("g")
    elif kind == "hard_links":
        if datasets:
            links = f.require_group("links")
            source = f[rng.choice(datasets)]
            for i in range(rng.choice([10, 1000, 5000])):
                links[f"l{i}"] = source
    elif kind == "attr":
        obj = f[rng.choice(groups or ["/"])] if groups else f
        value = rng.choice(
            [
                np.zeros(3, dtype=[("a", "i4"), ("b", "f8")]),
                "x" * rng.choice([10, 60_000]),
                np.array([b"a"] * 10),
                np.float64("nan"),
            ]
        )
        obj.attrs[rng.choice(["weight_names", "layer_names", "model_config", "keras_version", "dtype"])] = (
            value
        )
    elif kind in ("dtype", "bomb", "delete") and datasets:
        name = rng.choice(datasets)
        shape = f[name].shape
        del f[name]
        if kind == "dtype":
            dtype = rng.choice(["c8", "S4", "?", "i8", "f2", "V2", [("a", "i4")], "u1"])
            f.create_dataset(name, shape=shape, dtype=dtype)
        elif kind == "bomb":
            f.create_dataset(name, shape=(rng.choice([10**6, 10**8, 10**9]),), dtype="f4")
    elif kind == "names" and "model_weights" in f:
        names = list(f["model_weights"].attrs.get("layer_names", []))
        if names:
            f["model_weights"].attrs["layer_names"] = np.array([*names, rng.choice(names)], dtype="S")
    return kind


def mutate_h5(rng: random.Random, work: Path) -> str:
    import h5py

    if rng.random() < 0.5:
        path = work / "model.h5"
        shutil.copy(LEGACY_H5, path)
    else:
        model = work / "model"
        shutil.copytree(KERAS_DIR, model)
        path = model / "model.weights.h5"
    with h5py.File(path, "r+") as f:
        kind = _h5_edit(rng, f)
    if rng.random() < 0.2:  # and a few raw bytes
        data = bytearray(path.read_bytes())
        for _ in range(rng.randrange(1, 6)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        path.write_bytes(bytes(data))
        kind += "+bytes"
    return f"h5:{kind}"


# --- directory members ------------------------------------------------------------------------------


def mutate_dir(rng: random.Random, work: Path) -> str:
    model = work / "model"
    shutil.copytree(KERAS_DIR, model)
    member = model / rng.choice(["config.json", "metadata.json", "model.weights.h5"])
    kind = rng.choice(["symlink_out", "symlink_in", "dangling", "fifo", "directory", "empty", "asset_link"])
    if kind != "asset_link":
        member.unlink()
    if kind == "symlink_out":
        outside = work / "outside"
        outside.write_bytes(b"root:x:0:0:root:/root:/bin/bash\n")
        os.symlink(outside, member)
    elif kind == "symlink_in":
        os.symlink(".", member)
    elif kind == "dangling":
        os.symlink(work / "missing", member)
    elif kind == "fifo":
        os.mkfifo(member)
    elif kind == "directory":
        member.mkdir()
    elif kind == "empty":
        member.write_bytes(b"")
    else:
        (model / "assets").mkdir()
        os.symlink("/etc", model / "assets" / "etc")
    return f"dir:{kind}"


MUTATORS: list[Callable[[random.Random, Path], str]] = [mutate_zip, mutate_h5, mutate_dir]


# --- running a case ---------------------------------------------------------------------------------


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    def on_alarm(signum: int, frame: Any) -> None:
        raise TimeoutError(f"took longer than {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


_BASELINE = [0]  # resident memory when the current case started, where /proc can say it


def reset_peak_memory() -> None:
    """Start a new peak-memory window for this process (Linux: writing 5 to ``clear_refs`` resets
    ``VmHWM`` to the current resident size), so a case is measured alone and not against earlier
    tests in the same process; the resident size at that moment is kept as the case's baseline."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")
        _BASELINE[0] = peak_memory()


def case_memory() -> int:
    """Bytes the current case added on top of what the process held when it started (its peak)."""
    return peak_memory() - _BASELINE[0]


def peak_memory() -> int:
    """Peak resident memory of this process since the last reset, in bytes (``VmHWM``; the
    process's lifetime peak where ``/proc`` is missing)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_case(seed: int, work: Path) -> tuple[str, list[tuple[str, int, float, str]]]:
    """Mutate a sample (seeded) in ``work`` and run every command: ``(family, [(command, exit code,
    seconds, message if the code is not documented)])``."""
    from click.testing import CliRunner

    from modelgraph.cli.main import cli

    reset_peak_memory()
    rng = random.Random(seed)
    family = rng.choice(MUTATORS)(rng, work)
    target = next(p for p in (work / "model", work / "model.keras", work / "model.h5") if os.path.lexists(p))
    outcomes = []
    for command in COMMANDS:
        started = time.perf_counter()
        with time_limit(TIME_LIMIT):
            result = CliRunner().invoke(cli, [command[0], str(target), *command[1:]])
        seconds = time.perf_counter() - started
        text = (result.output or "") + (str(result.exception) if result.exception else "")
        bad = result.exit_code not in DOCUMENTED or "internal error" in text or "Traceback" in text
        outcomes.append((command[0], result.exit_code, seconds, text[-400:] if bad else ""))
    return family, outcomes


def main(argv: list[str]) -> int:
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    codes: dict[str, Counter] = {}
    failures: list[str] = []
    slowest = (0.0, "")
    started = time.perf_counter()
    for seed in range(args.seed, args.seed + args.cases):
        with tempfile.TemporaryDirectory() as tmp:
            family, outcomes = run_case(seed, Path(tmp))
        for command, code, seconds, bad in outcomes:
            codes.setdefault(family.split("+")[0], Counter())[f"{command}={code}"] += 1
            if seconds > slowest[0]:
                slowest = (seconds, f"seed {seed} {family} {command}")
            if bad:
                failures.append(f"seed {seed} {family} {command} exit {code}: {bad}")
    print(
        f"{args.cases} cases in {time.perf_counter() - started:.0f} s; peak memory {peak_memory() / 2**20:.0f} MiB"
    )
    print(f"slowest command: {slowest[0]:.2f} s ({slowest[1]})")
    for family in sorted(codes):
        print(f"  {family}: " + ", ".join(f"{k} x{v}" for k, v in sorted(codes[family].items())))
    print(f"{len(failures)} failure(s)")
    for line in failures[:50]:
        print("  " + line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main(sys.argv[1:]))
