"""Kernels: ops family (see modelgraph/runner/registry.py for the contract)."""
