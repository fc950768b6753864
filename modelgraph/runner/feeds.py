"""Model inputs: reading them from ``.npy``/``.npz`` files, or drawing random ones.

Files are read with ``allow_pickle=False`` always; ``.npy`` files are memory-mapped so a large input
is read one batch at a time. An ``.npz`` is keyed by input layer name; the goldens' ``input/<name>``
keys are accepted too (their other keys are ignored).
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from modelgraph import catalogue
from modelgraph.errors import FormatError, UsageError
from modelgraph.graph import ModelGraph, TensorRef
from modelgraph.graph_walk import GraphWalker, Visit
from modelgraph.runner.interpreter import InputSpec
from modelgraph.safe_io import check_allocation

GOLDEN_INPUT_PREFIX = "input/"
# Largest random input drawn (bytes of its float64 / int64 draw): a file may declare any shape, and
# --random is for smoke runs; a larger one is a usage error pointing to --input.
RANDOM_INPUT_MAX_BYTES = 1 << 31


_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")


def _head(path: Path) -> bytes:
    try:
        with path.open("rb") as fh:
            return fh.read(8)
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from exc


def _not_numpy(path: Path, head: bytes, what: str) -> UsageError:
    """The error for a file that is not the NumPy file its name says (empty, or some other format)."""
    if not head:
        return UsageError(f"{path}: the file is empty, not {what}")
    return UsageError(f"{path}: not {what} (it starts with {head[:8]!r})")


def read_npy(path: Path) -> np.ndarray:
    """The array of a ``.npy`` (no pickles), memory-mapped."""
    head = _head(path)
    if not head.startswith(_NPY_MAGIC):
        raise _not_numpy(path, head, "a .npy array file")
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as exc:
        raise UsageError(f"{path}: cannot read as .npy without pickle: {exc}") from exc
    except (OSError, EOFError) as exc:
        raise UsageError(f"{path}: truncated or unreadable .npy file: {exc}") from exc


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` (no pickles), keyed as stored."""
    head = _head(path)
    if head.startswith(_NPY_MAGIC):
        raise UsageError(f"{path}: holds a single .npy array, not an .npz of named arrays")
    if not head.startswith(_ZIP_MAGIC):
        raise _not_numpy(path, head, "an .npz archive (a zip of .npy arrays)")
    try:
        data = np.load(path, allow_pickle=False)
        if isinstance(data, np.ndarray):
            raise UsageError(f"{path}: holds a single .npy array, not an .npz of named arrays")
        with data:
            return {k: data[k] for k in data.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise UsageError(f"{path}: cannot read as .npz without pickle: {exc}") from exc


def read_input_file(
    path: Path, input_names: list[str], ignored: list[str] | None = None
) -> dict[str, np.ndarray]:
    """One ``--input FILE``: an ``.npz`` by input name or a ``.npy`` for a single-input model.

    An ``.npz`` that also holds other arrays (outputs, taps: the same file as ``--expect``) feeds the
    inputs it names; the keys of the others are appended to ``ignored``."""
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
        kept = {
            k[len(GOLDEN_INPUT_PREFIX) :]: v for k, v in arrays.items() if k.startswith(GOLDEN_INPUT_PREFIX)
        }
        others = [k for k in arrays if not k.startswith(GOLDEN_INPUT_PREFIX)]
    elif any(k in input_names for k in arrays):
        kept = {k: v for k, v in arrays.items() if k in input_names}
        others = [k for k in arrays if k not in input_names]
    else:
        return arrays  # the caller names the keys that are not inputs
    if ignored is not None:
        ignored.extend(sorted(others))
    return kept


def parse_input_options(
    values: Iterable[str], input_names: list[str], ignored: list[str] | None = None
) -> dict[str, np.ndarray]:
    """All ``--input FILE`` / ``--input NAME=FILE`` options merged; unknown names are usage errors.

    Keys of a combined inputs+outputs ``.npz`` that are not inputs are appended to ``ignored``."""
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
        for key, arr in read_input_file(Path(value), input_names, ignored).items():
            if key not in input_names:
                raise UsageError(
                    f"unknown input {key!r}; model inputs are {input_names} (in {Path(value).name})"
                )
            feeds[key] = arr
    return feeds


def _id_size(key: str, config: Mapping[str, Any]) -> int | None:
    """The ids a layer's input takes are in ``[0, n)``: n from its entry's ``id_range`` (an
    Embedding's ``input_dim``), or from the layer a wrapper holds (TimeDistributed(Embedding)); None
    for any other layer. Wrappers are followed without recursion: a config may nest them deeply."""
    sizes: list[int] = []
    todo: list[tuple[str, Mapping[str, Any]]] = [(key, config)]
    while todo:
        name, cfg = todo.pop()
        spec = catalogue.spec_for(name)
        if spec is None:
            continue
        if spec.id_range is not None:
            size = spec.id_range(cfg)
            if size is not None:
                sizes.append(size)
            continue
        for wrapped in spec.wrapped_keys:
            inner = cfg.get(wrapped)
            if isinstance(inner, Mapping) and isinstance(inner.get("config"), Mapping):
                todo.append((str(inner.get("class_name")), inner["config"]))
    return min(sizes) if sizes else None


class _IdWalk(GraphWalker["str | None"]):
    """The graph walk's client that follows each model input's values: a tensor's value is the name
    of the model input whose values it holds unchanged (through layers whose entry ``keeps_values``:
    reshapes, casts, Masking; into and out of nested models), else None. An Embedding reached by
    one gives that input its ``input_dim`` as a limit."""

    def __init__(self) -> None:
        self.limits: dict[str, int] = {}

    def run_node(self, visit: Visit, env: dict[TensorRef, str | None], masks: Any) -> None:
        layer, node = visit.layer, visit.node
        held = [env.get(r) for r in node.inputs]
        size = _id_size(layer.key, layer.config) if layer.kind == "layer" else None
        if size is not None:
            for name in held:
                if name is not None:
                    self.limits[name] = min(self.limits.get(name, size), size)
        spec = catalogue.spec_for(layer.key)
        keeps = size is None and bool(held) and spec is not None and spec.keeps_values
        for t in visit.scope.referenced_outputs(node):
            env[TensorRef(layer.name, node.index, t)] = held[0] if keeps and t == 0 else None

    def missing_inputs(self, visit: Visit, missing: Sequence[TensorRef]) -> bool:
        return True  # what nothing computes holds no model input's values


def _embedding_limits(graph: ModelGraph) -> dict[str, int]:
    """For each model input whose values reach an Embedding as ids: the smallest ``input_dim``.

    The ids are followed through nested models, TimeDistributed(Embedding), and layers that keep
    values (reshapes, Masking, casts), so random ids stay in range."""
    walk = _IdWalk()
    walk.walk(graph, {ref: ref.layer for ref in graph.inputs})
    return walk.limits


def parse_shape_options(values: Iterable[str], input_names: list[str]) -> dict[str, tuple[int, ...]]:
    """``--shape NAME=D1xD2...`` (or ``D1xD2...`` for a single-input model): the dimensions after
    the batch of a random input, for inputs whose declared shape leaves some unknown."""
    shapes: dict[str, tuple[int, ...]] = {}
    for value in values:
        name, sep, dims = value.rpartition("=")
        if not sep:
            if len(input_names) != 1:
                raise UsageError(
                    f"--shape {value!r}: name the input (NAME=D1xD2...); model inputs are {input_names}"
                )
            name = input_names[0]
        if name not in input_names:
            raise UsageError(f"--shape: unknown input {name!r}; model inputs are {input_names}")
        parts = dims.lower().split("x") if dims else []
        if not parts or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise UsageError(f"--shape {value!r}: give positive sizes after the batch, as NAME=10040x4")
        shapes[name] = tuple(int(p) for p in parts)
    return shapes


def _fill_shape(spec: InputSpec, given: tuple[int, ...] | None, batch: int) -> list[int]:
    assert spec.shape is not None
    shape = list(spec.shape)
    if shape and shape[0] is None:
        shape[0] = batch
    if given is not None:
        declared = tuple(spec.shape[1:])
        if len(given) != len(declared) or any(
            d is not None and d != g for d, g in zip(declared, given, strict=True)
        ):
            raise UsageError(
                f"--shape for input '{spec.name}' is {'x'.join(map(str, given))}, which does not fit its "
                f"declared shape {tuple(spec.shape)} (give the sizes after the batch)"
            )
        shape[1:] = list(given)
    return shape


def random_feeds(
    inputs: list[InputSpec],
    graph: ModelGraph,
    *,
    seed: int = 0,
    batch: int = 1,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> dict[str, np.ndarray]:
    """Random inputs of the declared shapes and dtypes: normal floats, small ints, and ids in
    ``[0, input_dim)`` for inputs that reach an Embedding (whatever their dtype). ``shapes`` gives
    the sizes after the batch where the declared shape leaves them unknown."""
    rng = np.random.default_rng(seed)
    limits = _embedding_limits(graph)
    feeds: dict[str, np.ndarray] = {}
    for spec in inputs:
        if spec.shape is None:
            raise UsageError(f"input '{spec.name}' has no declared shape; give it with --input")
        shape = _fill_shape(spec, (shapes or {}).get(spec.name), batch)
        unknown = [i for i, d in enumerate(shape) if d is None]
        if unknown:
            raise UsageError(
                f"input '{spec.name}' has shape {tuple(spec.shape)} with unknown dimensions; give its sizes "
                f"with --shape {spec.name}=D1xD2... or the input with --input"
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
        if spec.name in limits and kind in "iuf":
            feeds[spec.name] = rng.integers(0, limits[spec.name], size=shape).astype(dtype)
        elif kind == "f":
            feeds[spec.name] = rng.standard_normal(shape).astype(dtype)
        elif kind == "b":
            feeds[spec.name] = rng.random(shape) < 0.5
        elif kind in "iu":
            feeds[spec.name] = rng.integers(0, 10, size=shape).astype(dtype)
        else:
            raise UsageError(f"input '{spec.name}' has dtype {spec.dtype}; cannot draw random values")
    return feeds


def batch_of(feeds: Mapping[str, Any]) -> int:
    """The leading dimension shared by the inputs (0 when there are none)."""
    sizes = {np.shape(v)[0] for v in feeds.values() if np.ndim(v)}
    return max(sizes) if sizes else 0
