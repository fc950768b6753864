"""Keras 3 operations (``op:<Class>``) and tf.keras TFOpLambda functions (``tf:<function>``).

Semantics and call structures: ``modelgraph/runner/kernels/ops.py`` (whose parameter readers are
reused, so a config or call argument the runner refuses is refused here too). Constants mixed with
tensors take the tensor's dtype (Keras's weak Python scalars); every op works in Keras's layout,
except unary elementwise ops, which keep the stored layout of their input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from modelgraph.errors import UnsupportedConfigError
from modelgraph.layer_params import NO_DEFAULT, axis_value, config_params, decode_key, dtype_value
from modelgraph.saving.onnx._onnx import onnx_dtype
from modelgraph.saving.onnx.emitter import Emitter, Value
from modelgraph.saving.onnx.mappings import _act
from modelgraph.saving.onnx.registry import MapContext, register

_INT64_MAX = np.iinfo(np.int64).max


# --- operands -----------------------------------------------------------------------------------


def _tensor_dtype(values: Sequence[Any]) -> str:
    for v in values:
        if isinstance(v, Value):
            return v.dtype
    return "float32"


def operand(ctx: MapContext, v: Any, dtype: str) -> str:
    """A tensor's logical name, or a constant in the tensors' dtype."""
    if isinstance(v, Value):
        return ctx.e.logical(v)
    arr = np.asarray(v)
    if arr.dtype.kind in "biuf" and dtype != "bool":
        arr = arr.astype(dtype)
    elif arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    return ctx.e.const(arr, "c")


def _rank_of(ctx: MapContext, v: Any, i: int = 0) -> int:
    if isinstance(v, Value) and v.rank is not None:
        return v.rank
    return ctx.rank(i)


def _out(name: str, ctx: MapContext, dtype: str, i: int = 0) -> Value:
    shape = ctx.out_shapes[i] if i < len(ctx.out_shapes) else None
    return Value(name, None if shape is None else len(shape), None, dtype)


# --- elementwise ------------------------------------------------------------------------------------

_UNARY_ACT = {
    "relu": "relu", "relu6": "relu6", "sigmoid": "sigmoid", "silu": "silu", "softplus": "softplus",
    "softsign": "softsign", "selu": "selu", "log_sigmoid": "log_sigmoid", "hard_silu": "hard_silu",
    "tanh_shrink": "tanh_shrink", "hard_tanh": "hard_tanh", "tanh": "tanh", "exp": "exponential",
    "hard_sigmoid": "hard_sigmoid", "sparse_plus": "sparse_plus", "sparse_sigmoid": "sparse_sigmoid",
}  # fmt: skip
_UNARY_ONNX = {
    "negative": "Neg", "abs": "Abs", "sqrt": "Sqrt", "log": "Log", "sin": "Sin", "cos": "Cos",
    "floor": "Floor", "ceil": "Ceil", "sign": "Sign", "reciprocal": "Reciprocal", "logical_not": "Not",
    "erf": "Erf",
}  # fmt: skip


def unary(e: Emitter, name: str, x: str) -> str:
    if name in _UNARY_ACT:
        out = _act.elementwise(e, _UNARY_ACT[name], x, 3)
        assert out is not None
        return out
    if name in _UNARY_ONNX:
        return e.op(_UNARY_ONNX[name], [x], name)
    one = e.const(np.float32(1.0), "one")
    if name == "square":
        return e.op("Mul", [x, x], name)
    if name == "rsqrt":
        return e.op("Reciprocal", [e.op("Sqrt", [x])], name)
    if name == "log2":
        return e.op("Div", [e.op("Log", [x]), e.const(np.float32(np.log(2.0)), "ln2")], name)
    if name == "log1p":
        return e.op("Log", [e.op("Add", [x, one])], name)
    if name == "expm1":
        return e.op("Sub", [e.op("Exp", [x]), one], name)
    raise KeyError(name)


def _unary_value(ctx: MapContext, name: str, x: Any) -> Value:
    if not isinstance(x, Value):
        raise ctx.unsupported("x", "<constant>")
    v = x
    if v.dtype not in ("float32", "float16", "float64") and name not in (
        "logical_not",
        "abs",
        "negative",
        "sign",
        "square",
    ):
        v = Value(ctx.e.cast(v.name, "float32"), v.rank, v.perm, "float32")
    return Value(unary(ctx.e, name, v.name), v.rank, v.perm, v.dtype)


_BINARY_ONNX = {
    "add": "Add", "subtract": "Sub", "multiply": "Mul", "divide": "Div", "power": "Pow", "maximum": "Max",
    "minimum": "Min", "equal": "Equal", "greater": "Greater", "greater_equal": "GreaterOrEqual",
    "less": "Less", "less_equal": "LessOrEqual", "logical_and": "And", "logical_or": "Or",
    "logical_xor": "Xor", "matmul": "MatMul",
}  # fmt: skip
_COMPARISONS = {"equal", "not_equal", "greater", "greater_equal", "less", "less_equal", "logical_and",
                "logical_or", "logical_xor"}  # fmt: skip


def binary(ctx: MapContext, name: str, a: Any, b: Any) -> Value:
    dtype = _tensor_dtype([a, b])
    e = ctx.e
    if name == "divide" and dtype not in ("float32", "float16", "float64"):
        dtype = "float32"
        a = Value(e.cast(e.logical(a), "float32"), a.rank) if isinstance(a, Value) else a
        b = Value(e.cast(e.logical(b), "float32"), b.rank) if isinstance(b, Value) else b
    x, y = operand(ctx, a, dtype), operand(ctx, b, dtype)
    if name in _BINARY_ONNX:
        out = e.op(_BINARY_ONNX[name], [x, y], name)
    elif name == "not_equal":
        out = e.op("Not", [e.op("Equal", [x, y])], name)
    elif name == "squared_difference":
        d = e.op("Sub", [x, y])
        out = e.op("Mul", [d, d], name)
    elif name == "floor_divide" and dtype.startswith("float"):
        out = e.op("Floor", [e.op("Div", [x, y])], name)
    elif name == "mod" and dtype.startswith("float"):
        out = e.op("Sub", [x, e.op("Mul", [e.op("Floor", [e.op("Div", [x, y])]), y])], name)
    elif name == "dot":
        out = e.op("MatMul", [x, y], name)
    else:
        raise ctx.unsupported("operation", f"{name} on {dtype}")
    return _out(out, ctx, "bool" if name in _COMPARISONS else dtype)


# --- reductions and shapes --------------------------------------------------------------------------


def reduce(
    ctx: MapContext,
    x: Value,
    axis: Any,
    keepdims: bool,
    op_type: str,
    hint: str = "",
    float_ints: bool = False,
) -> Value:
    """One ONNX ``Reduce*`` over ``axis`` (None: every axis); ``float_ints``: an integer input is
    reduced as float32 (a mean)."""
    e = ctx.e
    n = e.logical(x)
    dtype = x.dtype
    if float_ints and not dtype.startswith("float"):
        n, dtype = e.cast(n, "float32"), "float32"
    return _out(e.reduce(op_type, n, _reduced_axes(ctx, x, axis), 1 if keepdims else 0, hint), ctx, dtype)


def reduce_bool(ctx: MapContext, x: Value, axis: Any, keepdims: bool, any_true: bool) -> Value:
    """``any`` (``any_true``) or ``all`` over ``axis``: the maximum or minimum of the values as 0/1."""
    e = ctx.e
    f = e.cast(e.logical(x), "float32")
    red = e.reduce(
        "ReduceMax" if any_true else "ReduceMin", f, _reduced_axes(ctx, x, axis), 1 if keepdims else 0
    )
    return _out(e.cast(red, "bool"), ctx, "bool")


def reduce_moment(ctx: MapContext, x: Value, axis: Any, keepdims: bool, std: bool) -> Value:
    """The population variance over ``axis``, or its square root (``std``), in float32 for integers."""
    e = ctx.e
    n = e.logical(x)
    axes = _reduced_axes(ctx, x, axis)
    f = n if x.dtype.startswith("float") else e.cast(n, "float32")
    mean = e.reduce("ReduceMean", f, axes, 1)
    d = e.op("Sub", [f, mean])
    var = e.reduce("ReduceMean", e.op("Mul", [d, d]), axes, 1 if keepdims else 0)
    return _out(e.op("Sqrt", [var]) if std else var, ctx, "float32")


def _reduced_axes(ctx: MapContext, x: Value, axis: Any) -> list[Any]:
    if axis is None:
        return list(range(_rank_of(ctx, x)))
    return list(axis) if isinstance(axis, (list, tuple)) else [axis]


Reduction = Callable[[MapContext, Value, Any, bool], Value]

# Each reduction a Keras 3 op and a tf.keras function may name: ``(ctx, x, axis, keepdims) -> Value``.
MEAN: Reduction = partial(reduce, op_type="ReduceMean", hint="mean", float_ints=True)
SUM: Reduction = partial(reduce, op_type="ReduceSum", hint="sum")
PROD: Reduction = partial(reduce, op_type="ReduceProd", hint="prod")
MAX: Reduction = partial(reduce, op_type="ReduceMax", hint="max")
MIN: Reduction = partial(reduce, op_type="ReduceMin", hint="min")
ANY: Reduction = partial(reduce_bool, any_true=True)
ALL: Reduction = partial(reduce_bool, any_true=False)
STD: Reduction = partial(reduce_moment, std=True)
VAR: Reduction = partial(reduce_moment, std=False)


def get_item(ctx: MapContext, x: Value, key: Any) -> Value:
    """NumPy basic indexing (ints, slices, Ellipsis, None) as Slice, Squeeze and Unsqueeze."""
    e = ctx.e
    rank = _rank_of(ctx, x)
    items = list(key) if isinstance(key, tuple) else [key]
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise ctx.unsupported("index", "two ellipses")
    used = sum(1 for i in items if i is not None and i is not Ellipsis)
    if used > rank:
        raise ValueError(f"too many indices ({used}) for rank {rank}")
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items = items[:at] + [slice(None)] * (rank - used) + items[at + 1 :]
    else:
        items = items + [slice(None)] * (rank - used)
    starts, ends, axes, steps, squeeze, new_axes = [], [], [], [], [], []
    axis = 0
    out_pos = 0
    for item in items:
        if item is None:
            new_axes.append(out_pos)
            out_pos += 1
            continue
        if isinstance(item, slice):
            if item != slice(None):
                step = 1 if item.step is None else int(item.step)
                if step == 0:
                    raise ValueError("slice step 0")
                default_start, default_end = (0, _INT64_MAX) if step > 0 else (-1, -_INT64_MAX)
                starts.append(default_start if item.start is None else int(item.start))
                ends.append(default_end if item.stop is None else int(item.stop))
                axes.append(axis)
                steps.append(step)
            out_pos += 1
        elif isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            i = int(item)
            starts.append(i)
            ends.append(i + 1 if i != -1 else _INT64_MAX)
            axes.append(axis)
            steps.append(1)
            squeeze.append(axis)
        else:
            raise ctx.unsupported("index", repr(item))
        axis += 1
    n = e.logical(x)
    if axes:
        n = e.op(
            "Slice",
            [n, e.ints(starts, "starts"), e.ints(ends, "ends"), e.ints(axes, "axes"), e.ints(steps, "steps")],
            "getitem",
        )
    if squeeze:
        n = e.op("Squeeze", [n, e.ints(squeeze, "axes")], "getitem")
    if new_axes:
        n = e.op("Unsqueeze", [n, e.ints(new_axes, "axes")], "getitem")
    return _out(n, ctx, x.dtype)


def split(ctx: MapContext, x: Value, sections: Any, axis: int) -> tuple[Value, ...]:
    """``numpy.split`` (an int: equal sections; a list: split indices) or sizes already computed."""
    shape = ctx.in_shapes[0] if ctx.in_shapes else None
    rank = _rank_of(ctx, x)
    ax = axis + rank if axis < 0 else axis
    size = shape[ax] if shape is not None else None
    if isinstance(sections, int):
        if size is None:
            raise ctx.unsupported("split of unknown size", sections)
        sizes = [size // sections] * sections
    else:
        if size is None:
            raise ctx.unsupported("split of unknown size", sections)
        bounds = [0, *[int(i) for i in sections], size]
        sizes = [b - a for a, b in zip(bounds, bounds[1:], strict=False)]
    return _split_sizes(ctx, x, sizes, ax)


def _split_sizes(ctx: MapContext, x: Value, sizes: list[int], ax: int) -> tuple[Value, ...]:
    names = ctx.e.op(
        "Split", [ctx.e.logical(x), ctx.e.ints(sizes, "split")], "split", outputs=len(sizes), axis=ax
    )
    names = names if isinstance(names, list) else [names]
    return tuple(Value(n, x.rank, None, x.dtype) for n in names)


def concat(ctx: MapContext, xs: Sequence[Any], axis: int) -> Value:
    dtype = _tensor_dtype(xs)
    return _out(ctx.e.op("Concat", [operand(ctx, v, dtype) for v in xs], "concat", axis=axis), ctx, dtype)


def stack(ctx: MapContext, xs: Sequence[Any], axis: int) -> Value:
    dtype = _tensor_dtype(xs)
    e = ctx.e
    parts = [e.op("Unsqueeze", [operand(ctx, v, dtype), e.ints([axis], "axes")]) for v in xs]
    return _out(e.op("Concat", parts, "stack", axis=axis), ctx, dtype)


def reshape(ctx: MapContext, x: Value, shape: Sequence[Any]) -> Value:
    dims = [-1 if d is None else int(d) for d in shape]
    return _out(ctx.e.op("Reshape", [ctx.e.logical(x), ctx.e.ints(dims, "shape")], "reshape"), ctx, x.dtype)


def gelu(ctx: MapContext, x: Value, approximate: bool) -> Value:
    e = ctx.e
    n = e.logical(x)
    c = lambda v: e.const(np.float32(v), "c")  # noqa: E731
    if approximate:
        inner = e.op(
            "Mul",
            [
                c(np.sqrt(2.0 / np.pi)),
                e.op("Add", [n, e.op("Mul", [c(0.044715), e.op("Mul", [n, e.op("Mul", [n, n])])])]),
            ],
        )
        y = e.op("Mul", [e.op("Mul", [c(0.5), n]), e.op("Add", [c(1.0), e.op("Tanh", [inner])])], "gelu")
    else:
        y = _act.elementwise(e, "gelu", n, 3)
    return Value(y, x.rank, None, x.dtype)  # type: ignore[arg-type]


def cast(ctx: MapContext, x: Value, dtype: np.dtype) -> Value:
    name = str(dtype)
    n = ctx.e.logical(x)
    if x.dtype == name:
        return x
    return Value(ctx.e.op("Cast", [n], "cast", to=onnx_dtype(name)), x.rank, None, name)


def softmax(ctx: MapContext, x: Value, axis: Any, log: bool = False) -> Value:
    e = ctx.e
    n = e.logical(x)
    axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    if len(axes) != 1:
        raise ctx.unsupported("axis", axis)
    return Value(
        e.op("LogSoftmax" if log else "Softmax", [n], "softmax", axis=int(axes[0])), x.rank, None, x.dtype
    )


def where(ctx: MapContext, condition: Any, a: Any, b: Any) -> Value:
    if a is None or b is None:
        raise ctx.unsupported("x1/x2", None)
    dtype = _tensor_dtype([a, b])
    e = ctx.e
    cond = operand(ctx, condition, "bool")
    if isinstance(condition, Value) and condition.dtype != "bool":
        cond = e.cast(cond, "bool")
    return _out(e.op("Where", [cond, operand(ctx, a, dtype), operand(ctx, b, dtype)], "where"), ctx, dtype)


# --- Keras 3 ops ----------------------------------------------------------------------------------


def _op(class_names: Sequence[str], known: dict[str, Any] | None = None):
    """Register a mapping for Keras 3 op classes, its config read (and checked) like the runner's."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        def mapping(ctx: MapContext, *args: Any, **kwargs: Any) -> Any:
            p = config_params(ctx.spec, ctx.config, known or {}, "")
            return fn(ctx, p, *args, **kwargs)

        register(*(f"op:{c}" for c in class_names))(mapping)
        return fn

    return decorate


