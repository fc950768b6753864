"""Per-layer numbers the HTML view colours its nodes by (``render -o x.html --overlay NAME``).

An overlay is one number per layer (the colour key, drawn on a colour scale with a legend) plus the
values the layer panel lists. Six kinds:

* static, from the graph alone: ``params``, ``macs`` (multiply-accumulates per sample) and ``bytes``
  (output bytes per sample: every unknown dimension counted as 1);
* from a run of the NumPy runner on ``--input`` arrays (:mod:`modelgraph.runner`'s public ``Runner``):
  ``profile`` (median per-layer time of a few timed runs after one warm-up run), ``stats`` (each
  layer's output: min/max/mean/std over the finite values, NaN/Inf counts, fraction of zeros; the
  colour is the largest absolute finite value) and ``expect=REF.npz`` (each layer's output against
  the reference's array for it: max absolute and relative error, elements beyond the tolerance; the
  colour is the max absolute error, and the first diverging layer in run order is *marked*).

Layers an overlay has no number for (an input, a layer the reference does not hold) are drawn grey.
Nothing here prints; a missing ``--input`` or an unknown overlay name is a :class:`UsageError`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from modelgraph.errors import UsageError
from modelgraph.graph import ModelGraph

STATIC = ("params", "macs", "bytes")
RUN = ("profile", "stats", "expect")
PROFILE_RUNS = 3
"""Timed runs of ``--overlay profile`` (after one untimed warm-up run); the median is shown."""


@dataclass
class Overlay:
    """One overlay as the page gets it: a colour key per layer index and panel rows per layer."""

    name: str
    title: str
    unit: str
    log: bool
    """Colour on a log10 scale (counts and times spread over decades) rather than a linear one."""
    values: dict[int, float] = field(default_factory=dict)
    details: dict[int, dict[str, Any]] = field(default_factory=dict)
    marked: list[int] = field(default_factory=list)
    """Layers drawn with a marker: the first diverging layer (expect), layers with NaN/Inf (stats)."""
    note: str = ""

    def as_json(self) -> dict[str, Any]:
        """The overlay as the page's JSON (layer indices as string keys)."""
        return {
            "name": self.name,
            "title": self.title,
            "unit": self.unit,
            "log": self.log,
            "values": {str(k): v for k, v in self.values.items()},
            "details": {str(k): v for k, v in self.details.items()},
            "marked": self.marked,
            "note": self.note,
        }


@dataclass(frozen=True)
class OverlaySpec:
    """A parsed ``--overlay`` value: its kind and, for ``expect``, the reference file."""

    kind: str
    reference: Path | None = None


def parse_overlay(value: str) -> OverlaySpec:
    """``params``/``macs``/``bytes``/``profile``/``stats``/``expect=REF.npz`` -> an :class:`OverlaySpec`."""
    kind, sep, arg = value.partition("=")
    kind = kind.strip().lower()
    if kind == "expect":
        if not sep or not arg:
            raise UsageError("--overlay expect needs a reference file: --overlay expect=REF.npz")
        ref = Path(arg)
        if not ref.is_file():
            raise UsageError(f"--overlay expect: reference file '{arg}' does not exist")
        return OverlaySpec("expect", ref)
    if kind not in STATIC + RUN or sep:
        known = ", ".join((*STATIC, "profile", "stats", "expect=REF.npz"))
        raise UsageError(f"unknown overlay {value!r}; expected one of {known}")
    return OverlaySpec(kind)


def _round(value: float) -> float:
    return float(f"{float(value):.6g}")


# --- static ---------------------------------------------------------------------------------------

_ITEMSIZE = {"bool": 1, "bfloat16": 2, "string": 0}


def _itemsize(dtype: str | None) -> int | None:
    if not dtype:
        return None
    if dtype in _ITEMSIZE:
        return _ITEMSIZE[dtype]
    try:
        return int(np.dtype(dtype).itemsize)
    except TypeError:
        return None


def output_bytes(record: Mapping[str, Any]) -> int | None:
    """Bytes of a layer's outputs per sample (all calls; unknown dimensions counted as 1)."""
    total = 0
    known = False
    for call in record.get("calls", ()):
        for shape, dtype in zip(call.get("output_shapes", ()), call.get("output_dtypes", ()), strict=False):
            size = _itemsize(dtype)
            if size is None or not isinstance(shape, list):
                continue
            dims = [d if isinstance(d, int) else 1 for d in shape[1:]]
            total += int(np.prod(dims, dtype=np.int64)) * size
            known = True
    return total if known else None


