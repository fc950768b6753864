"""Per-class config upgrades: a layer config saved by Keras 1/2/tf.keras -> the config Keras 3 accepts.

A config is first read as Keras 3 would by the class's catalogue entry (its ``ConfigSpec.upgrade``
in :mod:`modelgraph.catalogue.upgrades`: Keras 1 RNN key names, RNN ``implementation``, GRU
``reset_after`` by version, ``time_major: false``, MultiHeadAttention build shapes, DepthwiseConv
``groups: 1``, normalisation ``axis: [3]``, BatchNormalization ``renorm_*`` when renorm is off);
``diff`` compares configs after the same step. The functions below (``UPGRADES``, keyed by class)
hold only what the writer needs beyond that: refusing what is left that Keras 3 cannot express,
and the writer-only rewrites (InputLayer's record, wrapped layers, SeparableConv's base-class
leftovers, Embedding ``input_length``) and the weight reshapes (``WEIGHT_UPGRADES``), which the
catalogue has no field for yet. The generic steps that apply to every layer (dtype policies,
initializer envelopes, activations) are in :func:`upgrade_common`. What the writer relies on is
described in ``docs/writing.md``.

An upgrade never changes what a layer computes. When the old config means something Keras 3
cannot express (Keras 2's ``hard_sigmoid``, a ``time_major`` RNN inside a wrapper, a GRU whose Keras 1 gate layout
is unknown), it raises :class:`NotConvertible` with the reason; the writer collects every such
layer and refuses the whole model before writing anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from modelgraph import catalogue
from modelgraph.catalogue.spec import ConfigSpec
from modelgraph.graph import keras_version_tuple
from modelgraph.saving.hard_sigmoid import NOT_RESCALABLE, uses_hard_sigmoid, weight_scales
from modelgraph.saving.keras3_names import KERAS3_ALIASES, KERAS3_LAYERS


class NotConvertible(Exception):
    """This config cannot be written faithfully for Keras 3; the message says why."""


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


Upgrade = Callable[[dict[str, Any], UpgradeContext], dict[str, Any]]
UPGRADES: dict[str, Upgrade] = {}


def upgrade(*class_names: str) -> Callable[[Upgrade], Upgrade]:
    """Register an upgrade for these class names."""

    def decorate(fn: Upgrade) -> Upgrade:
        for name in class_names:
            UPGRADES[name] = fn
        return fn

    return decorate


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
    if class_name in REPLACED_CLASSES:
        config = REPLACED_CLASSES[class_name][1](config)
    upgraded = _catalogue_upgrade(name, config, ctx)
    rescaled = False
    if ctx.major < 3 and ctx.rescale_hard_sigmoid and uses_hard_sigmoid(upgraded):
        if weight_scales(name, upgraded) is None:
            raise NotConvertible(NOT_RESCALABLE)
        rescaled = True
    out = upgrade_common(upgraded, ctx, rescaled)
    if name != "InputLayer":
        for key in _INPUT_SHAPE_KEYS:  # the graph has its InputLayer; Keras 3 layers refuse these keys
            out.pop(key, None)
    fn = UPGRADES.get(name)
    return name, fn(out, ctx) if fn is not None else out


def _catalogue_upgrade(class_name: str, config: Mapping[str, Any], ctx: UpgradeContext) -> Mapping[str, Any]:
    """The catalogue's upgrade of the class (the one shared with ``diff``), if it has one."""
    spec = catalogue.spec_for(class_name)
    if spec is None or not isinstance(spec.config, ConfigSpec) or spec.config.upgrade is None:
        return config
    return spec.config.upgrade(config, ctx.version)


def _drop_if(out: dict[str, Any], key: str, allowed: tuple[Any, ...]) -> None:
    """Drop a key Keras 3 does not accept when its value is one that changes nothing."""
    if key not in out:
        return
    if out[key] not in allowed:
        raise NotConvertible(f"{key}={out[key]!r} has no Keras 3 equivalent")
    del out[key]