def _unary_op(name: str) -> Callable[..., Value]:
    return lambda ctx, p, x: _unary_value(ctx, name, x)


def _binary_op(name: str) -> Callable[..., Value]:
    return lambda ctx, p, a, b: binary(ctx, name, a, b)


def _reduction_op(reduction: Reduction) -> Callable[..., Value]:
    return lambda ctx, p, x: reduction(ctx, x, axis_value(p["axis"]), bool(p["keepdims"]))


def _reduction_keys(**more: Any) -> dict[str, Any]:
    return {"axis": None, "keepdims": False, **more}


_op(["Negative"])(_unary_op("negative"))
_op(["Absolute", "Abs"])(_unary_op("abs"))
_op(["Square"])(_unary_op("square"))
_op(["Sqrt"])(_unary_op("sqrt"))
_op(["Rsqrt"])(_unary_op("rsqrt"))
_op(["Exp"])(_unary_op("exp"))
_op(["Log"])(_unary_op("log"))
_op(["Log1p"])(_unary_op("log1p"))
_op(["Expm1"])(_unary_op("expm1"))
_op(["Tanh"])(_unary_op("tanh"))
_op(["Sin"])(_unary_op("sin"))
_op(["Cos"])(_unary_op("cos"))
_op(["Floor"])(_unary_op("floor"))
_op(["Ceil"])(_unary_op("ceil"))
_op(["Sign"])(_unary_op("sign"))
_op(["Reciprocal"])(_unary_op("reciprocal"))
_op(["LogicalNot"])(_unary_op("logical_not"))
_op(["Erf"])(_unary_op("erf"))
_op(["Relu"])(_unary_op("relu"))
_op(["Relu6"])(_unary_op("relu6"))
_op(["Sigmoid"])(_unary_op("sigmoid"))
_op(["Silu"])(_unary_op("silu"))
_op(["Softplus"])(_unary_op("softplus"))
_op(["Softsign"])(_unary_op("softsign"))
_op(["Selu"])(_unary_op("selu"))
_op(["LogSigmoid"])(_unary_op("log_sigmoid"))
_op(["HardSigmoid"])(_unary_op("hard_sigmoid"))
_op(["HardSilu"])(_unary_op("hard_silu"))
_op(["TanhShrink"])(_unary_op("tanh_shrink"))
_op(["HardTanh"])(_unary_op("hard_tanh"))
_op(["SparsePlus"])(_unary_op("sparse_plus"))
_op(["SparseSigmoid"])(_unary_op("sparse_sigmoid"))
_op(["Log2"])(_unary_op("log2"))

