"""Streaming runs: inputs read a batch at a time, outputs written as they come, a killed run resumed.

:func:`stream_run` feeds a :class:`~modelgraph.runner.interpreter.Runner` (any backend) ``batch_size``
samples at a time from :mod:`modelgraph.runner.sources` and hands each batch's outputs to a sink:

* :class:`FolderSink` writes every output to ``FOLDER/<output>.npy``. The file is created with its
  full shape when the first batch's outputs are known (``np.lib.format.open_memmap`` writes the
  header and sizes the file), then each batch is written at its place with a positioned write
  (written pages go to the page cache, not the process's resident set). After each batch
  ``FOLDER/stream.json`` (the manifest) records how many samples are done, replaced atomically, so
  a run killed at any point leaves every sample up to the recorded count written. Resuming checks
  that the model, the inputs (paths, sizes, modification times, shapes) and the output files are
  the ones recorded, and starts after the last recorded batch.
* :class:`MemorySink` gathers the outputs in memory (the input still streams).

The memory a run holds is one batch of inputs, the model's activations for it, one batch of
outputs, and running summaries (min/max/mean, NaN/Inf counts), whatever the number of samples.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from modelgraph.errors import RunError, UsageError
from modelgraph.runner.sources import Source, read_npy_header

MANIFEST = "stream.json"
MANIFEST_VERSION = 1


@dataclass
class Summary:
    """Running shape, dtype, min/max/mean over the finite values and NaN/Inf counts of one tensor."""

    name: str
    shape: tuple[int, ...] = ()
    dtype: str = ""
    count: int = 0
    total: float = 0.0
    min: float | None = None
    max: float | None = None
    nan: int = 0
    inf: int = 0
    complete: bool = True  # False: some samples were not seen (a resumed run's inputs)

    def add(self, a: np.ndarray) -> None:
        """Fold one batch in."""
        if not a.size or a.dtype.kind not in "fiub":
            return
        f = a.astype(np.float64, copy=False)
        finite = np.isfinite(f)
        self.nan += int(np.isnan(f).sum())
        self.inf += int(np.isinf(f).sum())
        v = f[finite] if not finite.all() else f
        if v.size:
            lo, hi = float(v.min()), float(v.max())
            self.min = lo if self.min is None else min(self.min, lo)
            self.max = hi if self.max is None else max(self.max, hi)
            self.total += float(v.sum())
            self.count += int(v.size)

    @property
    def mean(self) -> float | None:
        """The mean of the finite values seen (None if there were none)."""
        return self.total / self.count if self.count else None


@dataclass
class StreamResult:
    """What a streaming run did."""

    samples: int
    batch_size: int
    resumed_from: int
    inputs: list[Summary]
    outputs: list[Summary]
    results: dict[str, np.ndarray] = field(default_factory=dict)  # MemorySink's outputs
    folder: str | None = None


def bind_sources(sources: Mapping[str, Source], input_names: list[str]) -> list[Source]:
    """The sources in model input order; every input fed, none unknown, all of one sample count."""
    unknown = [k for k in sources if k not in input_names]
    if unknown:
        raise UsageError(f"unknown input {unknown[0]!r}; model inputs are {input_names}")
    missing = [n for n in input_names if n not in sources]
    if missing:
        raise UsageError(f"missing input {missing[0]!r}; model inputs are {input_names}")
    ordered = [sources[n] for n in input_names]
    counts = {len(s) for s in ordered}
    if len(counts) > 1:
        shown = ", ".join(f"{n}: {len(s)}" for n, s in zip(input_names, ordered, strict=True))
        raise UsageError(f"the inputs hold different numbers of samples ({shown})")
    return ordered


class MemorySink:
    """Outputs gathered in memory, concatenated at the end."""

    folder: str | None = None

    def __init__(self) -> None:
        self._parts: dict[str, list[np.ndarray]] = {}

    def start(self, total: int, identity: dict[str, Any]) -> int:
        """Samples already done (always 0: nothing is kept between runs)."""
        return 0

    def write(self, start: int, stop: int, outputs: Mapping[str, np.ndarray]) -> None:
        """Keep one batch's outputs."""
        for key, value in outputs.items():
            self._parts.setdefault(key, []).append(np.asarray(value))

    def results(self) -> dict[str, np.ndarray]:
        """The outputs of every batch, concatenated."""
        return {k: np.concatenate(v, axis=0) for k, v in self._parts.items()}

    def written(self, key: str, start: int, stop: int) -> np.ndarray:  # pragma: no cover - never resumed
        raise NotImplementedError


