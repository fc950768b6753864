"""Pydantic models of one line of a ``validate --results`` JSONL file and of ``report --format json``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

RECORD_SCHEMA_VERSION = "1.0"
SCAN_REPORT_SCHEMA_VERSION = "1.0"


class _Report(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Finding(_Report):
    """One finding of a model."""

    rule: str = Field(description="stable rule id, e.g. SEC001 (see `modelgraph rules`)")
    severity: Literal["error", "warning", "info"]
    title: str
    message: str
    where: str = Field(description="the location inside the model (JSON path, layer, member), or empty")
    hint: str
    path: str = Field(description="the file the finding is about (the model, or its weights file)")


class ModelInfo(_Report):
    """What the check learnt about a model it could load."""

    name: str
    keras_version: str | None
    params: int = Field(description="stored parameters (shared weights once)")
    layer_classes: list[str] = Field(description="the Keras classes used, nested models included, sorted")


class Timings(_Report):
    hash_s: float = Field(description="seconds spent hashing the content")
    check_s: float = Field(description="seconds spent checking (0 for a cached record)")


class ValidateRecord(_Report):
    """One model's result in a ``--results`` JSONL file (one line each, appended as models finish)."""

    schema_version: Literal["1.0"] = RECORD_SCHEMA_VERSION
    path: str = Field(description="the model file or model directory")
    weights: str | None = Field(description="the weights file checked with a config-only JSON, if any")
    size: int = Field(description="bytes of content hashed (all files of a model directory or pair)")
    sha256: str = Field(description="content hash (empty when the content could not be read)")
    format: str = Field(description="detected format (keras_zip, legacy_h5, json_config, tfjs_layers, ...)")
    keras_version: str | None
    model: ModelInfo | None = Field(description="None when the model could not be loaded")
    verdict: Literal["ok", "failed"] = Field(description="failed: an error (a warning too with strict)")
    errors: int
    warnings: int
    infos: int
    findings: list[Finding]
    timings: Timings
    cached: bool = Field(description="taken from the --cache folder (same bytes, same rule set)")
    strict: bool
    tool_version: str
    ruleset_version: str = Field(description="tool version + digest of the rule table and the options")


class RuleCount(_Report):
    rule: str
    severity: Literal["error", "warning", "info"]
    title: str
    count: int = Field(description="findings of this rule")
    models: int = Field(description="models with at least one finding of this rule")


class ScanReport(_Report):
    """``modelgraph report --format json``: the totals of a results file (the latest record of each
    model) and the findings by rule; the per-model detail stays in the JSONL file."""

    schema_version: Literal["1.0"] = SCAN_REPORT_SCHEMA_VERSION
    tool_version: str
    results_file: str
    models: int
    ok: int
    failed: int
    errors: int
    warnings: int
    infos: int
    bytes: int
    superseded: int = Field(description="older records of a model that a later record replaced")
    formats: dict[str, int]
    by_rule: list[RuleCount]