_op(["Add"])(_binary_op("add"))
_op(["Subtract"])(_binary_op("subtract"))
_op(["Multiply"])(_binary_op("multiply"))
_op(["Divide", "TrueDivide"])(_binary_op("divide"))
_op(["Power"])(_binary_op("power"))
_op(["Maximum"])(_binary_op("maximum"))
_op(["Minimum"])(_binary_op("minimum"))
_op(["FloorDivide"])(_binary_op("floor_divide"))
_op(["Mod"])(_binary_op("mod"))
_op(["Equal"])(_binary_op("equal"))
_op(["NotEqual"])(_binary_op("not_equal"))
_op(["Greater"])(_binary_op("greater"))
_op(["GreaterEqual"])(_binary_op("greater_equal"))
_op(["Less"])(_binary_op("less"))
_op(["LessEqual"])(_binary_op("less_equal"))
_op(["LogicalAnd"])(_binary_op("logical_and"))
_op(["LogicalOr"])(_binary_op("logical_or"))
_op(["LogicalXor"])(_binary_op("logical_xor"))
_op(["Matmul"])(_binary_op("matmul"))
_op(["Dot"])(_binary_op("dot"))

_op(["Mean"], _reduction_keys())(_reduction_op(MEAN))
_op(["Sum"], _reduction_keys())(_reduction_op(SUM))
_op(["Prod"], _reduction_keys(dtype=None))(_reduction_op(PROD))
_op(["Max"], _reduction_keys(initial=None))(_reduction_op(MAX))
_op(["Min"], _reduction_keys(initial=None))(_reduction_op(MIN))
_op(["Std"], _reduction_keys())(_reduction_op(STD))
_op(["Var"], _reduction_keys())(_reduction_op(VAR))
_op(["Any"], _reduction_keys())(_reduction_op(ANY))
_op(["All"], _reduction_keys())(_reduction_op(ALL))

