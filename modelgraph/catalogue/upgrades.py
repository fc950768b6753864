"""Config upgrades shared by several catalogue entries: an older config as Keras 3 reads it.

Each function is an ``upgrade(config, keras_version)`` hook of a :class:`ConfigSpec`
(``keras_version`` is None when the file does not say). They rename keys, drop keys Keras 3 has no
meaning for, and make defaults that changed between versions explicit; ``diff`` compares configs
after them, and a writer will save what they return. A few are ``equivalent`` hooks instead (named
``*_equivalent``): for comparing only, they write settings equal in effect one way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Version = tuple[int, int, int] | None

#: Keras 1 spellings of recurrent-layer keys -> Keras 2/3 spellings.
KERAS1_RNN_KEYS = {
    "output_dim": "units",
    "inner_activation": "recurrent_activation",
    "init": "kernel_initializer",
    "inner_init": "recurrent_initializer",
    "W_regularizer": "kernel_regularizer",
    "U_regularizer": "recurrent_regularizer",
    "b_regularizer": "bias_regularizer",
    "dropout_W": "dropout",
    "dropout_U": "recurrent_dropout",
}


def recurrent(config: Mapping[str, Any], keras_version: Version) -> dict[str, Any]:
    """SimpleRNN, LSTM, ConvLSTM*: Keras 1 names renamed; ``implementation`` (a Keras 2 speed knob)
    dropped; ``time_major: false`` (tf.keras only, Keras 3 has no time-major layout) dropped."""
    out = {KERAS1_RNN_KEYS.get(k, k): v for k, v in config.items()}
    out.pop("implementation", None)
    if out.get("time_major") is False:
        del out["time_major"]
    return out


def gru_reset_after_default(keras_version: Version) -> bool:
    """GRU ``reset_after`` when a config omits it: True from Keras 2.4 (tf.keras 2.x and Keras 3 write
    it), False before (standalone Keras 2.0-2.3 applied the reset gate before the matrix product;
    Keras 1 has no such key)."""
    return keras_version is not None and keras_version >= (2, 4, 0)


def gru(config: Mapping[str, Any], keras_version: Version) -> dict[str, Any]:
    """GRU: as :func:`recurrent`, and ``reset_after`` explicit when the version says what it meant."""
    out = recurrent(config, keras_version)
    if "reset_after" not in out and keras_version is not None:
        out["reset_after"] = gru_reset_after_default(keras_version)
    return out


def multi_head_attention(config: Mapping[str, Any], keras_version: Version) -> dict[str, Any]:
    """tf.keras records the build shapes ``query_shape``/``key_shape``/``value_shape``; Keras 3 does not."""
    return {k: v for k, v in config.items() if k not in ("query_shape", "key_shape", "value_shape")}


def depthwise(config: Mapping[str, Any], keras_version: Version) -> dict[str, Any]:
    """tf.keras DepthwiseConv writes the base Conv's ``groups: 1``, which Keras 3 does not have."""
    return {k: v for k, v in config.items() if not (k == "groups" and v == 1)}


def normalization_axis(config: Mapping[str, Any], keras_version: Version) -> dict[str, Any]:
    """tf.keras writes a normalization ``axis`` as a one-element list (``[3]``), Keras 3 as an int."""
    out = dict(config)
    axis = out.get("axis")
    if isinstance(axis, list) and len(axis) == 1:
        out["axis"] = axis[0]
    return out


def batch_normalization(config: Mapping[str, Any], keras_version: Version) -> dict[str, Any]:
    """As :func:`normalization_axis`; Keras 3 writes ``renorm_*`` even when ``renorm`` is off."""
    out = normalization_axis(config, keras_version)
    if not out.get("renorm"):
        out.pop("renorm_momentum", None)
        out.pop("renorm_clipping", None)
    return out


#: Keys tf.keras's SeparableConv inherits from its base Conv and never reads (its kernels are the
#: depthwise and pointwise ones); Keras 3's SeparableConv neither has nor writes them.
SEPARABLE_UNUSED_CONV_KEYS = ("kernel_initializer", "kernel_regularizer", "kernel_constraint")


def separable(config: Mapping[str, Any], keras_version: Version) -> dict[str, Any]:
    """tf.keras SeparableConv writes the base Conv's ``groups: 1`` and its unused ``kernel_*`` keys."""
    return {
        k: v
        for k, v in config.items()
        if k not in SEPARABLE_UNUSED_CONV_KEYS and not (k == "groups" and v == 1)
    }


#: Serialisation bookkeeping that says nothing about what a layer computes.
_ENVELOPE = frozenset({"module", "registered_name", "build_config", "shared_object_id"})


def _in_effect(value: Any) -> Any:
    """``value`` without serialisation bookkeeping, at every depth (for comparing two layer configs)."""
    if isinstance(value, Mapping):
        return {k: _in_effect(v) for k, v in value.items() if k not in _ENVELOPE}
    if isinstance(value, list | tuple):
        return [_in_effect(v) for v in value]
    return value


def _wrapped_with_masked_output(wrapped: Any) -> Any:
    """A wrapped RNN's serialised form with ``zero_output_for_mask`` as Bidirectional sets it: equal to
    its ``return_sequences`` (both Keras versions force it when they build the wrapper, whatever the
    config says; Keras 3 writes the forced value, tf.keras writes the layer as it was given)."""
    if not isinstance(wrapped, Mapping) or not isinstance(wrapped.get("config"), Mapping):
        return wrapped
    inner = dict(wrapped["config"])
    inner["zero_output_for_mask"] = bool(inner.get("return_sequences", False))
    return {**wrapped, "config": inner}


def _default_backward(forward: Mapping[str, Any]) -> Any:
    """The backward layer Bidirectional makes when none is given: the forward layer with
    ``go_backwards`` flipped (its name aside), compared without bookkeeping."""
    inner = {k: v for k, v in forward["config"].items() if k != "name"}
    inner["go_backwards"] = not inner.get("go_backwards", False)
    return _in_effect({**forward, "config": inner})


def bidirectional_equivalent(config: Mapping[str, Any], keras_version: Version) -> dict[str, Any]:
    """Bidirectional, for comparing (a ``ConfigSpec.equivalent`` hook, not an upgrade: a writer keeps
    the file's own ``backward_layer``): the wrapped layers' ``zero_output_for_mask`` as the wrapper forces it, and a
    ``backward_layer`` dropped when it is the one Keras would make anyway (Keras 3 always writes it,
    tf.keras only when one was given), so an omitted and a written default compare equal."""
    out = dict(config)
    for key in ("layer", "backward_layer"):
        if key in out:
            out[key] = _wrapped_with_masked_output(out[key])
    forward, backward = out.get("layer"), out.get("backward_layer")
    if (
        isinstance(forward, Mapping)
        and isinstance(forward.get("config"), Mapping)
        and isinstance(backward, Mapping)
    ):
        inner = backward.get("config")
        if isinstance(inner, Mapping):
            mine = _in_effect({**backward, "config": {k: v for k, v in inner.items() if k != "name"}})
            if mine == _default_backward(forward):
                del out["backward_layer"]
    return out
