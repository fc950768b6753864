"""Recurrent layers: SimpleRNN, LSTM, GRU (as ONNX RNN / LSTM / GRU ops), Bidirectional, TimeDistributed.

Semantics: ``modelgraph/runner/kernels/recurrent.py``. What the mapping relies on (docs/onnx.md):

* Gate orders. Keras LSTM packs its kernels as ``[i, f, c, o]``, ONNX LSTM as ``[i, o, f, c]``; Keras
  GRU and ONNX GRU both use ``[z, r, h]``. Keras kernels are ``(input, gates * units)``; ONNX weights
  are ``(directions, gates * units, input)``, so they are transposed.
* Biases. ONNX adds an input bias and a recurrent bias. LSTM and SimpleRNN get Keras's bias as the
  input bias (recurrent bias zero). GRU with ``reset_after=True`` (bias ``(2, 3 * units)``) maps to
  ``linear_before_reset=1`` with row 0 as the input bias and row 1 as the recurrent bias, which is
  exactly Keras's ``r * (h @ R_h + b_rh)``; ``reset_after=False`` is ``linear_before_reset=0``.
* ``go_backwards``: the input (and mask) are reversed along time and run forwards, so sequences come
  out in processing order, as Keras returns them.
* Masks. A masked step keeps the states and repeats the previous output (zeros with
  ``zero_output_for_mask``). ONNX's ``sequence_lens`` only models trailing padding, so a masked RNN is
  unrolled over its (static) time steps: one single-step ONNX cell per step and a ``Where`` on the
  mask.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from modelgraph import catalogue
from modelgraph.layer_params import inner_record, int_tuple
from modelgraph.runner.activations import activation_name
from modelgraph.runner.kernels.recurrent import split_call
from modelgraph.runner.registry import KernelSpec
from modelgraph.saving.onnx.emitter import Value
from modelgraph.saving.onnx.registry import MapContext, get_mapping, register
from modelgraph.shape_rules import extra_batch_axes

_INT64_MAX = np.iinfo(np.int64).max
_CALL_KWARGS = frozenset({"initial_state", "mask", "constants"})


def _onnx_activation(
    ctx: MapContext, key: str, default: str, legacy: str | None = None
) -> tuple[str, dict[str, float]]:
    """The ONNX RNN activation (and its alpha/beta) for a Keras activation config value."""
    if key in ctx.config:
        value = ctx.config[key]
    elif legacy is not None and legacy in ctx.config:
        value = ctx.config[legacy]
    else:
        value = default
    name = activation_name(value)
    keras3 = ctx.spec.keras_version[0] >= 3
    table: dict[str, tuple[str, dict[str, float]]] = {
        "tanh": ("Tanh", {}),
        "sigmoid": ("Sigmoid", {}),
        "relu": ("Relu", {}),
        "linear": ("Affine", {"alpha": 1.0, "beta": 0.0}),
        "softsign": ("Softsign", {}),
        "softplus": ("Softplus", {}),
        "elu": ("Elu", {"alpha": 1.0}),
        "hard_sigmoid": ("HardSigmoid", {"alpha": 1.0 / 6.0 if keras3 else 0.2, "beta": 0.5}),
    }
    if name not in table:
        raise ctx.unsupported(key, value)
    return table[name]


def _recurrent_activation(ctx: MapContext) -> tuple[str, dict[str, float]]:
    default = "hard_sigmoid" if ctx.spec.keras_version < (2, 3, 0) else "sigmoid"
    return _onnx_activation(ctx, "recurrent_activation", default, legacy="inner_activation")


def _parse_call(
    ctx: MapContext, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> tuple[Value, list[Value], Value | None]:
    return split_call(ctx.spec, args, kwargs)


def _reverse_time(ctx: MapContext, n: str, axis: int) -> str:
    e = ctx.e
    return e.op(
        "Slice",
        [
            n,
            e.ints([-1], "starts"),
            e.ints([-_INT64_MAX], "ends"),
            e.ints([axis], "axes"),
            e.ints([-1], "steps"),
        ],
        "reverse",
    )


def _gate_blocks(kernel: np.ndarray, units: int, order: list[int]) -> np.ndarray:
    """(rows, gates * units) in Keras's gate order -> (1, gates * units, rows) in ONNX's."""
    blocks = [kernel[:, g * units : (g + 1) * units] for g in order]
    return np.concatenate(blocks, axis=1).T[None].astype(np.float32)


Activations = list[tuple[str, dict[str, float]]]
CellOp = tuple[str, int, np.ndarray, np.ndarray, np.ndarray, Activations, dict[str, Any]]
"""One Keras recurrent layer as an ONNX op: its type, number of states, W, R, B, activations and
its other attributes."""


def _simple_rnn_op(ctx: MapContext, units: int, kernel: np.ndarray, recurrent: np.ndarray,
                   bias: np.ndarray | None, act: tuple[str, dict[str, float]]) -> CellOp:  # fmt: skip
    """SimpleRNN as ONNX RNN: Keras's bias is the input bias."""
    b = np.zeros(2 * units, np.float32)
    if bias is not None:
        b[:units] = bias
    return "RNN", 1, kernel.T[None], recurrent.T[None], b, [act], {}


