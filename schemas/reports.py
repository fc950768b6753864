"""Pydantic models of modelgraph's JSON reports.

Every ``--format json`` output is exactly one document validated by one of these models, with a
``schema_version``. JSON Schema files generated from them live beside this module
(``inspect.schema.json``, ...) and a test keeps them in sync.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

Shape = list[int | None]

INSPECT_SCHEMA_VERSION = "1.1"
"""1.1 added trainable/dtype/output_bytes per layer, activation and stored bytes in the totals, shown_layers.
A new optional field bumps the minor version; a removed or changed field the major."""


class _Report(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TensorInfo(_Report):
    """A model input or output."""

    name: str = Field(description="input layer name, or output layer name")
    ref: str = Field(description="the keras_history reference, layer[node][tensor]")
    shape: Shape | None = Field(default=None, description="static shape, None for unknown dims")
    dtype: str | None = None


class LayerInfo(_Report):
    """One layer (or Keras 3 op, or nested model) in Keras's order."""

    name: str
    path: list[str] = Field(description="enclosing model names then the layer name; length 1 at top level")
    class_name: str
    kind: str = Field(description="input, layer, op (Keras 3 raw op) or model (nested model)")
    depth: int | None = Field(
        description="Keras's layer depth (outputs at 0); None when no output reaches it"
    )
    params: int
    trainable_params: int
    non_trainable_params: int
    macs: int | None = Field(default=None, description="multiply-accumulates of all its calls, when known")
    output_shapes: list[Shape | None] = Field(description="output shapes of its first call")
    inbound: list[str] = Field(description="every input tensor of every call, as layer[node][tensor]")
    nodes: int = Field(description="number of calls (more than 1 for shared layers)")
    trainable: bool | None = Field(
        default=None, description="the layer's trainable flag (False also when an enclosing model is frozen)"
    )
    dtype: str | None = Field(default=None, description="dtype of its first output")
    output_bytes: int | None = Field(
        default=None, description="bytes of its outputs for one sample (all calls), when the shapes are known"
    )


class NodeInfo(_Report):
    """One call of a layer."""

    layer: str
    index: int
    depth: int | None
    inputs: list[str]


class Totals(_Report):
    total_params: int
    trainable_params: int
    non_trainable_params: int
    weight_bytes: int
    weight_bytes_by_dtype: dict[str, int]
    macs: int | None = None
    layers: int
    nodes: int
    activation_bytes: int | None = Field(
        default=None,
        description="bytes of every layer output for a batch of one sample (torchinfo's forward pass size)",
    )
    stored_bytes_by_dtype: dict[str, int] | None = Field(
        default=None,
        description="bytes as stored on disk per stored dtype, when it differs from weight_bytes_by_dtype "
        "(TF.js uint8/uint16/float16 quantized weights)",
    )


class InspectReport(_Report):
    """``modelgraph inspect --format json``."""

    schema_version: str = INSPECT_SCHEMA_VERSION
    tool: str = "modelgraph"
    tool_version: str
    source: str
    format: str
    keras_version: str | None
    name: str
    class_name: str
    has_weights: bool
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    layers: list[LayerInfo]
    nodes: list[NodeInfo]
    totals: Totals
    notes: list[str] = Field(default_factory=list, description="loader notes: weights that did not fit, ...")
    shown_layers: int | None = Field(
        default=None,
        description="when --depth/--filter/--totals left layers out: how many rows 'layers' holds",
    )
