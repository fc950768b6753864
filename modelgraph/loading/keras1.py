"""Keras 1 files read as Keras 2 reads them: layer arguments renamed, ``Merge`` as the merge layer
of its mode, and per-gate recurrent weights joined into Keras 2's kernels.

Keras 2 loaded Keras 1 files through legacy layer interfaces (renaming arguments when a layer was
built) and a weight conversion when the weights were set; the graph modelgraph builds for a Keras 1
file is the one Keras 2 built. The per-class knowledge is in the layer catalogue: each entry's
``ConfigSpec.upgrade`` renames Keras 1 arguments, ``keras1_class`` reads ``Merge`` as the layer of
its mode, ``keras1_kernel`` converts a convolution kernel, ``wrapped_keys`` and ``directions`` find a
wrapper's layer and its weights, ``catalogue.recurrent.KERAS1_GATES`` is the gate order of each
recurrent class. See ``docs/formats.md`` ("Keras 1 configs and weights").
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import replace
from typing import Any

import numpy as np

from modelgraph import catalogue
from modelgraph.catalogue.recurrent import KERAS1_GATES
from modelgraph.catalogue.spec import LayerSpec
from modelgraph.graph import Layer, ModelGraph, Weight, keras_version_tuple
from modelgraph.weight_names import keras1_weight_name

_MODELS = ("Sequential", "Model", "Functional")


def is_keras1(keras_version: str | None) -> bool:
    """Whether a file's ``keras_version`` says Keras 1."""
    return (
        isinstance(keras_version, str) and bool(keras_version) and keras_version_tuple(keras_version)[0] == 1
    )


def upgrade_envelope(envelope: Any, keras_version: str | None) -> Any:
    """A Keras 1 model config with every layer's config as Keras 2 reads it (unknown shapes untouched)."""
    version = keras_version_tuple(keras_version)
    if not isinstance(envelope, Mapping):
        return envelope
    return _model(envelope, version)


def _model(envelope: Mapping[str, Any], version: Any) -> dict[str, Any]:
    out = dict(envelope)
    config = envelope.get("config")
    if isinstance(config, list):
        out["config"] = [_layer(item, version) for item in config]
    elif isinstance(config, Mapping) and isinstance(config.get("layers"), list):
        out["config"] = {**config, "layers": [_layer(item, version) for item in config["layers"]]}
    return out


def _layer(record: Any, version: Any) -> Any:
    if not isinstance(record, Mapping) or not isinstance(record.get("class_name"), str):
        return record
    class_name = record["class_name"]
    config = record.get("config")
    if class_name in _MODELS:
        return _model(record, version)
    if not isinstance(config, Mapping):
        return record
    out = dict(record)
    spec = catalogue.spec_for(class_name)
    if spec is not None and spec.keras1_class is not None:
        out["class_name"], out["config"] = spec.keras1_class(config)
        return out
    if _wrapped_key(spec) is not None and isinstance(config.get("layer"), Mapping):
        config = {**config, "layer": _layer(config["layer"], version)}
    upgrade = getattr(spec.config, "upgrade", None) if spec is not None else None  # a string: uncatalogued
    if upgrade is not None:
        config = upgrade(config, version)
    out["config"] = config
    return out


def _wrapped_key(spec: LayerSpec | None) -> str | None:
    """The config key of the layer a wrapper class wraps (None for any other class)."""
    return spec.wrapped_keys[0] if spec is not None and spec.wrapped_keys else None


# --- weights -------------------------------------------------------------------------------------


#: The backend a Keras 1 file was made with, which the file does not record: ``tensorflow`` (read
#: the kernels as stored, as Keras 2 loads a Keras 1 file) or ``theano`` (reverse convolution
#: kernels, as Theano applied them). The CLI's ``--keras1-backend`` sets it.
KERAS1_BACKEND: ContextVar[str] = ContextVar("keras1_backend", default="tensorflow")


def upgrade_weights(graph: ModelGraph, backend: str | None = None) -> ModelGraph:
    """``graph`` with Keras 1's stored weights under Keras 2's names and layouts (at every level);
    ``backend`` (default :data:`KERAS1_BACKEND`) says how its convolution kernels were applied."""
    theano = (backend or KERAS1_BACKEND.get()) == "theano"
    return replace(graph, layers=tuple(_layer_weights(layer, theano) for layer in graph.layers))


