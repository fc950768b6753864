"""Per-class config upgrades: a layer config saved by Keras 1/2/tf.keras -> the config Keras 3 accepts.

A config is first read as Keras 3 would by the class's catalogue entry (its ``ConfigSpec.upgrade``
in :mod:`modelgraph.catalogue.upgrades`: Keras 1 RNN key names, RNN ``implementation``, GRU
``reset_after`` by version, ``time_major: false``, MultiHeadAttention build shapes, DepthwiseConv
``groups: 1``, normalisation ``axis: [3]``, BatchNormalization ``renorm_*`` when renorm is off);
``diff`` compares configs after the same step. What the writer needs beyond that is in the
entry's ``keras3_rules`` (:class:`modelgraph.catalogue.spec.Keras3Rules`, hooks in
:mod:`modelgraph.catalogue.writing`): refusing what is left that Keras 3 cannot express, the
writer-only rewrites (InputLayer's record, wrapped layers, SeparableConv's base-class leftovers,
Embedding ``input_length``) and the Keras 3 class a dropped class is written as; the weight reshapes
are the entry's ``keras3_weight_upgrades``. The generic steps that apply to every layer (dtype
policies, initializer envelopes, activations) are in :func:`upgrade_common`. What the writer relies on is
described in ``docs/writing.md``.

An upgrade never changes what a layer computes. When the old config means something Keras 3
cannot express (Keras 2's ``hard_sigmoid``, a ``time_major`` RNN inside a wrapper, a GRU whose Keras 1 gate layout
is unknown), it raises :class:`NotConvertible` with the reason; the writer collects every such
layer and refuses the whole model before writing anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from modelgraph import catalogue
from modelgraph.catalogue.keras3 import KERAS3_ALIASES, KERAS3_LAYERS
from modelgraph.catalogue.spec import ConfigSpec, Keras3Rules
from modelgraph.catalogue.writing import NotConvertible
from modelgraph.graph import keras_version_tuple
from modelgraph.saving.hard_sigmoid import NOT_RESCALABLE, uses_hard_sigmoid, weight_scales

__all__ = ["NotConvertible", "UpgradeContext", "keras3_class_name", "upgrade_layer"]


@dataclass(frozen=True)
class UpgradeContext:
    """What an upgrade may need to know: the Keras version that wrote the file."""

    keras_version: str | None
    rescale_hard_sigmoid: bool = False
    """Write Keras 1/2's ``hard_sigmoid`` as Keras 3's with rescaled weights (``.keras`` only: a
    legacy ``.h5`` is read by tf_keras with the old meaning and by Keras 3 with the new one)."""

    @property
    def major(self) -> int:
        return keras_version_tuple(self.keras_version)[0]

    @property
    def version(self) -> tuple[int, int, int]:
        return keras_version_tuple(self.keras_version)

    def layer(self, class_name: str, config: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """A wrapped layer's record upgraded like any layer (for the catalogue's writing hooks)."""
        return upgrade_layer(class_name, config, self)

    def cell(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """A Keras 2 RNN cell record in Keras 3's form (for the catalogue's writing hooks)."""
        return upgrade_cell(record, self)


def keras3_rules(class_name: str) -> Keras3Rules:
    """The writing rules of a class's catalogue entry (empty rules for a class without any)."""
    spec = catalogue.spec_for(class_name)
    rules = spec.keras3_rules if spec is not None else None
    return rules if rules is not None else _NO_RULES


_NO_RULES = Keras3Rules()


# --- generic -----------------------------------------------------------------------------------

_OBJECT_MODULES = {
    "_initializer": "keras.initializers",
    "_regularizer": "keras.regularizers",
    "_constraint": "keras.constraints",
}
# Keras 2's variance-scaling "normal" was a truncated normal (tf.keras renamed it).
_DISTRIBUTIONS = {"normal": "truncated_normal"}
# Activations whose meaning changed in Keras 3: Keras 2's hard_sigmoid is clip(0.2x + 0.5, 0, 1),
# Keras 3's is relu6(x + 3) / 6; no Keras 3 activation computes the old one.
_CHANGED_ACTIVATIONS = frozenset({"hard_sigmoid"})


def _is_changed_activation(value: Any) -> bool:
    """Whether an activation setting names one of :data:`_CHANGED_ACTIVATIONS` (a config may hold
    any JSON value there: a list or object is another, unsupported, activation)."""
    return isinstance(value, str) and value in _CHANGED_ACTIVATIONS


def dtype_policy(name: str) -> dict[str, Any]:
    """Keras 3's serialised ``DTypePolicy`` for a policy name (``"float32"``, ``"mixed_float16"``)."""
    return {"module": "keras", "class_name": "DTypePolicy", "config": {"name": name}, "registered_name": None}


def upgrade_dtype(value: Any) -> Any:
    """A layer's ``dtype`` as Keras 3 writes it: a ``DTypePolicy`` object (quantized policies kept)."""
    if isinstance(value, str):
        return dtype_policy(value)
    if isinstance(value, Mapping) and value.get("class_name") in ("Policy", "DTypePolicy"):
        inner = value.get("config")
        name = inner.get("name") if isinstance(inner, Mapping) else None
        if isinstance(name, str):
            return dtype_policy(name)
    return value


def upgrade_object(value: Any, module: str) -> Any:
    """An initializer/regularizer/constraint record in Keras 3's envelope."""
    if not isinstance(value, Mapping) or not isinstance(value.get("class_name"), str):
        return value
    config = dict(value.get("config") or {})
    if value["class_name"] == "VarianceScaling" and config.get("distribution") in _DISTRIBUTIONS:
        config["distribution"] = _DISTRIBUTIONS[config["distribution"]]
    return {
        "module": value.get("module") or module,
        "class_name": value["class_name"],
        "config": config,
        "registered_name": value.get("registered_name"),
    }