_op(["Reshape"], {"newshape": NO_DEFAULT})(lambda ctx, p, x: reshape(ctx, x, p["newshape"]))
_op(["GetItem"])(lambda ctx, p, x, key: get_item(ctx, x, decode_key(key)))
_op(["Split"], {"indices_or_sections": NO_DEFAULT, "axis": 0})(
    lambda ctx, p, x: split(
        ctx,
        x,
        p["indices_or_sections"]
        if isinstance(p["indices_or_sections"], int)
        else list(p["indices_or_sections"]),
        int(p["axis"]),
    )
)
_op(["Concatenate"], {"axis": 0})(lambda ctx, p, xs: concat(ctx, xs, int(p["axis"])))
_op(["Stack"], {"axis": 0})(lambda ctx, p, xs: stack(ctx, xs, int(p["axis"])))
_op(["Gelu"], {"approximate": True})(lambda ctx, p, x: gelu(ctx, x, bool(p["approximate"])))
_op(["Softmax"], {"axis": -1})(lambda ctx, p, x: softmax(ctx, x, p["axis"]))
_op(["LogSoftmax"], {"axis": -1})(lambda ctx, p, x: softmax(ctx, x, p["axis"], log=True))
_op(["Where"])(lambda ctx, p, condition, x1=None, x2=None: where(ctx, condition, x1, x2))


