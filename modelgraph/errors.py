"""The exception hierarchy of modelgraph.

Exceptions mean a job could not be done; findings are data (see ``modelgraph.validate``).
Each family maps to one exit code, decided in one place in the CLI (``cli/exit_codes.py``):

* :class:`LoadError` and subclasses: the file cannot be read as a model (exit 3)
* :class:`UnsupportedError` and subclasses: recognised but not supported (exit 4)
* :class:`RunError` and subclasses: the runner failed while executing (exit 5)
* :class:`UsageError`: the caller asked for something that does not exist (exit 2)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

# Lone surrogates U+DC80..U+DCFF: bytes that were not UTF-8, kept by a "surrogateescape" decode (an
# HDF5 link name, say) so the name can still be used to open the object; and control characters
# (C0, DEL, C1), which a hostile name could use to move the cursor, rewrite the terminal's title or
# break a one-line message; and the Unicode bidirectional controls (embeddings, overrides, isolates,
# LRM/RLM/ALM), which make a terminal show text in another order than it is (a name could appear
# to be another one, or reorder the rest of the line).
_UNPRINTABLE = re.compile("[\udc80-\udcff\x00-\x1f\x7f-\x9f\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]")


def _escape(char: str) -> str:
    code = ord(char)
    if code >= 0xDC80:
        return f"\\x{code - 0xDC00:02x}"  # the byte itself
    return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}"  # C1, bidi: \\uNNNN


def printable(text: str) -> str:
    """``text`` safe to print on one line and to serialise to JSON: every byte that was not UTF-8 (a
    lone surrogate of a "surrogateescape" decode) written as ``\\xNN``, every control character as
    ``\\xNN`` (``\\uNNNN`` for C1 controls), so a file's names cannot inject terminal escapes or
    line breaks into a message or a report."""
    return _UNPRINTABLE.sub(lambda m: _escape(m.group()), text)


def did_you_mean(name: str, choices: Iterable[str], limit: int = 3) -> str:
    """``"; did you mean 'x'?"`` (or ``'x', 'y'``) for the choices closest to a mistyped ``name``, else ``""``."""
    import difflib

    pool = list(dict.fromkeys(choices))
    close = difflib.get_close_matches(name, pool, n=limit, cutoff=0.6)
    if not close:
        folded = {c.lower(): c for c in pool}
        close = [
            folded[c] for c in difflib.get_close_matches(name.lower(), list(folded), n=limit, cutoff=0.6)
        ]
    if not close:
        return ""
    return "; did you mean " + " or ".join(f"'{printable(c)}'" for c in close) + "?"


class ModelGraphError(Exception):
    """Base class of every error modelgraph raises on purpose. A string message is made
    :func:`printable` (a file's non-UTF-8 names end up in messages)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*(printable(a) if isinstance(a, str) else a for a in args))


class UsageError(ModelGraphError):
    """The request names something that does not exist (an unknown input, layer or option)."""


def config_only_model(model: str) -> UsageError:
    """The one wording for running or exporting a model whose file holds no weights."""
    return UsageError(
        f"'{model}' holds no weights (a config-only model): give its weights file "
        "(--weights FILE; modelgraph.load(path, weights=...) in Python)"
    )


class CatalogueError(ModelGraphError, ValueError):
    """A catalogue registration was refused: not a descriptor, a wrong type in one of its fields, or a
    name already registered (without ``replace=True``)."""


class PluginError(UsageError):
    """A plugin the user named cannot be loaded: missing, raising, or registering nonsense (exit 2)."""


# --- cannot load (exit 3) -------------------------------------------------------------------


class LoadError(ModelGraphError):
    """The file could not be read as a Keras model."""


class FormatError(LoadError):
    """The container is unreadable, truncated, or of no format modelgraph knows."""


class UnsupportedFormatError(LoadError):
    """A recognised format that is out of scope (a SavedModel directory, a subclassed model)."""


class SecurityError(LoadError):
    """The file tries something a reader must refuse (zip bomb, path traversal, HDF5 external link)."""


class ConfigError(LoadError):
    """The model config does not follow any Keras schema; ``where`` is a JSON path."""

    def __init__(self, message: str, where: str = "") -> None:
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class GraphError(LoadError):
    """The config's layer/node structure is broken."""


class DanglingReferenceError(GraphError):
    """A node or model input/output names a layer that does not exist."""


class IndexOutOfRangeError(GraphError):
    """A reference's node index or tensor index is past what its layer has."""


class CycleError(GraphError):
    """The layer graph has a cycle."""


class DuplicateNameError(GraphError):
    """Two layers (or ops) share one name."""


class DisconnectedGraphError(GraphError):
    """An output depends on an input layer that is not among the model's inputs."""


class WeightsError(LoadError):
    """Weights are missing, unreadable, or do not fit the architecture."""


# --- unsupported (exit 4) -------------------------------------------------------------------


class UnsupportedError(ModelGraphError):
    """Something recognised that this tool does not support."""


class UnsupportedLayerError(UnsupportedError):
    """The runner has no kernel for a layer class."""

    def __init__(self, class_name: str, layer: str | None = None) -> None:
        self.class_name = class_name
        self.layer = layer
        where = f" (layer '{layer}')" if layer else ""
        super().__init__(f"layer class '{class_name}' is not supported by the NumPy runner{where}")


class UnsupportedConfigError(UnsupportedError):
    """A kernel does not implement one config value; names the class, the key and the value."""

    def __init__(self, class_name: str, key: str, value: Any, layer: str | None = None) -> None:
        self.class_name = class_name
        self.key = key
        self.value = value
        self.layer = layer
        where = f" (layer '{layer}')" if layer else ""
        super().__init__(f"{class_name}: {key}={value!r} is not supported{where}")


class NotConvertibleError(UnsupportedError):
    """A model cannot be written faithfully; ``refusals`` names every layer that stops it."""

    def __init__(self, target: str, refusals: list[Any]) -> None:
        self.refusals = list(refusals)
        listed = "; ".join(str(r) for r in self.refusals)
        count = len(self.refusals)
        super().__init__(
            f"cannot write {target}: {count} layer{'s' if count != 1 else ''} cannot be converted: {listed}"
        )


class SecurityRefusedError(UnsupportedError):
    """A writer refuses a model whose input files carry error-severity security findings (the rules
    ``validate`` reports); ``findings`` lists them, and nothing is written."""

    def __init__(self, target: str, source: str, findings: list[Any], shown: int = 3) -> None:
        self.target = target
        self.source = source
        self.findings = list(findings)
        listed = "; ".join(_finding_text(f) for f in self.findings[:shown])
        more = len(self.findings) - shown
        if more > 0:
            listed += f"; and {more} more"
        count = len(self.findings)
        super().__init__(
            f"refusing to write {target}: {source} has {count} security error{'s' if count != 1 else ''}: "
            f"{listed}; see them all with: modelgraph validate {source}"
        )


def _finding_text(finding: Any, limit: int = 200) -> str:
    """``SEC006 at $.config.layers[3]: layer 'x' is a TFSMLayer ...`` (the message cut to ``limit``)."""
    message = str(getattr(finding, "message", finding))
    if len(message) > limit:
        message = message[: limit - 3] + "..."
    where = getattr(finding, "where", "")
    return f"{getattr(finding, 'rule', '?')}{f' at {where}' if where else ''}: {message}"


class ToolMissingError(UnsupportedError):
    """An external program (Graphviz ``dot``) or an optional package (onnx, cramjam) is not installed."""


# --- run failed (exit 5) --------------------------------------------------------------------


class RunError(ModelGraphError):
    """Execution failed."""


class ToolFailedError(RunError):
    """An external program (Graphviz ``dot``) ran but failed or ran past its time limit (exit 5)."""


class KernelError(RunError):
    """A kernel raised; names the node, the layer and the input shapes. ``__cause__`` is the original."""

    def __init__(self, node: str, class_name: str, input_shapes: Any, cause: BaseException) -> None:
        self.node = node
        self.class_name = class_name
        self.input_shapes = input_shapes
        super().__init__(
            f"{class_name} node {node} failed on input shapes {input_shapes}: {type(cause).__name__}: {cause}"
        )


# --- the shape-rule protocol (modelgraph.shape_rules): raised by rules, recorded by inference ------


class ShapeError(Exception):
    """The model is inconsistent at this node (recorded as a problem; outputs become unknown)."""

    def __init__(self, message: str, kind: str = "shape") -> None:
        super().__init__(message)
        self.kind = kind


class Unknown(Exception):
    """A rule needs an input shape (or a config value) that is not known: outputs are unknown."""
