"""Kernels: recurrent family (see modelgraph/runner/registry.py for the contract).

SimpleRNN, LSTM, GRU, ConvLSTM1D/2D/3D, Bidirectional and TimeDistributed with the semantics of
docs/formats.md, "Recurrent layers":

* The input projection ``x @ kernel + bias`` (or the input convolution) is computed for every time
  step in one call; only the recurrent part loops over time, vectorised over the batch.
* ``go_backwards`` processes time reversed and returns sequences in processing (reversed) order.
* Masked steps carry the states over unchanged; their output is the previous step's output, or zeros
  with ``zero_output_for_mask`` (the initial "previous output" is zeros, as in Keras).
* Outputs are ``output`` then the final states (``return_state``), in Keras order.

Call structures accepted (Keras 3 records ``initial_state``/``mask`` as kwargs; tf.keras folds initial
states into the first argument, ``[x, h0, c0]``, and may give the mask as a list with one entry per
input): ``fn(x)``, ``fn([x, *states])``, ``fn(x, initial_state)``, ``fn(x, initial_state, mask)``,
``fn(x, initial_state=[...], mask=m)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from modelgraph.catalogue.upgrades import gru_reset_after_default
from modelgraph.errors import UnsupportedConfigError
from modelgraph.layer_params import cell_records, inner_record, int_tuple
from modelgraph.runner.activations import Activation, get_activation
from modelgraph.runner.registry import KernelSpec, get_kernel, register
from modelgraph.shape_rules import extra_batch_axes

Array = np.ndarray
# One recurrent step: (precomputed input projection at t, states) -> (output, new states).
Step = Callable[[Array, list[Array]], tuple[Array, list[Array]]]

_CALL_KWARGS = frozenset({"initial_state", "mask", "training", "constants"})


# --- configuration ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Sequencing:
    """The time-loop options shared by every RNN class."""

    return_sequences: bool
    return_state: bool
    go_backwards: bool
    zero_output_for_mask: bool
    time_major: bool
    zero_in_time_order: bool = False
    """tf.keras's unrolled loop (``unroll=True``, ``go_backwards``, ``zero_output_for_mask``): masked
    steps carry the previous output, then the outputs, still in processing (reversed) order, are
    zeroed where the mask in time order is False (docs/backend-disagreements.md)."""


def _sequencing(spec: KernelSpec) -> _Sequencing:
    # stateful: Keras saves no RNN states (Keras 2 and 3), so a loaded model's first call starts from
    # zeros (or the given initial_state), as every run here does. Later calls would carry the state
    # over, so the runner refuses to split a stateful model's input into batches (Runner.run).
    spec.flag("stateful")
    # implementation, use_cudnn, dropout and recurrent_dropout have no numeric effect at inference
    # (dropout only acts with training=True, which the interpreter refuses centrally); unroll has one
    # only in tf.keras, for masked backward sequences with zero_output_for_mask (_Sequencing).
    go_backwards = spec.flag("go_backwards")
    zero_output = spec.flag("zero_output_for_mask")
    return _Sequencing(
        return_sequences=spec.flag("return_sequences"),
        return_state=spec.flag("return_state"),
        go_backwards=go_backwards,
        zero_output_for_mask=zero_output,
        time_major=spec.flag("time_major"),
        zero_in_time_order=(
            spec.keras_version[0] < 3 and spec.flag("unroll") and go_backwards and zero_output
        ),
    )


def _activation(spec: KernelSpec, key: str, default: str, legacy_key: str | None = None) -> Activation:
    if key in spec.config:
        value = spec.config[key]
    elif legacy_key is not None and legacy_key in spec.config:
        value = spec.config[legacy_key]  # Keras 1 names: inner_activation
    else:
        value = default
    try:
        return get_activation(value, spec.keras_version, spec.class_name)
    except UnsupportedConfigError:
        raise spec.unsupported(key, value) from None


def _recurrent_activation(spec: KernelSpec) -> Activation:
    # Keras 1 and Keras 2.0-2.2 (and tf.keras 1.x) defaulted to hard_sigmoid with the Keras 2 formula;
    # Keras 2.3+, tf.keras 2.x and Keras 3 write the key explicitly (default sigmoid).
    default = "hard_sigmoid" if spec.keras_version < (2, 3, 0) else "sigmoid"
    return _activation(spec, "recurrent_activation", default, legacy_key="inner_activation")


def _units(spec: KernelSpec) -> int:
    value = spec.get("units", spec.get("output_dim"))  # output_dim: Keras 1
    if not isinstance(value, int) or value <= 0:
        raise spec.unsupported("units", value)
    return value


def _weight(spec: KernelSpec, name: str) -> Array:
    value = spec.weight(name)
    return value.astype(np.float32) if value.dtype != np.float64 else value


def _bias(spec: KernelSpec) -> Array | None:
    return _weight(spec, "bias") if spec.flag("use_bias", True) else None


# --- call structure ---------------------------------------------------------------------------


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def split_call(
    spec: KernelSpec, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> tuple[Any, list[Any], Any]:
    """``(sequences, initial states, mask)`` from any recorded call structure of a recurrent layer,
    left as given (arrays here, graph values in the ONNX export)."""
    unknown = set(kwargs) - _CALL_KWARGS
    if unknown:
        raise TypeError(f"{spec.class_name}: unexpected call arguments {sorted(unknown)}")
    if kwargs.get("constants") is not None:
        raise spec.unsupported("constants", "<call argument>")
    if not args:
        raise TypeError(f"{spec.class_name}: called without inputs")
    first = args[0]
    states: list[Any] = []
    if isinstance(first, (list, tuple)):
        x, states = first[0], list(first[1:])
    else:
        x = first
    if len(args) > 1:
        states += _as_list(args[1])
    if len(args) > 2 and kwargs.get("mask") is None:
        kwargs = {**kwargs, "mask": args[2]}
    if len(args) > 3:
        raise TypeError(f"{spec.class_name}: too many positional arguments ({len(args)})")
    states += _as_list(kwargs.get("initial_state"))
    mask = kwargs.get("mask")
    if isinstance(mask, (list, tuple)):  # tf.keras: one mask per input; the sequence's comes first
        mask = mask[0] if mask else None
    return x, [s for s in states if s is not None], mask


def _parse_call(
    spec: KernelSpec, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> tuple[Array, list[Array], Array | None]:
    """:func:`split_call` with every part an array."""
    x, states, mask = split_call(spec, args, kwargs)
    return np.asarray(x), [np.asarray(s) for s in states], None if mask is None else np.asarray(mask)


# --- the time loop ----------------------------------------------------------------------------


def _time_major(x: Array, seq: _Sequencing) -> Array:
    """(T, B, ...) in processing order."""
    xt = x if seq.time_major else np.swapaxes(x, 0, 1)
    return xt[::-1] if seq.go_backwards else xt


def _projected_call(
    spec: KernelSpec,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    seq: _Sequencing,
    kernel: Array,
    bias: Array | None,
) -> tuple[Array, list[Array], Array | None]:
    """A 3-D recurrent call's input, time-major in processing order and projected by the (first)
    cell's input kernel and bias, with the initial states and mask it was given."""
    x, given, mask = _parse_call(spec, args, kwargs)
    if x.ndim != 3:
        raise ValueError(f"{spec.class_name} expects a 3-D input (batch, time, features), got {x.shape}")
    projected = _time_major(x, seq) @ kernel
    return (projected if bias is None else projected + bias), given, mask


