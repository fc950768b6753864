"""Loaders, one module per container format."""
