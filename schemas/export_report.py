"""Pydantic model of ``modelgraph export --format json`` (:class:`ExportReport`);
``schemas/export.schema.json`` is generated from it (``python -m modelgraph.schemas.export``)."""

from __future__ import annotations

from pydantic import BaseModel

EXPORT_SCHEMA_VERSION = "1.0"


class ExportReport(BaseModel):
    """What ``modelgraph export`` wrote."""

    model_config = {"extra": "forbid"}

    schema_version: str = EXPORT_SCHEMA_VERSION
    tool: str = "modelgraph"
    tool_version: str
    model: str
    output: str
    opset: int
    batch: int | str
    inputs: list[str]
    outputs: list[str]
    nodes: int
    initializers: int
    bytes: int
    dequantized_layers: list[str] = []
    export_seconds: float
