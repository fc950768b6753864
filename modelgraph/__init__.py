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
    "set_threads": ("modelgraph.runner.threads", "set_threads"),
    "validate": ("modelgraph.validate.api", "validate"),
    "render": ("modelgraph.render", "render"),
    "diff": ("modelgraph.diff", "diff"),
    "save": ("modelgraph.saving.api", "save"),
    "extract": ("modelgraph.saving.extract", "extract"),
    "export_onnx": ("modelgraph.saving.onnx", "export_onnx"),
    "to_onnx": ("modelgraph.saving.onnx", "to_onnx"),
    "load_plugin": ("modelgraph.plugins", "load_plugin"),
}

__all__ = [  # noqa: F822 - the names resolve lazily through __getattr__
    "__version__",
    "load",
    "set_threads",
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
    "save",
    "extract",
    "export_onnx",
    "to_onnx",
    "load_plugin",
]


def _find_source_tree_packages() -> None:
    """Let ``python -m modelgraph`` run from a source checkout that is not installed.

    Installed, ``modelgraph.cli`` and ``modelgraph.schemas`` are ordinary subpackages (pyproject's
    package-dir remap puts the repository's ``cli/`` and ``schemas/`` there). In a bare checkout they
    sit beside ``modelgraph/`` instead; a finder placed *last* on ``sys.meta_path`` answers for
    exactly those two names from there, so it never shadows an installed copy.
    """
    import sys
    from importlib.machinery import PathFinder
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    if not (root / "pyproject.toml").is_file() or not (root / "cli" / "__init__.py").is_file():
        return

    class _SourceTreeFinder:
        names = {"modelgraph.cli", "modelgraph.schemas"}

        @classmethod
        def find_spec(cls, fullname: str, path: Any = None, target: Any = None) -> Any:
            if fullname not in cls.names:
                return None
            return PathFinder.find_spec(fullname, [str(root)])

    if not any(getattr(f, "__name__", "") == "_SourceTreeFinder" for f in sys.meta_path):
        sys.meta_path.append(_SourceTreeFinder)  # type: ignore[arg-type]


_find_source_tree_packages()


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        module_name, attr = _EXPORTS[name]
        value = getattr(importlib.import_module(module_name), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'modelgraph' has no attribute {name!r}")
