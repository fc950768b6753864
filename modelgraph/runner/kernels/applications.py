"""Kernels: applications family (see modelgraph/runner/registry.py for the contract)."""
