"""The kernel registry: Keras class name -> kernel factory.

The contract every kernel follows (kernels/<family>.py):

* A factory attaches to the catalogue entry of its key with ``@register("Dense")`` (several names
  allowed; the entry must be declared in :mod:`modelgraph.catalogue`). Keras 3 op nodes
  (``keras.src.ops.*``, whose class names clash with layers) are keyed ``"op:<ClassName>"``
  (``"op:Add"``); tf.keras ``TFOpLambda``/``SlicingOpLambda`` are keyed ``"tf:<function>"``
  (``"tf:__operators__.add"``, ``"tf:math.multiply"``).
* The factory receives a :class:`KernelSpec` once, at plan time, reads only the config keys it
  uses (with Keras's defaults), pre-transforms weights for speed, and raises
  ``UnsupportedConfigError(class_name, key, value, layer)`` for any value it does not implement.
* It returns a callable invoked as ``fn(*args, **kwargs)`` with the node's recorded call structure,
  tensors replaced by NumPy arrays, constants as recorded. It returns one array or a tuple of arrays
  (a node's outputs in ``tensor_index`` order).
* The interpreter drops ``training=False/None`` and ``mask=None`` before the call. A node recorded
  with ``training=True`` whose catalogue entry is ``training_sensitive`` (Dropout, BatchNorm,
  noise layers) is refused centrally with ``UnsupportedConfigError``; for every other kernel
  ``training`` has no effect and is dropped too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from modelgraph import catalogue
from modelgraph.errors import UnsupportedConfigError, UnsupportedLayerError, WeightsError

Kernel = Callable[..., Any]


@dataclass(frozen=True)
class KernelSpec:
    """What a kernel factory gets to know about one layer."""

    name: str
    class_name: str
    config: Mapping[str, Any]
    weights: Mapping[str, np.ndarray] = field(default_factory=dict)
    keras_version: tuple[int, int, int] = (3, 0, 0)
    compute_dtype: str = "float32"

    def get(self, key: str, default: Any = None) -> Any:
        """A config value, or ``default`` when the key is absent."""
        return self.config.get(key, default)

    def unsupported(self, key: str, value: Any) -> UnsupportedConfigError:
        """The error for a config value this kernel does not implement (raise it)."""
        return UnsupportedConfigError(self.class_name, key, value, self.name)

    def flag(self, key: str, default: bool = False) -> bool:
        """A boolean config value; None means the default, anything not bool-like is unsupported."""
        value = self.config.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool | int | np.bool_):
            raise self.unsupported(key, value)
        return bool(value)

    def weight(self, name: str, *, integer: bool = False) -> np.ndarray:
        """A weight by canonical name; :class:`WeightsError` naming the layer and the weights it has
        when it is missing. Unless ``integer`` (a quantized kernel reading its codes), integer storage
        raises :class:`UnsupportedConfigError`: a float kernel must not read a quantized sublayer's
        codes as plain numbers."""
        try:
            value = np.asarray(self.weights[name])
        except KeyError:
            raise WeightsError(
                f"{self.class_name} layer '{self.name}' has no weight {name!r}; it has {sorted(self.weights)}"
            ) from None
        if not integer and value.dtype.kind not in "fc":
            raise UnsupportedConfigError(
                self.class_name, f"weights/{name} dtype", str(value.dtype), self.name
            )
        return value


KernelFactory = Callable[[KernelSpec], Kernel]


@dataclass(frozen=True)
class KernelEntry:
    factory: KernelFactory
    training_sensitive: bool


# Plan-time fused steps (keys under ``modelgraph/``) are not Keras classes: they stay out of the
# catalogue and are kept here.
_FUSED: dict[str, KernelFactory] = {}
_FUSED_PREFIX = "modelgraph/"
# Fused steps whose kernels always return a new array, never a view of an input (``fresh_output``).
_FRESH: set[str] = set()


def register(*class_names: str, fresh_output: bool = False) -> Callable[[KernelFactory], KernelFactory]:
    """Attach a kernel factory to the catalogue entries of these keys (see the module docstring).
    ``fresh_output`` (fused steps only): its kernels always return a new array, so a pass may let
    the output's only reader overwrite it (:func:`returns_fresh_array`)."""

    def decorate(factory: KernelFactory) -> KernelFactory:
        for class_name in class_names:
            if class_name.startswith(_FUSED_PREFIX):
                if class_name in _FUSED:
                    raise RuntimeError(f"kernel for {class_name!r} registered twice")
                _FUSED[class_name] = factory
                if fresh_output:
                    _FRESH.add(class_name)
            elif fresh_output:
                raise ValueError(
                    f"fresh_output is for fused steps; {class_name!r} says it in its catalogue entry"
                )
            else:
                catalogue.attach(class_name, "kernel", factory)
        return factory

    return decorate


def returns_fresh_array(key: str) -> bool:
    """Whether the fused step ``key`` was registered with ``fresh_output`` (False for any other key,
    and for a step whose module is not imported yet: the passes that ask import the fused steps)."""
    return key in _FRESH


def get_entry(key: str, layer: str | None = None) -> KernelEntry:
    """The kernel of a catalogue key (with its training sensitivity), or :class:`UnsupportedLayerError`."""
    if key.startswith(_FUSED_PREFIX):
        import modelgraph.runner.kernels  # noqa: F401  (fused steps register with the kernels)

        if key in _FUSED:
            return KernelEntry(_FUSED[key], False)
        raise UnsupportedLayerError(key, layer)
    spec = catalogue.spec_for(key, "kernel")
    if spec is None or not callable(spec.kernel):
        raise UnsupportedLayerError(key, layer)
    return KernelEntry(spec.kernel, spec.training_sensitive)


def get_kernel(key: str, layer: str | None = None) -> KernelFactory:
    """The kernel factory for a key, or :class:`UnsupportedLayerError`."""
    return get_entry(key, layer).factory


def supported() -> list[str]:
    """Every catalogue key (and alias) with a kernel, sorted."""
    runnable = {spec.key for spec in catalogue.all_specs() if callable(spec.kernel)}
    return sorted(name for name in catalogue.names() if catalogue.spec_for(name).key in runnable)
