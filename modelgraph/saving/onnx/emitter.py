"""The emitter: the one object that writes ONNX nodes, initializers and names for the graph walk.

It owns what every mapping would otherwise repeat:

* unique names (a hint per tensor, numbered on collision; model input and output names reserved);
* initializers deduplicated by content (a shared layer, or two layers with equal weights, store
  their arrays once);
* layouts: a :class:`Value` is a tensor in Keras's logical layout, possibly stored transposed
  (``perm``: the stored tensor is ``numpy.transpose(logical, perm)``). Convolutions store NCHW;
  layout-agnostic mappings (activations, batch norm, adds, padding) keep whatever layout their input
  has, and :meth:`Emitter.logical` / :meth:`Emitter.in_layout` insert one Transpose per tensor and
  layout only where a mapping needs another one. So a chain of convolutions stays NCHW and pays
  two transposes, at its ends.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from modelgraph.saving.onnx._onnx import helper, numpy_helper, onnx_dtype

Perm = tuple[int, ...]


@dataclass(frozen=True)
class Value:
    """A tensor of the exported graph: its ONNX name, logical rank and stored layout."""

    name: str
    rank: int | None = None
    perm: Perm | None = None
    dtype: str = "float32"

    @property
    def is_logical(self) -> bool:
        return self.perm is None or self.perm == tuple(range(len(self.perm)))


def inverse(perm: Perm) -> Perm:
    """The permutation that undoes ``perm``."""
    return tuple(int(i) for i in np.argsort(perm))


class Emitter:
    """Collects nodes and initializers; every mapping writes through it."""

    def __init__(self, reserved: set[str] | None = None, opset: int = 17) -> None:
        self.opset = opset
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._names: set[str] = set(reserved or ())
        self._counters: dict[str, int] = {}
        self._by_content: dict[tuple[str, tuple[int, ...], bytes], str] = {}
        self._layouts: dict[tuple[str, Perm], str] = {}
        self.scope = ""

    # --- names --------------------------------------------------------------------------------

    def unique(self, hint: str) -> str:
        """A tensor or node name not used before, derived from ``hint`` (scoped by the current layer)."""
        base = (self.scope + hint) if hint else (self.scope or "t")
        name = base
        n = self._counters.get(base, 0)
        while name in self._names:
            n += 1
            name = f"{base}_{n}"
        self._counters[base] = n
        self._names.add(name)
        return name

    def reserve(self, name: str) -> None:
        self._names.add(name)

    # --- initializers ---------------------------------------------------------------------------

    def const(self, value: Any, hint: str = "const", dtype: Any = None) -> str:
        """An initializer holding ``value`` (deduplicated by dtype, shape and bytes)."""
        array = np.asarray(value, dtype=dtype)
        if array.dtype == np.float64:
            array = array.astype(np.float32)
        array = np.ascontiguousarray(array)
        data = memoryview(array).cast("B") if array.size else b""
        key = (array.dtype.str, array.shape, hashlib.sha256(data).digest())
        found = self._by_content.get(key)
        if found is not None:
            return found
        name = self.unique(hint)
        self.initializers.append(numpy_helper.from_array(array, name))
        self._by_content[key] = name
        return name

    def ints(self, values: Any, hint: str = "shape") -> str:
        """An int64 initializer (shapes, axes, pads, indices)."""
        return self.const(np.asarray(values, dtype=np.int64), hint)

    # --- nodes ----------------------------------------------------------------------------------

    def op(
        self, op_type: str, inputs: list[str], hint: str | None = None, outputs: int = 1, **attrs: Any
    ) -> Any:
        """Append one node; returns its output name (or the list of names when ``outputs`` > 1).
        An empty input name stands for an omitted optional input."""
        names = [self.unique(hint or op_type.lower()) for _ in range(outputs)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        node = helper.make_node(op_type, inputs, names, name=self.unique(f"{hint or op_type}/op"), **attrs)
        self.nodes.append(node)
        return names[0] if outputs == 1 else names

    def reduce(
        self, op_type: str, x: str, axes: list[int] | None, keepdims: int = 1, hint: str | None = None
    ) -> str:
        """A Reduce* node over ``axes`` (None: all), whichever way the opset takes its axes."""
        as_input = op_type == "ReduceSum" or self.opset >= 18
        if axes is None:
            return self.op(op_type, [x], hint, keepdims=keepdims)
        if as_input:
            return self.op(op_type, [x, self.ints(list(axes), "axes")], hint, keepdims=keepdims)
        return self.op(op_type, [x], hint, axes=list(axes), keepdims=keepdims)

    def cast(self, name: str, dtype: str) -> str:
        return self.op("Cast", [name], "cast", to=onnx_dtype(dtype))

    # --- layouts --------------------------------------------------------------------------------

    def logical(self, value: Value) -> str:
        """The tensor's name in Keras's layout (one Transpose, made once per tensor)."""
        if value.is_logical:
            return value.name
        return self._transposed(value.name, inverse(value.perm))  # type: ignore[arg-type]

    def in_layout(self, value: Value, perm: Perm) -> str:
        """The tensor stored as ``transpose(logical, perm)``."""
        if value.perm == perm or (value.is_logical and perm == tuple(range(len(perm)))):
            return value.name
        if value.is_logical:
            return self._transposed(value.name, perm)
        # stored = L.T(p); wanted = L.T(q) = stored.T(p^-1 then q)
        p = value.perm
        assert p is not None
        composed = tuple(inverse(p)[i] for i in perm)
        return self._transposed(value.name, composed)

    def _transposed(self, name: str, perm: Perm) -> str:
        key = (name, perm)
        found = self._layouts.get(key)
        if found is None:
            found = self.op("Transpose", [name], f"{name}/T", perm=list(perm))
            self._layouts[key] = found
        return found