def _lstm_op(ctx: MapContext, units: int, kernel: np.ndarray, recurrent: np.ndarray,
             bias: np.ndarray | None, act: tuple[str, dict[str, float]]) -> CellOp:  # fmt: skip
    """LSTM as ONNX LSTM: gates reordered, Keras's bias the input bias."""
    ctx.flag("unit_forget_bias", True)  # an initializer option (checked): the stored bias holds it
    order = [0, 3, 1, 2]  # Keras i, f, c, o -> ONNX i, o, f, c
    w, r = _gate_blocks(kernel, units, order), _gate_blocks(recurrent, units, order)
    b = np.zeros(8 * units, np.float32)
    if bias is not None:
        b[: 4 * units] = _gate_blocks(bias[None, :], units, order)[0, :, 0]
    return "LSTM", 2, w, r, b, [_recurrent_activation(ctx), act, act], {}


def _gru_op(ctx: MapContext, units: int, kernel: np.ndarray, recurrent: np.ndarray,
            bias: np.ndarray | None, act: tuple[str, dict[str, float]]) -> CellOp:  # fmt: skip
    """GRU as ONNX GRU: Keras's ``reset_after`` is ONNX's ``linear_before_reset`` (module docstring)."""
    reset_after = ctx.flag("reset_after", ctx.spec.keras_version >= (2, 4, 0))
    order = [0, 1, 2]
    w, r = _gate_blocks(kernel, units, order), _gate_blocks(recurrent, units, order)
    b = np.zeros(6 * units, np.float32)
    if bias is not None:
        if reset_after:
            if bias.shape != (2, 3 * units):
                raise ValueError(f"GRU reset_after=True expects bias (2, {3 * units}), got {bias.shape}")
            b[: 3 * units], b[3 * units :] = bias[0], bias[1]
        else:
            b[: 3 * units] = bias.reshape(-1)
    attrs = {"linear_before_reset": 1 if reset_after else 0}
    return "GRU", 1, w, r, b, [_recurrent_activation(ctx), act], attrs


CellLowering = Callable[..., CellOp]