def _loop(
    step: Step,
    projected: Array,
    states: list[Array],
    mask: Array | None,
    seq: _Sequencing,
) -> tuple[Array, list[Array]]:
    """Run ``step`` over time-major ``projected``; returns (outputs (T, B, ...) or last, states)."""
    steps = projected.shape[0]
    if mask is not None:
        m = mask != 0
        if m.ndim == 3 and m.shape[-1] == 1:
            m = m[..., 0]
        if m.ndim != 2:
            raise ValueError(f"RNN mask must be (batch, time), got shape {mask.shape}")
        m = m if seq.time_major else m.T
        if seq.go_backwards:
            m = m[::-1]
    outputs: list[Array] = []
    previous: Array | None = None
    zero_each_step = seq.zero_output_for_mask and not seq.zero_in_time_order
    # tf.keras zeroes its unrolled last output by the last processed step's mask, as each step would.
    zero_last = seq.zero_in_time_order and not seq.return_sequences
    for t in range(steps):
        out, new_states = step(projected[t], states)
        if mask is not None:
            keep = m[t].reshape((-1,) + (1,) * (out.ndim - 1))
            new_states = [np.where(keep, n, s) for n, s in zip(new_states, states, strict=True)]
            if zero_each_step or previous is None or (zero_last and t == steps - 1):
                out = np.where(keep, out, np.zeros((), out.dtype))
            else:
                out = np.where(keep, out, previous)
            previous = out
        states = new_states
        if seq.return_sequences or t == steps - 1:
            outputs.append(out)
    if not outputs:
        raise ValueError("RNN input has zero time steps")
    if seq.return_sequences:
        stacked = np.stack(outputs)
        if mask is not None and seq.zero_in_time_order:
            in_time_order = m[::-1].reshape(m.shape + (1,) * (stacked.ndim - 2))
            stacked = np.where(in_time_order, stacked, np.zeros((), stacked.dtype))
        return (stacked if seq.time_major else np.swapaxes(stacked, 0, 1)), states
    return outputs[-1], states