def static_overlay(kind: str, records: Sequence[Mapping[str, Any]]) -> Overlay:
    """``params``, ``macs`` or ``bytes`` from the page's layer records."""
    titles = {
        "params": ("Parameters", "params"),
        "macs": ("MACs per sample", "MACs"),
        "bytes": ("Output bytes per sample", "bytes"),
    }
    title, unit = titles[kind]
    overlay = Overlay(kind, title, unit, log=True)
    for i, record in enumerate(records):
        if record.get("kind") == "input" or record.get("nested_layers"):
            continue  # a nested model's numbers are its layers'
        value = output_bytes(record) if kind == "bytes" else record.get(kind)
        if value is None:
            continue
        overlay.values[i] = float(value)
        overlay.details[i] = {unit: int(value)}
    return overlay


# --- from a run -----------------------------------------------------------------------------------

_CALL = re.compile(r":\d+(?=/|$)")


def _index_of(records: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    return {"/".join(r["path"]): i for i, r in enumerate(records)}


def _layer_of(path: str, index: Mapping[str, int]) -> int | None:
    """The record index of a runner layer path (``inner:1/dense`` names ``inner/dense``)."""
    return index.get(_CALL.sub("", path))


def _runner(graph: ModelGraph) -> Any:
    from modelgraph.runner.interpreter import Runner

    return Runner(graph)


def _feeds(runner: Any, inputs: Sequence[str]) -> dict[str, np.ndarray]:
    from modelgraph.runner import feeds as fd

    if not inputs:
        raise UsageError("this overlay runs the model: give its inputs with --input FILE.npz")
    return fd.parse_input_options(inputs, runner.input_names, [])


def profile_overlay(
    graph: ModelGraph, records: Sequence[Mapping[str, Any]], inputs: Sequence[str]
) -> Overlay:
    """Median per-layer time of :data:`PROFILE_RUNS` timed runs (after a warm-up run)."""
    from modelgraph.runner.interpreter import Profile, median_profile

    runner = _runner(graph)
    feeds = _feeds(runner, inputs)
    runner.run(feeds)
    timed = []
    for _ in range(PROFILE_RUNS):
        timed.append(Profile(steps=[]))
        runner.run(feeds, profile=timed[-1])
    prof = median_profile(timed)
    index = _index_of(records)
    seconds: dict[int, float] = {}
    steps: dict[int, list[str]] = {}
    for step in prof.steps:
        i = _layer_of(step.path, index)
        if i is None:
            continue
        seconds[i] = seconds.get(i, 0.0) + step.seconds
        steps.setdefault(i, []).append(step.label)
    total = sum(seconds.values()) or 1.0
    overlay = Overlay(
        "profile",
        f"Time per layer (median of {PROFILE_RUNS} runs)",
        "ms",
        log=True,
        note=f"{prof.total_seconds * 1e3:.3g} ms per run in all, batch of {_batch(feeds)}",
    )
    for i, s in seconds.items():
        overlay.values[i] = _round(s * 1e3)
        overlay.details[i] = {
            "ms": _round(s * 1e3),
            "share": f"{100 * s / total:.1f}%",
            "steps": len(steps[i]),
        }
    return overlay


def _batch(feeds: Mapping[str, np.ndarray]) -> int:
    first = next(iter(feeds.values()), None)
    return int(first.shape[0]) if first is not None and first.ndim else 1


def activation_stats(values: np.ndarray) -> dict[str, Any]:
    """min/max/mean/std of the finite values, NaN/Inf counts and the fraction of zeros of one array."""
    data = np.asarray(values)
    if data.dtype.kind not in "biuf":
        return {"note": f"no statistics for {data.dtype} values"}
    data = data.astype(np.float64, copy=False).ravel()
    finite = data[np.isfinite(data)]
    out: dict[str, Any] = {
        "nan": int(np.isnan(data).sum()),
        "inf": int(np.isinf(data).sum()),
        "zeros": _round(np.count_nonzero(data == 0) / data.size) if data.size else 0.0,
        "size": int(data.size),
    }
    if finite.size:
        out.update(
            min=_round(finite.min()),
            max=_round(finite.max()),
            mean=_round(finite.mean()),
            std=_round(finite.std()),
            absmax=_round(np.abs(finite).max()),
        )
    return out


def stats_overlay(graph: ModelGraph, records: Sequence[Mapping[str, Any]], inputs: Sequence[str]) -> Overlay:
    """Every layer's output statistics from one run (all intermediates tapped)."""
    from modelgraph.runner.interpreter import parse_tap_key

    runner = _runner(graph)
    feeds = _feeds(runner, inputs)
    results = runner.run(feeds, all_intermediates=True)
    index = _index_of(records)
    overlay = Overlay("stats", "Largest |activation|", "|x|", log=True, note=f"batch of {_batch(feeds)}")
    for key, value in results.items():
        if not key.startswith("tap/"):
            continue
        path, _node, _tensor = parse_tap_key(key)
        i = _layer_of(path, index)
        if i is None or i in overlay.details:
            continue  # a layer with several outputs or calls: its first output stands for it
        stats = activation_stats(value)
        overlay.details[i] = stats
        if "absmax" in stats:
            overlay.values[i] = stats["absmax"]
        if stats.get("nan") or stats.get("inf"):
            overlay.marked.append(i)
    bad = len(overlay.marked)
    if bad:
        overlay.note += f"; {bad} layer(s) output NaN/Inf (marked)"
    return overlay


def expect_overlay(
    graph: ModelGraph,
    records: Sequence[Mapping[str, Any]],
    inputs: Sequence[str],
    reference_file: Path,
    *,
    atol: float = 1e-5,
    rtol: float = 1e-4,
) -> Overlay:
    """Each layer's output against a reference file's array for it; the first divergence is marked."""
    from modelgraph.runner import compare as cmp

    runner = _runner(graph)
    feeds = _feeds(runner, inputs)
    reference = cmp.read_reference(
        reference_file, runner.output_keys, runner.output_aliases, runner.output_config_names
    )
    known = set(runner.layer_paths())
    taps = [p for p in cmp.reference_taps(reference) if p in known]
    results = runner.run(feeds, taps=taps)
    comparison = cmp.compare_run(runner, results, reference, atol=atol, rtol=rtol)
    index = _index_of(records)
    overlay = Overlay("expect", f"Max |error| vs {reference_file.name}", "abs err", log=True)
    for t in comparison.tensors:
        if t.kind == "intermediate":
            rid = cmp.reference_id(t.name, ())
            path = str(rid[1]) if rid else t.name
        else:
            path = t.name.split(":")[0]
        i = _layer_of(path, index)
        if i is None or i in overlay.details:
            continue
        overlay.values[i] = _round(t.max_abs)
        overlay.details[i] = {
            "max abs": _round(t.max_abs),
            "max rel": _round(t.max_rel),
            "differ": f"{t.mismatches:,}/{t.size:,}",
            "passed": t.passed,
            **({"note": t.note} if t.note else {}),
        }
    first = comparison.first_divergence
    if first is not None:
        i = _layer_of(first, index)
        if i is not None:
            overlay.marked.append(i)
            overlay.details.setdefault(i, {})["first diverging"] = True
        overlay.note = f"first diverging layer: {first} (atol {atol:g}, rtol {rtol:g})"
    else:
        overlay.note = f"{len(comparison.tensors)} tensors within atol {atol:g}, rtol {rtol:g}"
    return overlay


def build_overlays(
    graph: ModelGraph,
    records: Sequence[Mapping[str, Any]],
    specs: Sequence[OverlaySpec],
    inputs: Sequence[str] = (),
) -> list[Overlay]:
    """The overlays asked for, in the order given (each kind once)."""
    if any(s.kind in RUN for s in specs) and not inputs:
        asked = next(s.kind for s in specs if s.kind in RUN)
        raise UsageError(f"--overlay {asked} runs the model: give its inputs with --input FILE.npz")
    out: list[Overlay] = []
    seen: set[str] = set()
    for spec in specs:
        if spec.kind in seen:
            continue
        seen.add(spec.kind)
        if spec.kind in STATIC:
            out.append(static_overlay(spec.kind, records))
        elif spec.kind == "profile":
            out.append(profile_overlay(graph, records, inputs))
        elif spec.kind == "stats":
            out.append(stats_overlay(graph, records, inputs))
        else:
            assert spec.reference is not None
            out.append(expect_overlay(graph, records, inputs, spec.reference))
    return out
