"""Model inputs: reading them from ``.npy``/``.npz`` files, or drawing random ones.

Files are read with ``allow_pickle=False`` always; ``.npy`` files are memory-mapped so a large input
is read one batch at a time. An ``.npz`` is keyed by input layer name; the goldens' ``input/<name>``
keys are accepted too (their other keys are ignored).
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from modelgraph.errors import FormatError, UsageError
from modelgraph.graph import ModelGraph
from modelgraph.runner.interpreter import InputSpec
from modelgraph.safe_io import check_allocation

GOLDEN_INPUT_PREFIX = "input/"
# Largest random input drawn (bytes of its float64 / int64 draw): a file may declare any shape, and
# --random is for smoke runs; a larger one is a usage error pointing to --input.
RANDOM_INPUT_MAX_BYTES = 1 << 31


def read_npy(path: Path) -> np.ndarray:
    """The array of a ``.npy`` (no pickles), memory-mapped."""
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as exc:
        raise UsageError(f"{path}: cannot read as .npy without pickle: {exc}") from exc
    except OSError as exc:
        raise UsageError(f"{path}: {exc}") from exc


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` (no pickles), keyed as stored."""
    try:
        data = np.load(path, allow_pickle=False)
        if isinstance(data, np.ndarray):
            raise UsageError(f"{path}: holds a single .npy array, not an .npz of named arrays")
        with data:
            return {k: data[k] for k in data.files}
    except (ValueError, OSError, zipfile.BadZipFile) as exc:
        raise UsageError(f"{path}: cannot read as .npz without pickle: {exc}") from exc


def read_input_file(path: Path, input_names: list[str]) -> dict[str, np.ndarray]:
    """One ``--input FILE``: an ``.npz`` by input name or a ``.npy`` for a single-input model."""
    if not path.exists():
        raise UsageError(f"input file '{path}' does not exist")
    if path.suffix == ".npy":
        if len(input_names) != 1:
            raise UsageError(
                f"{path.name}: a .npy file feeds a single-input model; model inputs are {input_names}; "
                "use --input NAME=FILE.npy or an .npz keyed by input name"
            )
        return {input_names[0]: read_npy(path)}
    arrays = read_npz(path)
    if any(k.startswith(GOLDEN_INPUT_PREFIX) for k in arrays):
        arrays = {
            k[len(GOLDEN_INPUT_PREFIX) :]: v for k, v in arrays.items() if k.startswith(GOLDEN_INPUT_PREFIX)
        }
    return arrays


def parse_input_options(values: Iterable[str], input_names: list[str]) -> dict[str, np.ndarray]:
    """All ``--input FILE`` / ``--input NAME=FILE`` options merged; unknown names are usage errors."""
    feeds: dict[str, np.ndarray] = {}
    for value in values:
        name, sep, file = value.partition("=")
        if sep and name and not Path(value).exists():
            if name not in input_names:
                raise UsageError(f"unknown input {name!r}; model inputs are {input_names}")
            path = Path(file)
            if not path.exists():
                raise UsageError(f"input file '{path}' does not exist")
            if path.suffix == ".npz":
                arrays = read_npz(path)
                if name in arrays:
                    feeds[name] = arrays[name]
                elif len(arrays) == 1:
                    feeds[name] = next(iter(arrays.values()))
                else:
                    raise UsageError(f"{path.name} has {sorted(arrays)}; which one is input {name!r}?")
            else:
                feeds[name] = read_npy(path)
            continue
        for key, arr in read_input_file(Path(value), input_names).items():
            if key not in input_names:
                raise UsageError(
                    f"unknown input {key!r}; model inputs are {input_names} (in {Path(value).name})"
                )
            feeds[key] = arr
    return feeds


def _embedding_limits(graph: ModelGraph) -> dict[str, int]:
    """``input_dim`` of an Embedding fed directly by a model input (so random ids stay in range)."""
    limits: dict[str, int] = {}
    names = set(graph.input_names)
    for node in graph.nodes:
        layer = graph.layer(node.layer)
        if layer.class_name == "Embedding":
            size = layer.config.get("input_dim")
            if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
                continue  # unusable: the Embedding's kernel refuses it, not the draw
            for ref in node.inputs:
                if ref.layer in names:
                    limits[ref.layer] = min(limits.get(ref.layer, 1 << 30), size)
    return limits


def random_feeds(
    inputs: list[InputSpec], graph: ModelGraph, *, seed: int = 0, batch: int = 1
) -> dict[str, np.ndarray]:
    """Random inputs of the declared shapes and dtypes: normal floats, small ints, Embedding-safe ids."""
    rng = np.random.default_rng(seed)
    limits = _embedding_limits(graph)
    feeds: dict[str, np.ndarray] = {}
    for spec in inputs:
        if spec.shape is None:
            raise UsageError(f"input '{spec.name}' has no declared shape; give it with --input")
        shape = list(spec.shape)
        if shape and shape[0] is None:
            shape[0] = batch
        unknown = [i for i, d in enumerate(shape) if d is None]
        if unknown:
            raise UsageError(
                f"input '{spec.name}' has shape {tuple(spec.shape)} with unknown dimensions; give it with --input"
            )
        # The draw is made in 64 bits before the cast: refuse it before allocating anything.
        size = math.prod(shape) * 8
        if size > RANDOM_INPUT_MAX_BYTES:
            raise UsageError(
                f"input '{spec.name}' has shape {tuple(shape)}: a random draw would take {size / 2**30:.3g} GiB "
                f"(at most {RANDOM_INPUT_MAX_BYTES / 2**30:g} GiB); give it with --input"
            )
        try:
            check_allocation(size, f"a random draw for input '{spec.name}' of shape {tuple(shape)}")
        except FormatError as exc:
            raise UsageError(f"{exc}; give it with --input") from None
        dtype = "float32" if spec.dtype == "bfloat16" else spec.dtype
        try:
            kind = np.dtype(dtype).kind
        except TypeError:
            kind = "?"  # a dtype NumPy has no name for (e.g. Keras's "string"): refused below
        if kind == "f":
            feeds[spec.name] = rng.standard_normal(shape).astype(dtype)
        elif kind == "b":
            feeds[spec.name] = rng.random(shape) < 0.5
        elif kind in "iu":
            high = limits.get(spec.name, 10)
            feeds[spec.name] = rng.integers(0, high, size=shape).astype(dtype)
        else:
            raise UsageError(f"input '{spec.name}' has dtype {spec.dtype}; cannot draw random values")
    return feeds


def batch_of(feeds: Mapping[str, Any]) -> int:
    """The leading dimension shared by the inputs (0 when there are none)."""
    sizes = {np.shape(v)[0] for v in feeds.values() if np.ndim(v)}
    return max(sizes) if sizes else 0
