"""Canonical weight names per layer class, and how each file layout spells them.

Every loader hands kernels, validate and diff the same names, whatever the file format. Each
class's catalogue entry (:mod:`modelgraph.catalogue`) names the function below that gives its names
(``weight_names``), the variables quantization adds and the legacy spellings; in short:

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
A class whose catalogue entry names no weights keeps positional names ``var_0``, ``var_1``, ...
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

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
        quantized = _spec(class_name).quantized_weight_names  # known names: the entry exists
        extra = quantized.get(base)
        if extra is None:
            return None  # other quantized layouts: positional names
        if base == "int4" and (int4_block_size(config) or -1) > 0:
            extra = extra + quantized.get("int4_grouped", ())
        return names + extra
    return names


def _float_weight_names(class_name: str, config: Mapping[str, Any]) -> tuple[str, ...] | None:
    rule = _names_rule(class_name)
    return None if rule is None else rule(config)


def _spec(class_name: str) -> Any:
    return _catalogue().spec_for(class_name)


@functools.cache
def _catalogue() -> Any:
    # Imported on first use: the catalogue's entries name this module's functions.
    import modelgraph.catalogue

    return modelgraph.catalogue


def _names_rule(class_name: str) -> Any:
    spec = _spec(class_name)
    return None if spec is None or isinstance(spec.weight_names, str) else spec.weight_names


# --- the weight names of each kind of layer (the catalogue entries name these) --------------------


def kernel_bias(config: Mapping[str, Any]) -> tuple[str, ...]:
    """Dense, Conv*, Conv*Transpose, DepthwiseConv*: kernel, bias."""
    return ("kernel", "bias") if _flag(config, "use_bias") else ("kernel",)


def einsum_dense(config: Mapping[str, Any]) -> tuple[str, ...]:
    return ("kernel", "bias") if config.get("bias_axes") else ("kernel",)


def separable(config: Mapping[str, Any]) -> tuple[str, ...]:
    names = ("depthwise_kernel", "pointwise_kernel")
    return names + ("bias",) if _flag(config, "use_bias") else names


def batch_normalization(config: Mapping[str, Any]) -> tuple[str, ...]:
    return gamma_beta(config) + ("moving_mean", "moving_variance")


def layer_normalization(config: Mapping[str, Any]) -> tuple[str, ...]:
    if _flag(config, "rms_scaling", False):
        return ("gamma",)  # Keras 3: rms_scaling always creates gamma and never beta
    return gamma_beta(config)


def gamma_beta(config: Mapping[str, Any]) -> tuple[str, ...]:
    return (("gamma",) if _flag(config, "scale") else ()) + (("beta",) if _flag(config, "center") else ())


def embeddings(config: Mapping[str, Any]) -> tuple[str, ...]:
    return ("embeddings",)


def alpha(config: Mapping[str, Any]) -> tuple[str, ...]:
    return ("alpha",)


def gamma(config: Mapping[str, Any]) -> tuple[str, ...]:
    return ("gamma",)


def recurrent(config: Mapping[str, Any]) -> tuple[str, ...]:
    """SimpleRNN, LSTM, GRU, ConvLSTM*: kernel, recurrent_kernel, bias (in a ``cell`` in Keras 3)."""
    names = ("kernel", "recurrent_kernel")
    return names + ("bias",) if _flag(config, "use_bias") else names


def normalization(config: Mapping[str, Any]) -> tuple[str, ...]:
    return () if config.get("mean") is not None else ("mean", "variance", "count")


def attention(config: Mapping[str, Any]) -> tuple[str, ...]:
    names = ("scale",) if _flag(config, "use_scale", False) else ()
    return names + (("concat_score_weight",) if config.get("score_mode") == "concat" else ())


def additive_attention(config: Mapping[str, Any]) -> tuple[str, ...]:
    return ("scale",) if _flag(config, "use_scale") else ()


def no_weights(config: Mapping[str, Any]) -> tuple[str, ...]:
    return ()


no_weights.no_weights = True  # type: ignore[attr-defined]


def wrapped(config: Mapping[str, Any]) -> None:
    """Wrappers and MultiHeadAttention: their variables are their sublayers' (see keras3_groups)."""
    return None


def keras3_groups(class_name: str, config: Mapping[str, Any]) -> list[Keras3Group] | None:
    """Where a layer's variables sit in a Keras 3 weights tree (``layers/<snake>[_N]/...``).

    Returns ``[(relative_path, names), ...]`` where ``relative_path`` is ``"vars"`` for the layer's
    own variables or e.g. ``"cell/vars"``; None when the class is unknown (keep positional names).
    The layout is the class's catalogue entry's ``keras3_weights`` (its own ``vars`` when it has none).
    """
    spec = _spec(class_name)
    layout = None if spec is None else spec.keras3_weights
    if layout is not None:
        return layout(class_name, config)
    names = own_weight_names(class_name, config)
    return None if names is None else [("vars", names)]


