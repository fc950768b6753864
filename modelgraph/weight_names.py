"""Canonical weight names per layer class, and how each file layout spells them.

Every loader hands kernels, validate and diff the same names, whatever the file format:

=====================================  =======================================================
class                                   canonical names, in Keras's weight order
=====================================  =======================================================
Dense, EinsumDense, Conv*, Conv*Transpose kernel, bias
DepthwiseConv1D/2D                      kernel, bias  (tf.keras stores ``depthwise_kernel``)
SeparableConv1D/2D                      depthwise_kernel, pointwise_kernel, bias
BatchNormalization                      gamma, beta, moving_mean, moving_variance
LayerNormalization, GroupNormalization  gamma, beta
Embedding                               embeddings
PReLU                                   alpha
SimpleRNN, LSTM, GRU, ConvLSTM1D/2D/3D  kernel, recurrent_kernel, bias
Bidirectional                           forward/<rnn names>, backward/<rnn names>
TimeDistributed                         the wrapped layer's names
MultiHeadAttention                      query/kernel, query/bias, key/..., value/..., attention_output/...
Normalization                           mean, variance, count
Attention                               scale, concat_score_weight;  AdditiveAttention: scale
LayerScale                              gamma
=====================================  =======================================================

Optional weights are simply absent (``use_bias=False`` has no ``bias``, ``scale=False`` no ``gamma``).
A class this table does not know keeps positional names ``var_0``, ``var_1``, ...
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

RNN_CLASSES = frozenset({"SimpleRNN", "LSTM", "GRU", "ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D"})
_KERNEL_BIAS = frozenset(
    {
        "Dense",
        "Conv1D",
        "Conv2D",
        "Conv3D",
        "Conv1DTranspose",
        "Conv2DTranspose",
        "Conv3DTranspose",
        "DepthwiseConv1D",
        "DepthwiseConv2D",
        "Convolution1D",
        "Convolution2D",
        "Convolution3D",
        "Deconvolution2D",
    }
)
_MHA_PARTS = (
    ("query_dense", "query"),
    ("key_dense", "key"),
    ("value_dense", "value"),
    ("output_dense", "attention_output"),
)

# One group in a Keras 3 weights tree: (path relative to the layer, canonical names by vars index).
Keras3Group = tuple[str, tuple[str, ...]]


def _flag(config: Mapping[str, Any], key: str, default: bool = True) -> bool:
    value = config.get(key, default)
    return bool(default if value is None else value)


def quantization_mode(config: Mapping[str, Any]) -> str | None:
    """The Keras 3 quantization mode a layer's dtype policy declares ("int8", "int4/128", ...)."""
    policy = config.get("dtype")
    if isinstance(policy, Mapping) and isinstance(policy.get("config"), Mapping):
        mode = policy["config"].get("mode")
        return mode if isinstance(mode, str) else None
    return None


# Keras 3 stores quantized variables in this order (``variable_serialization_spec``, Keras 3.15);
# bias is skipped when absent, so later indices shift. int4 layers quantized per group of
# ``block_size`` rows (the default) also store a zero point and the row -> group index. Other
# modes keep positional names.
_QUANTIZED_EXTRA = {
    ("int8", "Dense"): ("kernel_scale",),
    ("int8", "EinsumDense"): ("kernel_scale",),
    ("int8", "Embedding"): ("embeddings_scale",),
    ("int4", "Dense"): ("kernel_scale",),
    ("int4", "EinsumDense"): ("kernel_scale",),
    ("int4", "Embedding"): ("embeddings_scale",),
}
_INT4_GROUPED_EXTRA = {
    "Dense": ("kernel_zero", "g_idx"),
    "EinsumDense": ("kernel_zero", "g_idx"),
    "Embedding": ("embeddings_zero", "g_idx"),
}


def mode_block_size(mode: str) -> int | None:
    """The block size an int4 policy mode names (``"int4/128"``: 128, ``"int4/-1"``: -1 per channel);
    None when it names none."""
    base, _, block = mode.partition("/")
    return int(block) if base == "int4" and block.lstrip("-").isdigit() else None