def _file_name(key: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9_.-]", "_", key).strip(".") or "output"
    name, n = f"{base}.npy", 1
    while name in taken or name == MANIFEST:
        n += 1
        name = f"{base}_{n}.npy"
    taken.add(name)
    return name


class FolderSink:
    """Outputs written batch by batch to ``FOLDER/<output>.npy``, with a manifest for ``resume``."""

    def __init__(self, folder: Path, *, resume: bool = False) -> None:
        self.path = folder
        self.folder = str(folder)
        self.resume = resume
        self._manifest: dict[str, Any] = {}
        self._files: dict[str, tuple[int, int, int]] = {}  # key -> (fd, data offset, bytes per sample)

    # -- manifest -------------------------------------------------------------------------------------

    def _write_manifest(self) -> None:
        tmp = self.path / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(self._manifest, indent=1))
        os.replace(tmp, self.path / MANIFEST)

    def _read_manifest(self) -> dict[str, Any] | None:
        path = self.path / MANIFEST
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise UsageError(f"{path}: unreadable manifest of an earlier run: {exc}") from exc
        if not isinstance(data, dict) or data.get("version") != MANIFEST_VERSION:
            raise UsageError(f"{path}: not a manifest this version of modelgraph wrote")
        return data

    def start(self, total: int, identity: dict[str, Any]) -> int:
        """Prepare the folder; the samples already written by the run being resumed (else 0)."""
        if self.path.exists() and not self.path.is_dir():
            raise UsageError(f"{self.path}: exists and is not a folder (outputs go to FOLDER/<output>.npy)")
        self.path.mkdir(parents=True, exist_ok=True)
        old = self._read_manifest()
        if old is not None and old.get("done") == 0:
            old = None  # an earlier run that wrote nothing: start afresh
        elif old is None and any(self.path.iterdir()):
            raise UsageError(f"{self.path}: the folder is not empty; give an empty or new folder")
        if old is not None and not self.resume:
            raise UsageError(
                f"{self.path} holds the outputs of an earlier run ({MANIFEST}); add --resume to continue "
                "it, or give an empty folder"
            )
        self._manifest = {"version": MANIFEST_VERSION, "total": total, "done": 0, **identity, "outputs": {}}
        if old is None:
            self._write_manifest()
            return 0
        for key in ("total", "model", "inputs"):
            if old.get(key) != self._manifest[key]:
                raise UsageError(
                    f"{self.path / MANIFEST}: the earlier run had another {key} "
                    f"({old.get(key)!r} there, {self._manifest[key]!r} now); cannot resume it"
                )
        done = old.get("done")
        if not isinstance(done, int) or not 0 <= done <= total:
            raise UsageError(f"{self.path / MANIFEST}: bad sample count {done!r}")
        self._manifest = old
        outputs = old.get("outputs")
        if not isinstance(outputs, dict):
            raise UsageError(f"{self.path / MANIFEST}: bad outputs entry")
        for key, entry in outputs.items():
            try:
                self._open(key, entry, create=False)
            except (KeyError, TypeError, ValueError) as exc:
                raise UsageError(f"{self.path / MANIFEST}: bad entry for output {key!r}: {exc}") from exc
        return done

    # -- output files ----------------------------------------------------------------------------------

    def _open(self, key: str, entry: dict[str, Any], *, create: bool) -> None:
        if not isinstance(entry["file"], str) or not isinstance(entry["shape"], list):
            raise TypeError("file must be a name and shape a list")
        path = self.path / entry["file"]
        if os.sep in entry["file"] or entry["file"] in ("", ".", ".."):
            raise UsageError(f"{self.path / MANIFEST}: bad output file name {entry['file']!r}")
        shape, dtype = tuple(int(d) for d in entry["shape"]), np.dtype(entry["dtype"])
        if dtype.hasobject or any(d < 0 for d in shape):
            raise ValueError(f"output {shape} {dtype} cannot be a streamed output")
        if create:
            created = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=shape)
            del created  # unmapped: the header is written and the file sized (sparse until written)
        try:
            with path.open("rb") as fh:
                have_shape, have_dtype = read_npy_header(fh, str(path))
                offset = fh.tell()
        except OSError as exc:
            raise UsageError(f"{path}: cannot reopen the output of the earlier run: {exc}") from exc
        if have_shape != shape or have_dtype != dtype:
            raise UsageError(f"{path}: is not the {shape} {dtype} output the manifest records")
        sample = math.prod(shape[1:]) * dtype.itemsize
        if path.stat().st_size < offset + shape[0] * sample:
            raise UsageError(f"{path}: shorter than its header says (truncated?)")
        self._files[key] = (os.open(path, os.O_WRONLY), offset, sample)

    def write(self, start: int, stop: int, outputs: Mapping[str, np.ndarray]) -> None:
        """Write one batch's outputs at their place, then record them as done."""
        entries = self._manifest["outputs"]
        if not entries:
            taken: set[str] = set()
            for key, value in outputs.items():
                a = np.asarray(value)
                entries[key] = {
                    "file": _file_name(key, taken),
                    "shape": [self._manifest["total"], *a.shape[1:]],
                    "dtype": a.dtype.str,
                }
                self._open(key, entries[key], create=True)
        for key, value in outputs.items():
            entry = entries.get(key)
            a = np.ascontiguousarray(value)
            if entry is None or list(a.shape[1:]) != entry["shape"][1:] or a.dtype.str != entry["dtype"]:
                want = "no such output" if entry is None else f"{entry['shape'][1:]} {entry['dtype']}"
                raise RunError(
                    f"output {key!r} of samples {start}..{stop} is {list(a.shape[1:])} {a.dtype.str}, "
                    f"but earlier batches gave {want}: its size cannot change between batches"
                )
            fd, offset, sample = self._files[key]
            view, done = memoryview(a.reshape(-1).view(np.uint8)), 0
            while done < len(view):
                done += os.pwrite(fd, view[done:], offset + start * sample + done)
        self._manifest["done"] = stop
        self._write_manifest()

    def written(self, key: str, start: int, stop: int) -> np.ndarray:
        """Samples ``[start, stop)`` of an output file as written (to summarise a resumed run)."""
        entry = self._manifest["outputs"][key]
        shape, dtype = entry["shape"], np.dtype(entry["dtype"])
        _, offset, sample = self._files[key]
        with (self.path / entry["file"]).open("rb") as fh:
            fh.seek(offset + start * sample)
            data = fh.read((stop - start) * sample)
        return np.frombuffer(data, dtype=dtype).reshape(stop - start, *shape[1:])

    def close(self) -> None:
        """Close the output files."""
        for fd, _, _ in self._files.values():
            os.close(fd)
        self._files.clear()