# Keras 2 let any first layer declare the model's input; the graph always has an InputLayer.
_INPUT_SHAPE_KEYS = ("batch_input_shape", "batch_size", "input_shape", "input_dtype")
_RNN_CALLS = frozenset(
    {"SimpleRNN", "LSTM", "GRU", "ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D", "RNN", "Bidirectional"}
)


def upgrade_call(
    class_name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A Keras 1/2 node's call in Keras 3's form.

    tf.keras folds an RNN's ``initial_state`` into its first argument (``rnn([x, h, c])``);
    Keras 3 takes the states as ``initial_state=``. (tf.keras's Bidirectional also records
    ``initial_state=None, constants=None`` beside the folded states; Keras 3's RNN calls take no
    ``constants``, so an empty one is dropped.)
    """
    if class_name in _RNN_CALLS and "constants" in kwargs and kwargs["constants"] is None:
        kwargs = {k: v for k, v in kwargs.items() if k != "constants"}
    folded = class_name in _RNN_CALLS and args and isinstance(args[0], list) and len(args[0]) > 1
    if folded and kwargs.get("initial_state") is None:
        states = list(args[0][1:])
        return (args[0][0], *args[1:]), {**kwargs, "initial_state": states[0] if len(states) == 1 else states}
    return args, kwargs


# Keras 1 class names Keras 3 knows under another name.
KERAS1_CLASSES = {"Convolution1D": "Conv1D", "Convolution2D": "Conv2D", "Convolution3D": "Conv3D"}


def _thresholded_relu(config: Mapping[str, Any]) -> dict[str, Any]:
    # tf.keras: x * (x > theta); Keras 3's ReLU(threshold=theta): where(x > theta, x, 0).
    out = {k: v for k, v in config.items() if k != "theta"}
    return {**out, "negative_slope": 0.0, "max_value": None, "threshold": float(config.get("theta", 1.0))}


# Keras 2 classes Keras 3 dropped, and the Keras 3 class (with the config) that computes the same.
REPLACED_CLASSES: dict[str, tuple[str, Callable[[Mapping[str, Any]], dict[str, Any]]]] = {
    "ThresholdedReLU": ("ReLU", _thresholded_relu),
}


def keras3_class_name(class_name: str) -> str:
    """The Keras 3 class a layer of this (possibly older) class is written as."""
    if class_name in REPLACED_CLASSES:
        return REPLACED_CLASSES[class_name][0]
    return KERAS3_ALIASES.get(class_name, KERAS1_CLASSES.get(class_name, class_name))


# --- per class ---------------------------------------------------------------------------------


@upgrade("InputLayer")
def _input_layer(out: dict[str, Any], ctx: UpgradeContext) -> dict[str, Any]:
    if "batch_input_shape" in out:
        out["batch_shape"] = out.pop("batch_input_shape")
    if "input_dtype" in out:  # Keras 1
        out["dtype"] = out.pop("input_dtype")
    dtype = out.get("dtype")
    if isinstance(dtype, Mapping):  # InputLayer keeps a plain dtype string
        inner = dtype.get("config") or {}
        out["dtype"] = inner.get("name", "float32")
    result = {
        "batch_shape": out.get("batch_shape"),
        "dtype": out.get("dtype") or "float32",
        "sparse": bool(out.get("sparse", False)),
        "ragged": bool(out.get("ragged", False)),
        "name": out.get("name"),
        "optional": bool(out.get("optional", False)),
    }
    if result["sparse"] or result["ragged"]:
        raise NotConvertible("sparse or ragged inputs are not written")
    return result


@upgrade("LSTM", "SimpleRNN", "GRU")
def _rnn(out: dict[str, Any], ctx: UpgradeContext) -> dict[str, Any]:
    # The catalogue dropped ``time_major: false`` and set GRU ``reset_after`` by version; a
    # time-major layer reaches here only where no Transpose op nodes can be written around it
    # (inside a wrapper, in a legacy .h5): the writer strips the key where they can.
    _refuse_time_major(out)
    return out


def _refuse_time_major(out: dict[str, Any]) -> None:
    if out.get("time_major"):
        raise NotConvertible(
            "time_major=True has no Keras 3 equivalent here (a .keras file writes a time-major "
            "layer of the model itself with Transpose op nodes around it)"
        )
    out.pop("time_major", None)


# The cells of a generic RNN(cell) and the Keras 2 layer whose config (and catalogue upgrade) each
# one shares: LSTMCell reads LSTM's keys, GRUCell GRU's (``reset_after`` by version), ...
_CELL_LAYERS = {"SimpleRNNCell": "SimpleRNN", "LSTMCell": "LSTM", "GRUCell": "GRU"}


@upgrade("RNN")
def _generic_rnn(out: dict[str, Any], ctx: UpgradeContext) -> dict[str, Any]:
    _refuse_time_major(out)
    if ctx.major < 3 and isinstance(out.get("cell"), Mapping):
        out["cell"] = upgrade_cell(out["cell"], ctx)
    return out


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


@upgrade("DepthwiseConv1D", "DepthwiseConv2D", "Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose")
def _no_groups(out: dict[str, Any], ctx: UpgradeContext) -> dict[str, Any]:
    # tf.keras's base convolution gave these classes a `groups` argument (always 1 for them);
    # Keras 3's constructors refuse the key.
    _drop_if(out, "groups", (1, None))
    return out


@upgrade("BatchNormalization")
def _batch_norm(out: dict[str, Any], ctx: UpgradeContext) -> dict[str, Any]:
    # The catalogue made ``axis`` an int and dropped ``renorm_*`` when renorm is off.
    for key, neutral in (
        ("fused", (None, True, False)),
        ("renorm", (False,)),
        ("renorm_clipping", (None,)),
        ("renorm_momentum", (0.99, None)),
        ("virtual_batch_size", (None,)),
        ("adjustment", (None,)),
    ):
        _drop_if(out, key, neutral)
    return out


@upgrade("SeparableConv1D", "SeparableConv2D")
def _separable(out: dict[str, Any], ctx: UpgradeContext) -> dict[str, Any]:
    _drop_if(out, "groups", (1, None))
    for key in ("kernel_initializer", "kernel_regularizer", "kernel_constraint"):
        out.pop(key, None)  # tf.keras's base-class leftovers: a separable conv has no `kernel`
    return out


@upgrade("Bidirectional", "TimeDistributed")
def _wrapper(out: dict[str, Any], ctx: UpgradeContext) -> dict[str, Any]:
    for key in ("layer", "backward_layer"):
        record = out.get(key)
        if isinstance(record, Mapping) and isinstance(record.get("class_name"), str):
            name, inner = upgrade_layer(record["class_name"], record.get("config") or {}, ctx)
            out[key] = {
                "module": "keras.layers",
                "class_name": name,
                "config": inner,
                "registered_name": None,
            }
    return out


@upgrade("SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D")
def _spatial_dropout(out: dict[str, Any], ctx: UpgradeContext) -> dict[str, Any]:
    # Keras 3's SpatialDropout takes only rate, seed, name, dtype (and data_format for 2D/3D); a
    # weightless layer's ``trainable`` changes nothing.
    out.pop("trainable", None)
    _drop_if(out, "noise_shape", (None,))
    return out


@upgrade("MultiHeadAttention")
def _mha(out: dict[str, Any], ctx: UpgradeContext) -> dict[str, Any]:
    # The catalogue dropped tf.keras's build shapes (query_shape, ...).
    _drop_if(out, "softmax_robust_masking", (False, None))
    return out


@upgrade("Embedding")
def _embedding(out: dict[str, Any], ctx: UpgradeContext) -> dict[str, Any]:
    out.pop("input_length", None)  # a build-time shape check only; Keras 3 infers it
    return out


# --- weights --------------------------------------------------------------------------------------

WeightUpgrade = Callable[[Any], Any]
# (class, canonical weight name) -> how a stored array becomes the array Keras 3 creates.
WEIGHT_UPGRADES: dict[tuple[str, str], WeightUpgrade] = {
    # tf.keras's Attention(use_scale=True) stored its scale as shape (1,); Keras 3's is a scalar.
    ("Attention", "scale"): lambda array: array.reshape(()) if array.size == 1 else array,
}