# --- Keras 3 weight layouts of the classes whose variables are not all their own ``vars`` ----------


def in_cell(class_name: str, config: Mapping[str, Any]) -> list[Keras3Group]:
    """Recurrent layers: the variables belong to the layer's ``cell``."""
    return [("cell/vars", own_weight_names(class_name, config) or ())]


def bidirectional_layers(class_name: str, config: Mapping[str, Any]) -> list[Keras3Group] | None:
    """Bidirectional: the forward and backward layers' groups, names prefixed by direction."""
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


def wrapped_layer(class_name: str, config: Mapping[str, Any]) -> list[Keras3Group] | None:
    """TimeDistributed: the wrapped layer's groups, under ``layer/``."""
    inner = _inner(config, "layer")
    if inner is None:
        return None
    sub_groups = keras3_groups(inner[0], inner[1])
    return None if sub_groups is None else [(f"layer/{path}", names) for path, names in sub_groups]


def attention_projections(class_name: str, config: Mapping[str, Any]) -> list[Keras3Group]:
    """MultiHeadAttention: one EinsumDense per projection (query, key, value, output)."""
    bias = ("kernel", "bias") if _flag(config, "use_bias") else ("kernel",)
    return [(f"{attr}/vars", tuple(f"{part}/{n}" for n in bias)) for attr, part in _MHA_PARTS]


_CELL_LAYERS = {"SimpleRNNCell": "SimpleRNN", "LSTMCell": "LSTM", "GRUCell": "GRU"}


def rnn_cell_groups(class_name: str, config: Mapping[str, Any]) -> list[Keras3Group] | None:
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


# Keras 1 wrote "<layer>_W", "<layer>_b", ... (docs/formats.md, "Legacy HDF5 weight names").
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


def keras1_weight_name(class_name: str, suffix: str) -> str | None:
    """Keras 2's name for a Keras 1 weight suffix of this class (``W`` -> ``kernel``, an Embedding's
    ``W`` -> ``embeddings``, ``running_std`` -> ``moving_variance``), or None for another suffix."""
    name = _KERAS1_SUFFIXES.get(suffix)
    if name is None:
        return None
    spec = _spec(class_name)
    return name if spec is None else spec.keras1_weight_names.get(name, name)


def canonical_from_path(
    class_name: str, layer_name: str, stored: str, config: Mapping[str, Any] | None = None
) -> str:
    """Canonical name of a weight stored under a legacy/TF.js path (``bn/gamma:0``, ``mha/query/kernel``);
    ``config`` tells the cells of an ``RNN(StackedRNNCells)`` apart (``rnn/stacked/lstm_a/kernel``)."""
    segments = [s for s in stored.split("/") if s]
    if not segments:
        return stored
    last = segments[-1].split(":", 1)[0]
    spec = _spec(class_name)
    by_path = spec.legacy_weight_path if spec is not None else None
    named = by_path(segments, last, config) if by_path is not None else None
    if named is not None:
        return named
    for segment in segments[:-1]:  # a per-direction wrapper: forward_lstm/kernel, backward_lstm/...
        for direction in spec.directions if spec is not None else ():
            if segment.startswith(direction):
                return f"{direction}/{last}"
    if last.startswith(layer_name + "_"):
        keras1 = keras1_weight_name(class_name, last[len(layer_name) + 1 :])
        if keras1 is not None:
            return keras1
    return last if spec is None else spec.legacy_weight_names.get(last, last)


def stacked_cell_path(segments: list[str], last: str, config: Mapping[str, Any] | None) -> str | None:
    """RNN: a weight of one cell of an ``RNN(StackedRNNCells)`` (``rnn/stacked/lstm_a/kernel``) is
    ``cells/<index>/<name>``."""
    index = _stacked_cell_index(config, segments[:-1])
    return f"cells/{index}/{last}" if index is not None else None


def projection_path(segments: list[str], last: str, config: Mapping[str, Any] | None) -> str | None:
    """MultiHeadAttention: ``mha/query/kernel`` is ``query/kernel`` (its projections' sublayers)."""
    return f"{segments[-2]}/{last}" if len(segments) >= 2 and segments[-2] in _MHA_LEGACY else None


def snake_case(class_name: str) -> str:
    """Keras's ``to_snake_case``: the name a class gets in a Keras 3 weights tree."""
    name = re.sub(r"\W+", "", class_name)
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    name = re.sub(r"([a-z])([A-Z])", r"\1_\2", name)
    return name.lower()
