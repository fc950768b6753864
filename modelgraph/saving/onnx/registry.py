"""ONNX mappings are the catalogue's ``onnx`` concern: ``@register`` attaches one to its entries.

Like the runner's kernels (:mod:`modelgraph.runner.registry`), a mapping attaches itself to the
catalogue entry of each key it names (:func:`modelgraph.catalogue.attach`, slot ``"onnx"``; a key the
catalogue does not declare, or an entry that says why it has no mapping, is refused). Keys are the
catalogue's, stored on ``Layer.key`` (the exporter looks them up): the Keras class name
(``"Dense"``), ``"op:<Class>"`` for Keras 3 ops, ``"tf:<function>"`` for tf.keras TFOpLambda layers;
an alias (``Convolution2D``) resolves to its class's entry. Every family module in ``mappings/``
registers its functions; ``mappings/__init__.py`` imports them all, so the supported list is readable
in one file, and the catalogue imports that package when the ``onnx`` concern is first asked for.
The mapping modules import without the optional ``onnx`` package (``modelgraph layers`` reports ONNX
support without it); only building a model needs it (:func:`~modelgraph.saving.onnx._onnx.require_onnx`).

A mapping is called once per node as ``fn(ctx, *args, **kwargs)``, with the node's recorded call
structure, every tensor replaced by a :class:`~modelgraph.saving.onnx.emitter.Value` and constants
as recorded (the interpreter's ``training=``/``mask=None`` dropping applies). It writes nodes through
``ctx.e`` and returns one output (a Value, or a tensor name in Keras's layout) or a tuple of them in
``tensor_index`` order. It raises ``ctx.unsupported(key, value)`` for any config value it does not map.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from modelgraph import catalogue
from modelgraph.errors import UnsupportedConfigError
from modelgraph.runner.registry import KernelSpec
from modelgraph.saving.onnx.emitter import Emitter, Value

Shape = tuple[int | None, ...]
OnnxMapping = Callable[..., Any]


def register(*keys: str) -> Callable[[OnnxMapping], OnnxMapping]:
    """Attach a mapping to the catalogue entries of these keys (see the module docstring)."""
    return catalogue.provides("onnx", *keys)


def register_ranks(implementation: Callable[..., Any], keys_by_rank: Mapping[int, tuple[str, ...]]) -> None:
    """Register ``implementation(ctx, x, rank)`` for the keys of each rank (``Conv1D`` .. ``Conv3D``)."""
    for rank, keys in keys_by_rank.items():
        register(*keys)(partial(implementation, rank=rank))


def get_mapping(key: str) -> OnnxMapping | None:
    """The mapping for a layer key, or None."""
    spec = catalogue.spec_for(key, "onnx")
    return spec.onnx if spec is not None and callable(spec.onnx) else None


def supported() -> list[str]:
    """Every catalogue key (and alias) with an ONNX mapping, sorted."""
    mapped = {spec.key for spec in catalogue.all_specs() if callable(spec.onnx)}
    return sorted(name for name in catalogue.names() if catalogue.spec_for(name).key in mapped)


@dataclass
class MapContext:
    """What a mapping knows about the node it maps: the layer (as a :class:`KernelSpec`, whose
    config helpers the kernels share), the emitter, and the static shapes of the node's tensors."""

    spec: KernelSpec
    e: Emitter
    in_shapes: Sequence[Shape | None] = ()
    out_shapes: Sequence[Shape | None] = ()

    # config helpers (the kernels' own)
    @property
    def config(self) -> Mapping[str, Any]:
        return self.spec.config

    @property
    def class_name(self) -> str:
        return self.spec.class_name

    def get(self, key: str, default: Any = None) -> Any:
        return self.spec.get(key, default)

    def flag(self, key: str, default: bool = False) -> bool:
        return self.spec.flag(key, default)

    def unsupported(self, key: str, value: Any) -> UnsupportedConfigError:
        return self.spec.unsupported(key, value)

    def weight(self, name: str) -> np.ndarray:
        """A float weight as float32 (the kernels' dtype rules apply)."""
        w = self.spec.weight(name)
        return w.astype(np.float32) if w.dtype != np.float32 else w

    def const(self, array: Any, hint: str = "w") -> str:
        return self.e.const(np.asarray(array, dtype=np.float32), hint)

    def rank(self, i: int = 0) -> int:
        """Rank of the i-th input tensor (from static shapes)."""
        shape = self.in_shapes[i] if i < len(self.in_shapes) else None
        if shape is None:
            raise self.unsupported("input rank", "unknown")
        return len(shape)

    def out_rank(self, i: int = 0) -> int:
        shape = self.out_shapes[i] if i < len(self.out_shapes) else None
        if shape is None:
            raise self.unsupported("output rank", "unknown")
        return len(shape)

    def x(self, value: Any) -> str:
        """A tensor argument's name in Keras's layout."""
        if isinstance(value, Value):
            return self.e.logical(value)
        if isinstance(value, str):
            return value
        raise TypeError(f"{self.class_name}: expected a tensor argument, got {type(value).__name__}")


def is_tensor(value: Any) -> bool:
    return isinstance(value, Value)
