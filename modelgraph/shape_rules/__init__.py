"""Shape and expected-weight rules, one module per layer family (imported explicitly here).

Each rule attaches to the catalogue entry of its key (:mod:`modelgraph.catalogue`); the dimension
helpers live in :mod:`modelgraph.shape_rules._base` and are public here; the driver and the public API are in
:mod:`modelgraph.shapes`.
"""

from modelgraph.shape_rules import attention, core, ops, recurrent, spatial
from modelgraph.shape_rules._base import (
    Call,
    Shape,
    ShapeError,
    TensorSpec,
    Unknown,
    channels_first,
    compute_dtype,
    einsum_int4_flat_shape,
    expected_for,
    extra_batch_axes,
    flatten,
    fmt,
    inner_record,
    is_float,
    is_size_list,
    need,
    quantization_mode,
    result_dtype,
    same_dim,
    shape_rule,
    variable_dtype,
    weight_rule,
)

__all__ = [
    "Call",
    "Shape",
    "ShapeError",
    "TensorSpec",
    "Unknown",
    "attention",
    "channels_first",
    "compute_dtype",
    "core",
    "einsum_int4_flat_shape",
    "expected_for",
    "extra_batch_axes",
    "flatten",
    "fmt",
    "inner_record",
    "is_float",
    "is_size_list",
    "need",
    "ops",
    "quantization_mode",
    "recurrent",
    "result_dtype",
    "same_dim",
    "shape_rule",
    "spatial",
    "variable_dtype",
    "weight_rule",
]
