"""Catalogue rules (``CAT``): custom classes and functions modelgraph does not know.

A class the catalogue has no entry for (a user's custom layer) is read, drawn and checked like any
other, but has no shape rule, MAC count, kernel or ONNX mapping, and ``convert`` refuses it unless
told to keep it. A custom activation a config names by a registered name is the same for the
layers that use it; a custom initializer only matters to Keras (it needs the code to load). One finding per class or function, naming its layers and the two ways on:
a plugin (``--plugin``, docs/plugins.md) or ``convert --keep-unknown``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from modelgraph import catalogue
from modelgraph.graph import Layer, ModelGraph
from modelgraph.validate.issue import Issue
from modelgraph.validate.registry import make_issue

_SKIPPED_KINDS = ("input", "model")
_BUILTIN_FUNCTION_MODULES = ("keras.", "tf_keras.", "tensorflow.")
_SHOWN = 5


def catalogue_issues(graph: ModelGraph, path: str = "") -> list[Issue]:
    """``CAT001`` for every class and custom activation the catalogue does not know."""
    classes: dict[str, list[str]] = {}
    activations: dict[str, list[str]] = {}
    initializers: dict[str, list[str]] = {}
    for label, layer in _layers(graph, ()):
        if layer.kind not in _SKIPPED_KINDS and catalogue.spec_for(layer.key) is None:
            classes.setdefault(layer.class_name, []).append(label)
        for name in _custom_activations(layer.config):
            activations.setdefault(name, []).append(label)
        for name in _custom_initializers(layer.config):
            initializers.setdefault(name, []).append(label)
    issues = [
        _issue(f"class '{name}'", labels, path, "no shape rule, MAC count, kernel or ONNX mapping")
        for name, labels in classes.items()
    ]
    issues += [
        _issue(f"custom activation '{name}'", labels, path, "the layers using it cannot run or export")
        for name, labels in activations.items()
    ]
    issues += [
        _issue(f"custom initializer '{name}'", labels, path, "Keras needs its code to load the model")
        for name, labels in initializers.items()
    ]
    return issues


def _issue(what: str, labels: list[str], path: str, consequence: str) -> Issue:
    shown = ", ".join(f"'{label}'" for label in labels[:_SHOWN])
    more = f" and {len(labels) - _SHOWN} more" if len(labels) > _SHOWN else ""
    message = (
        f"{what} is not known to modelgraph ({consequence}): layer{'s' if len(labels) > 1 else ''} "
        f"{shown}{more}; describe it in a plugin (modelgraph --plugin FILE.py, see docs/plugins.md)"
    )
    return make_issue("CAT001", message, f"layer '{labels[0]}'", path=path)


def _layers(graph: ModelGraph, prefix: tuple[str, ...]) -> Iterator[tuple[str, Layer]]:
    for layer in graph.layers:
        yield "/".join((*prefix, layer.name)), layer
        if layer.subgraph is not None:
            yield from _layers(layer.subgraph, (*prefix, layer.name))


def _custom_activations(config: Mapping[str, Any]) -> Iterator[str]:
    """Registered names of custom functions the config's ``*activation`` keys name and no plugin
    registered (Keras 3 writes them as ``{"class_name": "function", "config": "pkg>name"}``)."""
    for key, value in config.items():
        if not key.endswith("activation") or not isinstance(value, Mapping):
            continue
        name, module = value.get("config"), value.get("module") or ""
        if value.get("class_name") != "function" or not isinstance(name, str):
            continue
        if module.startswith(_BUILTIN_FUNCTION_MODULES):
            continue
        if catalogue.function_spec("activation", name, builtin=False) is None:
            yield name


def _custom_initializers(config: Mapping[str, Any]) -> Iterator[str]:
    """Registered names of custom initializers the config's ``*_initializer`` keys name (a
    ``pkg>Name`` registered name, or a module outside Keras) that no plugin registered."""
    for key, value in config.items():
        if not key.endswith("_initializer") or not isinstance(value, Mapping):
            continue
        name = value.get("registered_name") or value.get("class_name")
        module = value.get("module")
        if not isinstance(name, str):
            continue
        outside = isinstance(module, str) and not module.startswith(_BUILTIN_FUNCTION_MODULES)
        if (">" in name or outside) and catalogue.function_spec("initializer", name) is None:
            yield name
