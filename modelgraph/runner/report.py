"""The JSON reports of ``modelgraph run`` and ``run --check``, built from a run's results.

The models are in :mod:`modelgraph.schemas.run_report`; the CLI only formats them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from modelgraph._version import __version__
from modelgraph.runner.compare import Comparison, TensorComparison
from modelgraph.runner.interpreter import Problem, Profile
from modelgraph.runner.threads import blas_libraries
from modelgraph.schemas.run_report import (
    BlasReport,
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
    backend: str = "numpy",
) -> RunReport:
    """``run --format json``: the inputs and outputs summarised, taps, comparison and profile."""
    report = RunReport(
        tool_version=__version__,
        model=model,
        inputs=[tensor_summary(k, v) for k, v in feeds.items()],
        outputs=[tensor_summary(k, results[k]) for k in output_keys],
        intermediates=[k for k in results if k.startswith("tap/")],
        saved_to=saved_to,
        backend=backend,
    )
    if comparison is not None:
        report.comparison = _comparison_report(comparison, reference)
    if profile is not None:
        report.profile = _profile_report(profile, backend)
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
    same = ("atol", "rtol", "passed", "first_divergence", "missing", "ignored", "not_compared")
    return ComparisonReport(
        reference=reference,
        **{name: getattr(comp, name) for name in same},
        tensors=[_tensor_comparison(t) for t in comp.tensors],
    )


def _tensor_comparison(t: TensorComparison) -> TensorComparisonReport:
    data = {_RENAMED.get(k, k): v for k, v in asdict(t).items()}
    data["histogram"] = [HistogramBin(low=lo, high=hi, count=c) for lo, hi, c in t.histogram]
    return TensorComparisonReport.model_validate(data)


#: Fields the report spells out that the comparison abbreviates.
_RENAMED = {"ref_shape": "reference_shape", "ref_nan": "reference_nan", "ref_inf": "reference_inf"}


_STEP_FIELDS = ("class_name", "calls", "seconds", "output_bytes", "live_bytes")


def _profile_report(profile: Profile, backend: str) -> ProfileReport:
    layers = [
        LayerProfile(node=s.label, layer=s.path, **{f: getattr(s, f) for f in _STEP_FIELDS})
        for s in profile.steps
        if s.calls
    ]
    return ProfileReport(
        total_seconds=profile.total_seconds,
        kernel_seconds=sum(s.seconds for s in layers),
        peak_live_bytes=profile.peak_live_bytes,
        weight_bytes=profile.weight_bytes,
        layers=layers,
        threads=profile.threads or None,
        # The GEMMs' speed depends on the kernel set the BLAS picked (or was told to pick).
        blas=[BlasReport(**asdict(lib)) for lib in blas_libraries()] if backend == "numpy" else [],
    )
