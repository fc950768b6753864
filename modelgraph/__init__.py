"""modelgraph: read, inspect, validate, render, diff and run saved Keras models without Keras."""

from modelgraph._version import __version__

__all__ = ["__version__"]