class _Cell:
    """One Keras recurrent layer as an ONNX op (``lowering``: its class's ``_*_op``)."""

    def __init__(self, ctx: MapContext, lowering: CellLowering) -> None:
        self.ctx = ctx
        units = ctx.get("units", ctx.get("output_dim"))
        if not isinstance(units, int) or units <= 0:
            raise ctx.unsupported("units", units)
        self.units = units
        kernel = ctx.weight("kernel")
        recurrent = ctx.weight("recurrent_kernel")
        use_bias = ctx.flag("use_bias", True)
        bias = ctx.weight("bias") if use_bias else None
        act = _onnx_activation(ctx, "activation", "tanh")
        self.attrs: dict[str, Any] = {"hidden_size": units}
        self.op, self.n_states, w, r, b, acts, attrs = lowering(ctx, units, kernel, recurrent, bias, act)
        self.attrs.update(attrs)
        self.attrs["activations"] = [a[0] for a in acts]
        alphas = [a[1].get("alpha") for a in acts]
        betas = [a[1].get("beta") for a in acts]
        if any(v is not None for v in alphas):
            self.attrs["activation_alpha"] = [0.0 if v is None else float(v) for v in alphas]
        if any(v is not None for v in betas):
            self.attrs["activation_beta"] = [0.0 if v is None else float(v) for v in betas]
        self.w = ctx.const(np.ascontiguousarray(w), "W")
        self.r = ctx.const(np.ascontiguousarray(r), "R")
        self.b = ctx.const(b[None], "B")

    def run(self, x_tm: str, states: list[str]) -> tuple[str, list[str]]:
        """Y (T, 1, B, U) and final states (1, B, U) of the op on time-major ``x_tm``."""
        e = self.ctx.e
        inputs = [x_tm, self.w, self.r, self.b, ""]
        inputs += states if states else [""] * self.n_states
        while inputs and inputs[-1] == "":
            inputs.pop()
        outs = e.op(self.op, inputs, self.op.lower(), outputs=1 + self.n_states, **self.attrs)
        return outs[0], list(outs[1:])


def _run_rnn(
    ctx: MapContext,
    lowering: CellLowering,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    force_zero_output: bool | None = None,
) -> Any:
    ctx.flag("stateful")  # the first call starts from zeros, as every export does
    return_sequences = ctx.flag("return_sequences")
    return_state = ctx.flag("return_state")
    go_backwards = ctx.flag("go_backwards")
    zero_output = ctx.flag("zero_output_for_mask") if force_zero_output is None else force_zero_output
    time_major = ctx.flag("time_major")
    x, given, mask = _parse_call(ctx, args, kwargs)
    cell = _Cell(ctx, lowering)
    e = ctx.e
    x_n = e.logical(x)
    if x.dtype != "float32":
        x_n = e.cast(x_n, "float32")
    x_tm = x_n if time_major else e.op("Transpose", [x_n], "time_major", perm=[1, 0, 2])
    if go_backwards:
        x_tm = _reverse_time(ctx, x_tm, 0)
    if given and len(given) != cell.n_states:
        raise ValueError(f"{ctx.class_name} expects {cell.n_states} initial state(s), got {len(given)}")
    states = [e.op("Unsqueeze", [e.logical(s), e.ints([0], "axes")], "state") for s in given]
    if mask is None:
        y, finals = cell.run(x_tm, states)
        if return_sequences:
            out = e.op("Squeeze", [y, e.ints([1], "axes")], "sequences")
            if not time_major:
                out = e.op("Transpose", [out], "sequences", perm=[1, 0, 2])
        else:
            out = e.op("Squeeze", [finals[0], e.ints([0], "axes")], "last")
    else:
        out, finals = _unrolled(
            ctx, cell, x_tm, states, mask, go_backwards, return_sequences, zero_output, time_major
        )
    if not return_state:
        return Value(out, 3 if return_sequences else 2)
    squeezed = [Value(e.op("Squeeze", [s, e.ints([0], "axes")], "final_state"), 2) for s in finals]
    return (Value(out, 3 if return_sequences else 2), *squeezed)


