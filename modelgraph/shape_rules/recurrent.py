"""Recurrent layers and wrappers: SimpleRNN, LSTM, GRU, ConvLSTM1D/2D/3D, Bidirectional, TimeDistributed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modelgraph import catalogue
from modelgraph.catalogue.spec import Recurrence
from modelgraph.shape_rules._base import (
    Call,
    Shape,
    ShapeError,
    TensorSpec,
    Unknown,
    channels_first,
    conv_length,
    dadd,
    expected_for,
    extra_batch_axes,
    fmt,
    inner_record,
    need,
    need_rank,
    run_rule,
    same_dim,
    shape_rule,
    weight_rule,
)
from modelgraph.shape_rules.spatial import conv_geometry


def recurrence(class_name: str) -> Recurrence | None:
    """The recurrent step of a class whose step is a matrix product (SimpleRNN, LSTM, GRU, ...), from
    its catalogue entry; None for any other class (ConvLSTM: :func:`conv_recurrence`)."""
    spec = catalogue.spec_for(class_name)
    step = spec.recurrence if spec is not None else None
    return step if step is not None and not step.convolutional else None


def conv_recurrence(class_name: str) -> Recurrence | None:
    """The recurrent step of a ConvLSTM-like class (a convolution per step), else None."""
    spec = catalogue.spec_for(class_name)
    step = spec.recurrence if spec is not None else None
    return step if step is not None and step.convolutional else None


def _keys(convolutional: bool) -> tuple[str, ...]:
    return tuple(
        s.key
        for s in catalogue.declared()
        if s.recurrence is not None and s.recurrence.convolutional == convolutional
    )


RNN_NAMES = _keys(False)
CONVLSTM_NAMES = _keys(True)


def _step(class_name: str) -> Recurrence:
    step = recurrence(class_name)
    if step is None:
        raise ShapeError(f"{class_name} is not a recurrent layer", "config")
    return step


def _units(config: Mapping[str, Any], who: str) -> int:
    units = config.get("units", config.get("output_dim"))
    if not isinstance(units, int) or isinstance(units, bool):
        raise ShapeError(f"{who} units {units!r} is not an integer", "config")
    return units


def rnn_outputs(
    class_name: str, config: Mapping[str, Any], shape: Shape, call: Call | None = None
) -> list[Shape]:
    """Outputs of a SimpleRNN/LSTM/GRU on ``shape``: [output, *states] when return_state."""
    need_rank(shape, 3, class_name)
    if config.get("time_major"):
        batch, steps = shape[1], shape[0]
    else:
        batch, steps = shape[0], shape[1]
    units = _units(config, class_name)
    seq = bool(config.get("return_sequences", False))
    out: Shape = (
        ((steps, batch, units) if config.get("time_major") else (batch, steps, units))
        if seq
        else (batch, units)
    )
    result = [out]
    if config.get("return_state", False):
        result.extend([(batch, units)] * _step(class_name).states)
    return result


@shape_rule(*RNN_NAMES)
def _rnn(call: Call) -> list[Shape]:
    return rnn_outputs(call.class_name, call.config, call.x(), call)


def rnn_weights(class_name: str, config: Mapping[str, Any], features: Any) -> dict[str, Shape]:
    step = _step(class_name)
    gates = step.gates
    units = _units(config, class_name)
    out: dict[str, Shape] = {"kernel": (features, gates * units), "recurrent_kernel": (units, gates * units)}
    use_bias = config.get("use_bias", True)
    if use_bias is None or use_bias:
        if step.bias == "cudnn":
            out["bias"] = (2 * gates * units,)
        elif step.bias == "reset_after" and config.get("reset_after", False):
            out["bias"] = (2, gates * units)
        else:
            out["bias"] = (gates * units,)
    return out


# ------------------------------------------------------------------------------------------------
# The generic RNN layer over cells

_CELL_LAYERS = {"SimpleRNNCell": "SimpleRNN", "LSTMCell": "LSTM", "GRUCell": "GRU"}


def rnn_cells(config: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], str]]:
    """(layer class of the cell, cell config, weight prefix) of each cell of an ``RNN(cell)``."""
    cell = inner_record(config, "cell")
    if cell is None:
        raise ShapeError("RNN has no 'cell' record", "config")
    if cell[0] in _CELL_LAYERS:
        return [(_CELL_LAYERS[cell[0]], cell[1], "")]
    records = cell[1].get("cells") if cell[0] == "StackedRNNCells" else None
    if not isinstance(records, list) or not records:
        raise Unknown()
    out = []
    for i, record in enumerate(records):
        sub = inner_record({"c": record}, "c")
        if sub is None or sub[0] not in _CELL_LAYERS:
            raise Unknown()
        out.append((_CELL_LAYERS[sub[0]], sub[1], f"cells/{i}/"))
    return out


@shape_rule("RNN")
def _generic_rnn(call: Call) -> list[Shape]:
    cells = rnn_cells(call.config)
    loop = {k: call.config.get(k) for k in ("return_sequences", "time_major")}
    out = rnn_outputs(cells[-1][0], {**cells[-1][1], **loop}, call.x(), call)
    if call.config.get("return_state", False):
        batch = out[0][1] if call.config.get("time_major") and len(out[0]) == 3 else out[0][0]
        for layer_class, cfg, _ in cells:
            out.extend([(batch, _units(cfg, layer_class))] * _step(layer_class).states)
    return out


@weight_rule("RNN")
def _generic_rnn_weights(config: Mapping[str, Any], ins: list[Shape | None]) -> dict[str, Shape]:
    features: Any = need(ins[0] if ins else None)[-1]
    out: dict[str, Shape] = {}
    for layer_class, cfg, prefix in rnn_cells(config):
        for name, shape in rnn_weights(layer_class, cfg, features).items():
            out[prefix + name] = shape
        features = _units(cfg, layer_class)
    return out


# ------------------------------------------------------------------------------------------------
# ConvLSTM


def convlstm_outputs(class_name: str, config: Mapping[str, Any], shape: Shape) -> list[Shape]:
    n = int(class_name[-2]) if class_name[-2].isdigit() else 2
    need_rank(shape, n + 3, class_name)
    first = channels_first(config)
    g = conv_geometry(config, n, class_name)
    filters = config.get("filters")
    if not isinstance(filters, int):
        raise ShapeError(f"{class_name} filters {filters!r} is not an integer", "config")
    batch, steps = shape[0], shape[1]
    spatial = list(shape[3:]) if first else list(shape[2:-1])
    out_sp = [
        conv_length(d, k, s, r, g["padding"])
        for d, k, s, r in zip(spatial, g["kernel"], g["strides"], g["dilation"], strict=True)
    ]
    frame: tuple[Any, ...] = (filters, *out_sp) if first else (*out_sp, filters)
    out: Shape = (batch, steps, *frame) if config.get("return_sequences") else (batch, *frame)
    result = [out]
    if config.get("return_state"):
        result.extend([(batch, *frame)] * 2)
    return result


@shape_rule(*CONVLSTM_NAMES)
def _convlstm(call: Call) -> list[Shape]:
    return convlstm_outputs(call.class_name, call.config, call.x())


def convlstm_weights(class_name: str, config: Mapping[str, Any], shape: Shape) -> dict[str, Shape]:
    n = len(shape) - 3
    g = conv_geometry(config, n, class_name)
    channels = shape[2] if channels_first(config) else shape[-1]
    filters = config.get("filters")
    out: dict[str, Shape] = {
        "kernel": (*g["kernel"], channels, 4 * filters),
        "recurrent_kernel": (*g["kernel"], filters, 4 * filters),
    }
    use_bias = config.get("use_bias", True)
    if use_bias is None or use_bias:
        out["bias"] = (4 * filters,)
    return out


# ------------------------------------------------------------------------------------------------
# Wrappers


def _inner_outputs(call: Call, cls: str, cfg: Mapping[str, Any], shape: Shape) -> list[Shape | None]:
    if recurrence(cls) is not None:
        return list(rnn_outputs(cls, cfg, shape))
    if conv_recurrence(cls) is not None:
        return list(convlstm_outputs(cls, cfg, shape))
    return run_rule(call, cls, cfg, [TensorSpec(shape, call.first().dtype)])


@shape_rule("Bidirectional")
def _bidirectional(call: Call) -> list[Shape | None]:
    shape = call.x()
    fwd = inner_record(call.config, "layer")
    if fwd is None:
        raise ShapeError("Bidirectional has no wrapped 'layer' record", "config")
    bwd = inner_record(call.config, "backward_layer") or fwd
    f_out = _inner_outputs(call, fwd[0], fwd[1], shape)
    b_out = _inner_outputs(call, bwd[0], bwd[1], shape)
    if len(f_out) != len(b_out):
        raise ShapeError(
            "Bidirectional forward and backward layers return different numbers of outputs", "config"
        )
    f_main, b_main = f_out[0], b_out[0]
    if f_main is None or b_main is None:
        raise Unknown()
    mode = call.config.get("merge_mode", "concat")
    if mode == "concat":
        if len(f_main) != len(b_main) or not all(
            same_dim(a, b) for a, b in zip(f_main[:-1], b_main[:-1], strict=True)
        ):
            raise ShapeError(f"Bidirectional cannot concatenate {fmt(f_main)} and {fmt(b_main)}", "concat")
        merged: list[Shape | None] = [(*f_main[:-1], dadd(f_main[-1], b_main[-1]))]
    elif mode in ("sum", "mul", "ave"):
        if f_main != b_main and not all(same_dim(a, b) for a, b in zip(f_main, b_main, strict=True)):
            raise ShapeError(
                f"Bidirectional merge_mode={mode} needs equal shapes, got {fmt(f_main)} and {fmt(b_main)}",
                "broadcast",
            )
        merged = [f_main]
    elif mode is None:
        merged = [f_main, b_main]
    else:
        raise ShapeError(f"Bidirectional merge_mode {mode!r} is not concat/sum/mul/ave/None", "config")
    return merged + list(f_out[1:]) + list(b_out[1:])


@weight_rule("Bidirectional")
def _bidirectional_weights(config: Mapping[str, Any], ins: list[Shape | None]) -> dict[str, Shape]:
    fwd = inner_record(config, "layer")
    if fwd is None:
        raise Unknown()
    bwd = inner_record(config, "backward_layer") or fwd
    out: dict[str, Shape] = {}
    for direction, (cls, cfg) in (("forward", fwd), ("backward", bwd)):
        sub = wrapped_weights(cls, cfg, ins)
        if sub is None:
            raise Unknown()
        out.update({f"{direction}/{k}": v for k, v in sub.items()})
    return out


def wrapped_weights(cls: str, cfg: Mapping[str, Any], ins: list[Shape | None]) -> dict[str, Shape] | None:
    if recurrence(cls) is not None:
        return rnn_weights(cls, cfg, need(ins[0] if ins else None)[-1])
    if conv_recurrence(cls) is not None:
        return convlstm_weights(cls, cfg, need(ins[0] if ins else None))
    return expected_for(cls, cfg, ins)


@shape_rule("TimeDistributed")
def _time_distributed(call: Call) -> list[Shape | None]:
    shape = call.x()
    if len(shape) < 3:
        raise ShapeError(f"TimeDistributed needs an input of rank >= 3, got {fmt(shape)}", "rank")
    inner = inner_record(call.config, "layer")
    if inner is None:
        raise ShapeError("TimeDistributed has no wrapped 'layer' record", "config")
    extra = extra_batch_axes(inner[0], len(shape) - 1)
    outs = _inner_outputs(call, inner[0], inner[1], (shape[0], *shape[2 + extra :]))
    lead = tuple(shape[: 2 + extra])
    return [None if o is None else (*lead, *o[1:]) for o in outs]


@weight_rule("TimeDistributed")
def _time_distributed_weights(config: Mapping[str, Any], ins: list[Shape | None]) -> dict[str, Shape]:
    shape = need(ins[0] if ins else None)
    inner = inner_record(config, "layer")
    if inner is None:
        raise Unknown()
    extra = extra_batch_axes(inner[0], len(shape) - 1)
    sub = wrapped_weights(inner[0], inner[1], [(shape[0], *shape[2 + extra :])])
    if sub is None:
        raise Unknown()
    return sub


def _register_named_weight_rules() -> None:
    for name in RNN_NAMES:
        weight_rule(name)(lambda cfg, ins, n=name: rnn_weights(n, cfg, need(ins[0] if ins else None)[-1]))
    for name in CONVLSTM_NAMES:
        weight_rule(name)(lambda cfg, ins, n=name: convlstm_weights(n, cfg, need(ins[0] if ins else None)))


_register_named_weight_rules()
