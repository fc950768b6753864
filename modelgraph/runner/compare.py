"""Polygraphy-style comparison of run results with reference arrays.

Per element ``|a - b| <= atol + rtol * |b|`` (``b`` is the reference). Per tensor: max/mean
absolute and relative error, how many elements fail, NaN/Inf counts on both sides, a short histogram
of the absolute errors. NaN matches NaN and an infinity matches the same infinity; anything else
involving a non-finite value is a mismatch.

Reference keys understood: the runner's output names, the goldens' ``output/<i>``, ``tap/<layer>``
(with ``:<node>[:<tensor>]``) and the goldens' ``intermediate/<layer>/<node>/<tensor>``; ``input/...``
keys are ignored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from modelgraph.errors import UsageError
from modelgraph.runner.feeds import GOLDEN_INPUT_PREFIX, read_npy, read_npz
from modelgraph.runner.interpreter import Runner, parse_tap_key

OutputId = tuple[str, int]  # ("output", index)
TapId = tuple[str, str, int, int]  # ("tap", path, node, tensor)


@dataclass
class TensorComparison:
    """How one actual tensor compares with its reference."""

    name: str
    kind: str  # "output" or "intermediate"
    shape: tuple[int, ...]
    ref_shape: tuple[int, ...]
    passed: bool
    max_abs: float = 0.0
    mean_abs: float = 0.0
    max_rel: float = 0.0
    mean_rel: float = 0.0
    mismatches: int = 0
    size: int = 0
    nan: int = 0
    inf: int = 0
    ref_nan: int = 0
    ref_inf: int = 0
    worst_index: tuple[int, ...] | None = None
    histogram: list[tuple[float, float, int]] = field(default_factory=list)
    note: str = ""


@dataclass
class Comparison:
    """All tensors compared; ``first_divergence`` is the first intermediate (plan order) that fails."""

    atol: float
    rtol: float
    tensors: list[TensorComparison]
    first_divergence: str | None = None
    missing: list[str] = field(default_factory=list)
    # Reference keys naming no output or layer (model inputs of a golden file aside), and the model
    # outputs the reference has no array for: reported, not failures.
    ignored: list[str] = field(default_factory=list)
    not_compared: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(t.passed for t in self.tensors) and not self.missing

    @property
    def outputs(self) -> list[TensorComparison]:
        return [t for t in self.tensors if t.kind == "output"]

    @property
    def intermediates(self) -> list[TensorComparison]:
        return [t for t in self.tensors if t.kind == "intermediate"]


def compare_arrays(
    name: str,
    actual: Any,
    expected: Any,
    *,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    kind: str = "output",
    bins: int = 6,
) -> TensorComparison:
    """Compare one array with its reference."""
    a = _numeric(np.asarray(actual))
    b = _numeric(np.asarray(expected))
    if a.shape != b.shape:
        return TensorComparison(name, kind, a.shape, b.shape, False, size=int(b.size), note="shape mismatch")
    if a.dtype.kind not in "fciub" or b.dtype.kind not in "fciub":
        same = bool(np.array_equal(a, b))
        return TensorComparison(
            name, kind, a.shape, b.shape, same, size=int(b.size), note="compared for equality"
        )
    a64 = a.astype(np.float64)
    b64 = b.astype(np.float64)
    nan_a, nan_b = np.isnan(a64), np.isnan(b64)
    inf_a, inf_b = np.isinf(a64), np.isinf(b64)
    finite = ~(nan_a | nan_b | inf_a | inf_b)
    special_ok = (nan_a & nan_b) | (inf_a & inf_b & (a64 == b64))
    diff = np.zeros(a64.shape)
    diff[finite] = np.abs(a64[finite] - b64[finite])
    ok = np.where(finite, diff <= atol + rtol * np.abs(b64), special_ok)
    mismatches = int(ok.size - np.count_nonzero(ok))
    result = TensorComparison(
        name,
        kind,
        a.shape,
        b.shape,
        mismatches == 0,
        mismatches=mismatches,
        size=int(b.size),
        nan=int(nan_a.sum()),
        inf=int(inf_a.sum()),
        ref_nan=int(nan_b.sum()),
        ref_inf=int(inf_b.sum()),
    )
    if finite.any():
        d = diff[finite]
        rel = d / np.maximum(np.abs(b64[finite]), np.finfo(np.float64).tiny)
        result.max_abs = float(d.max())
        result.mean_abs = float(d.mean())
        result.max_rel = float(rel.max())
        result.mean_rel = float(rel.mean())
        result.histogram = _histogram(d, bins)
    if mismatches:
        # Worst element: a failing non-finite one first, else the largest violation of the tolerance.
        excess = np.where(finite, diff - (atol + rtol * np.abs(b64)), np.inf)
        excess = np.where(ok, -np.inf, excess)
        result.worst_index = tuple(int(i) for i in np.unravel_index(int(np.argmax(excess)), a.shape))
    return result


def _numeric(x: np.ndarray) -> np.ndarray:
    """Raw 2-byte void arrays are bfloat16 (how h5py/NumPy keep them): widen to float32."""
    if x.dtype.kind == "V" and x.dtype.itemsize == 2:
        return (np.ascontiguousarray(x).view(np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)
    return x


def _histogram(d: np.ndarray, bins: int) -> list[tuple[float, float, int]]:
    lo, hi = float(d.min()), float(d.max())
    if hi <= lo:
        return [(lo, hi, int(d.size))]
    counts, edges = np.histogram(d, bins=bins, range=(lo, hi))
    return [(float(edges[i]), float(edges[i + 1]), int(counts[i])) for i in range(len(counts))]


def histogram_lines(t: TensorComparison, width: int = 30) -> list[str]:
    """A short text histogram of absolute errors."""
    if not t.histogram:
        return []
    peak = max(c for _, _, c in t.histogram) or 1
    lines = []
    for lo, hi, count in t.histogram:
        bar = "#" * max(1 if count else 0, round(width * count / peak))
        lines.append(f"  [{lo:.3e}, {hi:.3e}) {count:>9d} {bar}")
    return lines


def reference_id(
    key: str, output_keys: Sequence[str], aliases: Mapping[str, int] | None = None
) -> OutputId | TapId | None:
    """What a reference key names: a model output (by its key, an alias of it such as a nested
    model's config numbering, see ``Runner.output_aliases``, or ``output/<i>``), an intermediate,
    or nothing (None)."""
    if aliases and key in aliases:  # first: a config's numbering reuses names of the output keys
        return ("output", aliases[key])
    if key in output_keys:
        return ("output", list(output_keys).index(key))
    if key.startswith("output/") and key[len("output/") :].isdigit():
        return ("output", int(key[len("output/") :]))
    if key.startswith("tap/"):
        path, node, tensor = parse_tap_key(key)
        return ("tap", path, 0 if node is None else node, tensor)
    if key.startswith("intermediate/"):
        parts = key[len("intermediate/") :].split("/")
        if len(parts) >= 3 and parts[-1].isdigit() and parts[-2].isdigit():
            return ("tap", "/".join(parts[:-2]), int(parts[-2]), int(parts[-1]))
    return None


def output_aliases_for(
    reference_keys: Sequence[str],
    output_keys: Sequence[str],
    own: Mapping[str, int],
    config: Mapping[str, int],
) -> dict[str, int]:
    """The other output names a reference may use (``Runner.output_aliases`` and
    ``Runner.output_config_names``): a nested model's config numbering when one of the reference's
    keys exists only there (``enc:2:0`` for a model whose keys stop at ``enc:1:1``), else the bracket
    form of the output keys' own numbering."""
    known = set(output_keys) | set(own)
    if any(k in config and k not in known for k in reference_keys):
        return dict(config)
    return dict(own)


def key_preview(keys: Sequence[str], limit: int = 5) -> str:
    """The first ``limit`` keys, quoted and comma-separated, with ``...`` when there are more."""
    return ", ".join(repr(k) for k in keys[:limit]) + (", ..." if len(keys) > limit else "")


def read_reference(
    path: Path,
    output_keys: Sequence[str],
    own: Mapping[str, int] | None = None,
    config: Mapping[str, int] | None = None,
) -> dict[str, np.ndarray]:
    """The arrays ``--expect`` compares with: an ``.npz`` whose keys name outputs or layers (see
    :func:`reference_id`), or a ``.npy`` holding the only output of a single-output model. A file
    none of whose keys names an output or a layer is a :class:`UsageError` (nothing would be
    compared, and the check would pass)."""
    if path.suffix == ".npy":
        if len(output_keys) != 1:
            raise UsageError(
                f"{path.name}: a .npy reference is for a single-output model; model outputs are "
                f"{list(output_keys)}: use an .npz keyed by output name"
            )
        return {output_keys[0]: np.asarray(read_npy(path))}
    arrays = read_npz(path)
    aliases = output_aliases_for(list(arrays), output_keys, own or {}, config or {})
    if not any(reference_id(key, output_keys, aliases) is not None for key in arrays):
        raise UsageError(
            f"{path.name}: none of its arrays ({key_preview(list(arrays)) or 'none'}) names a model output "
            f"({', '.join(output_keys)}), 'output/<i>' or 'tap/<layer>'"
        )
    return arrays


def reference_taps(reference: Mapping[str, Any]) -> list[str]:
    """Layer paths a reference holds intermediates for (so the run can tap them)."""
    paths: dict[str, None] = {}
    for key in reference:
        rid = reference_id(key, ())
        if rid is not None and rid[0] == "tap":
            paths.setdefault(str(rid[1]), None)
    return list(paths)


def compare_results(
    actual: Mapping[str, np.ndarray],
    reference: Mapping[str, Any],
    output_keys: Sequence[str],
    *,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    order: Sequence[str] = (),
    aliases: Mapping[str, int] | None = None,
) -> Comparison:
    """Compare a run's results with a reference file's arrays.

    ``order`` lists layer paths in plan order; the first failing intermediate in that order is
    ``first_divergence`` (an output's layer counts too, when no intermediate of it was recorded).
    """
    by_id: dict[Any, str] = {}
    for key in actual:
        rid = reference_id(key, output_keys)
        if rid is not None:
            by_id[rid] = key
    tensors: list[TensorComparison] = []
    missing: list[str] = []
    ignored: list[str] = []
    for key, ref in reference.items():
        rid = reference_id(key, output_keys, aliases)
        if rid is None:
            if not key.startswith(GOLDEN_INPUT_PREFIX):
                ignored.append(key)
            continue
        if rid[0] == "tap":
            # A tap key without node/tensor suffix names node 0, tensor 0.
            mine = by_id.get(rid)
            if mine is None:
                missing.append(key)
                continue
            tensors.append(compare_arrays(key, actual[mine], ref, atol=atol, rtol=rtol, kind="intermediate"))
        else:
            idx = int(rid[1])
            if idx >= len(output_keys):
                missing.append(key)
                continue
            name = output_keys[idx]
            tensors.append(compare_arrays(name, actual[name], ref, atol=atol, rtol=rtol, kind="output"))
    compared = {t.name for t in tensors if t.kind == "output"}
    not_compared = [k for k in output_keys if k not in compared]
    result = Comparison(atol, rtol, tensors, missing=missing, ignored=ignored, not_compared=not_compared)
    rank = {p: i for i, p in enumerate(order)}
    failing = []
    for t in tensors:
        if t.passed or t.kind != "intermediate":
            continue
        rid = reference_id(t.name, ())
        path = str(rid[1]) if rid else t.name
        failing.append((rank.get(path, math.inf), path, t.name))
    if failing:
        failing.sort(key=lambda x: (x[0], x[2]))
        result.first_divergence = failing[0][1]
    return result


def compare_run(
    runner: Runner,
    results: Mapping[str, np.ndarray],
    reference: Mapping[str, Any],
    *,
    atol: float = 1e-5,
    rtol: float = 1e-4,
) -> Comparison:
    """:func:`compare_results` for one run of ``runner``: its output names (with the other names a
    reference may use for them) and its plan order for the first divergence."""
    aliases = output_aliases_for(
        list(reference), runner.output_keys, runner.output_aliases, runner.output_config_names
    )
    return compare_results(
        results,
        reference,
        runner.output_keys,
        atol=atol,
        rtol=rtol,
        order=runner.layer_paths(),
        aliases=aliases,
    )
