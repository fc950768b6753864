"""Keras 3 op nodes that a legacy ``.h5`` can carry as a layer both tf_keras 2 and Keras 3 have.

tf_keras has no op nodes, so an op is written into a ``.h5`` only where a layer of both Keras
versions computes the very same numbers (float arithmetic, operation for operation):

* ``Add``/``Subtract``/``Multiply``/``Maximum``/``Minimum`` of two float tensors of one shape and
  dtype -> the merge layer of that name called on ``[a, b]`` (it applies the same op to the pair);
* ``x + c``, ``c + x``, ``x - c``, ``c - x``, ``x * c``, ``c * x`` for a float tensor ``x`` and a
  number ``c`` -> ``Rescaling(scale, offset)``, which computes ``x * scale + offset``: a scale of
  ``1`` or ``-1`` and an offset of ``0`` change no bit of the result (IEEE multiplication by
  ``+-1`` and addition of zero are exact).

Everything else (division, comparisons, reshapes, reductions, activations, ...) stays refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modelgraph import catalogue

# Which op becomes which layer is in the op's catalogue entry (``legacy_h5``, catalogue/ops.py).
_FLOATS = frozenset({"float16", "float32", "float64", "bfloat16"})


def op_as_layer(entry: Mapping[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]] | str:
    """``(class name, layer config, Keras 3 node calling it)`` for a Keras 3 op record, or the
    reason it has no layer both loaders share."""
    nodes = entry.get("inbound_nodes") or []
    op = entry["class_name"]
    if len(nodes) != 1 or nodes[0].get("kwargs") or len(nodes[0].get("args") or []) != 2:
        return "tf_keras has no op nodes"
    a, b = nodes[0]["args"]
    tensors = [t for t in (a, b) if _is_tensor(t)]
    spec = catalogue.spec_for(f"op:{op}")
    rules = spec.legacy_h5 if spec is not None else None
    if len(tensors) == 2 and rules is not None and rules.merge_layer is not None:
        if _spec(a) != _spec(b) or _spec(a)[1] not in _FLOATS:
            return f"tf_keras has no op nodes; a {op} layer needs two float tensors of one shape"
        config = {"name": entry["name"], "trainable": True, "dtype": _spec(a)[1]}
        return rules.merge_layer, config, {"args": [[a, b]], "kwargs": {}}
    if len(tensors) == 1 and rules is not None and rules.rescaling is not None:
        tensor, number = (a, b) if _is_tensor(a) else (b, a)
        if not _is_number(number) or _spec(tensor)[1] not in _FLOATS:
            return "tf_keras has no op nodes; only a float tensor and a number make a Rescaling layer"
        scale, offset = rules.rescaling(float(number), tensor is a)
        config = {
            "name": entry["name"],
            "trainable": True,
            "dtype": _spec(tensor)[1],
            "scale": scale,
            "offset": offset,
        }
        return "Rescaling", config, {"args": [tensor], "kwargs": {}}
    return "tf_keras has no op nodes"


def _is_tensor(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get("class_name") == "__keras_tensor__"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _spec(tensor: Mapping[str, Any]) -> tuple[Any, Any]:
    config = tensor["config"]
    return tuple(config.get("shape") or ()), config.get("dtype")
