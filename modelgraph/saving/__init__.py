"""Writers: a :class:`ModelGraph` -> a Keras 3 ``.keras`` archive or a legacy ``.h5`` (ONNX export in
:mod:`modelgraph.saving.onnx`).

>>> import modelgraph
>>> graph = modelgraph.load("old_model.h5")
>>> report = modelgraph.save(graph, "model.keras")   # Keras 3 loads it in safe mode
>>> sub = modelgraph.extract(graph, outputs=["dense_2"], inputs=["dense"])
"""

from __future__ import annotations

from modelgraph.saving.api import SaveReport, save
from modelgraph.saving.extract import extract

__all__ = ["SaveReport", "extract", "save"]
