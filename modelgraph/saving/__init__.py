"""Writers: the loaders' mirror (ONNX export in :mod:`modelgraph.saving.onnx`)."""