@_op(["Cast", "ConvertToTensor"], {"dtype": None, "sparse": None, "ragged": None})
def _op_cast(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
    if p["sparse"] or p["ragged"]:
        raise ctx.unsupported("sparse", p["sparse"])
    return x if p["dtype"] is None else cast(ctx, x, dtype_value(ctx.spec, "dtype", p["dtype"]))


@_op(["Transpose"], {"axes": None})
def _op_transpose(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
    axes = p["axes"]
    perm = list(reversed(range(_rank_of(ctx, x)))) if axes is None else [int(a) for a in axes]
    return _out(ctx.e.op("Transpose", [ctx.e.logical(x)], "transpose", perm=perm), ctx, x.dtype)


@_op(["ExpandDims"], {"axis": NO_DEFAULT})
def _op_expand_dims(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
    axes = p["axis"] if isinstance(p["axis"], (list, tuple)) else [p["axis"]]
    return _out(
        ctx.e.op("Unsqueeze", [ctx.e.logical(x), ctx.e.ints(axes, "axes")], "expand_dims"), ctx, x.dtype
    )


@_op(["Squeeze"], {"axis": None})
def _op_squeeze(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
    e = ctx.e
    axis = p["axis"]
    if axis is None:
        shape = ctx.in_shapes[0] if ctx.in_shapes else None
        if shape is None or any(d is None for d in shape[1:]):
            raise ctx.unsupported("axis", None)
        axes = [i for i, d in enumerate(shape) if d == 1]
    else:
        axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    return _out(e.op("Squeeze", [e.logical(x), e.ints(axes, "axes")], "squeeze"), ctx, x.dtype)


@_op(["Einsum"], {"subscripts": NO_DEFAULT})
def _op_einsum(ctx: MapContext, p: dict[str, Any], *operands: Any) -> Value:
    dtype = _tensor_dtype(operands)
    names = [operand(ctx, v, dtype) for v in operands]
    return _out(
        ctx.e.op("Einsum", names, "einsum", equation=str(p["subscripts"]).replace(" ", "")), ctx, dtype
    )


@_op(["Clip"], {"x_min": NO_DEFAULT, "x_max": NO_DEFAULT})
def _op_clip(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
    e = ctx.e
    n = e.logical(x)
    lo, hi = operand(ctx, p["x_min"], x.dtype), operand(ctx, p["x_max"], x.dtype)
    return _out(e.op("Min", [e.op("Max", [n, lo]), hi], "clip"), ctx, x.dtype)


# --- tf.keras TFOpLambda ----------------------------------------------------------------------------


def _tf(functions: Sequence[str], known: dict[str, Any]):
    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        def mapping(ctx: MapContext, first: Any, /, **kwargs: Any) -> Any:
            p = config_params(ctx.spec, kwargs, known, "call argument ")
            return fn(ctx, p, first)

        register(*(f"tf:{f}" for f in functions))(mapping)
        return fn

    return decorate


def _tf_binary(name: str) -> Callable[..., Value]:
    return lambda ctx, p, x: binary(ctx, name, x, p["y"])


_tf(["math.negative"], {})(_unary_op("negative"))
_tf(["math.abs"], {})(_unary_op("abs"))
_tf(["math.square"], {})(_unary_op("square"))
_tf(["math.sqrt"], {})(_unary_op("sqrt"))
_tf(["math.rsqrt"], {})(_unary_op("rsqrt"))
_tf(["math.exp"], {})(_unary_op("exp"))
_tf(["math.log"], {})(_unary_op("log"))
_tf(["math.log1p"], {})(_unary_op("log1p"))
_tf(["math.expm1"], {})(_unary_op("expm1"))
_tf(["math.tanh"], {})(_unary_op("tanh"))
_tf(["math.sin"], {})(_unary_op("sin"))
_tf(["math.cos"], {})(_unary_op("cos"))
_tf(["math.floor"], {})(_unary_op("floor"))
_tf(["math.ceil"], {})(_unary_op("ceil"))
_tf(["math.sign"], {})(_unary_op("sign"))
_tf(["math.reciprocal"], {})(_unary_op("reciprocal"))
_tf(["math.logical_not"], {})(_unary_op("logical_not"))
_tf(["math.erf"], {})(_unary_op("erf"))
_tf(["nn.relu"], {})(_unary_op("relu"))
_tf(["nn.relu6"], {})(_unary_op("relu6"))
_tf(["math.sigmoid", "nn.sigmoid"], {})(_unary_op("sigmoid"))
_tf(["math.softplus", "nn.softplus"], {})(_unary_op("softplus"))
_tf(["math.softsign", "nn.softsign"], {})(_unary_op("softsign"))
_tf(["nn.selu"], {})(_unary_op("selu"))
_tf(["math.log_sigmoid"], {})(_unary_op("log_sigmoid"))

_tf(["__operators__.add", "math.add"], {"y": NO_DEFAULT})(_tf_binary("add"))
_tf(["math.subtract"], {"y": NO_DEFAULT})(_tf_binary("subtract"))
_tf(["math.multiply"], {"y": NO_DEFAULT})(_tf_binary("multiply"))
_tf(["math.truediv", "math.divide"], {"y": NO_DEFAULT})(_tf_binary("divide"))
_tf(["math.pow"], {"y": NO_DEFAULT})(_tf_binary("power"))
_tf(["math.maximum"], {"y": NO_DEFAULT})(_tf_binary("maximum"))
_tf(["math.minimum"], {"y": NO_DEFAULT})(_tf_binary("minimum"))
_tf(["math.floordiv", "compat.v1.floor_div"], {"y": NO_DEFAULT})(_tf_binary("floor_divide"))
_tf(["math.floormod", "math.mod"], {"y": NO_DEFAULT})(_tf_binary("mod"))
_tf(["math.equal", "__operators__.eq"], {"y": NO_DEFAULT})(_tf_binary("equal"))
_tf(["math.not_equal", "__operators__.ne"], {"y": NO_DEFAULT})(_tf_binary("not_equal"))
_tf(["math.greater"], {"y": NO_DEFAULT})(_tf_binary("greater"))
_tf(["math.greater_equal"], {"y": NO_DEFAULT})(_tf_binary("greater_equal"))
_tf(["math.less"], {"y": NO_DEFAULT})(_tf_binary("less"))
_tf(["math.less_equal"], {"y": NO_DEFAULT})(_tf_binary("less_equal"))
_tf(["math.logical_and"], {"y": NO_DEFAULT})(_tf_binary("logical_and"))
_tf(["math.logical_or"], {"y": NO_DEFAULT})(_tf_binary("logical_or"))
_tf(["math.logical_xor"], {"y": NO_DEFAULT})(_tf_binary("logical_xor"))
_tf(["math.squared_difference"], {"y": NO_DEFAULT})(_tf_binary("squared_difference"))

_tf(["math.reduce_mean"], _reduction_keys())(_reduction_op(MEAN))
_tf(["math.reduce_sum"], _reduction_keys())(_reduction_op(SUM))
_tf(["math.reduce_max"], _reduction_keys())(_reduction_op(MAX))
_tf(["math.reduce_min"], _reduction_keys())(_reduction_op(MIN))
_tf(["math.reduce_prod"], _reduction_keys())(_reduction_op(PROD))
_tf(["math.reduce_std"], _reduction_keys())(_reduction_op(STD))
_tf(["math.reduce_variance"], _reduction_keys())(_reduction_op(VAR))
_tf(["math.reduce_any"], _reduction_keys())(_reduction_op(ANY))
_tf(["math.reduce_all"], _reduction_keys())(_reduction_op(ALL))

_tf(["concat"], {"axis": NO_DEFAULT})(
    lambda ctx, p, xs: concat(ctx, xs if isinstance(xs, (list, tuple)) else [xs], int(p["axis"]))
)
_tf(["stack"], {"axis": 0})(lambda ctx, p, xs: stack(ctx, xs, int(p["axis"])))
_tf(["reshape"], {"shape": NO_DEFAULT})(
    lambda ctx, p, x: reshape(ctx, x, list(np.asarray(p["shape"]).reshape(-1)))
)
_tf(["__operators__.getitem"], {"slice_spec": NO_DEFAULT, "var": None})(
    lambda ctx, p, x: get_item(ctx, x, decode_key(p["slice_spec"]))
)
_tf(["identity"], {})(lambda ctx, p, x: x)
_tf(["nn.gelu"], {"approximate": False})(lambda ctx, p, x: gelu(ctx, x, bool(p["approximate"])))
_tf(["nn.softmax"], {"axis": None, "dim": None})(
    lambda ctx, p, x: softmax(
        ctx,
        x,
        -1 if p["axis"] is None and p["dim"] is None else (p["axis"] if p["axis"] is not None else p["dim"]),
    )
)
_tf(
    ["linalg.matmul"],
    {
        "b": NO_DEFAULT,
        "transpose_a": False,
        "transpose_b": False,
        "adjoint_a": False,
        "adjoint_b": False,
        "a_is_sparse": False,
        "b_is_sparse": False,
    },
)(  # fmt: skip
    lambda ctx, p, a: _tf_matmul(ctx, a, p)
)


def _tf_matmul(ctx: MapContext, a: Value, p: dict[str, Any]) -> Value:
    e = ctx.e
    dtype = _tensor_dtype([a, p["b"]])
    x, y = operand(ctx, a, dtype), operand(ctx, p["b"], dtype)
    for flag, i in (("transpose_a", 0), ("transpose_b", 1)):
        if p[flag] or p.get(flag.replace("transpose", "adjoint")):
            rank = _rank_of(ctx, [a, p["b"]][i], i)
            perm = [*range(rank - 2), rank - 1, rank - 2]
            if i == 0:
                x = e.op("Transpose", [x], perm=perm)
            else:
                y = e.op("Transpose", [y], perm=perm)
    return _out(e.op("MatMul", [x, y], "matmul"), ctx, dtype)


@_tf(["split"], {"num_or_size_splits": NO_DEFAULT, "axis": 0, "num": None})
def _tf_split(ctx: MapContext, p: dict[str, Any], x: Value) -> tuple[Value, ...]:
    splits = p["num_or_size_splits"]
    axis = int(p["axis"])
    if isinstance(splits, (list, tuple, np.ndarray)):
        sizes = [int(s) for s in np.asarray(splits).reshape(-1)]
        if -1 in sizes:
            shape = ctx.in_shapes[0] if ctx.in_shapes else None
            rank = _rank_of(ctx, x)
            total = shape[axis % rank] if shape is not None else None
            if total is None:
                raise ctx.unsupported("call argument num_or_size_splits", splits)
            sizes[sizes.index(-1)] = total - (sum(sizes) + 1)
        rank = _rank_of(ctx, x)
        return _split_sizes(ctx, x, sizes, axis + rank if axis < 0 else axis)
    return split(ctx, x, int(splits), axis)


@_tf(["cast"], {"dtype": NO_DEFAULT})
def _tf_cast(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
    return cast(ctx, x, dtype_value(ctx.spec, "call argument dtype", p["dtype"]))


@_tf(["expand_dims", "compat.v1.expand_dims"], {"axis": None, "dim": None})
def _tf_expand_dims(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
    axis = p["axis"] if p["axis"] is not None else p["dim"]
    if axis is None:
        raise UnsupportedConfigError(ctx.class_name, "call argument axis", None, ctx.spec.name)
    return _out(
        ctx.e.op("Unsqueeze", [ctx.e.logical(x), ctx.e.ints([int(axis)], "axes")], "expand_dims"),
        ctx,
        x.dtype,
    )


@_tf(["transpose", "compat.v1.transpose"], {"perm": None, "conjugate": False})
def _tf_transpose(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
    perm = list(reversed(range(_rank_of(ctx, x)))) if p["perm"] is None else [int(v) for v in p["perm"]]
    return _out(ctx.e.op("Transpose", [ctx.e.logical(x)], "transpose", perm=perm), ctx, x.dtype)


# --- more elementwise, indexing and scan ops ---------------------------------------------------------


def leaky_relu(ctx: MapContext, x: Value, slope: float) -> Value:
    """``where(x >= 0, x, slope * x)`` (ONNX LeakyRelu scales x < 0 only: the same at 0)."""
    return Value(
        ctx.e.op("LeakyRelu", [ctx.e.logical(x)], "leaky_relu", alpha=float(slope)), x.rank, None, x.dtype
    )


def elu(ctx: MapContext, x: Value, alpha: float) -> Value:
    return Value(ctx.e.op("Elu", [ctx.e.logical(x)], "elu", alpha=float(alpha)), x.rank, None, x.dtype)


def flip(ctx: MapContext, x: Value, axis: Any) -> Value:
    rank = _rank_of(ctx, x)
    axes = (
        list(range(rank))
        if axis is None
        else [int(a) for a in (axis if isinstance(axis, (list, tuple)) else [axis])]
    )
    e = ctx.e
    n = len(axes)
    y = e.op("Slice", [e.logical(x), e.ints([-1] * n, "starts"), e.ints([-_INT64_MAX] * n, "ends"),
                       e.ints(axes, "axes"), e.ints([-1] * n, "steps")], "flip")  # fmt: skip
    return Value(y, rank, None, x.dtype)


def tile(ctx: MapContext, x: Value, repeats: Any) -> Value:
    reps = [int(r) for r in np.asarray(repeats).reshape(-1)]
    rank = _rank_of(ctx, x)
    n = ctx.e.logical(x)
    if len(reps) > rank:
        n = ctx.e.op("Unsqueeze", [n, ctx.e.ints(list(range(len(reps) - rank)), "axes")])
        rank = len(reps)
    reps = [1] * (rank - len(reps)) + reps
    return _out(ctx.e.op("Tile", [n, ctx.e.ints(reps, "repeats")], "tile"), ctx, x.dtype)


def pad(ctx: MapContext, x: Value, width: Any, mode: str, value: Any) -> Value:
    modes = {"constant": "constant", "reflect": "reflect", "edge": "edge"}
    if mode not in modes:
        raise ctx.unsupported("mode", mode)
    pairs = np.asarray(width, dtype=np.int64).reshape(-1, 2)
    rank = _rank_of(ctx, x)
    if len(pairs) == 1:
        pairs = np.repeat(pairs, rank, axis=0)
    e = ctx.e
    inputs = [e.logical(x), e.ints(list(pairs[:, 0]) + list(pairs[:, 1]), "pads")]
    if mode == "constant" and value not in (None, 0):
        inputs.append(operand(ctx, value, x.dtype))
    return Value(e.op("Pad", inputs, "pad", mode=modes[mode]), rank, None, x.dtype)


def take(ctx: MapContext, x: Value, indices: Any, axis: Any) -> Value:
    e = ctx.e
    n = e.logical(x)
    if axis is None:
        n, axis = e.op("Reshape", [n, e.ints([-1], "flat")]), 0
    idx = (
        operand(ctx, np.asarray(indices).astype(np.int64), "int64")
        if not isinstance(indices, Value)
        else e.cast(e.logical(indices), "int64")
    )
    return _out(e.op("Gather", [n, idx], "take", axis=int(axis)), ctx, x.dtype)


def arg_reduce(ctx: MapContext, x: Value, axis: Any, keepdims: bool, kind: str, dtype: str) -> Value:
    e = ctx.e
    n = e.logical(x)
    if axis is None:
        rank = _rank_of(ctx, x)
        n, axis = e.op("Reshape", [n, e.ints([-1], "flat")]), 0
        out = e.op(kind, [n], kind.lower(), axis=0, keepdims=0, select_last_index=0)
        if keepdims:
            out = e.op("Reshape", [out, e.ints([1] * rank, "shape")])
    else:
        out = e.op(
            kind, [n], kind.lower(), axis=int(axis), keepdims=1 if keepdims else 0, select_last_index=0
        )
    return _out(e.cast(out, dtype), ctx, dtype)


def cumsum(ctx: MapContext, x: Value, axis: Any, exclusive: bool = False, reverse: bool = False) -> Value:
    e = ctx.e
    n = e.logical(x)
    if axis is None:
        n, axis = e.op("Reshape", [n, e.ints([-1], "flat")]), 0
    y = e.op(
        "CumSum", [n, e.ints(int(axis), "axis")], "cumsum", exclusive=int(exclusive), reverse=int(reverse)
    )
    return _out(y, ctx, x.dtype)


def logsumexp(ctx: MapContext, x: Value, axis: Any, keepdims: bool) -> Value:
    e = ctx.e
    n = e.logical(x)
    rank = _rank_of(ctx, x)
    axes = (
        list(range(rank))
        if axis is None
        else [int(a) for a in (axis if isinstance(axis, (list, tuple)) else [axis])]
    )
    peak = e.reduce("ReduceMax", n, axes, 1)
    total = e.reduce("ReduceSum", e.op("Exp", [e.op("Sub", [n, peak])]), axes, 1)
    y = e.op("Add", [e.op("Log", [total]), peak])
    if not keepdims:
        y = e.op("Squeeze", [y, e.ints(axes, "axes")])
    return _out(y, ctx, x.dtype)


def clip(ctx: MapContext, x: Value, lo: Any, hi: Any) -> Value:
    e = ctx.e
    n = e.logical(x)
    y = e.op("Min", [e.op("Max", [n, operand(ctx, lo, x.dtype)]), operand(ctx, hi, x.dtype)], "clip")
    return Value(y, x.rank, None, x.dtype)


_op(["LeakyRelu"], {"negative_slope": 0.2})(lambda ctx, p, x: leaky_relu(ctx, x, p["negative_slope"]))
_op(["Elu"], {"alpha": 1.0})(lambda ctx, p, x: elu(ctx, x, p["alpha"]))
_op(["Flip"], {"axis": None})(lambda ctx, p, x: flip(ctx, x, p["axis"]))
_op(["Tile"], {"repeats": NO_DEFAULT})(lambda ctx, p, x: tile(ctx, x, p["repeats"]))
_op(["Pad"], {"pad_width": NO_DEFAULT, "mode": "constant"})(
    lambda ctx, p, x, constant_values=None: pad(ctx, x, p["pad_width"], p["mode"], constant_values)
)
_op(["Take"], {"axis": None})(lambda ctx, p, x, indices: take(ctx, x, indices, p["axis"]))
_op(["Argmax"], {"axis": None, "keepdims": False})(
    lambda ctx, p, x: arg_reduce(ctx, x, p["axis"], p["keepdims"], "ArgMax", "int32")
)
_op(["Argmin"], {"axis": None, "keepdims": False})(
    lambda ctx, p, x: arg_reduce(ctx, x, p["axis"], p["keepdims"], "ArgMin", "int32")
)
_op(["Logsumexp"], {"axis": None, "keepdims": False})(
    lambda ctx, p, x: logsumexp(ctx, x, axis_value(p["axis"]), bool(p["keepdims"]))
)


@_op(["Cumsum"], {"axis": None, "dtype": None})
def _op_cumsum(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
    if p["dtype"] is not None:
        x = cast(ctx, x, dtype_value(ctx.spec, "dtype", p["dtype"]))
    return cumsum(ctx, x, p["axis"])


_tf(["nn.leaky_relu"], {"alpha": 0.2})(lambda ctx, p, x: leaky_relu(ctx, x, p["alpha"]))
_tf(["nn.elu"], {})(lambda ctx, p, x: elu(ctx, x, 1.0))
_tf(["reverse"], {"axis": NO_DEFAULT})(lambda ctx, p, x: flip(ctx, x, axis_value(p["axis"])))
_tf(["tile"], {"multiples": NO_DEFAULT})(lambda ctx, p, x: tile(ctx, x, p["multiples"]))
_tf(["clip_by_value"], {"clip_value_min": NO_DEFAULT, "clip_value_max": NO_DEFAULT})(
    lambda ctx, p, x: clip(ctx, x, p["clip_value_min"], p["clip_value_max"])
)
_tf(["math.reduce_logsumexp"], {"axis": None, "keepdims": False})(
    lambda ctx, p, x: logsumexp(ctx, x, axis_value(p["axis"]), bool(p["keepdims"]))
)
_tf(["nn.log_softmax"], {"axis": None})(
    lambda ctx, p, x: softmax(ctx, x, -1 if p["axis"] is None else p["axis"], log=True)
)
_tf(["math.cumsum"], {"axis": 0, "exclusive": False, "reverse": False})(
    lambda ctx, p, x: cumsum(ctx, x, int(p["axis"]), bool(p["exclusive"]), bool(p["reverse"]))
)


@_tf(["nn.silu"], {"beta": 1.0})
def _tf_silu(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
    e = ctx.e
    n = e.logical(x)
    z = n if p["beta"] == 1.0 else e.op("Mul", [n, e.const(np.float32(p["beta"]), "beta")])
    return Value(e.op("Mul", [n, e.op("Sigmoid", [z])], "silu"), x.rank, None, x.dtype)


def _tf_arg(kind: str) -> Callable[..., Value]:
    """``tf.math.argmax`` (``kind`` ArgMax) or ``argmin``: over axis 0 unless told, as ``output_type``."""

    def mapping(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
        dtype = str(dtype_value(ctx.spec, "output_type", p["output_type"]))
        return arg_reduce(ctx, x, 0 if p["axis"] is None else p["axis"], False, kind, dtype)

    return mapping


_tf(["math.argmax"], {"axis": None, "output_type": "int64"})(_tf_arg("ArgMax"))
_tf(["math.argmin"], {"axis": None, "output_type": "int64"})(_tf_arg("ArgMin"))


@_tf(["squeeze", "compat.v1.squeeze"], {"axis": None, "squeeze_dims": None})
def _tf_squeeze(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
    axis = p["axis"] if p["axis"] is not None else p["squeeze_dims"]
    return _op_squeeze(ctx, {"axis": axis if axis not in ((), []) else None}, x)


@_tf(["pad", "compat.v1.pad"], {"paddings": NO_DEFAULT, "mode": "CONSTANT", "constant_values": 0})
def _tf_pad(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
    mode = {"CONSTANT": "constant", "REFLECT": "reflect"}.get(str(p["mode"]).upper())
    if mode is None:
        raise ctx.unsupported("call argument mode", p["mode"])
    return pad(ctx, x, p["paddings"], mode, p["constant_values"])


@_tf(
    ["gather", "compat.v1.gather"],
    {"indices": NO_DEFAULT, "axis": None, "batch_dims": 0, "validate_indices": None},
)
def _tf_gather(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
    if p["batch_dims"]:
        raise ctx.unsupported("call argument batch_dims", p["batch_dims"])
    return take(ctx, x, p["indices"], 0 if p["axis"] is None else int(p["axis"]))


@_tf(["where"], {"x": None, "y": None})
def _tf_where(ctx: MapContext, p: dict[str, Any], condition: Any) -> Value:
    return where(ctx, condition, p["x"], p["y"])


@_tf(["math.divide_no_nan"], {"y": NO_DEFAULT})
def _tf_divide_no_nan(ctx: MapContext, p: dict[str, Any], x: Any) -> Value:
    e = ctx.e
    dtype = _tensor_dtype([x, p["y"]])
    a, b = operand(ctx, x, dtype), operand(ctx, p["y"], dtype)
    zero = e.const(np.zeros((), dtype), "zero")
    is_zero = e.op("Equal", [b, zero])
    safe = e.op("Where", [is_zero, e.const(np.ones((), dtype), "one"), b])
    return _out(e.op("Where", [is_zero, zero, e.op("Div", [a, safe])], "divide_no_nan"), ctx, dtype)


@_tf(["math.l2_normalize"], {"axis": None, "epsilon": 1e-12, "dim": None})
def _tf_l2_normalize(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
    e = ctx.e
    n = e.logical(x)
    axis = p["axis"] if p["axis"] is not None else p["dim"]
    axes = None if axis is None else [int(a) for a in (axis if isinstance(axis, (list, tuple)) else [axis])]
    sq = e.reduce(
        "ReduceSum", e.op("Mul", [n, n]), axes if axes is not None else list(range(_rank_of(ctx, x))), 1
    )
    denom = e.op("Sqrt", [e.op("Max", [sq, e.const(np.float32(p["epsilon"]), "eps")])])
    return Value(e.op("Div", [n, denom], "l2_normalize"), x.rank, None, x.dtype)


@_tf(["unstack"], {"num": None, "axis": 0})
def _tf_unstack(ctx: MapContext, p: dict[str, Any], x: Value) -> tuple[Value, ...]:
    shape = ctx.in_shapes[0] if ctx.in_shapes else None
    rank = _rank_of(ctx, x)
    axis = int(p["axis"]) % rank
    size = shape[axis] if shape is not None else p["num"]
    if not isinstance(size, int):
        raise ctx.unsupported("call argument num", p["num"])
    parts = _split_sizes(ctx, x, [1] * size, axis)
    e = ctx.e
    return tuple(
        Value(e.op("Squeeze", [v.name, e.ints([axis], "axes")]), rank - 1, None, x.dtype) for v in parts
    )


# --- the remaining Keras 3 ops ----------------------------------------------------------------------


def _c(ctx: MapContext, v: float, dtype: str = "float32") -> str:
    return ctx.e.const(np.asarray(v, dtype=dtype), "c")


def _transpose(ctx: MapContext, x: Value, perm: list[int]) -> Value:
    return _out(ctx.e.op("Transpose", [ctx.e.logical(x)], "transpose", perm=perm), ctx, x.dtype)


@_op(["Celu"], {"alpha": 1.0})
def _op_celu(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
    return Value(ctx.e.op("Celu", [ctx.e.logical(x)], "celu", alpha=float(p["alpha"])), x.rank, None, x.dtype)


@_op(["Glu"], {"axis": -1})
def _op_glu(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
    shape = ctx.in_shapes[0] if ctx.in_shapes else None
    rank = _rank_of(ctx, x)
    axis = int(p["axis"]) % rank
    if shape is None or not isinstance(shape[axis], int):
        raise ctx.unsupported("axis of unknown size", p["axis"])
    a, b = _split_sizes(ctx, x, [shape[axis] // 2] * 2, axis)
    return Value(ctx.e.op("Mul", [a.name, ctx.e.op("Sigmoid", [b.name])], "glu"), rank, None, x.dtype)


def _op_shrink(soft: bool) -> Callable[..., Value]:
    """ONNX Shrink: values within ``threshold`` of 0 become 0, the others move towards 0 by it (``soft``)."""

    def mapping(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
        t = float(p["threshold"])
        y = ctx.e.op("Shrink", [ctx.e.logical(x)], "shrink", lambd=t, bias=t if soft else 0.0)
        return Value(y, x.rank, None, x.dtype)

    return mapping


_op(["SoftShrink"], {"threshold": 0.5})(_op_shrink(soft=True))
_op(["HardShrink"], {"threshold": 0.5})(_op_shrink(soft=False))


@_op(["Squareplus"], {"b": 4})
def _op_squareplus(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
    e = ctx.e
    n = e.logical(x)
    root = e.op("Sqrt", [e.op("Add", [e.op("Mul", [n, n]), _c(ctx, p["b"])])])
    return Value(e.op("Div", [e.op("Add", [n, root]), _c(ctx, 2.0)], "squareplus"), x.rank, None, x.dtype)


@_op(["Normalize"], {"axis": -1, "order": 2, "epsilon": None})
def _op_normalize(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
    if p["order"] != 2:
        raise ctx.unsupported("order", p["order"])
    eps = 1e-12 if p["epsilon"] is None else float(p["epsilon"])
    e = ctx.e
    n = e.logical(x)
    axes = [int(a) for a in (p["axis"] if isinstance(p["axis"], (list, tuple)) else [p["axis"]])]
    sq = e.reduce("ReduceSum", e.op("Mul", [n, n]), axes, 1)
    return Value(
        e.op("Div", [n, e.op("Sqrt", [e.op("Max", [sq, _c(ctx, eps)])])], "normalize"), x.rank, None, x.dtype
    )


@_op(["Moveaxis"], {"source": NO_DEFAULT, "destination": NO_DEFAULT})
def _op_moveaxis(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
    rank = _rank_of(ctx, x)
    src = [int(a) % rank for a in (p["source"] if isinstance(p["source"], (list, tuple)) else [p["source"]])]
    dst = [
        int(a) % rank
        for a in (p["destination"] if isinstance(p["destination"], (list, tuple)) else [p["destination"]])
    ]
    perm = [a for a in range(rank) if a not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        perm.insert(d, s)
    return _transpose(ctx, x, perm)


@_op(["Swapaxes"], {"axis1": NO_DEFAULT, "axis2": NO_DEFAULT})
def _op_swapaxes(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
    rank = _rank_of(ctx, x)
    perm = list(range(rank))
    a, b = int(p["axis1"]) % rank, int(p["axis2"]) % rank
    perm[a], perm[b] = perm[b], perm[a]
    return _transpose(ctx, x, perm)


def _op_tri(upper: bool) -> Callable[..., Value]:
    """ONNX Trilu: the upper (Triu) or lower (Tril) triangle from diagonal ``k``."""

    def mapping(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
        e = ctx.e
        y = e.op("Trilu", [e.logical(x), e.ints(int(p["k"]), "k")], "trilu", upper=1 if upper else 0)
        return Value(y, x.rank, None, x.dtype)

    return mapping


_op(["Triu"], {"k": 0})(_op_tri(upper=True))
_op(["Tril"], {"k": 0})(_op_tri(upper=False))


def _op_fill_like(fill: int) -> Callable[..., Value]:
    """A tensor of ``x``'s shape filled with ``fill`` (ZerosLike 0, OnesLike 1), in ``dtype`` if given."""

    def mapping(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
        dtype = x.dtype if p["dtype"] is None else str(dtype_value(ctx.spec, "dtype", p["dtype"]))
        value = np.asarray([fill], dtype=dtype)
        e = ctx.e
        from onnx import numpy_helper

        y = e.op(
            "ConstantOfShape", [e.op("Shape", [e.logical(x)])], "fill", value=numpy_helper.from_array(value)
        )
        return Value(y, x.rank, None, dtype)

    return mapping


_op(["ZerosLike"], {"dtype": None})(_op_fill_like(0))
_op(["OnesLike"], {"dtype": None})(_op_fill_like(1))


_op(["StopGradient", "Copy"])(lambda ctx, p, x: x)  # the same values: nothing to compute


@_op(["Round"], {"decimals": 0})
def _op_round(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
    e = ctx.e
    n = e.logical(x)
    if p["decimals"] == 0:
        return Value(e.op("Round", [n], "round"), x.rank, None, x.dtype)
    scale = _c(ctx, 10.0 ** int(p["decimals"]), x.dtype if x.dtype.startswith("float") else "float32")
    return Value(
        e.op("Div", [e.op("Round", [e.op("Mul", [n, scale])]), scale], "round"), x.rank, None, x.dtype
    )


@_op(["Unstack"], {"num": None, "axis": 0})
def _op_unstack(ctx: MapContext, p: dict[str, Any], x: Value) -> tuple[Value, ...]:
    return _tf_unstack(ctx, p, x)


@_op(["Repeat"], {"repeats": NO_DEFAULT, "axis": None})
def _op_repeat(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
    repeats = p["repeats"]
    if p["axis"] is None or not isinstance(repeats, int):
        raise ctx.unsupported("repeats/axis", [repeats, p["axis"]])
    rank = _rank_of(ctx, x)
    axis = int(p["axis"]) % rank
    shape = ctx.in_shapes[0] if ctx.in_shapes else None
    if shape is None or any(not isinstance(d, int) for d in shape[1:]):
        raise ctx.unsupported("input shape", shape)
    e = ctx.e
    u = e.op("Unsqueeze", [e.logical(x), e.ints([axis + 1], "axes")])
    reps = [1] * (rank + 1)
    reps[axis + 1] = repeats
    tiled = e.op("Tile", [u, e.ints(reps, "repeats")])
    target = [-1 if i == 0 else d for i, d in enumerate(shape)]
    target[axis] = shape[axis] * repeats if axis else -1
    if axis == 0:
        target = [-1, *shape[1:]]
    return _out(e.op("Reshape", [tiled, e.ints(target, "shape")], "repeat"), ctx, x.dtype)


@_op(["Tensordot"], {"axes": 2})
def _op_tensordot(ctx: MapContext, p: dict[str, Any], a: Any, b: Any) -> Value:
    ra, rb = _rank_of(ctx, a, 0), _rank_of(ctx, b, 1)
    axes = p["axes"]
    if isinstance(axes, int):
        pa, pb = list(range(ra - axes, ra)), list(range(axes))
    else:
        pa = [int(v) % ra for v in (axes[0] if isinstance(axes[0], (list, tuple)) else [axes[0]])]
        pb = [int(v) % rb for v in (axes[1] if isinstance(axes[1], (list, tuple)) else [axes[1]])]
    letters = "abcdefghijklmnopqrstuvwxyz"
    la, lb = list(letters[:ra]), list(letters[ra : ra + rb])
    for i, j in zip(pa, pb, strict=True):
        lb[j] = la[i]
    out = [c for i, c in enumerate(la) if i not in pa] + [c for j, c in enumerate(lb) if j not in pb]
    dtype = _tensor_dtype([a, b])
    eq = f"{''.join(la)},{''.join(lb)}->{''.join(out)}"
    return _out(
        ctx.e.op("Einsum", [operand(ctx, a, dtype), operand(ctx, b, dtype)], "tensordot", equation=eq),
        ctx,
        dtype,
    )


@_op(["SaturateCast"], {"dtype": None, "sparse": None, "ragged": None})
def _op_saturate_cast(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
    if p["dtype"] is None:
        return x
    dtype = dtype_value(ctx.spec, "dtype", p["dtype"])
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        src = x.dtype if x.dtype.startswith("float") else "float64"
        n = ctx.e.logical(x) if x.dtype.startswith("float") else ctx.e.cast(ctx.e.logical(x), src)
        x = Value(ctx.e.op("Clip", [n, _c(ctx, info.min, src), _c(ctx, info.max, src)]), x.rank, None, src)
    return cast(ctx, x, dtype)


@_tf(["linalg.matrix_transpose", "linalg.adjoint"], {"conjugate": False})
def _tf_matrix_transpose(ctx: MapContext, p: dict[str, Any], x: Value) -> Value:
    rank = _rank_of(ctx, x)
    return _transpose(ctx, x, [*range(rank - 2), rank - 1, rank - 2])
