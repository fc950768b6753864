"""Every ONNX mapping family, listed here so the supported list is readable in one file."""

from modelgraph import catalogue

#: The family modules; each attaches its mappings to the catalogue entries of its keys (``@register``).
FAMILIES = ("attention", "conv", "core", "merge", "normalization", "ops", "pooling", "preprocessing",
            "recurrent", "resample", "reshaping")  # fmt: skip

catalogue.load_families(__name__, FAMILIES)
