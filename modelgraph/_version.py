"""The package version, kept apart so that `modelgraph --version` imports nothing heavy."""

__version__ = "0.1.0"