def _finish(output: Array, states: list[Array], seq: _Sequencing) -> Array | tuple[Array, ...]:
    return (output, *states) if seq.return_state else output


def _initial_states(
    spec: KernelSpec, given: list[Array], shapes: list[tuple[int, ...]], dtype: Any
) -> list[Array]:
    if not given:
        return [np.zeros(shape, dtype) for shape in shapes]
    if len(given) != len(shapes):
        raise ValueError(f"{spec.class_name} expects {len(shapes)} initial state(s), got {len(given)}")
    return [
        np.broadcast_to(np.asarray(s, dtype), shape).copy() for s, shape in zip(given, shapes, strict=True)
    ]


# --- SimpleRNN / LSTM / GRU -------------------------------------------------------------------


class _Cell(NamedTuple):
    """A SimpleRNN, LSTM or GRU cell read from its layer's config and weights: ``step`` maps the
    input of one time step (projected by ``kernel``, plus ``input_bias``) and the states to the
    output and the new states."""

    n_states: int
    step: Step
    kernel: Array
    input_bias: Array | None


def _dense_rnn(spec: KernelSpec, read_cell: Callable[[KernelSpec], _Cell]):
    """SimpleRNN, LSTM or GRU: its cell's step run over time. The loop options are checked before
    the cell reads its weights, so a config the runner refuses is named before any missing weight."""
    seq = _sequencing(spec)
    units = _units(spec)
    cell = read_cell(spec)

    def run(*args: Any, **kwargs: Any) -> Array | tuple[Array, ...]:
        projected, given, mask = _projected_call(spec, args, kwargs, seq, cell.kernel, cell.input_bias)
        batch = projected.shape[1]
        states = _initial_states(spec, given, [(batch, units)] * cell.n_states, projected.dtype)
        output, states = _loop(cell.step, projected, states, mask, seq)
        return _finish(output, states, seq)

    return run


def _simple_rnn_cell(spec: KernelSpec) -> _Cell:
    act = _activation(spec, "activation", "tanh")
    recurrent = _weight(spec, "recurrent_kernel")

    def step(xp: Array, states: list[Array]) -> tuple[Array, list[Array]]:
        h = act(xp + states[0] @ recurrent)
        return h, [h]

    return _Cell(1, step, _weight(spec, "kernel"), _bias(spec))


