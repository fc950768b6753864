"""Pydantic models of the saved Keras config records (Keras 1, 2 and 3).

They describe the shapes a config may take; ``modelgraph.loading.normalize`` turns them into one
:class:`modelgraph.graph.ModelGraph`. Layer ``config`` bodies stay plain dicts: their keys are
per-class and read by shape rules, kernels and validate.

* :class:`KerasObject`: the envelope of every serialised object
  (``class_name``, ``config`` and, from tf.keras 2.13 / Keras 3 on, ``module``, ``registered_name``,
  ``build_config``, ``compile_config``, ``shared_object_id``).
* :class:`LayerRecord`: a layer inside a Functional config (adds ``name`` and ``inbound_nodes``).
* :class:`FunctionalConfig` / :class:`SequentialConfig`: the two model config bodies; Keras 1 and
  Keras <= 2.2.2 Sequential configs are a bare list of layers.
* :class:`Keras3Node`: a Keras 3 node ``{"args": [...], "kwargs": {...}}``; Keras 1/2 nodes are
  lists of ``[layer, node_index, tensor_index(, kwargs)]`` entries (see ``normalize``).
* :class:`KerasTensorRecord`: ``{"class_name": "__keras_tensor__", "config": {"shape", "dtype",
  "keras_history"}}``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class KerasObject(_Record):
    """The envelope every serialised Keras object shares."""

    class_name: str
    config: Any = None
    module: str | None = None
    registered_name: str | None = None
    build_config: dict[str, Any] | None = None
    compile_config: dict[str, Any] | None = None
    shared_object_id: int | None = None


class LayerRecord(KerasObject):
    """One entry of a model config's ``layers`` list."""

    name: str | None = None
    inbound_nodes: list[Any] = Field(default_factory=list)

    @field_validator("config", mode="before")
    @classmethod
    def _config_is_mapping(cls, value: Any) -> Any:
        if value is None:
            return {}
        if isinstance(value, dict | list):
            return value
        raise ValueError(f"a layer config must be an object, not {type(value).__name__}")

    def layer_name(self) -> str | None:
        """The name Keras uses: the record's ``name``, else ``config.name``."""
        if self.name is not None:
            return self.name
        if isinstance(self.config, dict):
            name = self.config.get("name")
            return name if isinstance(name, str) else None
        return None


class FunctionalConfig(_Record):
    """The body of a Functional (Keras 2 ``Model``/``Functional``, Keras 1 ``Model``/``Container``)."""

    name: str | None = None
    trainable: bool | None = None
    layers: list[LayerRecord]
    input_layers: Any
    output_layers: Any


class SequentialConfig(_Record):
    """The body of a Sequential (Keras >= 2.2.3 dict form)."""

    name: str | None = None
    trainable: bool | None = None
    layers: list[LayerRecord]
    build_input_shape: Any = None


class Keras3Node(_Record):
    """A Keras 3 node: the exact call arguments, with ``__keras_tensor__`` leaves."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)


class KerasTensorConfig(_Record):
    shape: list[int | None] | None = None
    dtype: str | None = None
    keras_history: tuple[str, int, int]


class KerasTensorRecord(_Record):
    """A symbolic tensor reference in a Keras 3 node."""

    class_name: str
    config: KerasTensorConfig


class ModelEnvelope(KerasObject):
    """The top-level object of ``config.json``, ``model_config`` or ``to_json()``."""


class KerasMetadata(_Record):
    """``metadata.json`` of a ``.keras`` zip."""

    keras_version: str | None = None
    date_saved: str | None = None