def _unrolled(ctx, cell: _Cell, x_tm: str, states: list[str], mask: Value, go_backwards: bool,
              return_sequences: bool, zero_output: bool, time_major: bool = False) -> tuple[str, list[str]]:  # fmt: skip
    """A masked RNN, one single-step cell per time step (see the module docstring)."""
    e = ctx.e
    shape = ctx.in_shapes[0] if ctx.in_shapes else None
    steps = shape[0 if time_major else 1] if shape is not None and len(shape) == 3 else None
    if not isinstance(steps, int):
        raise ctx.unsupported("mask with unknown time steps", "<mask>")
    m = e.logical(mask)
    if mask.rank == 3:
        m = e.op("Squeeze", [m, e.ints([2], "axes")])
    if mask.dtype != "bool":
        m = e.cast(m, "bool")
    m_tm = m if time_major else e.op("Transpose", [m], "mask_tm", perm=[1, 0])  # (T, B)
    in_time_order = m_tm
    if go_backwards:
        m_tm = _reverse_time(ctx, m_tm, 0)
    m_tm = e.op("Unsqueeze", [m_tm, e.ints([1, 3], "axes")])  # (T, 1, B, 1)
    # tf.keras's unrolled loop zeroes the stacked outputs (processing order) by the mask in time
    # order, having carried the previous output over masked steps (the runner's _Sequencing).
    late_zero = (
        return_sequences
        and zero_output
        and go_backwards
        and ctx.flag("unroll")
        and ctx.spec.keras_version[0] < 3
    )
    batch = e.op("Slice", [e.op("Shape", [x_tm]), e.ints([1], "s"), e.ints([2], "e")])
    zeros = e.op(
        "ConstantOfShape",
        [e.op("Concat", [e.ints([1], "one"), batch, e.ints([cell.units], "units")], axis=0)],
        "zeros",
    )
    if not states:
        states = [zeros] * cell.n_states
    previous = zeros
    outputs: list[str] = []
    for t in range(steps):
        x_t = e.op("Slice", [x_tm, e.ints([t], "s"), e.ints([t + 1], "e"), e.ints([0], "axes")], f"step{t}")
        keep = e.op("Slice", [m_tm, e.ints([t], "s"), e.ints([t + 1], "e"), e.ints([0], "axes")], f"step{t}")
        keep = e.op("Squeeze", [keep, e.ints([0], "axes")])  # (1, B, 1)
        _, new = cell.run(x_t, states)
        states = [e.op("Where", [keep, n, s], f"step{t}") for n, s in zip(new, states, strict=True)]
        out = e.op("Where", [keep, new[0], zeros if zero_output and not late_zero else previous], f"step{t}")
        previous = out
        if return_sequences:
            outputs.append(out)
    if return_sequences:
        stacked = e.op("Concat", outputs, "sequences", axis=0)  # (T, B, U)
        if late_zero:
            keep_all = e.op("Unsqueeze", [in_time_order, e.ints([2], "axes")])  # (T, B, 1)
            stacked = e.op("Where", [keep_all, stacked, zeros], "sequences")
        return (stacked if time_major else e.op("Transpose", [stacked], "sequences", perm=[1, 0, 2])), states
    return e.op("Squeeze", [previous, e.ints([0], "axes")], "last"), states


def _recurrent(lowering: CellLowering) -> Callable[..., Any]:
    """The mapping of a recurrent layer whose step is ``lowering``'s ONNX op."""

    def recurrent(ctx: MapContext, *args: Any, **kwargs: Any) -> Any:
        return _run_rnn(ctx, lowering, args, kwargs)

    return recurrent


register("SimpleRNN")(_recurrent(_simple_rnn_op))
register("LSTM")(_recurrent(_lstm_op))
register("GRU")(_recurrent(_gru_op))


def _recurrent_layer(ctx: MapContext, class_name: str) -> tuple[Callable[..., Any], int]:
    """The mapping of a recurrent layer a wrapper or an RNN runs (a catalogue entry with a
    non-convolutional :class:`~modelgraph.catalogue.Recurrence` and a mapping), and its states."""
    spec = catalogue.spec_for(class_name, "onnx")
    recurrence = spec.recurrence if spec is not None else None
    if spec is None or recurrence is None or recurrence.convolutional or not callable(spec.onnx):
        raise ctx.unsupported("layer", class_name)
    return spec.onnx, recurrence.states


def _inner_ctx(ctx: MapContext, class_name: str, config: Mapping[str, Any], prefix: str, in_shapes: Any = None,
               out_shapes: Any = None) -> MapContext:  # fmt: skip
    weights = {k[len(prefix) :]: v for k, v in ctx.spec.weights.items() if k.startswith(prefix)}
    spec = KernelSpec(
        name=f"{ctx.spec.name}/{config.get('name', class_name)}",
        class_name=class_name,
        config=config,
        weights=weights,
        keras_version=ctx.spec.keras_version,
        compute_dtype=ctx.spec.compute_dtype,
    )
    return MapContext(spec=spec, e=ctx.e, in_shapes=ctx.in_shapes if in_shapes is None else in_shapes,
                      out_shapes=ctx.out_shapes if out_shapes is None else out_shapes)  # fmt: skip


