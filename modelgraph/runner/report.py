"""The JSON reports of ``modelgraph run`` and ``run --check``, built from a run's results.

The models are in :mod:`modelgraph.schemas.run_report`; the CLI only formats them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from modelgraph._version import __version__
from modelgraph.runner.compare import Comparison
from modelgraph.runner.interpreter import Problem, Profile
from modelgraph.schemas.run_report import (
    CheckProblem,
    CheckReport,
    ComparisonReport,
    HistogramBin,
    LayerProfile,
    ProfileReport,
    RunReport,
    TensorComparisonReport,
    TensorSummary,
)


def run_report(
    model: str,
    feeds: Mapping[str, Any],
    results: Mapping[str, Any],
    output_keys: Sequence[str],
    *,
    saved_to: str | None = None,
    comparison: Comparison | None = None,
    reference: str = "",
    profile: Profile | None = None,
) -> RunReport:
    """``run --format json``: the inputs and outputs summarised, taps, comparison and profile."""
    report = RunReport(
        tool_version=__version__,
        model=model,
        inputs=[tensor_summary(k, v) for k, v in feeds.items()],
        outputs=[tensor_summary(k, results[k]) for k in output_keys],
        intermediates=[k for k in results if k.startswith("tap/")],
        saved_to=saved_to,
    )
    if comparison is not None:
        report.comparison = _comparison_report(comparison, reference)
    if profile is not None:
        report.profile = _profile_report(profile)
    return report


def check_report(model: str, problems: Sequence[Problem]) -> CheckReport:
    """``run --check --format json``: every problem that stops the model from running."""
    return CheckReport(
        tool_version=__version__,
        model=model,
        supported=not problems,
        problems=[
            CheckProblem(
                layer=p.path,
                class_name=p.class_name,
                kind="unsupported" if p.unsupported else "error",
                message=str(p.error),
            )
            for p in problems
        ],
    )


def tensor_summary(name: str, x: Any) -> TensorSummary:
    """Shape, dtype, min/max/mean over the finite values, and NaN/Inf counts of one tensor."""
    import numpy as np

    a = np.asarray(x)
    s = TensorSummary(name=name, shape=[int(d) for d in a.shape], dtype=str(a.dtype))
    if a.size and a.dtype.kind in "fiub":
        f = a.astype(np.float64)
        finite = np.isfinite(f)
        s.nan = int(np.isnan(f).sum())
        s.inf = int(np.isinf(f).sum())
        if finite.any():
            v = f[finite]
            s.min, s.max, s.mean = float(v.min()), float(v.max()), float(v.mean())
    return s


def _comparison_report(comp: Comparison, reference: str) -> ComparisonReport:
    return ComparisonReport(
        reference=reference,
        atol=comp.atol,
        rtol=comp.rtol,
        passed=comp.passed,
        first_divergence=comp.first_divergence,
        missing=comp.missing,
        ignored=comp.ignored,
        not_compared=comp.not_compared,
        tensors=[
            TensorComparisonReport(
                name=t.name,
                kind=t.kind,
                passed=t.passed,
                shape=list(t.shape),
                reference_shape=list(t.ref_shape),
                max_abs=t.max_abs,
                mean_abs=t.mean_abs,
                max_rel=t.max_rel,
                mean_rel=t.mean_rel,
                mismatches=t.mismatches,
                size=t.size,
                nan=t.nan,
                inf=t.inf,
                reference_nan=t.ref_nan,
                reference_inf=t.ref_inf,
                worst_index=None if t.worst_index is None else list(t.worst_index),
                histogram=[HistogramBin(low=lo, high=hi, count=c) for lo, hi, c in t.histogram],
                note=t.note,
            )
            for t in comp.tensors
        ],
    )


def _profile_report(profile: Profile) -> ProfileReport:
    layers = [
        LayerProfile(
            node=s.label,
            layer=s.path,
            class_name=s.class_name,
            calls=s.calls,
            seconds=s.seconds,
            output_bytes=s.output_bytes,
            live_bytes=s.live_bytes,
        )
        for s in profile.steps
        if s.calls
    ]
    return ProfileReport(
        total_seconds=profile.total_seconds,
        kernel_seconds=sum(s.seconds for s in layers),
        peak_live_bytes=profile.peak_live_bytes,
        weight_bytes=profile.weight_bytes,
        layers=layers,
    )
