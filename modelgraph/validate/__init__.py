"""Validation rules, one module per family; ``modelgraph.validate(path)`` runs them all (see api.py)."""

from modelgraph._callable_module import make_callable

make_callable(__name__, "modelgraph.validate.api", "validate")
