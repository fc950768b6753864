"""Kernels: preprocessing family (see modelgraph/runner/registry.py for the contract)."""