def _lstm_cell(spec: KernelSpec) -> _Cell:
    act = _activation(spec, "activation", "tanh")
    rec_act = _recurrent_activation(spec)
    recurrent = _weight(spec, "recurrent_kernel")
    units = recurrent.shape[0]

    def step(xp: Array, states: list[Array]) -> tuple[Array, list[Array]]:
        h, c = states
        z = xp + h @ recurrent
        i = rec_act(z[:, :units])
        f = rec_act(z[:, units : 2 * units])
        c = f * c + i * act(z[:, 2 * units : 3 * units])
        o = rec_act(z[:, 3 * units :])
        h = o * act(c)
        return h, [h, c]

    return _Cell(2, step, _weight(spec, "kernel"), _bias(spec))


def _gru_cell(spec: KernelSpec) -> _Cell:
    act = _activation(spec, "activation", "tanh")
    rec_act = _recurrent_activation(spec)
    reset_after = spec.flag("reset_after", gru_reset_after_default(spec.keras_version))
    recurrent = _weight(spec, "recurrent_kernel")
    units = recurrent.shape[0]
    bias = _bias(spec)
    input_bias = recurrent_bias = None
    if bias is not None:
        if reset_after:
            if bias.shape != (2, 3 * units):
                raise ValueError(f"GRU reset_after=True expects bias (2, {3 * units}), got {bias.shape}")
            input_bias, recurrent_bias = bias[0], bias[1]
        else:
            input_bias = bias.reshape(-1)
    rec_zr = np.ascontiguousarray(recurrent[:, : 2 * units])
    rec_h = np.ascontiguousarray(recurrent[:, 2 * units :])

    def step_after(xp: Array, states: list[Array]) -> tuple[Array, list[Array]]:
        h = states[0]
        inner = h @ recurrent
        if recurrent_bias is not None:
            inner = inner + recurrent_bias
        z = rec_act(xp[:, :units] + inner[:, :units])
        r = rec_act(xp[:, units : 2 * units] + inner[:, units : 2 * units])
        hh = act(xp[:, 2 * units :] + r * inner[:, 2 * units :])
        h = z * h + (1 - z) * hh
        return h, [h]

    def step_before(xp: Array, states: list[Array]) -> tuple[Array, list[Array]]:
        h = states[0]
        inner = h @ rec_zr
        z = rec_act(xp[:, :units] + inner[:, :units])
        r = rec_act(xp[:, units : 2 * units] + inner[:, units:])
        hh = act(xp[:, 2 * units :] + (r * h) @ rec_h)
        h = z * h + (1 - z) * hh
        return h, [h]

    return _Cell(1, step_after if reset_after else step_before, _weight(spec, "kernel"), input_bias)


# --- ConvLSTM ---------------------------------------------------------------------------------


