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
    out = recurrent_keras1(out, keras_version)
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


# --- Keras 1 ------------------------------------------------------------------------------------
# Keras 2 renamed most layer arguments; a Keras 1 config reads as Keras 2 once they are renamed (as
# Keras 2's own legacy layer interfaces did when they were given Keras 1 arguments). See
# docs/formats.md, "Keras 1 configs and weights".

#: Keras 1 spellings shared by every layer with a kernel and a bias.
KERAS1_KERNEL_KEYS = {
    "init": "kernel_initializer",
    "W_regularizer": "kernel_regularizer",
    "b_regularizer": "bias_regularizer",
    "W_constraint": "kernel_constraint",
    "b_constraint": "bias_constraint",
    "bias": "use_bias",
}

#: Keras 1 ``dim_ordering`` -> Keras 2 ``data_format`` ("default" was the user's keras.json: Keras 2
#: read it as its own default, channels_last).
KERAS1_DIM_ORDERING = {"tf": "channels_last", "th": "channels_first", "default": "channels_last"}

#: Keys Keras 1 layers carried for building only (the input size, given again by the graph).
KERAS1_BUILD_KEYS = ("input_dim", "input_length")


def _renamed(config: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        out.setdefault(names.get(key, key), value)
    return out


def _data_format(out: dict[str, Any]) -> dict[str, Any]:
    if "dim_ordering" in out:
        ordering = out.pop("dim_ordering")
        # any other value (a hostile list or object too) is kept for the kernel to refuse
        out["data_format"] = (
            KERAS1_DIM_ORDERING.get(ordering, ordering) if isinstance(ordering, str) else ordering
        )
    return out


def dense(config: Mapping[str, Any], keras_version: Version) -> dict[str, Any]:
    """Dense: Keras 1's ``output_dim``, ``init``, ``W_*``/``b_*`` and ``bias`` renamed; ``input_dim`` dropped."""
    if "output_dim" not in config:
        return dict(config)
    out = _renamed(config, {**KERAS1_KERNEL_KEYS, "output_dim": "units"})
    out.pop("input_dim", None)
    return out


def convolution(config: Mapping[str, Any], keras_version: Version) -> dict[str, Any]:
    """Conv1D/2D/3D (and Keras 1's Atrous and Deconvolution forms): ``nb_filter`` -> ``filters``; the
    kernel size from ``filter_length`` / ``nb_row, nb_col`` / ``kernel_dim1..3``; ``subsample`` /
    ``subsample_length`` -> ``strides``; ``border_mode`` -> ``padding``; ``atrous_rate`` ->
    ``dilation_rate``; ``dim_ordering`` -> ``data_format``."""
    if "nb_filter" not in config:
        return dict(config)
    out = _renamed(
        config,
        {
            **KERAS1_KERNEL_KEYS,
            "nb_filter": "filters",
            "subsample": "strides",
            "subsample_length": "strides",
            "border_mode": "padding",
            "atrous_rate": "dilation_rate",
        },
    )
    if "filter_length" in out:
        out["kernel_size"] = [out.pop("filter_length")]
        if isinstance(out.get("strides"), int):
            out["strides"] = [out["strides"]]
        if isinstance(out.get("dilation_rate"), int):
            out["dilation_rate"] = [out["dilation_rate"]]
    sizes = [out.pop(k) for k in ("nb_row", "nb_col") if k in out] or [
        out.pop(k) for k in ("kernel_dim1", "kernel_dim2", "kernel_dim3") if k in out
    ]
    if sizes:
        out["kernel_size"] = sizes
    out.pop("output_shape", None)  # Deconvolution2D's declared output size: the graph gives it
    for key in KERAS1_BUILD_KEYS:
        out.pop(key, None)
    return _data_format(out)


def pooling(config: Mapping[str, Any], keras_version: Version) -> dict[str, Any]:
    """Pooling: ``pool_length`` -> ``pool_size``, ``stride`` -> ``strides`` (1D), ``border_mode`` ->
    ``padding``, ``dim_ordering`` -> ``data_format``."""
    out = _renamed(config, {"pool_length": "pool_size", "stride": "strides", "border_mode": "padding"})
    for key in ("pool_size", "strides"):
        if isinstance(out.get(key), int):
            out[key] = [out[key]]
    return _data_format(out)


def dim_ordering(config: Mapping[str, Any], keras_version: Version) -> dict[str, Any]:
    """Padding, cropping, upsampling and global pooling: ``dim_ordering`` -> ``data_format``."""
    return _data_format(dict(config))


def embedding(config: Mapping[str, Any], keras_version: Version) -> dict[str, Any]:
    """Embedding: Keras 1's ``init``/``W_*`` renamed; its ``dropout`` (whole-row dropout while training)
    and ``input_length`` change nothing at inference and Keras 2 has no such keys."""
    if "init" not in config and "W_regularizer" not in config:
        return dict(config)
    out = _renamed(
        config,
        {
            "init": "embeddings_initializer",
            "W_regularizer": "embeddings_regularizer",
            "W_constraint": "embeddings_constraint",
        },
    )
    out.pop("dropout", None)
    return out


def dropout(config: Mapping[str, Any], keras_version: Version) -> dict[str, Any]:
    """Dropout/SpatialDropout: Keras 1's ``p`` -> ``rate``."""
    return _renamed(config, {"p": "rate"})


def keras1_batch_normalization(config: Mapping[str, Any], keras_version: Version) -> dict[str, Any]:
    """BatchNormalization: Keras 1's ``beta_init``/``gamma_init`` renamed; ``mode: 0`` (feature-wise,
    the only mode Keras 2 kept) dropped, other modes kept so that nothing runs them as mode 0."""
    out = _renamed(config, {"beta_init": "beta_initializer", "gamma_init": "gamma_initializer"})
    if out.get("mode") == 0:
        del out["mode"]
    return batch_normalization(out, keras_version)


def recurrent_keras1(config: Mapping[str, Any], keras_version: Version) -> dict[str, Any]:
    """SimpleRNN/LSTM/GRU keys Keras 1 alone had: ``consume_less`` (a speed knob), ``forget_bias_init``
    (an initializer), ``input_dim``/``input_length`` (the input size) dropped, after :func:`recurrent`."""
    out = {
        k: v for k, v in config.items() if k not in ("consume_less", "forget_bias_init", *KERAS1_BUILD_KEYS)
    }
    return out


def keras1_input(config: Mapping[str, Any], keras_version: Version) -> dict[str, Any]:
    """InputLayer: Keras 1's ``input_dtype`` is the ``dtype``."""
    return {("dtype" if k == "input_dtype" else k): v for k, v in config.items()}
