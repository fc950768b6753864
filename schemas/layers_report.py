"""Pydantic model of ``modelgraph layers --format json``: every Keras class the catalogue knows.

``schemas/layers.schema.json`` is generated from it (``python -m modelgraph.schemas.export``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

LAYERS_SCHEMA_VERSION = "1.1"

Supported = bool | str


class _Report(BaseModel):
    model_config = {"extra": "forbid"}


class LayerSupport(_Report):
    """Per concern: ``true`` when modelgraph implements it, else a string saying why not."""

    read: Supported = Field(description="the class is recognised in a model config")
    shapes: Supported = Field(description="static shape inference (inspect, validate)")
    weights: Supported = Field(description="weight names in Keras's order and their expected shapes")
    macs: Supported = Field(description="multiply-accumulate count (inspect)")
    masks: Supported = Field(description="implicit mask behaviour (tf.keras and Keras 3)")
    run: Supported = Field(description="a NumPy kernel (modelgraph run)")
    onnx: Supported = Field(
        description="an ONNX mapping (modelgraph export, modelgraph run --backend onnxruntime)"
    )


class LayerClass(_Report):
    """One catalogue entry."""

    name: str = Field(
        description="catalogue key: class name, op:<Class> (Keras 3 op), tf:<function> (TFOpLambda)"
    )
    family: str = Field(description="the catalogue module that describes it")
    aliases: list[str] = Field(description="other class names real files carry for it")
    keras_versions: list[str] = Field(description="Keras major versions whose files carry it")
    support: LayerSupport
    training_sensitive: bool = Field(description="a call with training=True behaves differently")
    dtype: Literal["compute", "follows_input", "float32_variables"]
    masks: str = Field(
        description="the output mask per Keras version (`Keras 2: pass; Keras 3: or`): drop, pass, and/or, "
        "or the class's own rule (modelgraph.runner.masks); `drop` when no version keeps one"
    )
    config_defaults: dict[str, object] | None = Field(
        default=None, description="config keys read, with Keras 3's defaults (null: not catalogued)"
    )


class LayersReport(_Report):
    """``modelgraph layers --format json``."""

    schema_version: str = LAYERS_SCHEMA_VERSION
    tool: str = "modelgraph"
    tool_version: str
    classes: list[LayerClass]
