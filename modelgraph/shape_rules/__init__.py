"""Shape and expected-weight rules, one module per layer family (imported explicitly here).

The registry and the dimension helpers live in :mod:`modelgraph.shape_rules._base`; the driver and
the public API are in :mod:`modelgraph.shapes`.
"""

from modelgraph.shape_rules import attention, core, ops, recurrent, spatial
from modelgraph.shape_rules._base import SHAPE_RULES, WEIGHT_RULES, shape_rule, weight_rule

__all__ = [
    "SHAPE_RULES",
    "WEIGHT_RULES",
    "attention",
    "core",
    "ops",
    "recurrent",
    "shape_rule",
    "spatial",
    "weight_rule",
]
