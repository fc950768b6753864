"""Kernels: reshaping family (see modelgraph/runner/registry.py for the contract)."""
