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

import contextlib
import dataclasses
import importlib
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from types import ModuleType
from typing import Any

from modelgraph.catalogue import activations as _activations
from modelgraph.catalogue.spec import (
    ALL_KERAS_VERSIONS,
    BUILTIN_FUNCTIONS,
    CONCERNS,
    FED,
    Alias,
    ConfigSpec,
    FunctionSpec,
    Fusion,
    Keras3Rules,
    Keras3Writing,
    LayerSpec,
    LegacyH5Rules,
    MaskBehaviour,
    Recurrence,
    missing_concerns,
    support,
)
from modelgraph.errors import CatalogueError, ShapeError, Unknown

__all__ = [
    "CONCERNS",
    "FunctionSpec",
    "Fusion",
    "Keras3Rules",
    "Keras3Writing",
    "LayerSpec",
    "LegacyH5Rules",
    "Recurrence",
    "all_specs",
    "attach",
    "attach_function",
    "builtin_activations",
    "declared",
    "function_spec",
    "functions",
    "register",
    "register_activation",
    "register_function",
    "register_initializer",
    "scratch",
    "is_layer_class",
    "is_model_input",
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


_FUNCTIONS: dict[tuple[str, str], tuple[FunctionSpec, ...]] = {}
FUNCTION_KINDS = ("activation", "initializer", "function")

#: The plugin whose module is being imported (set by :mod:`modelgraph.plugins`): entries it registers
#: carry its name, and the concerns they omit say so.
_PLUGIN: ContextVar[str] = ContextVar("modelgraph_plugin", default="")

# Implementation slots: a callable, a string saying why there is none, or None until attached.
_IMPL_SLOTS = ("shape", "weight_shapes", "macs", "kernel", "onnx")
_DTYPES = ("compute", "follows_input", "float32_variables")


def not_given(plugin: str) -> str:
    """The reason a plugin's entry gives for a concern it omits."""
    return f"not given by plugin '{plugin}'"


@contextlib.contextmanager
def plugin_scope(name: str) -> Iterator[None]:
    """Entries registered inside are the plugin ``name``'s (used by :func:`modelgraph.plugins.load_plugin`)."""
    token = _PLUGIN.set(name)
    try:
        yield
    finally:
        _PLUGIN.reset(token)


@contextlib.contextmanager
def scratch() -> Iterator[None]:
    """Every registration made inside is undone on leaving (for tests, and for trying a plugin)."""
    saved = dict(_SPECS), dict(_ALIASES), dict(_FUNCTIONS)
    try:
        yield
    finally:
        for table, old in zip((_SPECS, _ALIASES, _FUNCTIONS), saved, strict=True):
            table.clear()
            table.update(old)  # type: ignore[arg-type]


def register(spec: LayerSpec, *, replace: bool = False, family: str | None = None) -> LayerSpec:
    """Add a class to the catalogue: the one way in, for the built-in families and plugins alike.

    ``spec`` may give any subset of the concerns (shape rule, expected weights, MACs, kernel, ONNX
    mapping, Keras 3 writing); an implementation slot left None is filled later by a built-in
    provider module (``@shape_rule``, ``@register`` ...), or, for a plugin's entry, says that the
    plugin does not give it (``modelgraph layers`` reports each concern). ``weight_names`` may be a
    tuple of names (the same for every config). A key or alias that is already registered is a
    :class:`~modelgraph.errors.CatalogueError` unless ``replace`` (the old entry, and its aliases, go).
    Returns the entry as registered.
    """
    if not isinstance(spec, LayerSpec):
        raise CatalogueError(f"register() takes a LayerSpec, got {type(spec).__name__}")
    plugin = _PLUGIN.get()
    if plugin:
        spec = _plugin_entry(spec, plugin)
    _check(spec)
    names = (spec.key, *(a.name for a in spec.aliases))
    taken = [name for name in names if name in _SPECS or name in _ALIASES]
    if taken and not replace:
        owner = _SPECS[_canonical(taken[0])]
        by = f"plugin '{owner.plugin}'" if owner.plugin else f"modelgraph ({owner.family})"
        raise CatalogueError(
            f"{taken[0]!r} is already registered by {by}; pass replace=True to replace that entry"
        )
    if taken:
        # The built-in providers attach to the entries they name: let them do it before it goes.
        _load(tuple(PROVIDERS))
        for name in taken:
            old = _SPECS.pop(_canonical(name), None)
            for alias in old.aliases if old is not None else ():
                _ALIASES.pop(alias.name, None)
    if family is not None or plugin or not spec.family:
        # The entry is the caller's own new object: set its family in place (replace() would copy
        # ~400 entries at every start-up).
        object.__setattr__(spec, "family", family or (f"plugin {plugin}" if plugin else "custom"))
    _SPECS[spec.key] = spec
    _ALIASES.update({a.name: spec.key for a in spec.aliases})
    return spec


def _plugin_entry(spec: LayerSpec, plugin: str) -> LayerSpec:
    """A plugin's entry: its name recorded, every omitted concern saying so, names as a function."""
    fields: dict[str, Any] = {"plugin": plugin}
    for slot in _IMPL_SLOTS:
        if getattr(spec, slot) is None:
            fields[slot] = not_given(plugin)
    if callable(spec.shape):
        fields["shape"] = _named_shape_rule(spec.shape, plugin, spec.key)
    names = spec.weight_names
    if isinstance(names, tuple | list) and all(isinstance(n, str) for n in names):
        fixed = tuple(names)
        fields["weight_names"] = lambda _config, _names=fixed: _names
    return dataclasses.replace(spec, **fields)


def _named_shape_rule(rule: Callable[..., Any], plugin: str, key: str) -> Callable[..., Any]:
    """The plugin's shape rule, with an exception other than the rule protocol's (``ShapeError``,
    ``Unknown``) reported as a shape problem naming the plugin, not as a modelgraph bug."""

    def shape(call: Any) -> Any:
        try:
            return rule(call)
        except (ShapeError, Unknown):
            raise
        except Exception as exc:  # noqa: BLE001 - the plugin's own code
            raise ShapeError(
                f"the shape rule of plugin '{plugin}' for {key} failed: {type(exc).__name__}: {exc}", "plugin"
            ) from None

    return shape


def _check(spec: LayerSpec) -> None:
    """Refuse an entry whose fields have the wrong types, naming the field."""

    def bad(field: str, want: str, value: Any) -> CatalogueError:
        return CatalogueError(
            f"entry {spec.key!r}: {field} must be {want}, got {type(value).__name__} {value!r}"
        )

    if not isinstance(spec.key, str) or not spec.key.strip() or spec.key != spec.key.strip():
        raise CatalogueError(f"an entry's key must be a non-empty class name, got {spec.key!r}")
    for slot in _IMPL_SLOTS:
        value = getattr(spec, slot)
        if value is not None and not isinstance(value, str) and not callable(value):
            raise bad(slot, "a callable or a string saying why there is none", value)
    if not isinstance(spec.weight_names, str) and not callable(spec.weight_names):
        raise bad(
            "weight_names", "(config) -> names, a tuple of names, or a reason string", spec.weight_names
        )
    if not isinstance(spec.config, ConfigSpec | str):
        raise bad("config", "a ConfigSpec or a reason string", spec.config)
    if not isinstance(spec.aliases, tuple) or not all(isinstance(a, Alias) for a in spec.aliases):
        raise bad("aliases", "a tuple of Alias", spec.aliases)
    if not isinstance(spec.keras_versions, tuple) or not all(isinstance(v, str) for v in spec.keras_versions):
        raise bad("keras_versions", "a tuple of strings ('2', '3')", spec.keras_versions)
    if not isinstance(spec.masks, Mapping) or not all(
        isinstance(b, MaskBehaviour) for b in spec.masks.values()
    ):
        raise bad("masks", "a mapping of Keras version to MaskBehaviour (spec.masks(...))", spec.masks)
    for behaviour in spec.masks.values():
        if not isinstance(behaviour.clears, tuple) or not all(isinstance(v, str) for v in behaviour.clears):
            raise bad("masks", "MaskBehaviours whose clears is a tuple of argument names", spec.masks)
    if not isinstance(spec.keeps_values, bool):
        raise bad("keeps_values", "True or False", spec.keeps_values)
    if spec.dtype not in _DTYPES:
        raise bad("dtype", " or ".join(_DTYPES), spec.dtype)
    if not all(callable(k) for k in spec.fast_kernels):
        raise bad("fast_kernels", "a tuple of callables", spec.fast_kernels)
    if spec.keras3 is not None and not isinstance(spec.keras3, Keras3Writing):
        raise bad("keras3", "a Keras3Writing", spec.keras3)
    for name, kind in (
        ("recurrence", Recurrence),
        ("keras3_rules", Keras3Rules),
        ("legacy_h5", LegacyH5Rules),
        ("fusion", Fusion),
    ):
        value = getattr(spec, name)
        if value is not None and not isinstance(value, kind):
            raise bad(name, f"a {kind.__name__}", value)
    for name in (
        "quantized_weight_shapes",
        "legacy_weight_path",
        "keras1_class",
        "keras1_kernel",
        "weight_inputs",
        "id_range",
        "padded_kernel",
    ):
        value = getattr(spec, name)
        if value is not None and not callable(value):
            raise bad(name, "a callable", value)
    for name in ("linear_weights", "wrapped_keys", "directions", "non_trainable_weights"):
        value = getattr(spec, name)
        if not isinstance(value, tuple) or not all(isinstance(v, str) for v in value):
            raise bad(name, "a tuple of strings", value)
    if spec.fusion is not None:
        _check_fusion(spec.fusion, bad)
    axis = spec.input_quantizer_axis
    if axis is not None and (not isinstance(axis, int) or isinstance(axis, bool)):
        raise bad("input_quantizer_axis", "an integer axis or None", axis)
    rank = spec.leading_batch_rank
    if rank is not None and (not isinstance(rank, int) or isinstance(rank, bool) or rank < 1):
        raise bad("leading_batch_rank", "a positive integer", rank)


def _check_fusion(fusion: Fusion, bad: Callable[[str, str, Any], CatalogueError]) -> None:
    """Refuse a :class:`Fusion` whose fields have the wrong types, naming the field."""
    axis = fusion.channel_axis
    if axis is not None and (not isinstance(axis, int) or isinstance(axis, bool) or axis < 1):
        raise bad("fusion.channel_axis", "a positive axis (counted with the batch axis) or None", axis)
    if fusion.bottleneck not in (None, "pointwise", "depthwise"):
        raise bad("fusion.bottleneck", "'pointwise', 'depthwise' or None", fusion.bottleneck)
    for name in ("depthwise", "batchnorm", "residual", "sums", "multiplies", "shareable", "separable"):
        if not isinstance(getattr(fusion, name), bool):
            raise bad(f"fusion.{name}", "True or False", getattr(fusion, name))
    for name in ("activation", "zero_padding", "takes_zero_padding"):
        value = getattr(fusion, name)
        if value is not None and not callable(value):
            raise bad(f"fusion.{name}", "a callable or None", value)


def _register(module: ModuleType) -> None:
    family = module.__name__.rsplit(".", 1)[1]
    for spec in module.SPECS:
        register(spec, family=family)


for _family in FAMILIES:
    _register(importlib.import_module(f"modelgraph.catalogue.{_family}"))


def _register_function(
    kind: str,
    name: str,
    kernel: Any,
    onnx: Any,
    replace: bool,
    keras_versions: tuple[str, ...] = ALL_KERAS_VERSIONS,
    elementwise: bool = True,
    family: str | None = None,
) -> FunctionSpec:
    if not isinstance(name, str) or not name.strip():
        raise CatalogueError(f"a registered {kind} needs a non-empty name, got {name!r}")
    for slot, value in (("kernel", kernel), ("onnx", onnx)):
        if value is not None and not isinstance(value, str) and not callable(value):
            raise CatalogueError(
                f"{kind} {name!r}: {slot} must be a callable or a string saying why there is none, "
                f"got {type(value).__name__} {value!r}"
            )
    if (
        not isinstance(keras_versions, tuple)
        or not keras_versions
        or not set(keras_versions) <= set(ALL_KERAS_VERSIONS)
    ):
        raise CatalogueError(
            f"{kind} {name!r}: keras_versions must be a non-empty tuple of {ALL_KERAS_VERSIONS}, "
            f"got {keras_versions!r}"
        )
    if not isinstance(elementwise, bool):
        raise CatalogueError(f"{kind} {name!r}: elementwise must be True or False, got {elementwise!r}")
    plugin = _PLUGIN.get()
    existing = _FUNCTIONS.get((kind, name), ())
    clash = [f for f in existing if set(f.keras_versions) & set(keras_versions)]
    if clash and not replace:
        owner = clash[0]
        if owner.family == BUILTIN_FUNCTIONS:
            raise CatalogueError(f"{kind} {name!r} is built into modelgraph; pass replace=True to replace it")
        by = f"plugin '{owner.plugin}'" if owner.plugin else "modelgraph"
        raise CatalogueError(
            f"{kind} {name!r} is already registered by {by}; pass replace=True to replace it"
        )
    if any(f.family == BUILTIN_FUNCTIONS for f in clash):
        _load(tuple(PROVIDERS))  # the built-in implementations attach before their entry goes
    if family is None:
        family = f"plugin {plugin}" if plugin else "custom"
    # A built-in's missing implementation is attached by its provider; anyone else's is not given.
    reason = None if family == BUILTIN_FUNCTIONS else not_given(plugin) if plugin else "not given"
    spec = FunctionSpec(
        kind,
        name,
        reason if kernel is None else kernel,
        reason if onnx is None else onnx,
        plugin,
        keras_versions,
        elementwise,
        family,
    )
    kept = tuple(f for f in existing if f not in clash)
    _FUNCTIONS[(kind, name)] = (*kept, spec)
    return spec


def register_activation(
    name: str,
    kernel: Callable[..., Any] | None = None,
    onnx: Callable[..., Any] | None = None,
    *,
    replace: bool = False,
    keras_versions: tuple[str, ...] = ALL_KERAS_VERSIONS,
    elementwise: bool = True,
    family: str | None = None,
) -> FunctionSpec:
    """An activation by its registered name: ``kernel(x) -> y`` (NumPy) for the runner, ``onnx(e, x)
    -> name`` writing nodes through the exporter's emitter (``e.op``, ``e.const``). Every layer whose
    ``activation`` names it (``Dense``, ``Activation``, ...) uses it.

    ``keras_versions`` are the Keras major versions whose files mean this function by ``name`` (a name
    may be registered once per group of versions); ``elementwise=False`` for one that works along the
    last axis (the exporter then gives it the tensor in Keras's layout). modelgraph's own activations
    are registered with this call too (:mod:`modelgraph.catalogue.activations`); replacing one needs
    ``replace=True``."""
    return _register_function("activation", name, kernel, onnx, replace, keras_versions, elementwise, family)


def register_initializer(name: str, *, replace: bool = False) -> FunctionSpec:
    """A custom initializer by its registered name (known, so ``validate`` does not report it)."""
    return _register_function("initializer", name, None, None, replace)


def register_function(name: str, *, replace: bool = False) -> FunctionSpec:
    """Any other custom function a config names (a loss, a metric, a constraint), known by name."""
    return _register_function("function", name, None, None, replace)


def _in_version(specs: tuple[FunctionSpec, ...], keras_major: int | None) -> FunctionSpec | None:
    if keras_major is None:
        return specs[0] if specs else None
    version = str(keras_major)
    return next((f for f in specs if version in f.keras_versions), None)


def function_spec(
    kind: str, name: Any, keras_major: int | None = None, *, builtin: bool = True
) -> FunctionSpec | None:
    """The registered function of this kind a config's name denotes (``pkg>name`` or ``name``) in a
    file written by Keras ``keras_major`` (None: any version's). ``builtin=False`` leaves modelgraph's
    own out (a config naming a function of the user's module never means Keras's); a ``pkg>`` prefix
    never names one of them either."""
    if not isinstance(name, str):
        return None
    specs = _FUNCTIONS.get((kind, name), ())
    if not builtin:
        specs = tuple(f for f in specs if f.family != BUILTIN_FUNCTIONS)
    found = _in_version(specs, keras_major)
    if found is None and ">" in name:
        short = _FUNCTIONS.get((kind, name.rsplit(">", 1)[1]), ())
        found = _in_version(tuple(f for f in short if f.family != BUILTIN_FUNCTIONS), keras_major)
    return found


def functions() -> list[FunctionSpec]:
    """Every registered function, by kind and name (a name registered per version once per version)."""
    return [f for k in sorted(_FUNCTIONS) for f in _FUNCTIONS[k]]


def builtin_activations() -> list[str]:
    """The names of modelgraph's own activations (sorted)."""
    return sorted(
        name
        for (kind, name), specs in _FUNCTIONS.items()
        if kind == "activation" and any(f.family == BUILTIN_FUNCTIONS for f in specs)
    )


def attach_function(kind: str, name: str, slot: str, implementation: Callable[..., Any],
                    keras_version: str | None = None) -> None:  # fmt: skip
    """Fill the ``kernel`` or ``onnx`` slot of a built-in function's entry (the one for files of Keras
    ``keras_version`` when its meaning depends on the version; None: every entry of the name), as
    :func:`attach` fills a layer's. Refuses a name modelgraph does not declare."""
    specs = [
        f
        for f in _FUNCTIONS.get((kind, name), ())
        if f.family == BUILTIN_FUNCTIONS and (keras_version is None or keras_version in f.keras_versions)
    ]
    if not specs:
        raise RuntimeError(
            f"catalogue: {slot} for {kind} {name!r}, which modelgraph does not declare; "
            "declare it in modelgraph/catalogue/activations.py"
        )
    for spec in specs:
        current = getattr(spec, slot)
        if current is None:
            object.__setattr__(spec, slot, implementation)  # once, while the provider is imported
        elif current is not implementation:
            raise RuntimeError(f"catalogue: {kind} {name!r} already has {slot} {current!r}")


def _register_builtin_functions() -> None:
    """modelgraph's own activations, through the call a plugin makes (their implementations attach)."""
    for name in _activations.ELEMENTWISE:
        register_activation(name, family=BUILTIN_FUNCTIONS)
    for name in _activations.ALONG_LAST_AXIS:
        register_activation(name, elementwise=False, family=BUILTIN_FUNCTIONS)
    for name, versions in _activations.BY_VERSION:
        register_activation(name, keras_versions=versions, family=BUILTIN_FUNCTIONS)


_register_builtin_functions()


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
    if spec.plugin and current == not_given(spec.plugin):
        current = None  # a plugin may attach what its entry left out, with the providers' decorators
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


def is_model_input(class_name: str) -> bool:
    """True for a class whose layer is a model input (fed, not computed: ``InputLayer``)."""
    spec = spec_for(class_name)
    return spec is not None and spec.kernel == FED


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
    key = _canonical(class_name)
    if key not in _SPECS and ">" in key:
        # Keras 3's legacy .h5 names a registered custom class by its registered name ("pkg>Class").
        short = _canonical(key.rsplit(">", 1)[1])
        if short in _SPECS:
            return short
    return key


def names() -> Iterator[str]:
    """Every key and alias the catalogue knows (for "did you mean" suggestions)."""
    yield from _SPECS
    yield from _ALIASES
