"""Validation rules, one module per family."""
