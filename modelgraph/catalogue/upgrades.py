"""Config upgrades shared by several catalogue entries: an older config as Keras 3 reads it.

Each function is an ``upgrade(config, keras_version)`` hook of a :class:`ConfigSpec`
(``keras_version`` is None when the file does not say). They rename keys, drop keys Keras 3 has no
meaning for, and make defaults that changed between versions explicit; ``diff`` compares configs
after them, and a writer will save what they return.
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
