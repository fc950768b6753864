"""Pydantic models of ``modelgraph run``'s JSON reports: ``run --format json`` (:class:`RunReport`)
and ``run --check --format json`` (:class:`CheckReport`). ``schemas/run.schema.json`` and
``schemas/run_check.schema.json`` are generated from them (``python -m modelgraph.schemas.export``).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

RUN_SCHEMA_VERSION = "1.3"  # 1.1: profile runs and warmup; 1.2: stream; 1.3: profile threads and blas
# (a new optional field bumps the minor)


class _Report(BaseModel):
    model_config = {"extra": "forbid"}


class TensorSummary(_Report):
    name: str
    shape: list[int]
    dtype: str
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    nan: int = 0
    inf: int = 0


class HistogramBin(_Report):
    low: float
    high: float
    count: int


class TensorComparisonReport(_Report):
    name: str
    kind: str
    passed: bool
    shape: list[int]
    reference_shape: list[int]
    max_abs: float
    mean_abs: float
    max_rel: float
    mean_rel: float
    mismatches: int
    size: int
    nan: int
    inf: int
    reference_nan: int
    reference_inf: int
    worst_index: list[int] | None = None
    histogram: list[HistogramBin] = []
    note: str = ""


class ComparisonReport(_Report):
    reference: str
    atol: float
    rtol: float
    passed: bool
    first_divergence: str | None = None
    missing: list[str] = []
    ignored: list[str] = []
    not_compared: list[str] = []
    tensors: list[TensorComparisonReport]


class LayerProfile(_Report):
    node: str
    layer: str
    class_name: str
    calls: int
    seconds: float
    output_bytes: int
    live_bytes: int


class BlasReport(_Report):
    library: str = Field(description="threadpoolctl's internal_api, e.g. openblas")
    version: str | None = None
    kernels: str | None = Field(default=None, description="the kernel set in use, e.g. SkylakeX, Haswell")
    chosen_by: str | None = Field(
        default=None, description="the environment variable that chose the kernel set (OPENBLAS_CORETYPE=...)"
    )


class ProfileReport(_Report):
    total_seconds: float
    kernel_seconds: float
    peak_live_bytes: int
    weight_bytes: int
    layers: list[LayerProfile]
    runs: int = Field(default=1, description="timed runs; times are their medians (--repeat)")
    warmup: int = Field(default=0, description="untimed runs before the timed ones")
    threads: int | None = Field(default=None, description="threads the timed runs used (runner and BLAS)")
    blas: list[BlasReport] = Field(default_factory=list, description="the BLAS NumPy runs (NumPy backend)")


class StreamReport(_Report):
    """A run that read its inputs and wrote its outputs a batch at a time."""

    samples: int
    batch_size: int
    resumed_from: int = Field(default=0, description="samples an earlier, resumed run had written")
    folder: str | None = Field(default=None, description="where the outputs were written (-o FOLDER)")


class RunReport(_Report):
    """``modelgraph run --format json``: inputs and outputs summarised, intermediates kept, the
    comparison with ``--expect`` and the ``--profile`` table."""

    schema_version: str = RUN_SCHEMA_VERSION
    tool: str = "modelgraph"
    tool_version: str
    model: str
    inputs: list[TensorSummary]
    outputs: list[TensorSummary]
    intermediates: list[str] = []
    saved_to: str | None = None
    backend: str = "numpy"
    comparison: ComparisonReport | None = None
    profile: ProfileReport | None = None
    stream: StreamReport | None = None


class CheckProblem(_Report):
    layer: str
    class_name: str
    kind: str
    message: str


class CheckReport(_Report):
    """``modelgraph run --check --format json``: every layer or option the runner cannot execute."""

    schema_version: str = RUN_SCHEMA_VERSION
    tool: str = "modelgraph"
    tool_version: str
    model: str
    supported: bool
    problems: list[CheckProblem]
