"""Kernels: normalization family (see modelgraph/runner/registry.py for the contract)."""