def upgrade_common(config: Mapping[str, Any], ctx: UpgradeContext, rescaled: bool = False) -> dict[str, Any]:
    """Steps every layer config takes: dtype policy objects, object envelopes, activation checks
    (``rescaled``: the layer's ``hard_sigmoid`` is kept exact by rescaled weights)."""
    out = dict(config)
    if "dtype" in out and out["dtype"] is not None:
        out["dtype"] = upgrade_dtype(out["dtype"])
    for key, value in list(out.items()):
        for suffix, module in _OBJECT_MODULES.items():
            if key.endswith(suffix):
                out[key] = upgrade_object(value, module)
        if ctx.major < 3 and key.endswith("activation") and _is_changed_activation(value) and not rescaled:
            raise NotConvertible(
                f"{key}={value!r} means clip(0.2x+0.5) in Keras {ctx.major}; Keras 3's {value} differs"
            )
    return out


def upgrade_layer(
    class_name: str, config: Mapping[str, Any], ctx: UpgradeContext
) -> tuple[str, dict[str, Any]]:
    """``(Keras 3 class name, Keras 3 config)`` of one public layer, or :class:`NotConvertible`."""
    name = keras3_class_name(class_name)
    if name not in KERAS3_LAYERS:
        raise NotConvertible(f"class '{class_name}' is not a Keras 3 layer")
    rules = keras3_rules(class_name)
    upgraded = _catalogue_upgrade(name, config, ctx)
    rescaled = False
    if ctx.major < 3 and ctx.rescale_hard_sigmoid and uses_hard_sigmoid(upgraded):
        if weight_scales(name, upgraded) is None:
            raise NotConvertible(NOT_RESCALABLE)
        rescaled = True
    out = upgrade_common(upgraded, ctx, rescaled)
    if not catalogue.is_model_input(class_name):
        for key in _INPUT_SHAPE_KEYS:  # the graph has its InputLayer; Keras 3 layers refuse these keys
            out.pop(key, None)
    return name, rules.upgrade(out, ctx) if rules.upgrade is not None else out


def _catalogue_upgrade(class_name: str, config: Mapping[str, Any], ctx: UpgradeContext) -> Mapping[str, Any]:
    """The catalogue's upgrade of the class (the one shared with ``diff``), if it has one."""
    spec = catalogue.spec_for(class_name)
    if spec is None or not isinstance(spec.config, ConfigSpec) or spec.config.upgrade is None:
        return config
    return spec.config.upgrade(config, ctx.version)


# Keras 2 let any first layer declare the model's input; the graph always has an InputLayer.
_INPUT_SHAPE_KEYS = ("batch_input_shape", "batch_size", "input_shape", "input_dtype")


def upgrade_call(
    class_name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A Keras 1/2 node's call in Keras 3's form.

    tf.keras folds an RNN's ``initial_state`` into its first argument (``rnn([x, h, c])``);
    Keras 3 takes the states as ``initial_state=``. (tf.keras's Bidirectional also records
    ``initial_state=None, constants=None`` beside the folded states; Keras 3's RNN calls take no
    ``constants``, so an empty one is dropped.)
    """
    folds = keras3_rules(class_name).folds_initial_state
    if folds and "constants" in kwargs and kwargs["constants"] is None:
        kwargs = {k: v for k, v in kwargs.items() if k != "constants"}
    folded = folds and args and isinstance(args[0], list) and len(args[0]) > 1
    if folded and kwargs.get("initial_state") is None:
        states = list(args[0][1:])
        return (args[0][0], *args[1:]), {**kwargs, "initial_state": states[0] if len(states) == 1 else states}
    return args, kwargs


def keras3_class_name(class_name: str) -> str:
    """The Keras 3 class a layer of this (possibly older) class is written as."""
    replaced = keras3_rules(class_name).class_name
    return replaced or KERAS3_ALIASES.get(class_name, class_name)


# --- RNN cells --------------------------------------------------------------------------------


# The cells of a generic RNN(cell) and the Keras 2 layer whose config (and catalogue upgrade) each
# one shares: LSTMCell reads LSTM's keys, GRUCell GRU's (``reset_after`` by version), ...
_CELL_LAYERS = {"SimpleRNNCell": "SimpleRNN", "LSTMCell": "LSTM", "GRUCell": "GRU"}


def upgrade_cell(record: Mapping[str, Any], ctx: UpgradeContext) -> dict[str, Any]:
    """A Keras 2 RNN cell record (SimpleRNNCell/LSTMCell/GRUCell/StackedRNNCells) in Keras 3's form."""
    class_name = record.get("class_name")
    config = dict(record.get("config") or {})
    if class_name == "StackedRNNCells" and isinstance(config.get("cells"), list):
        config = upgrade_common(config, ctx)
        config["cells"] = [upgrade_cell(c, ctx) for c in config["cells"]]
    elif class_name in _CELL_LAYERS:
        # The cell's own keys are its layer's: the same catalogue upgrade applies.
        config = upgrade_common(_catalogue_upgrade(_CELL_LAYERS[class_name], config, ctx), ctx)
    else:
        raise NotConvertible(f"an RNN cell of class '{class_name}' is not a Keras 3 cell")
    out = {"module": "keras.layers", "class_name": class_name, "config": config, "registered_name": None}
    return out
