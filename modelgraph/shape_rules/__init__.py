"""Shape and expected-weight rules, one module per layer family (imported explicitly here).

Each rule attaches to the catalogue entry of its key (:mod:`modelgraph.catalogue`); the dimension
helpers live in :mod:`modelgraph.shape_rules._base`; the driver and the public API are in
:mod:`modelgraph.shapes`.
"""

from modelgraph.shape_rules import attention, core, ops, recurrent, spatial
from modelgraph.shape_rules._base import ShapeError, Unknown, shape_rule, weight_rule

__all__ = ["ShapeError", "Unknown", "attention", "core", "ops", "recurrent", "shape_rule", "spatial", "weight_rule"]
