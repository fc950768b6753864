"""Every kernel family, listed here so the supported list is readable in one file.

These are the reference kernels; the fast kernels chosen in their place at plan time and the plan's
merged steps are listed in ``modelgraph/runner/fast/__init__.py``.
"""

from modelgraph import catalogue

#: The family modules; each attaches its kernels to the catalogue entries of its keys (``@register``).
FAMILIES = ("applications", "attention", "conv", "core", "merge", "normalization", "ops", "pooling",
            "preprocessing", "recurrent", "reshaping")  # fmt: skip

catalogue.load_families(__name__, FAMILIES)
