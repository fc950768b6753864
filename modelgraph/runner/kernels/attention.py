"""Kernels: attention family (see modelgraph/runner/registry.py for the contract)."""
