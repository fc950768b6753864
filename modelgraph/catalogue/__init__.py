"""The layer catalogue: one :class:`LayerSpec` per Keras class, registered once.

Every family module below lists its entries in ``SPECS``; this list of modules is the whole
catalogue. The key of a layer is decided once, by :func:`key_of`, when the graph is built, and stored
on :attr:`modelgraph.graph.Layer.key`; shape inference, stats, validate, diff and the runner look the
entry up by that key with :func:`spec_for`.

Implementations live next to their kind (shape rules in :mod:`modelgraph.shape_rules`, MAC rules in
:mod:`modelgraph.stats`, kernels in :mod:`modelgraph.runner.kernels`, ONNX mappings in
:mod:`modelgraph.saving.onnx.mappings`) and attach themselves to the entry of the key they name
(:func:`attach`); those modules are imported only when a concern is asked for (:data:`PROVIDERS`), so
reading a model does not import the runner. Attaching needs no optional package (the ONNX mappings
import without ``onnx``; only building a model does).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from types import ModuleType
from typing import Any

from modelgraph.catalogue.spec import CONCERNS, LayerSpec, missing_concerns, support

__all__ = [
    "CONCERNS",
    "LayerSpec",
    "all_specs",
    "attach",
    "declared",
    "is_layer_class",
    "key_of",
    "load_families",
    "missing_concerns",
    "names",
    "provides",
    "spec_for",
    "support",
]

#: The catalogue: every family module, each listing its entries in ``SPECS``.
FAMILIES: tuple[str, ...] = (
    "applications",
    "attention",
    "conv",
    "core",
    "merge",
    "normalization",
    "ops",
    "pooling",
    "preprocessing",
    "recurrent",
    "reshaping",
    "tf_ops",
)

# The modules that attach each implementation slot, imported on first use of that slot.
PROVIDERS: Mapping[str, str] = {
    "shape": "modelgraph.shape_rules",
    "weight_shapes": "modelgraph.shape_rules",
    "macs": "modelgraph.stats",
    "kernel": "modelgraph.runner.kernels",
    "onnx": "modelgraph.saving.onnx.mappings",
}
OP_LAMBDA_CLASSES = ("TFOpLambda", "SlicingOpLambda")

_SPECS: dict[str, LayerSpec] = {}
_ALIASES: dict[str, str] = {}
_unloaded: set[str] = set(PROVIDERS.values())


def _register(module: ModuleType) -> None:
    family = module.__name__.rsplit(".", 1)[1]
    for spec in module.SPECS:
        for name in (spec.key, *(a.name for a in spec.aliases)):
            if name in _SPECS or name in _ALIASES:
                raise RuntimeError(f"catalogue: {name!r} is declared twice")
        # The entry is the family module's own new object: set its family in place (replace() would
        # copy 396 entries at every start-up).
        object.__setattr__(spec, "family", family)
        _SPECS[spec.key] = spec
        _ALIASES.update({a.name: spec.key for a in spec.aliases})


for _family in FAMILIES:
    _register(importlib.import_module(f"modelgraph.catalogue.{_family}"))


def _canonical(key: str) -> str:
    return _ALIASES.get(key, key)


def _load(slots: tuple[str, ...]) -> None:
    for slot in slots:
        module = PROVIDERS.get(slot)
        if module is not None and module in _unloaded:
            _unloaded.discard(module)
            importlib.import_module(module)


def spec_for(key: str, *slots: str) -> LayerSpec | None:
    """The entry of a catalogue key or alias (None when the catalogue does not know it).

    ``slots`` names the implementation slots the caller reads (``"shape"``, ``"kernel"``, ...): their
    provider modules are imported first, so those slots are filled.
    """
    if slots and _unloaded:
        _load(slots)
    return _SPECS.get(_ALIASES.get(key, key))


def declared() -> list[LayerSpec]:
    """Every entry as declared, without importing the implementation providers (for data fields)."""
    return list(_SPECS.values())


def all_specs() -> list[LayerSpec]:
    """Every entry with every slot filled, sorted by key."""
    _load(tuple(PROVIDERS))
    return [_SPECS[k] for k in sorted(_SPECS)]


def attach(key: str, slot: str, implementation: Callable[..., Any]) -> None:
    """Fill an implementation slot of a declared entry (used by the provider modules' decorators).

    Refuses a key the catalogue does not declare, a slot the entry says it has no implementation for,
    and a second, different implementation: the catalogue stays the one list of classes.
    """
    canonical = _canonical(key)
    spec = _SPECS.get(canonical)
    if spec is None:
        raise RuntimeError(
            f"catalogue: {slot} for {key!r}, which has no entry; declare it in modelgraph/catalogue/<family>.py"
        )
    current = getattr(spec, slot)
    if current is implementation:
        return
    if isinstance(current, str):
        raise RuntimeError(
            f"catalogue: {key!r} already has {slot} {current!r} (a reason for having none): "
            f"drop `{slot}=...` from its entry in modelgraph/catalogue/{spec.family}.py"
        )
    if current is not None:
        raise RuntimeError(f"catalogue: {key!r} already has {slot} {current!r}")
    # Filled once, while the provider module is imported (frozen for everyone else); in place, as
    # copying the entry for each of the ~700 attachments would slow every start-up.
    object.__setattr__(spec, slot, implementation)


def provides(slot: str, *keys: str) -> Callable[[Any], Any]:
    """A decorator that attaches what it decorates to the ``slot`` of these keys' entries."""

    def decorate(implementation: Any) -> Any:
        for key in keys:
            attach(key, slot, implementation)
        return implementation

    return decorate


def load_families(package: str, families: tuple[str, ...]) -> None:
    """Import ``<package>.<family>`` for each family: how a provider package (the kernels, the ONNX
    mappings) has every family module attach its implementations, as the catalogue loads its own."""
    for family in families:
        importlib.import_module(f"{package}.{family}")


def is_layer_class(class_name: str) -> bool:
    """True when the catalogue knows this name as a layer class (not only as a Keras 3 op)."""
    return _canonical(class_name) in _SPECS


def key_of(class_name: str, kind: str, config: Mapping[str, Any]) -> str:
    """The catalogue key of one layer of a graph: decided once, when the graph is built.

    ``op:<Class>`` for a Keras 3 op node, ``tf:<function>`` for tf.keras ``TFOpLambda`` and
    ``SlicingOpLambda``, else the class name with an alias resolved (``Convolution2D`` -> ``Conv2D``).
    """
    if kind == "op":
        return f"op:{class_name}"
    if class_name in OP_LAMBDA_CLASSES:
        function = config.get("function")
        return f"tf:{function if isinstance(function, str) else ''}"
    return _canonical(class_name)


def names() -> Iterator[str]:
    """Every key and alias the catalogue knows (for "did you mean" suggestions)."""
    yield from _SPECS
    yield from _ALIASES
