"""Pydantic model of ``modelgraph diff --format json`` (one document, ``schema_version`` first).

A diff pairs the layers of model A with those of model B (see :mod:`modelgraph.diff_align`) and
lists every layer that is not unchanged: added, removed, renamed, config changes per key,
rewired inputs, weight shape, dtype and value changes. Unchanged layers are only counted; the full
alignment is in ``alignment``. The JSON Schema generated from this model is
``schemas/diff.schema.json`` (``python -m modelgraph.schemas.export``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

DIFF_SCHEMA_VERSION = "1.0"

Shape = list[int | None]
LayerStatus = Literal["added", "removed", "changed"]
MatchedBy = Literal["name", "input", "structure", "consumer", "output", "position", "config"]


class _Report(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelSide(_Report):
    """One of the two models compared."""

    source: str
    format: str
    keras_version: str | None
    name: str
    class_name: str
    layers: int = Field(description="layers of every nesting level (walk of the graph)")
    params: int | None = Field(description="stored parameters; None for a file without weights")
    has_weights: bool


class Options(_Report):
    weights: bool = Field(description="weights were compared (--no-weights turns it off)")
    atol: float
    rtol: float
    outputs: bool
    seed: int


class Rename(_Report):
    old: str
    new: str
    auto: bool = Field(
        description="both names are Keras auto-generated (dense_3 vs dense_7): session history, not a "
        "difference; the diff stays identical"
    )


class ConfigChange(_Report):
    """One changed key of a layer's normalised config, as a dotted path (``kernel_initializer.config.seed``)."""

    key: str
    old: Any = Field(default=None, description="value in A (absent when the key is only in B)")
    new: Any = Field(default=None, description="value in B (absent when the key is only in A)")
    only_in: Literal["a", "b"] | None = Field(default=None, description="the key exists on one side only")


class WiringChange(_Report):
    """Different inputs to one call (node) of the layer, or a call that exists on one side only."""

    node: int
    old: list[str] | None = Field(
        description="inputs in A as layer[node][tensor] with A's names; None: no such call"
    )
    new: list[str] | None = Field(description="inputs in B with B's names; None: no such call")
    old_kwargs: dict[str, Any] | None = None
    new_kwargs: dict[str, Any] | None = None


class WeightChange(_Report):
    """One weight (canonical name) that is added, removed, reshaped, retyped or has different values."""

    name: str
    status: Literal["added", "removed", "shape", "dtype", "values"]
    old_shape: Shape | None = None
    new_shape: Shape | None = None
    old_dtype: str | None = None
    new_dtype: str | None = None
    size: int | None = Field(default=None, description="number of elements (values changes)")
    mismatched: int | None = Field(
        default=None, description="elements where |a - b| > atol + rtol * |b| (numpy.isclose)"
    )
    max_abs: float | None = Field(default=None, description="max |a - b|")
    rms: float | None = Field(default=None, description="sqrt(mean((a - b)^2))")
    rel: float | None = Field(default=None, description="||a - b||_2 / ||a||_2 (relative L2 change)")


class LayerDiff(_Report):
    """One layer that is not unchanged."""

    status: LayerStatus
    marker: str = Field(
        description="allennlp-style: + added, - removed, ~ changed structure/config, ! weights"
    )
    name: str = Field(description="the layer's name in B, or in A when it was removed")
    path: list[str] = Field(
        description="enclosing model names then the layer name (B's names, A's when removed)"
    )
    path_a: list[str] | None = None
    path_b: list[str] | None = None
    class_name: str
    old_class_name: str | None = Field(default=None, description="set when the class differs")
    matched_by: MatchedBy | None = Field(default=None, description="how the alignment paired it")
    rename: Rename | None = None
    config: list[ConfigChange] = Field(default_factory=list)
    wiring: list[WiringChange] = Field(default_factory=list)
    weights: list[WeightChange] = Field(default_factory=list)
    old_params: int | None = None
    new_params: int | None = None
    similarity: float = Field(description="1 unchanged ... 0 added/removed (see DiffReport.similarity)")


class Match(_Report):
    """One pair of the alignment."""

    a: list[str]
    b: list[str]
    class_name: str
    matched_by: MatchedBy


class ModelChanges(_Report):
    """Changes of the model itself: its inputs and outputs (mapped through the alignment), name, class."""

    old_inputs: list[str] | None = None
    new_inputs: list[str] | None = None
    old_outputs: list[str] | None = None
    new_outputs: list[str] | None = None
    rename: Rename | None = None
    old_class_name: str | None = None
    new_class_name: str | None = None


class OutputDiff(_Report):
    """One model output run on the same random inputs."""

    name_a: str
    name_b: str | None
    shape_a: Shape
    shape_b: Shape | None
    equal: bool = Field(description="shapes equal and numpy.allclose(b, a, rtol, atol)")
    size: int | None = None
    max_abs: float | None = None
    rms: float | None = None
    rel: float | None = None
    mismatched: int | None = None


class OutputsReport(_Report):
    seed: int
    inputs: dict[str, Shape] = Field(description="the random inputs fed to both models, by A's input names")
    outputs: list[OutputDiff]
    equal: bool


class Counts(_Report):
    layers_a: int
    layers_b: int
    matched: int
    unchanged: int
    added: int
    removed: int
    renamed: int = Field(description="user-given names that changed (auto-generated renumbering excluded)")
    auto_renamed: int
    config_changed: int
    rewired: int
    weights_changed: int = Field(
        description="layers with a weight added, removed, reshaped, retyped or changed"
    )


class DiffReport(_Report):
    """``modelgraph diff --format json``."""

    schema_version: str = DIFF_SCHEMA_VERSION
    tool: str = "modelgraph"
    tool_version: str
    a: ModelSide
    b: ModelSide
    options: Options
    identical: bool = Field(description="no difference (auto-generated renumbering and metadata excluded)")
    verdict: str = Field(description="one line")
    similarity: float = Field(
        description="2 * sum(layer similarities of matched pairs) / (layers_a + layers_b), in [0, 1]; "
        "a matched layer scores 1 minus penalties: config 0.4 * changed/compared keys (at least 0.1), "
        "wiring 0.3, weights 0.3 * changed/compared weights, user rename 0.05"
    )
    params_a: int | None = Field(description="None when A has no weights (an architecture-only file)")
    params_b: int | None = Field(description="None when B has no weights")
    params_delta: int | None = Field(description="params_b - params_a; None when a side has no weights")
    counts: Counts
    model: ModelChanges | None = None
    layers: list[LayerDiff] = Field(
        description="every layer that is not unchanged, in B's order then removed ones"
    )
    alignment: list[Match]
    outputs: OutputsReport | None = None
    notes: list[str] = Field(default_factory=list)