def stream_run(
    runner: Any,
    sources: list[Source],
    batch_size: int,
    sink: FolderSink | MemorySink,
    *,
    model: str = "",
    progress: Callable[[int, int], None] | None = None,
) -> StreamResult:
    """Run ``runner`` over ``sources`` (in model input order) ``batch_size`` samples at a time,
    handing each batch's outputs to ``sink``; resumes where a :class:`FolderSink` says an earlier run
    stopped. ``progress(done, total)`` is called after every batch (and once before the first)."""
    if batch_size < 1:
        raise UsageError(f"the batch size must be at least 1, got {batch_size}")
    total = len(sources[0]) if sources else 0
    if total == 0:
        raise UsageError("the inputs hold no samples")
    runner.check_batching(total, batch_size)
    runner.check_inputs([s.shape for s in sources], [s.dtype for s in sources])
    identity = {
        "model": model,
        "inputs": [
            {"name": n, "shape": list(s.shape), "dtype": s.dtype.str, "files": s.identity()}
            for n, s in zip(runner.input_names, sources, strict=True)
        ],
    }
    resumed = sink.start(total, identity)
    inputs = [
        Summary(n, tuple(s.shape), str(s.dtype), complete=resumed == 0)
        for n, s in zip(runner.input_names, sources, strict=True)
    ]
    outputs = {k: Summary(k) for k in runner.output_keys}
    for start in range(0, resumed, batch_size):  # what the earlier run wrote
        stop = min(start + batch_size, resumed)
        for key, summary in outputs.items():
            summary.add(sink.written(key, start, stop))
    if progress is not None:
        progress(resumed, total)
    try:
        for start in range(resumed, total, batch_size):
            stop = min(start + batch_size, total)
            chunk = [s.read(start, stop) for s in sources]
            for summary, a in zip(inputs, chunk, strict=True):
                summary.add(a)
            result = runner.run(chunk)
            sink.write(start, stop, result)
            for key, summary in outputs.items():
                summary.add(np.asarray(result[key]))
            if progress is not None:
                progress(stop, total)
    finally:
        if isinstance(sink, FolderSink):
            sink.close()
    results = sink.results() if isinstance(sink, MemorySink) else {}
    entries = sink._manifest.get("outputs", {}) if isinstance(sink, FolderSink) else {}  # noqa: SLF001
    for key, summary in outputs.items():
        if key in results:
            summary.shape, summary.dtype = tuple(results[key].shape), str(results[key].dtype)
        elif key in entries:
            summary.shape, summary.dtype = tuple(entries[key]["shape"]), str(np.dtype(entries[key]["dtype"]))
    return StreamResult(total, batch_size, resumed, inputs, list(outputs.values()), results, sink.folder)