def _layer_weights(layer: Layer, theano: bool) -> Layer:
    if layer.subgraph is not None:
        return replace(layer, subgraph=upgrade_weights(layer.subgraph, "theano" if theano else "tensorflow"))
    if not layer.weights:
        return layer
    spec = catalogue.spec_for(layer.key)
    convert = spec.keras1_kernel if spec is not None else None
    if convert is not None:
        weights = [
            _conv_kernel(w, convert, layer.config, theano) if w.name == "kernel" else w for w in layer.weights
        ]
        return replace(layer, weights=tuple(weights))
    key = _wrapped_key(spec)
    inner = layer.config.get(key) if key is not None else None
    if isinstance(inner, Mapping):
        inner_class = inner.get("class_name", "")
        inner_name = (inner.get("config") or {}).get("name", "")
        if spec is not None and spec.directions:
            weights: list[Weight] = []
            for side in spec.directions:
                prefix = f"{side}_{inner_name}_"
                own = _strip(tuple(w for w in layer.weights if w.name.startswith(prefix)), prefix)
                weights += [replace(w, name=f"{side}/{w.name}") for w in _join_gates(inner_class, own)]
            return replace(layer, weights=tuple(weights))
        return replace(
            layer, weights=tuple(_join_gates(inner_class, _strip(layer.weights, f"{inner_name}_")))
        )
    return replace(
        layer, weights=tuple(_join_gates(layer.class_name, _strip(layer.weights, f"{layer.name}_")))
    )


def _conv_kernel(weight: Weight, convert: Any, config: Mapping[str, Any], theano: bool) -> Weight:
    """A Keras 1 convolution kernel in Keras 2's layout, read lazily (the entry's ``keras1_kernel``)."""
    # the new shape, from a view of no memory
    probe = convert(np.broadcast_to(np.uint8(0), weight.shape), config, theano)

    def read(weight: Weight = weight) -> np.ndarray:
        return np.ascontiguousarray(convert(np.asarray(weight.read()), config, theano))

    return replace(weight, shape=tuple(probe.shape), reader=read)


def _strip(weights: tuple[Weight, ...], prefix: str) -> list[Weight]:
    """The weights under their Keras 1 suffixes (``lstm_1_W_i`` -> ``W_i``); names already canonical stay."""
    return [replace(w, name=w.name[len(prefix) :]) if w.name.startswith(prefix) else w for w in weights]


def _join_gates(class_name: str, weights: list[Weight]) -> list[Weight]:
    """Keras 1's per-gate recurrent weights (``W_i``, ``U_i``, ``b_i``, ...) joined gate by gate in
    Keras 2's order; every other Keras 1 suffix renamed."""
    spec = catalogue.spec_for(class_name)
    gates = KERAS1_GATES.get(spec.key) if spec is not None else None
    by_name = {w.name: w for w in weights}
    if gates and all(f"{part}_{g}" in by_name for part in ("W", "U", "b") for g in gates):
        return [
            _joined(name, [by_name[f"{part}_{g}"] for g in gates])
            for part, name in (("W", "kernel"), ("U", "recurrent_kernel"), ("b", "bias"))
        ]
    return [replace(w, name=keras1_weight_name(class_name, w.name) or w.name) for w in weights]


def _joined(name: str, parts: list[Weight]) -> Weight:
    """One weight made of ``parts`` concatenated along the last axis, read lazily."""
    first = parts[0]
    shape = (*first.shape[:-1], sum(p.shape[-1] for p in parts))

    def read(parts: list[Weight] = parts) -> np.ndarray:
        return np.concatenate([np.asarray(p.read()) for p in parts], axis=-1)

    location = f"{first.location} (+{len(parts) - 1} gates joined)"
    return Weight(name, shape, first.dtype, location, read)


def _has_keras1_kernel(key: str) -> bool:
    spec = catalogue.spec_for(key)
    return spec is not None and spec.keras1_kernel is not None


def keras1_notes(graph: ModelGraph) -> list[str]:
    """What a reader of this Keras 1 file should know: how its convolution kernels were read."""
    if not any(_has_keras1_kernel(layer.key) for _, layer in graph.walk()):
        return []
    backend = KERAS1_BACKEND.get()
    return [
        f"a Keras 1 file does not record its backend: convolution kernels are applied as {backend} did"
        + (" (--keras1-backend theano for a model made with Theano)" if backend == "tensorflow" else "")
    ]