@register("Bidirectional")
def bidirectional(ctx: MapContext, *args: Any, **kwargs: Any) -> Any:
    merge_mode = ctx.get("merge_mode", "concat")
    if merge_mode not in ("concat", "sum", "mul", "ave", None):
        raise ctx.unsupported("merge_mode", merge_mode)
    forward = inner_record(ctx.spec, "layer")
    if forward is None:
        raise ctx.unsupported("layer", None)
    backward = inner_record(ctx.spec, "backward_layer")
    if backward is None:
        backward = (forward[0], {**forward[1], "go_backwards": not forward[1].get("go_backwards", False)})
    return_sequences = bool(forward[1].get("return_sequences", False))
    return_state = bool(forward[1].get("return_state", False))
    x, given, mask = _parse_call(ctx, args, kwargs)
    if len(given) % 2:
        raise ValueError(f"Bidirectional expects an even number of initial states, got {len(given)}")
    half = len(given) // 2
    results = []
    for (cls, config), prefix, states in (
        (forward, "forward/", given[:half]),
        (backward, "backward/", given[half:]),
    ):
        mapping, _ = _recurrent_layer(ctx, cls)
        inner = _inner_ctx(ctx, cls, {**config, "zero_output_for_mask": return_sequences}, prefix)
        call_kwargs: dict[str, Any] = {}
        if mask is not None:
            call_kwargs["mask"] = mask
        if states:
            call_kwargs["initial_state"] = list(states)
        out = mapping(inner, x, **call_kwargs)
        results.append(out if isinstance(out, tuple) else (out,))
    e = ctx.e
    y, y_rev = results[0][0], results[1][0]
    states_out = [*results[0][1:], *results[1][1:]] if return_state else []
    y_rev_n = y_rev.name
    if return_sequences:
        y_rev_n = _reverse_time(ctx, y_rev_n, 0 if forward[1].get("time_major") else 1)
    rank = 3 if return_sequences else 2
    if merge_mode == "concat":
        merged = [Value(e.op("Concat", [y.name, y_rev_n], "bidirectional", axis=-1), rank)]
    elif merge_mode == "sum":
        merged = [Value(e.op("Add", [y.name, y_rev_n], "bidirectional"), rank)]
    elif merge_mode == "mul":
        merged = [Value(e.op("Mul", [y.name, y_rev_n], "bidirectional"), rank)]
    elif merge_mode == "ave":
        s = e.op("Add", [y.name, y_rev_n])
        merged = [Value(e.op("Div", [s, e.const(np.float32(2.0), "two")], "bidirectional"), rank)]
    else:
        merged = [y, Value(y_rev_n, rank)]
    result = merged + states_out
    return result[0] if len(result) == 1 else tuple(result)


_CELL_LAYERS = {"SimpleRNNCell": "SimpleRNN", "LSTMCell": "LSTM", "GRUCell": "GRU"}
_LOOP_KEYS = ("return_sequences", "return_state", "stateful", "zero_output_for_mask", "time_major")