def _conv(x: Array, kernel: Array, strides: Sequence[int], dilation: Sequence[int], padding: str) -> Array:
    """Channels-last N-D convolution ``(N, *spatial, C) * (*k, C, O) -> (N, *out, O)`` (TF padding)."""
    rank = kernel.ndim - 2
    sizes = kernel.shape[:rank]
    if padding == "same":
        pads = []
        for n, k, s, d in zip(x.shape[1 : 1 + rank], sizes, strides, dilation, strict=True):
            out = -(-n // s)
            total = max((out - 1) * s + (k - 1) * d + 1 - n, 0)
            pads.append((total // 2, total - total // 2))
        if any(p != (0, 0) for p in pads):
            x = np.pad(x, [(0, 0), *pads, (0, 0)])
    extent = tuple((k - 1) * d + 1 for k, d in zip(sizes, dilation, strict=True))
    windows = sliding_window_view(x, extent, axis=tuple(range(1, 1 + rank)))  # (N, *full, C, *extent)
    index = (
        (slice(None),)
        + tuple(slice(None, None, s) for s in strides)
        + (slice(None),)
        + tuple(slice(None, None, d) for d in dilation)
    )
    windows = windows[index]  # (N, *out, C, *k)
    flat_kernel = np.moveaxis(kernel, rank, 0)  # (C, *k, O)
    return np.tensordot(
        windows, flat_kernel, axes=(list(range(1 + rank, 2 + 2 * rank)), list(range(rank + 1)))
    )


def _conv_lstm(spec: KernelSpec, rank: int):
    seq = _sequencing(spec)
    if seq.time_major:
        raise spec.unsupported("time_major", True)
    act = _activation(spec, "activation", "tanh")
    rec_act = _recurrent_activation(spec)
    filters = spec.get("filters")
    if not isinstance(filters, int) or filters <= 0:
        raise spec.unsupported("filters", filters)
    strides = int_tuple(spec, "strides", rank, 1)
    dilation = int_tuple(spec, "dilation_rate", rank, 1)
    int_tuple(spec, "kernel_size", rank, 1)  # validated; the kernel's shape is authoritative
    padding = spec.get("padding", "valid")
    if padding not in ("valid", "same"):
        raise spec.unsupported("padding", padding)
    data_format = spec.get("data_format") or "channels_last"
    if data_format not in ("channels_last", "channels_first"):
        raise spec.unsupported("data_format", data_format)
    channels_first = data_format == "channels_first"
    if any(s != 1 for s in strides) and any(d != 1 for d in dilation):
        raise spec.unsupported("dilation_rate", list(dilation))  # Keras refuses this combination too
    kernel = _weight(spec, "kernel")
    recurrent = _weight(spec, "recurrent_kernel")
    bias = _bias(spec)
    ones = (1,) * rank

    def to_last(a: Array) -> Array:  # (B, C, *sp) -> (B, *sp, C)
        return np.moveaxis(a, 1, -1) if channels_first else a

    def to_first(a: Array) -> Array:
        return np.moveaxis(a, -1, 1) if channels_first else a

    def step(xp: Array, states: list[Array]) -> tuple[Array, list[Array]]:
        h, c = states
        z = xp + _conv(h, recurrent, ones, ones, "same")
        i = rec_act(z[..., :filters])
        f = rec_act(z[..., filters : 2 * filters])
        c = f * c + i * act(z[..., 2 * filters : 3 * filters])
        o = rec_act(z[..., 3 * filters :])
        h = o * act(c)
        return h, [h, c]

    def run(*args: Any, **kwargs: Any) -> Array | tuple[Array, ...]:
        x, given, mask = _parse_call(spec, args, kwargs)
        if x.ndim != rank + 3:
            raise ValueError(f"{spec.class_name} expects a {rank + 3}-D input, got shape {x.shape}")
        batch, steps = x.shape[:2]
        if channels_first:
            x = np.moveaxis(x, 2, -1)
        folded = x.reshape((batch * steps, *x.shape[2:]))
        projected = _conv(folded, kernel.astype(x.dtype, copy=False), strides, dilation, padding)
        if bias is not None:
            projected = projected + bias.astype(projected.dtype, copy=False)
        projected = projected.reshape((batch, steps, *projected.shape[1:]))
        xt = _time_major(projected, seq)
        state_shape = (batch, *projected.shape[2:-1], filters)
        states = _initial_states(spec, [to_last(s) for s in given], [state_shape] * 2, projected.dtype)
        output, states = _loop(step, xt, states, mask, seq)
        if channels_first:
            output = np.moveaxis(output, -1, 2 if seq.return_sequences else 1)
        return _finish(output, [to_first(s) for s in states], seq)

    return run


@register("ConvLSTM1D")
def conv_lstm_1d(spec: KernelSpec):
    return _conv_lstm(spec, 1)


@register("ConvLSTM2D")
def conv_lstm_2d(spec: KernelSpec):
    return _conv_lstm(spec, 2)


@register("ConvLSTM3D")
def conv_lstm_3d(spec: KernelSpec):
    return _conv_lstm(spec, 3)


# --- wrappers ---------------------------------------------------------------------------------


def _inner_spec(spec: KernelSpec, class_name: str, config: Mapping[str, Any], prefix: str) -> KernelSpec:
    weights = {k[len(prefix) :]: v for k, v in spec.weights.items() if k.startswith(prefix)}
    return KernelSpec(
        name=str(config.get("name", spec.name)),
        class_name=class_name,
        config=config,
        weights=weights,
        keras_version=spec.keras_version,
        compute_dtype=spec.compute_dtype,
    )


_MERGE_MODES = ("concat", "sum", "mul", "ave", None)


@register("Bidirectional")
def bidirectional(spec: KernelSpec):
    merge_mode = spec.get("merge_mode", "concat")
    if merge_mode not in _MERGE_MODES:
        raise spec.unsupported("merge_mode", merge_mode)
    forward = inner_record(spec, "layer")
    if forward is None:
        raise spec.unsupported("layer", None)
    backward = inner_record(spec, "backward_layer")
    if backward is None:
        # Keras: the backward layer is a copy of the forward one with go_backwards flipped.
        backward = (forward[0], {**forward[1], "go_backwards": not forward[1].get("go_backwards", False)})
    fw_config, bw_config = forward[1], backward[1]
    return_sequences = bool(fw_config.get("return_sequences", False))
    return_state = bool(fw_config.get("return_state", False))
    time_axis = 0 if fw_config.get("time_major") else 1
    # Keras forces zero_output_for_mask = return_sequences on both sub-layers.
    fw_config = {**fw_config, "zero_output_for_mask": return_sequences}
    bw_config = {**bw_config, "zero_output_for_mask": return_sequences}
    fw_run = get_kernel(forward[0], spec.name)(_inner_spec(spec, forward[0], fw_config, "forward/"))
    bw_run = get_kernel(backward[0], spec.name)(_inner_spec(spec, backward[0], bw_config, "backward/"))

    def run(*args: Any, **kwargs: Any) -> Array | tuple[Array, ...]:
        x, given, mask = _parse_call(spec, args, kwargs)
        if len(given) % 2:
            raise ValueError(f"Bidirectional expects an even number of initial states, got {len(given)}")
        half = len(given) // 2
        fw_kwargs: dict[str, Any] = {"mask": mask} if mask is not None else {}
        bw_kwargs = dict(fw_kwargs)
        if given:
            fw_kwargs["initial_state"] = given[:half]
            bw_kwargs["initial_state"] = given[half:]
        y = fw_run(x, **fw_kwargs)
        y_rev = bw_run(x, **bw_kwargs)
        states: list[Array] = []
        if return_state:
            states = [*y[1:], *y_rev[1:]]
            y, y_rev = y[0], y_rev[0]
        if return_sequences:
            y_rev = np.flip(y_rev, axis=time_axis)
        if merge_mode == "concat":
            merged: list[Array] = [np.concatenate([y, y_rev], axis=-1)]
        elif merge_mode == "sum":
            merged = [y + y_rev]
        elif merge_mode == "mul":
            merged = [y * y_rev]
        elif merge_mode == "ave":
            merged = [(y + y_rev) / y.dtype.type(2)]
        else:
            merged = [y, y_rev]
        result = merged + states
        return result[0] if len(result) == 1 else tuple(result)

    return run


@register("TimeDistributed")
def time_distributed(spec: KernelSpec):
    inner = inner_record(spec, "layer")
    if inner is None:
        raise spec.unsupported("layer", None)
    inner_run = get_kernel(inner[0], spec.name)(_inner_spec(spec, inner[0], inner[1], ""))

    def fold(a: Array) -> Array:
        return a.reshape((a.shape[0] * a.shape[1], *a.shape[2:]))

    def run(*args: Any, **kwargs: Any) -> Array | tuple[Array, ...]:
        extra = set(kwargs) - {"mask", "training"}
        if extra or len(args) != 1:
            raise TypeError(
                f"TimeDistributed: unexpected call structure {len(args)} args, kwargs {sorted(extra)}"
            )
        x = np.asarray(args[0])
        if x.ndim < 3:
            raise ValueError(f"TimeDistributed expects at least a 3-D input, got shape {x.shape}")
        batch, steps = x.shape[:2]
        inner_kwargs: dict[str, Any] = {}
        mask = kwargs.get("mask")
        # Keras hands the inner layer mask[:, t] at each step. A (batch, time) mask gives a per-sample
        # (batch,) mask that no built-in layer uses, so it is not passed; a deeper mask (batch, time,
        # inner_time) is the inner layer's own (for example an RNN's) and is folded like the input.
        if mask is not None and np.ndim(mask) > 2:
            inner_kwargs["mask"] = fold(np.asarray(mask))
        # A tf.keras conv takes the axes before its own input rank as batch (shape_rules/_base.py).
        extra = extra_batch_axes(inner[0], x.ndim - 1)
        lead = x.shape[: 2 + extra]
        out = inner_run(x.reshape((-1, *x.shape[2 + extra :])), **inner_kwargs)

        def unfold(a: Array) -> Array:
            return a.reshape((*lead, *a.shape[1:]))

        if isinstance(out, tuple):
            return tuple(unfold(a) for a in out)
        return unfold(out)

    return run


# --- the generic RNN layer over cells ------------------------------------------------------------

_CELLS: dict[str, tuple[str, Callable[[KernelSpec], _Cell]]] = {
    "SimpleRNNCell": ("SimpleRNN", _simple_rnn_cell),
    "LSTMCell": ("LSTM", _lstm_cell),
    "GRUCell": ("GRU", _gru_cell),
}
"""Each cell class with its layer class and reader: the layer SimpleRNN/LSTM/GRU runs its cell's
step over time (``_dense_rnn``), the generic RNN layer a stack of cells (``rnn``)."""


for _layer_class, _read_cell in _CELLS.values():
    register(_layer_class)(partial(_dense_rnn, read_cell=_read_cell))
_SEQUENCING_KEYS = (
    "return_sequences",
    "return_state",
    "go_backwards",
    "stateful",
    "zero_output_for_mask",
    "time_major",
)


@register("RNN")
def rnn(spec: KernelSpec):
    """``keras.layers.RNN(cell)`` over LSTMCell, GRUCell, SimpleRNNCell or StackedRNNCells of them:
    the cells' own steps, in a stack each cell's output is the next one's input; the states are the
    cells' states in order (``[h, c]`` of an LSTMCell, ``[h]`` of the others)."""
    seq = _sequencing(spec)
    loop_config = {k: spec.get(k) for k in _SEQUENCING_KEYS if spec.get(k) is not None}
    cells = []
    for class_name, config, prefix in cell_records(spec):
        if class_name not in _CELLS:
            raise spec.unsupported("cell", class_name)
        layer_class, read_cell = _CELLS[class_name]
        cell_spec = _inner_spec(spec, layer_class, {**config, **loop_config}, prefix)
        cell = read_cell(cell_spec)
        cells.append((cell.n_states, _units(cell_spec), cell.step, cell.kernel, cell.input_bias))
    first_kernel, first_bias = cells[0][3], cells[0][4]

    def stacked(xp: Array, states: list[Array]) -> tuple[Array, list[Array]]:
        out: Array = xp
        new: list[Array] = []
        at = 0
        for i, (n, _, step, kernel, input_bias) in enumerate(cells):
            if i:
                xp = out @ kernel
                if input_bias is not None:
                    xp = xp + input_bias
            out, cell_states = step(xp, states[at : at + n])
            new.extend(cell_states)
            at += n
        return out, new

    step = cells[0][2] if len(cells) == 1 else stacked

    def run(*args: Any, **kwargs: Any) -> Array | tuple[Array, ...]:
        projected, given, mask = _projected_call(spec, args, kwargs, seq, first_kernel, first_bias)
        batch = projected.shape[1]
        shapes = [(batch, units) for n, units, *_ in cells for _ in range(n)]
        states = _initial_states(spec, given, shapes, projected.dtype)
        output, states = _loop(step, projected, states, mask, seq)
        return _finish(output, states, seq)

    return run
