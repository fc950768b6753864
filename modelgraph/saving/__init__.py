"""Writers: a :class:`ModelGraph` -> a Keras 3 ``.keras`` archive (the legacy ``.h5`` writer is not built yet).

>>> import modelgraph
>>> graph = modelgraph.load("old_model.h5")
>>> report = modelgraph.save(graph, "model.keras")   # Keras 3 loads it in safe mode
"""

from __future__ import annotations

from modelgraph.saving.api import SaveReport, save

__all__ = ["SaveReport", "save"]