@register("RNN")
def rnn(ctx: MapContext, *args: Any, **kwargs: Any) -> Any:
    """``keras.layers.RNN(cell)``: each cell mapped as the layer of its class (LSTMCell as LSTM, ...)
    with the RNN's sequencing settings; a StackedRNNCells is a chain of such layers, every one but the
    last returning sequences and all given the same mask (a masked step holds each cell's states, and
    the last cell's output). ``go_backwards`` reverses the input and mask once, before the chain."""
    from modelgraph.layer_params import cell_records

    records = cell_records(ctx.spec)
    x, given, mask = _parse_call(ctx, args, kwargs)
    loop = {k: ctx.get(k) for k in _LOOP_KEYS if ctx.get(k) is not None}
    time_axis = 0 if ctx.flag("time_major") else 1
    if ctx.flag("go_backwards"):
        x = Value(_reverse_time(ctx, ctx.e.logical(x), time_axis), x.rank, None, x.dtype)
        if mask is not None:
            mask = Value(_reverse_time(ctx, ctx.e.logical(mask), time_axis), mask.rank, None, mask.dtype)
    outputs: list[Value] = []
    finals: list[Value] = []
    at = 0
    for i, (cell_class, config, prefix) in enumerate(records):
        layer_class = _CELL_LAYERS.get(cell_class)
        if layer_class is None:
            raise ctx.unsupported("cell", cell_class)
        last = i == len(records) - 1
        inner_config = {**config, **loop, "go_backwards": False, "return_state": True}
        if not last:
            inner_config["return_sequences"] = True
        inner = _inner_ctx(ctx, layer_class, inner_config, prefix)
        mapping, n_states = _recurrent_layer(ctx, layer_class)
        call_kwargs: dict[str, Any] = {}
        if mask is not None:
            call_kwargs["mask"] = mask
        if given:
            call_kwargs["initial_state"] = list(given[at : at + n_states])
        at += n_states
        result = mapping(inner, x, **call_kwargs)
        x = result[0]
        finals.extend(result[1:])
        if last:
            outputs = [x]
    if given and at != len(given):
        raise ValueError(f"RNN expects {at} initial state(s), got {len(given)}")
    if not ctx.flag("return_state"):
        return outputs[0]
    return (outputs[0], *finals)


@register("TimeDistributed")
def time_distributed(ctx: MapContext, x: Value, mask: Any = None) -> Any:
    inner = inner_record(ctx.spec, "layer")
    if inner is None:
        raise ctx.unsupported("layer", None)
    cls, config = inner
    key = cls
    mapping = get_mapping(key)
    if mapping is None:
        raise ctx.unsupported("layer", cls)
    shape = ctx.in_shapes[0] if ctx.in_shapes else None
    out_shape = ctx.out_shapes[0] if ctx.out_shapes else None
    if shape is None or out_shape is None:
        raise ctx.unsupported("input shape", shape)
    # A tf.keras conv takes the axes before its own input rank as batch too (the runner's rule).
    extra = extra_batch_axes(cls, len(shape) - 1)
    lead_axes = 2 + extra
    e = ctx.e
    n = e.logical(x)
    inner_sizes = shape[lead_axes:]
    fold_shape = (
        e.ints([-1, *inner_sizes], "shape")
        if all(isinstance(d, int) for d in inner_sizes)
        else e.op(  # sizes known only when it runs: (-1, the input's own sizes after the lead axes)
            "Concat",
            [
                e.ints([-1], "m1"),
                e.op("Slice", [e.op("Shape", [n]), e.ints([lead_axes], "s"), e.ints([_INT64_MAX], "e")]),
            ],
            axis=0,
        )
    )
    folded = e.op("Reshape", [n, fold_shape], "fold")
    inner_in = [(None, *shape[lead_axes:])]
    inner_out = [(None, *out_shape[lead_axes:])]
    ictx = _inner_ctx(ctx, cls, config, "", inner_in, inner_out)
    inner_kwargs: dict[str, Any] = {}
    if mask is not None and mask.rank is not None and mask.rank > 2:
        # the inner layer's own mask (batch, time, inner...): folded like the input
        if mask.rank != len(shape) - 1 or extra or any(d is None for d in shape[2:-1]):
            raise ctx.unsupported("mask", "<nested mask>")
        m = e.op("Reshape", [e.logical(mask), e.ints([-1, *shape[2:-1]], "shape")], "fold_mask")
        inner_kwargs["mask"] = Value(m, mask.rank - 1, None, mask.dtype)
    out = mapping(ictx, Value(folded, len(shape) - 1 - extra, None, x.dtype), **inner_kwargs)
    if isinstance(out, tuple):
        raise ctx.unsupported("layer", f"{cls} with several outputs")
    y = e.logical(out) if isinstance(out, Value) else out
    lead = e.op("Slice", [e.op("Shape", [n]), e.ints([0], "s"), e.ints([lead_axes], "e")])
    rest = (
        e.ints(list(out_shape[lead_axes:]), "rest")
        if all(isinstance(d, int) for d in out_shape[lead_axes:])
        else e.op("Slice", [e.op("Shape", [y]), e.ints([1], "s"), e.ints([_INT64_MAX], "e")])
    )
    return Value(e.op("Reshape", [y, e.op("Concat", [lead, rest], axis=0)], "unfold"), len(out_shape))