def int4_block_size(config: Mapping[str, Any]) -> int | None:
    """The int4 ``block_size`` of a layer config: from the policy mode (``"int4/128"``; -1 is per
    channel), else its ``quantization_config``; None when neither says."""
    block = mode_block_size(quantization_mode(config) or "")
    if block is not None:
        return block
    qc = config.get("quantization_config")
    inner = qc.get("config") if isinstance(qc, Mapping) else None
    value = inner.get("block_size") if isinstance(inner, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def own_weight_names(class_name: str, config: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The canonical names of a layer's own variables, or None for a class this table does not know."""
    names = _float_weight_names(class_name, config)
    mode = quantization_mode(config)
    if names is not None and mode is not None:
        base = mode.split("/")[0]
        extra = _QUANTIZED_EXTRA.get((base, class_name))
        if extra is None:
            return None  # other quantized layouts: positional names
        if base == "int4" and (int4_block_size(config) or -1) > 0:
            extra = extra + _INT4_GROUPED_EXTRA[class_name]
        return names + extra
    return names


def _float_weight_names(class_name: str, config: Mapping[str, Any]) -> tuple[str, ...] | None:
    if class_name in _KERNEL_BIAS:
        return ("kernel", "bias") if _flag(config, "use_bias") else ("kernel",)
    if class_name == "EinsumDense":
        return ("kernel", "bias") if config.get("bias_axes") else ("kernel",)
    if class_name in ("SeparableConv1D", "SeparableConv2D"):
        names = ("depthwise_kernel", "pointwise_kernel")
        return names + ("bias",) if _flag(config, "use_bias") else names
    if class_name == "BatchNormalization":
        names = (("gamma",) if _flag(config, "scale") else ()) + (
            ("beta",) if _flag(config, "center") else ()
        )
        return names + ("moving_mean", "moving_variance")
    if class_name == "LayerNormalization" and _flag(config, "rms_scaling", False):
        return ("gamma",)  # Keras 3: rms_scaling always creates gamma and never beta
    if class_name in ("LayerNormalization", "GroupNormalization"):
        return (("gamma",) if _flag(config, "scale") else ()) + (("beta",) if _flag(config, "center") else ())
    if class_name == "Embedding":
        return ("embeddings",)
    if class_name == "PReLU":
        return ("alpha",)
    if class_name in RNN_CLASSES:
        names = ("kernel", "recurrent_kernel")
        return names + ("bias",) if _flag(config, "use_bias") else names
    if class_name == "Normalization":
        return () if config.get("mean") is not None else ("mean", "variance", "count")
    if class_name == "Attention":
        names = ("scale",) if _flag(config, "use_scale", False) else ()
        return names + (("concat_score_weight",) if config.get("score_mode") == "concat" else ())
    if class_name == "AdditiveAttention":
        return ("scale",) if _flag(config, "use_scale") else ()
    if class_name == "LayerScale":
        return ("gamma",)
    if class_name in NO_WEIGHT_CLASSES:
        return ()
    return None


NO_WEIGHT_CLASSES = frozenset(
    {
        "InputLayer", "Activation", "ReLU", "LeakyReLU", "ELU", "Softmax", "ThresholdedReLU",
        "Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "GaussianNoise",
        "GaussianDropout", "AlphaDropout", "ActivityRegularization", "Flatten", "Reshape", "Permute",
        "RepeatVector", "ZeroPadding1D", "ZeroPadding2D", "ZeroPadding3D", "Cropping1D", "Cropping2D",
        "Cropping3D", "UpSampling1D", "UpSampling2D", "UpSampling3D", "MaxPooling1D", "MaxPooling2D",
        "MaxPooling3D", "AveragePooling1D", "AveragePooling2D", "AveragePooling3D", "MaxPool1D",
        "MaxPool2D", "MaxPool3D", "AvgPool1D", "AvgPool2D", "AvgPool3D", "GlobalMaxPooling1D",
        "GlobalMaxPooling2D", "GlobalMaxPooling3D", "GlobalAveragePooling1D", "GlobalAveragePooling2D",
        "GlobalAveragePooling3D", "GlobalMaxPool1D", "GlobalMaxPool2D", "GlobalMaxPool3D",
        "GlobalAvgPool1D", "GlobalAvgPool2D", "GlobalAvgPool3D", "Add", "Subtract", "Multiply",
        "Average", "Maximum", "Minimum", "Concatenate", "Dot", "UnitNormalization", "Rescaling",
        "Resizing", "CenterCrop", "Masking", "Identity", "CustomScaleLayer", "TFOpLambda",
        "SlicingOpLambda", "Lambda",
    }
)  # fmt: skip


def keras3_groups(class_name: str, config: Mapping[str, Any]) -> list[Keras3Group] | None:
    """Where a layer's variables sit in a Keras 3 weights tree (``layers/<snake>[_N]/...``).

    Returns ``[(relative_path, names), ...]`` where ``relative_path`` is ``"vars"`` for the layer's
    own variables or e.g. ``"cell/vars"``; None when the class is unknown (keep positional names).
    """
    if class_name in RNN_CLASSES:
        names = own_weight_names(class_name, config) or ()
        return [("cell/vars", names)]
    if class_name == "RNN":
        return rnn_cell_groups(config)
    if class_name == "Bidirectional":
        inner = _inner(config, "layer")
        backward = _inner(config, "backward_layer") or inner
        if inner is None:
            return None
        groups: list[Keras3Group] = []
        for direction, sub in (("forward", inner), ("backward", backward)):
            assert sub is not None
            for path, names in keras3_groups(sub[0], sub[1]) or []:
                groups.append((f"{direction}_layer/{path}", tuple(f"{direction}/{n}" for n in names)))
        return groups
    if class_name == "TimeDistributed":
        inner = _inner(config, "layer")
        if inner is None:
            return None
        sub_groups = keras3_groups(inner[0], inner[1])
        return None if sub_groups is None else [(f"layer/{path}", names) for path, names in sub_groups]
    if class_name == "MultiHeadAttention":
        bias = ("kernel", "bias") if _flag(config, "use_bias") else ("kernel",)
        return [(f"{attr}/vars", tuple(f"{part}/{n}" for n in bias)) for attr, part in _MHA_PARTS]
    names = own_weight_names(class_name, config)
    return None if names is None else [("vars", names)]


_CELL_LAYERS = {"SimpleRNNCell": "SimpleRNN", "LSTMCell": "LSTM", "GRUCell": "GRU"}


def rnn_cell_groups(config: Mapping[str, Any]) -> list[Keras3Group] | None:
    """The groups of a generic ``RNN(cell)`` layer: ``cell/vars`` for one cell; for StackedRNNCells
    ``cell/cells/<snake_case(class)>[_N]/vars`` per cell, named ``cells/<i>/<weight>``. None when a
    cell is not one this table knows."""
    cell = _inner(config, "cell")
    if cell is None:
        return None
    if cell[0] in _CELL_LAYERS:
        names = own_weight_names(_CELL_LAYERS[cell[0]], cell[1])
        return None if names is None else [("cell/vars", names)]
    if cell[0] != "StackedRNNCells" or not isinstance(cell[1].get("cells"), list):
        return None
    groups: list[Keras3Group] = []
    counters: dict[str, int] = {}
    for i, record in enumerate(cell[1]["cells"]):
        sub = _inner({"c": record}, "c")
        if sub is None or sub[0] not in _CELL_LAYERS:
            return None
        names = own_weight_names(_CELL_LAYERS[sub[0]], sub[1]) or ()
        base = snake_case(sub[0])
        n = counters.get(base, 0)
        counters[base] = n + 1
        groups.append(
            (f"cell/cells/{base}" + (f"_{n}" if n else "") + "/vars", tuple(f"cells/{i}/{w}" for w in names))
        )
    return groups


def _stacked_cell_index(config: Mapping[str, Any] | None, segments: list[str]) -> int | None:
    cell = _inner(config or {}, "cell")
    if cell is None or cell[0] != "StackedRNNCells" or not isinstance(cell[1].get("cells"), list):
        return None
    for i, record in enumerate(cell[1]["cells"]):
        sub = _inner({"c": record}, "c")
        if sub is not None and sub[1].get("name") in segments:
            return i
    return None


def _inner(config: Mapping[str, Any], key: str) -> tuple[str, Mapping[str, Any]] | None:
    record = config.get(key)
    if not isinstance(record, Mapping) or not isinstance(record.get("class_name"), str):
        return None
    inner_config = record.get("config")
    return record["class_name"], inner_config if isinstance(inner_config, Mapping) else {}


_LEGACY_ALIASES = {
    ("DepthwiseConv1D", "depthwise_kernel"): "kernel",
    ("DepthwiseConv2D", "depthwise_kernel"): "kernel",
}
# Keras 1 wrote "<layer>_W", "<layer>_b", ... (see KERAS-FORMATS.md section 4.3).
_KERAS1_SUFFIXES = {
    "W": "kernel",
    "b": "bias",
    "U": "recurrent_kernel",
    "gamma": "gamma",
    "beta": "beta",
    "running_mean": "moving_mean",
    "running_std": "moving_variance",
    "alphas": "alpha",
    "W_constraint": "kernel",
}
_MHA_LEGACY = {"query", "key", "value", "attention_output"}


def canonical_from_path(
    class_name: str, layer_name: str, stored: str, config: Mapping[str, Any] | None = None
) -> str:
    """Canonical name of a weight stored under a legacy/TF.js path (``bn/gamma:0``, ``mha/query/kernel``);
    ``config`` tells the cells of an ``RNN(StackedRNNCells)`` apart (``rnn/stacked/lstm_a/kernel``)."""
    segments = [s for s in stored.split("/") if s]
    if not segments:
        return stored
    last = segments[-1].split(":", 1)[0]
    if class_name == "RNN":
        index = _stacked_cell_index(config, segments[:-1])
        if index is not None:
            return f"cells/{index}/{last}"
    if class_name == "MultiHeadAttention" and len(segments) >= 2 and segments[-2] in _MHA_LEGACY:
        return f"{segments[-2]}/{last}"
    if class_name == "Bidirectional":
        for segment in segments[:-1]:
            if segment.startswith("forward"):
                return f"forward/{last}"
            if segment.startswith("backward"):
                return f"backward/{last}"
    if last.startswith(layer_name + "_") and last[len(layer_name) + 1 :] in _KERAS1_SUFFIXES:
        return _KERAS1_SUFFIXES[last[len(layer_name) + 1 :]]
    return _LEGACY_ALIASES.get((class_name, last), last)


def snake_case(class_name: str) -> str:
    """Keras's ``to_snake_case``: the name a class gets in a Keras 3 weights tree."""
    name = re.sub(r"\W+", "", class_name)
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    name = re.sub(r"([a-z])([A-Z])", r"\1_\2", name)
    return name.lower()
