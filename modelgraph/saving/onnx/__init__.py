"""ONNX export without TensorFlow: ``to_onnx(graph)`` in memory, ``export_onnx(graph, path)`` to a file.

Needs the optional ``onnx`` package (``pip install 'modelgraph[onnx]'``). See docs/onnx.md for the
semantics the mappings rely on (layouts, gate orders, masks).
"""

from __future__ import annotations

from modelgraph.saving.onnx.export import (
    DEFAULT_OPSET,
    ExportRefusedError,
    ExportResult,
    export_onnx,
    to_onnx,
)

__all__ = ["DEFAULT_OPSET", "ExportRefusedError", "ExportResult", "export_onnx", "to_onnx"]
