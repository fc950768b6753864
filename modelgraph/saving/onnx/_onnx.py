"""The optional ``onnx`` package, imported in one place with a clear error when it is missing."""

from __future__ import annotations

from typing import Any

from modelgraph.errors import ToolMissingError

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:  # pragma: no cover - exercised only without the extra
    onnx = None  # type: ignore[assignment]
    TensorProto = helper = numpy_helper = None  # type: ignore[assignment]

_DTYPES = {
    "float32": 1,
    "uint8": 2,
    "int8": 3,
    "uint16": 4,
    "int16": 5,
    "int32": 6,
    "int64": 7,
    "string": 8,
    "bool": 9,
    "float16": 10,
    "float64": 11,
    "uint32": 12,
    "uint64": 13,
    "bfloat16": 16,
}


def require_onnx() -> Any:
    """The ``onnx`` module, or :class:`ToolMissingError` saying how to install it."""
    if onnx is None:
        raise ToolMissingError(
            "ONNX export needs the 'onnx' package, which is not installed: pip install 'modelgraph[onnx]'"
        )
    return onnx


def onnx_dtype(dtype: str) -> int:
    """The ONNX TensorProto element type of a NumPy / Keras dtype name."""
    try:
        return _DTYPES[str(dtype)]
    except KeyError:
        raise ValueError(f"no ONNX element type for dtype {dtype!r}") from None