# --- ConvLSTM ---------------------------------------------------------------------------------


def _conv_lstm(ctx: MapContext, rank: int, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    """ConvLSTM1D/2D/3D unrolled over its (static) time steps, channels-first inside: the input
    convolution of every step at once (time folded into the batch), then per step the recurrent
    'same' convolution of h, Keras's LSTM gates ``[i, f, c, o]`` on the channel axis, the mask."""
    from modelgraph.runner.activations import activation_name
    from modelgraph.runner.kernels.conv_utils import same_pads
    from modelgraph.saving.onnx.mappings import _act
    from modelgraph.saving.onnx.mappings.conv import onnx_kernel

    if ctx.flag("time_major"):
        raise ctx.unsupported("time_major", True)
    ctx.flag("stateful")
    return_sequences, return_state = ctx.flag("return_sequences"), ctx.flag("return_state")
    go_backwards, zero_output = ctx.flag("go_backwards"), ctx.flag("zero_output_for_mask")
    filters = ctx.get("filters")
    if not isinstance(filters, int) or filters <= 0:
        raise ctx.unsupported("filters", filters)
    fmt = ctx.get("data_format") or "channels_last"
    if fmt not in ("channels_last", "channels_first"):
        raise ctx.unsupported("data_format", fmt)
    padding = ctx.get("padding", "valid")
    if padding not in ("valid", "same"):
        raise ctx.unsupported("padding", padding)
    strides = int_tuple(ctx.spec, "strides", rank, 1)
    dilation = int_tuple(ctx.spec, "dilation_rate", rank, 1)
    keras_major = ctx.spec.keras_version[0]
    act_name = activation_name(ctx.get("activation", "tanh"))
    rec_default = "hard_sigmoid" if ctx.spec.keras_version < (2, 3, 0) else "sigmoid"
    rec_name = activation_name(ctx.get("recurrent_activation", ctx.get("inner_activation", rec_default)))
    x, given, mask = _parse_call(ctx, args, kwargs)
    shape = ctx.in_shapes[0] if ctx.in_shapes else None
    out_shape = ctx.out_shapes[0] if ctx.out_shapes else None
    if shape is None or out_shape is None or any(not isinstance(d, int) for d in shape[1:]):
        raise ctx.unsupported("input shape", shape)
    steps = shape[1]
    sizes = list(shape[2:-1] if fmt == "channels_last" else shape[3:])
    out_sizes = list(out_shape[-rank - 1 : -1] if fmt == "channels_last" else out_shape[-rank:])
    e = ctx.e
    kernel = ctx.weight("kernel")
    recurrent = ctx.weight("recurrent_kernel")
    bias = ctx.weight("bias") if ctx.flag("use_bias", True) else None

    def act(name: str | None, n: str) -> str:
        out = _act.elementwise(e, name or "", n, keras_major) if name else None
        if out is None:
            raise ctx.unsupported("activation", name)
        return out

    def conv(n: str, w: np.ndarray, b: np.ndarray | None, in_sizes: list[int], mode: str, st, dil) -> str:
        ks = w.shape[:rank]
        if mode == "same":
            pairs = [same_pads(s, k, a, d) for s, k, a, d in zip(in_sizes, ks, st, dil, strict=True)]
            pads = [p[0] for p in pairs] + [p[1] for p in pairs]
        else:
            pads = [0] * (2 * rank)
        inputs = [n, ctx.const(onnx_kernel(w), "kernel")] + ([ctx.const(b, "bias")] if b is not None else [])
        return e.op(
            "Conv", inputs, "conv", kernel_shape=list(ks), strides=list(st), dilations=list(dil), pads=pads
        )

    to_first = (0, rank + 1, *range(1, rank + 1))  # (N, *sp, C) -> (N, C, *sp)
    n = e.logical(x)
    folded = e.op("Reshape", [n, e.ints([-1, *shape[2:]], "shape")], "fold")
    if fmt == "channels_last":
        folded = e.op("Transpose", [folded], perm=list(to_first))
    projected = conv(folded, kernel, bias, sizes, padding, strides, dilation)  # (B*T, 4F, *out)
    projected = e.op("Reshape", [projected, e.ints([-1, steps, 4 * filters, *out_sizes], "shape")])
    ones = (1,) * rank

    def state_in(v: Value) -> str:
        s = e.logical(v)
        return e.op("Transpose", [s], perm=list(to_first)) if fmt == "channels_last" else s

    if given and len(given) != 2:
        raise ValueError(f"{ctx.class_name} expects 2 initial states, got {len(given)}")
    if given:
        h, c = state_in(given[0]), state_in(given[1])
    else:
        like = e.op(
            "Slice", [projected, e.ints([0, 0], "s"), e.ints([1, filters], "e"), e.ints([1, 2], "axes")]
        )
        h = c = e.op("Mul", [e.op("Squeeze", [like, e.ints([1], "axes")]), e.const(np.float32(0), "zero")])
    zeros = e.op("Mul", [h, e.const(np.float32(0), "zero")])
    keep_all = None
    if mask is not None:
        m = e.logical(mask)
        m = m if mask.dtype == "bool" else e.cast(m, "bool")
        keep_all = e.op("Unsqueeze", [m, e.ints(list(range(2, rank + 3)), "axes")])  # (B, T, 1, 1...)
    previous = zeros
    outputs = []
    order = range(steps - 1, -1, -1) if go_backwards else range(steps)
    for t in order:
        xp = e.op("Squeeze", [e.op("Slice", [projected, e.ints([t], "s"), e.ints([t + 1], "e"), e.ints([1], "axes")]),
                              e.ints([1], "axes")], f"step{t}")  # fmt: skip
        z = e.op("Add", [xp, conv(h, recurrent, None, out_sizes, "same", ones, ones)])
        zi, zf, zc, zo = e.op("Split", [z, e.ints([filters] * 4, "split")], "gates", outputs=4, axis=1)
        new_c = e.op(
            "Add", [e.op("Mul", [act(rec_name, zf), c]), e.op("Mul", [act(rec_name, zi), act(act_name, zc)])]
        )
        new_h = e.op("Mul", [act(rec_name, zo), act(act_name, new_c)])
        out = new_h
        if keep_all is not None:
            keep = e.op("Squeeze", [e.op("Slice", [keep_all, e.ints([t], "s"), e.ints([t + 1], "e"), e.ints([1], "axes")]),
                                    e.ints([1], "axes")])  # fmt: skip
            new_h = e.op("Where", [keep, new_h, h])
            new_c = e.op("Where", [keep, new_c, c])
            out = e.op("Where", [keep, out, zeros if zero_output else previous])
        previous = out
        h, c = new_h, new_c
        outputs.append(out)
    state_perm = (0, *range(2, rank + 2), 1) if fmt == "channels_last" else None
    seq_value: Value
    if return_sequences:
        stacked = e.op(
            "Concat", [e.op("Unsqueeze", [o, e.ints([1], "axes")]) for o in outputs], "sequences", axis=1
        )
        seq_perm = (0, 1, rank + 2, *range(2, rank + 2)) if fmt == "channels_last" else None
        seq_value = Value(stacked, rank + 3, seq_perm)
    else:
        seq_value = Value(previous, rank + 2, to_first if fmt == "channels_last" else None)
    if not return_state:
        return seq_value
    stored = to_first if state_perm is not None else None
    return seq_value, Value(h, rank + 2, stored), Value(c, rank + 2, stored)


@register("ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D")
def conv_lstm(ctx: MapContext, *args: Any, **kwargs: Any) -> Any:
    return _conv_lstm(ctx, int(ctx.class_name[-2]), args, kwargs)
