"""modelgraph: read, inspect, validate, render, diff and run saved Keras models without Keras.

>>> import modelgraph
>>> graph = modelgraph.load("model.keras")          # any Keras format, by content
>>> outputs = modelgraph.run(graph, {"image": x})   # pure NumPy, Keras's numbers

Public names are imported lazily so that ``import modelgraph`` (and ``modelgraph --version``)
stays fast.
"""

from __future__ import annotations

from typing import Any

from modelgraph._version import __version__

_EXPORTS = {
    "load": ("modelgraph.loading", "load"),
    "ModelGraph": ("modelgraph.graph", "ModelGraph"),
    "Layer": ("modelgraph.graph", "Layer"),
    "Node": ("modelgraph.graph", "Node"),
    "TensorRef": ("modelgraph.graph", "TensorRef"),
    "Weight": ("modelgraph.graph", "Weight"),
    "summarize": ("modelgraph.summary", "summarize"),
    "run": ("modelgraph.runner.api", "run"),
    "Runner": ("modelgraph.runner.interpreter", "Runner"),
    "validate": ("modelgraph.validate.api", "validate"),
    "render": ("modelgraph.render", "render"),
    "diff": ("modelgraph.diff", "diff"),
    "export_onnx": ("modelgraph.saving.onnx", "export_onnx"),
    "to_onnx": ("modelgraph.saving.onnx", "to_onnx"),
}

__all__ = [  # noqa: F822 - the names resolve lazily through __getattr__
    "__version__",
    "load",
    "ModelGraph",
    "Layer",
    "Node",
    "TensorRef",
    "Weight",
    "summarize",
    "run",
    "Runner",
    "validate",
    "render",
    "diff",
    "export_onnx",
    "to_onnx",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        module_name, attr = _EXPORTS[name]
        value = getattr(importlib.import_module(module_name), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'modelgraph' has no attribute {name!r}")
