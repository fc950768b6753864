"""Pydantic models of ``modelgraph validate --format json`` and ``modelgraph rules --format json``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

VALIDATE_SCHEMA_VERSION = "1.0"
RULES_SCHEMA_VERSION = "1.0"

SeverityName = Literal["error", "warning", "info"]


class _Report(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Location(_Report):
    """Where a finding is: the file, and inside it a JSON path, a layer/node, or a container member."""

    file: str = Field(description="the model file or directory, as given or found by the walk")
    where: str = Field(default="", description="the location as one line (JSON path, layer, member)")
    json_path: str | None = Field(
        default=None, description="JSON path inside the config, e.g. $.config.layers[3]"
    )
    layer: str | None = Field(default=None, description="layer name; nested layers as outer/inner")
    node: int | None = Field(default=None, description="node (call) index of the layer")
    weight: str | None = Field(default=None, description="canonical weight name")
    member: str | None = Field(default=None, description="zip member or HDF5 path")


class IssueReport(_Report):
    """One finding."""

    rule: str = Field(description="stable rule id, e.g. STR004 (see `modelgraph rules`)")
    severity: SeverityName
    title: str = Field(description="the rule's short title")
    message: str = Field(description="what was expected and what was found")
    location: Location
    hint: str = Field(description="how to fix it")


class FileReport(_Report):
    """All findings of one file."""

    path: str
    format: str = Field(description="detected format (keras_zip, legacy_h5, json_config, tfjs_layers, ...)")
    ok: bool = Field(description="no error (no warning either with --strict)")
    errors: int
    warnings: int
    infos: int
    issues: list[IssueReport]


class Summary(_Report):
    files: int
    ok: int
    failed: int
    errors: int
    warnings: int
    infos: int
    strict: bool
    by_rule: dict[str, int] = Field(description="number of findings per rule id")


class ValidateReport(_Report):
    """``modelgraph validate --format json``."""

    schema_version: str = VALIDATE_SCHEMA_VERSION
    tool: str = "modelgraph"
    tool_version: str
    results: list[FileReport]
    summary: Summary


class RuleInfo(_Report):
    id: str
    family: str
    severity: SeverityName
    title: str
    meaning: str
    hint: str


class RulesReport(_Report):
    """``modelgraph rules --format json``."""

    schema_version: str = RULES_SCHEMA_VERSION
    tool: str = "modelgraph"
    tool_version: str
    rules: list[RuleInfo]
