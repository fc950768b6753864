"""Kernels: raw op nodes (Keras 3 ``keras.src.ops.*``) and tf.keras ``TFOpLambda``/``SlicingOpLambda``.

See modelgraph/runner/registry.py for the contract. Two key families live here:

* ``"op:<ClassName>"``: Keras 3 operations. Constructor arguments are in the op's config
  (``{"name": "split", "indices_or_sections": 2, "axis": -1}``); the kernel is called with the
  recorded positional args (``fn(x, 3.0)``, ``fn([a, b])`` for Concatenate/Stack,
  ``fn(x, (slice(None), 0))`` for GetItem) and kwargs (``fn(x, constant_values=None)`` for Pad).
* ``"tf:<function>"``: tf.keras TF-op layers, called with the first argument followed by the
  recorded keyword arguments (``fn(x, y=3.0, name=None)``, ``fn([a, b], axis=-1)``,
  ``fn(x, slice_spec=[...])``). A constant first argument (``_CONSTANT_VALUE``) arrives as the value
  itself (``fn(2.0, y=x)``). ``name`` keywords are ignored.

Constants are combined with tensors NumPy-2 style (Python scalars are weak and keep float32 float32);
list constants take the dtype of the tensor operand. A result promoted to float64 when no input
tensor was float64 is brought back to float32, like Keras's ``floatx``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np

from modelgraph.errors import UnsupportedConfigError
from modelgraph.layer_params import NO_DEFAULT, axis_value, config_params, decode_key, dtype_value
from modelgraph.runner import activations as act
from modelgraph.runner.registry import Kernel, KernelFactory, KernelSpec, register

# ---------------------------------------------------------------------------------------------
# helpers


def _is_tensor(v: Any) -> bool:
    return isinstance(v, np.ndarray)


def _tensor_dtype(values: Sequence[Any]) -> np.dtype | None:
    for v in values:
        if _is_tensor(v):
            return v.dtype
    return None


def _const(v: Any, dtype: np.dtype | None) -> Any:
    """A non-tensor operand: lists become arrays of the tensor dtype, scalars stay weak."""
    if isinstance(v, list | tuple):
        arr = np.asarray(v)
        if dtype is not None and arr.dtype.kind in "biuf" and np.dtype(dtype).kind in "biuf":
            return arr.astype(dtype)
        return _fix_float(arr, [])
    return v


def _fix_float(result: Any, inputs: Sequence[Any]) -> Any:
    """Bring a float64 result back to float32 unless a float64 tensor went in (Keras floatx)."""
    if (
        isinstance(result, np.ndarray | np.generic)
        and result.dtype == np.float64
        and not any(_is_tensor(v) and v.dtype == np.float64 for v in inputs)
    ):
        return np.asarray(result, dtype=np.float32)
    return result


def _operands(*values: Any) -> list[Any]:
    dtype = _tensor_dtype(values)
    out = [_const(v, dtype) for v in values]
    if not any(_is_tensor(v) for v in out) and out:
        # only constants: make the first an array so the result is one
        out[0] = _fix_float(np.asarray(out[0]), [])
    return out


def _as_array(x: Any) -> np.ndarray:
    if _is_tensor(x):
        return x
    return _fix_float(np.asarray(x), [])


# ---------------------------------------------------------------------------------------------
# element-wise functions shared by both families


def _hard_sigmoid3(x: np.ndarray) -> np.ndarray:
    return act.hard_sigmoid_keras3(x)


def _erf(x: np.ndarray) -> np.ndarray:
    return act.erf(x).astype(x.dtype if x.dtype.kind == "f" else np.float32)


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return 1 / np.sqrt(x)


def _gelu(x: np.ndarray, approximate: bool) -> np.ndarray:
    return act.gelu_tanh(x) if approximate else act.gelu_exact(x)


def _log_softmax(x: np.ndarray, axis: Any = -1) -> np.ndarray:
    return act.log_softmax(x, axis_value(axis))


def _logsumexp(x: np.ndarray, axis: Any = None, keepdims: bool = False) -> np.ndarray:
    axis = axis_value(axis)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0).astype(x.dtype)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def _relu6(x: np.ndarray) -> np.ndarray:
    return np.clip(x, 0, 6).astype(x.dtype, copy=False)


def _silu(x: np.ndarray) -> np.ndarray:
    return x * act.sigmoid(x)


def _softsign(x: np.ndarray) -> np.ndarray:
    return x / (1 + np.abs(x))


def _selu(x: np.ndarray) -> np.ndarray:
    return 1.0507009873554805 * act.elu(x, 1.6732632423543772)


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -act.softplus(-x)


def _hard_silu(x: np.ndarray) -> np.ndarray:
    return x * _hard_sigmoid3(x)


def _tanh_shrink(x: np.ndarray) -> np.ndarray:
    return x - np.tanh(x)


def _hard_tanh(x: np.ndarray) -> np.ndarray:
    return np.clip(x, -1, 1).astype(x.dtype, copy=False)


def _sparse_plus(x: np.ndarray) -> np.ndarray:
    return np.where(x <= -1, 0, np.where(x >= 1, x, (x + 1) ** 2 / 4)).astype(x.dtype)


def _sparse_sigmoid(x: np.ndarray) -> np.ndarray:
    return np.where(x <= -1, 0, np.where(x >= 1, 1, 0.5 * (x + 1))).astype(x.dtype)


def _squared_difference(a: Any, b: Any) -> Any:
    return np.square(np.subtract(a, b))


def _apply_unary(fn: Callable[[np.ndarray], np.ndarray], x: Any) -> np.ndarray:
    x = _as_array(x)
    if x.dtype.kind in "biu" and fn not in (np.negative, np.abs, np.square, np.sign, np.logical_not):
        x = x.astype(np.float32)
    return _fix_float(fn(x), [x])


def _apply_binary(fn: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    a, b = _operands(a, b)
    return _fix_float(np.asarray(fn(a, b)), [a, b])


def _divide_no_nan(a: Any, b: Any) -> Any:
    a, b = _operands(a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.true_divide(a, b)
    return _fix_float(np.where(np.asarray(b) == 0, 0, out).astype(np.result_type(out)), [a, b])


# ---------------------------------------------------------------------------------------------
# Keras 3 operations ("op:<ClassName>")


def _unary(fn: Callable[[np.ndarray], np.ndarray]) -> KernelFactory:
    """An op computing ``fn`` element-wise (no config options)."""

    def factory(spec: KernelSpec) -> Kernel:
        config_params(spec, spec.config, {}, "")

        def kernel(x: Any) -> np.ndarray:
            return _apply_unary(fn, x)

        return kernel

    return factory


register("op:Negative")(_unary(np.negative))
register("op:Absolute", "op:Abs")(_unary(np.abs))
register("op:Square")(_unary(np.square))
register("op:Sqrt")(_unary(np.sqrt))
register("op:Rsqrt")(_unary(_rsqrt))
register("op:Exp")(_unary(np.exp))
register("op:Log")(_unary(np.log))
register("op:Log1p")(_unary(np.log1p))
register("op:Expm1")(_unary(np.expm1))
register("op:Tanh")(_unary(np.tanh))
register("op:Sin")(_unary(np.sin))
register("op:Cos")(_unary(np.cos))
register("op:Floor")(_unary(np.floor))
register("op:Ceil")(_unary(np.ceil))
register("op:Sign")(_unary(np.sign))
register("op:Reciprocal")(_unary(np.reciprocal))
register("op:LogicalNot")(_unary(np.logical_not))
register("op:Erf")(_unary(_erf))
register("op:Relu")(_unary(act.relu))
register("op:Relu6")(_unary(_relu6))
register("op:Sigmoid")(_unary(act.sigmoid))
register("op:Silu")(_unary(_silu))
register("op:Softplus")(_unary(act.softplus))
register("op:Softsign")(_unary(_softsign))
register("op:Selu")(_unary(_selu))
register("op:LogSigmoid")(_unary(_log_sigmoid))
register("op:HardSigmoid")(_unary(_hard_sigmoid3))
register("op:HardSilu")(_unary(_hard_silu))
register("op:TanhShrink")(_unary(_tanh_shrink))
register("op:HardTanh")(_unary(_hard_tanh))
register("op:SparsePlus")(_unary(_sparse_plus))
register("op:SparseSigmoid")(_unary(_sparse_sigmoid))


def _binary(fn: Callable[[Any, Any], Any]) -> KernelFactory:
    """An op computing ``fn(x1, x2)`` element-wise (no config options)."""

    def factory(spec: KernelSpec) -> Kernel:
        config_params(spec, spec.config, {}, "")

        def kernel(x1: Any, x2: Any) -> Any:
            return _apply_binary(fn, x1, x2)

        return kernel

    return factory


register("op:Add")(_binary(np.add))
register("op:Subtract")(_binary(np.subtract))
register("op:Multiply")(_binary(np.multiply))
register("op:Divide", "op:TrueDivide")(_binary(np.true_divide))
register("op:Power")(_binary(np.power))
register("op:Maximum")(_binary(np.maximum))
register("op:Minimum")(_binary(np.minimum))
register("op:FloorDivide")(_binary(np.floor_divide))
register("op:Mod")(_binary(np.mod))
register("op:Equal")(_binary(np.equal))
register("op:NotEqual")(_binary(np.not_equal))
register("op:Greater")(_binary(np.greater))
register("op:GreaterEqual")(_binary(np.greater_equal))
register("op:Less")(_binary(np.less))
register("op:LessEqual")(_binary(np.less_equal))
register("op:LogicalAnd")(_binary(np.logical_and))
register("op:LogicalOr")(_binary(np.logical_or))
register("op:LogicalXor")(_binary(np.logical_xor))
register("op:Matmul")(_binary(np.matmul))
register("op:Dot")(_binary(np.dot))


def _configured(
    known: Mapping[str, Any], impl: Callable[[KernelSpec, dict[str, Any]], Kernel]
) -> KernelFactory:
    """A factory calling ``impl(spec, params)`` with the op's config read through ``known``."""

    def factory(spec: KernelSpec) -> Kernel:
        return impl(spec, config_params(spec, spec.config, known, ""))

    return factory


def _op_with_config(
    class_names: Sequence[str], known: Mapping[str, Any]
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``impl(spec, params) -> kernel`` with the config read through ``known``."""

    def decorate(impl: Callable[..., Any]) -> Callable[..., Any]:
        register(*(f"op:{c}" for c in class_names))(_configured(known, impl))
        return impl

    return decorate


def _reduction(
    fn: Callable[..., Any], options: Mapping[str, Any] | None = None, *, ints_as_float: bool = False
) -> KernelFactory:
    """A reduction op: ``fn(x, axis=, keepdims=)`` with the op's further ``options`` (Max/Min
    ``initial``, Prod ``dtype``) passed on when set; ``ints_as_float``: an integer input is reduced
    as float32 (Mean, Std, Var)."""

    def impl(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
        axis = axis_value(p["axis"])
        extra: dict[str, Any] = {}
        if p.get("initial") is not None:
            extra["initial"] = p["initial"]
        if p.get("dtype") is not None:
            extra["dtype"] = dtype_value(spec, "dtype", p["dtype"])

        def kernel(x: Any) -> np.ndarray:
            x = _as_array(x)
            if ints_as_float and x.dtype.kind in "biu":
                x = x.astype(np.float32)
            return np.asarray(fn(x, axis=axis, keepdims=bool(p["keepdims"]), **extra))

        return kernel

    return _configured({"axis": None, "keepdims": False, **(options or {})}, impl)


register("op:Mean")(_reduction(np.mean, ints_as_float=True))
register("op:Sum")(_reduction(np.sum))
register("op:Prod")(_reduction(np.prod, {"dtype": None}))
register("op:Max")(_reduction(np.max, {"initial": None}))
register("op:Min")(_reduction(np.min, {"initial": None}))
register("op:Std")(_reduction(np.std, ints_as_float=True))
register("op:Var")(_reduction(np.var, ints_as_float=True))
register("op:Any")(_reduction(np.any))
register("op:All")(_reduction(np.all))


@_op_with_config(["Logsumexp"], {"axis": None, "keepdims": False})
def _op_logsumexp(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    return lambda x: _logsumexp(_as_array(x), p["axis"], bool(p["keepdims"]))


def _arg(fn: Callable[..., Any]) -> KernelFactory:
    """Argmax / Argmin: int32 indices along ``axis`` (of the flattened input when None)."""

    def impl(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
        def kernel(x: Any) -> np.ndarray:
            x = _as_array(x)
            if p["axis"] is None:
                out = fn(x.reshape(-1))
                out = np.reshape(out, (1,) * x.ndim) if p["keepdims"] else out
            else:
                out = fn(x, axis=p["axis"], keepdims=bool(p["keepdims"]))
            return np.asarray(out, dtype=np.int32)

        return kernel

    return _configured({"axis": None, "keepdims": False}, impl)


register("op:Argmax")(_arg(np.argmax))
register("op:Argmin")(_arg(np.argmin))


@_op_with_config(["Softmax"], {"axis": -1})
def _op_softmax(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    axis = axis_value(p["axis"])
    return lambda x: act.softmax(_as_array(x), axis=axis)


@_op_with_config(["LogSoftmax"], {"axis": -1})
def _op_log_softmax(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    return lambda x: _log_softmax(_as_array(x), p["axis"])


@_op_with_config(["Gelu"], {"approximate": True})
def _op_gelu(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    approximate = bool(p["approximate"])
    return lambda x: _gelu(_as_array(x), approximate)


def _activation_op(option: str, default: float, fn: Callable[[np.ndarray, Any], np.ndarray]) -> KernelFactory:
    """An op that is the activation ``fn`` with one option (its second argument)."""
    return _configured({option: default}, lambda spec, p: lambda x: fn(_as_array(x), p[option]))


register("op:LeakyRelu")(_activation_op("negative_slope", 0.2, act.leaky_relu))
register("op:Elu")(_activation_op("alpha", 1.0, act.elu))
register("op:Celu")(_activation_op("alpha", 1.0, act.celu))
register("op:SoftShrink")(_activation_op("threshold", 0.5, act.soft_shrink))
register("op:HardShrink")(_activation_op("threshold", 0.5, act.hard_shrink))
register("op:Squareplus")(_activation_op("b", 4, act.squareplus))


@_op_with_config(["Glu"], {"axis": -1})
def _op_glu(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    def kernel(x: Any) -> np.ndarray:
        a, b = np.split(_as_array(x), 2, axis=p["axis"])
        return a * act.sigmoid(b)

    return kernel


@_op_with_config(["Normalize"], {"axis": -1, "order": 2, "epsilon": None})
def _op_normalize(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    if p["order"] != 2:
        raise UnsupportedConfigError(spec.class_name, "order", p["order"], spec.name)
    eps = 1e-12 if p["epsilon"] is None else p["epsilon"]
    axis = axis_value(p["axis"])

    def kernel(x: Any) -> np.ndarray:
        x = _as_array(x)
        sq = np.sum(np.square(x), axis=axis, keepdims=True)
        return (x / np.sqrt(np.maximum(sq, eps))).astype(x.dtype, copy=False)

    return kernel


@_op_with_config(["Clip"], {"x_min": NO_DEFAULT, "x_max": NO_DEFAULT})
def _op_clip(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    def kernel(x: Any) -> np.ndarray:
        x = _as_array(x)
        return np.clip(x, p["x_min"], p["x_max"]).astype(x.dtype, copy=False)

    return kernel


def _cast(saturate: bool) -> KernelFactory:
    """Cast / ConvertToTensor (``dtype``: None keeps the input's) and SaturateCast (``saturate``:
    integers clipped to the target type's range first)."""
    return _configured({"dtype": None, "sparse": None, "ragged": None}, partial(_cast_kernel, saturate))


def _cast_kernel(saturate: bool, spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    if p["sparse"] or p["ragged"]:
        raise UnsupportedConfigError(spec.class_name, "sparse", p["sparse"], spec.name)
    dtype = None if p["dtype"] is None else dtype_value(spec, "dtype", p["dtype"])

    def kernel(x: Any) -> np.ndarray:
        x = _as_array(x)
        if dtype is None:
            return x
        if saturate and dtype.kind in "iu":
            info = np.iinfo(dtype)
            x = np.clip(x, info.min, info.max)
        return x.astype(dtype)

    return kernel


register("op:Cast", "op:ConvertToTensor")(_cast(saturate=False))
register("op:SaturateCast")(_cast(saturate=True))


@_op_with_config(["Reshape"], {"newshape": NO_DEFAULT})
def _op_reshape(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    # newshape includes the batch dimension (unlike the Reshape layer's target_shape)
    shape = tuple(-1 if d is None else int(d) for d in p["newshape"])
    return lambda x: np.reshape(_as_array(x), shape)


@_op_with_config(["Transpose"], {"axes": None})
def _op_transpose(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    axes = axis_value(p["axes"])
    return lambda x: np.transpose(_as_array(x), axes)


@_op_with_config(["ExpandDims"], {"axis": NO_DEFAULT})
def _op_expand_dims(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    axis = axis_value(p["axis"])
    return lambda x: np.expand_dims(_as_array(x), axis)


@_op_with_config(["Squeeze"], {"axis": None})
def _op_squeeze(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    axis = axis_value(p["axis"])
    return lambda x: np.squeeze(_as_array(x), axis=axis)


@_op_with_config(["Concatenate"], {"axis": 0})
def _op_concatenate(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    def kernel(xs: Sequence[Any]) -> np.ndarray:
        parts = _operands(*xs)
        if p["axis"] is None:
            return np.concatenate([np.ravel(v) for v in parts])
        return np.concatenate(parts, axis=p["axis"])

    return kernel


@_op_with_config(["Stack"], {"axis": 0})
def _op_stack(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    return lambda xs: np.stack(_operands(*xs), axis=p["axis"])


@_op_with_config(["Unstack"], {"num": None, "axis": 0})
def _op_unstack(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    def kernel(x: Any) -> tuple[np.ndarray, ...]:
        x = np.moveaxis(_as_array(x), p["axis"], 0)
        return tuple(x[i] for i in range(x.shape[0]))

    return kernel


@_op_with_config(["Split"], {"indices_or_sections": NO_DEFAULT, "axis": 0})
def _op_split(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    ios = p["indices_or_sections"]
    ios = list(ios) if isinstance(ios, list | tuple) else int(ios)
    return lambda x: tuple(np.split(_as_array(x), ios, axis=p["axis"]))


@_op_with_config(["GetItem"], {})
def _op_get_item(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    return lambda x, key: _as_array(x)[decode_key(key)]


@_op_with_config(["Where"], {})
def _op_where(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    def kernel(condition: Any, x1: Any = None, x2: Any = None) -> np.ndarray:
        if x1 is None or x2 is None:
            # the index form has a data-dependent shape
            raise UnsupportedConfigError(spec.class_name, "x1/x2", None, spec.name)
        x1, x2 = _operands(x1, x2)
        return _fix_float(np.where(np.asarray(condition, dtype=bool), x1, x2), [x1, x2])

    return kernel


@_op_with_config(["Einsum"], {"subscripts": NO_DEFAULT})
def _op_einsum(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    subscripts = p["subscripts"]
    return lambda *operands: np.einsum(subscripts, *_operands(*operands))


@_op_with_config(["Tensordot"], {"axes": 2})
def _op_tensordot(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    axes = p["axes"]
    return lambda x1, x2: np.tensordot(*_operands(x1, x2), axes=axes)


@_op_with_config(["Tile"], {"repeats": NO_DEFAULT})
def _op_tile(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    return lambda x: np.tile(_as_array(x), p["repeats"])


@_op_with_config(["Repeat"], {"repeats": NO_DEFAULT, "axis": None})
def _op_repeat(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    return lambda x: np.repeat(_as_array(x), p["repeats"], axis=p["axis"])


_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap", "maximum", "minimum", "mean")


@_op_with_config(["Pad"], {"pad_width": NO_DEFAULT, "mode": "constant"})
def _op_pad(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    mode = p["mode"]
    if mode not in _PAD_MODES:
        raise UnsupportedConfigError(spec.class_name, "mode", mode, spec.name)
    width = p["pad_width"]

    def kernel(x: Any, constant_values: Any = None) -> np.ndarray:
        x = _as_array(x)
        if mode == "constant":
            return np.pad(x, width, mode="constant", constant_values=constant_values or 0)
        if constant_values is not None:
            raise UnsupportedConfigError(spec.class_name, "constant_values", constant_values, spec.name)
        return np.pad(x, width, mode=mode)

    return kernel


@_op_with_config(["Take"], {"axis": None})
def _op_take(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    def kernel(x: Any, indices: Any) -> np.ndarray:
        x = _as_array(x)
        idx = np.asarray(indices).astype(np.int64)
        size = x.size if p["axis"] is None else x.shape[p["axis"]]
        idx = np.where(idx < 0, idx + size, idx)
        return np.take(x, idx, axis=p["axis"])

    return kernel


@_op_with_config(["Flip"], {"axis": None})
def _op_flip(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    return lambda x: np.flip(_as_array(x), axis=axis_value(p["axis"]))


@_op_with_config(["Moveaxis"], {"source": NO_DEFAULT, "destination": NO_DEFAULT})
def _op_moveaxis(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    return lambda x: np.moveaxis(_as_array(x), p["source"], p["destination"])


@_op_with_config(["Swapaxes"], {"axis1": NO_DEFAULT, "axis2": NO_DEFAULT})
def _op_swapaxes(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    return lambda x: np.swapaxes(_as_array(x), p["axis1"], p["axis2"])


def _cumulative(fn: Callable[..., Any]) -> KernelFactory:
    """Cumsum / Cumprod: ``fn`` along ``axis`` (flattened when None), in ``dtype`` when given."""

    def impl(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
        dtype = None if p["dtype"] is None else dtype_value(spec, "dtype", p["dtype"])
        return lambda x: fn(_as_array(x), axis=p["axis"], dtype=dtype)

    return _configured({"axis": None, "dtype": None}, impl)


register("op:Cumsum")(_cumulative(np.cumsum))
register("op:Cumprod")(_cumulative(np.cumprod))


@_op_with_config(["Round"], {"decimals": 0})
def _op_round(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    return lambda x: np.round(_as_array(x), p["decimals"])


def _triangle(fn: Callable[..., Any]) -> KernelFactory:
    """Triu / Tril: ``fn`` keeping the triangle above or below diagonal ``k``."""
    return _configured({"k": 0}, lambda spec, p: lambda x: fn(_as_array(x), p["k"]))


register("op:Triu")(_triangle(np.triu))
register("op:Tril")(_triangle(np.tril))


def _filled_like(fn: Callable[..., Any]) -> KernelFactory:
    """ZerosLike / OnesLike: ``fn`` of the input's shape, in ``dtype`` when given."""

    def impl(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
        dtype = None if p["dtype"] is None else dtype_value(spec, "dtype", p["dtype"])
        return lambda x: fn(_as_array(x), dtype=dtype)

    return _configured({"dtype": None}, impl)


register("op:ZerosLike")(_filled_like(np.zeros_like))
register("op:OnesLike")(_filled_like(np.ones_like))


@_op_with_config(["StopGradient", "Copy"], {})
def _op_identity(spec: KernelSpec, p: dict[str, Any]) -> Kernel:
    return lambda x: _as_array(x)


# ---------------------------------------------------------------------------------------------
# tf.keras TFOpLambda / SlicingOpLambda ("tf:<function>")


def _tf(*functions: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return register(*(f"tf:{f}" for f in functions))


def _tf_kwargs(spec: KernelSpec, kwargs: Mapping[str, Any], known: Mapping[str, Any]) -> dict[str, Any]:
    return config_params(spec, kwargs, known, "call argument ")


def _tf_unary(fn: Callable[[np.ndarray], np.ndarray]) -> KernelFactory:
    """A TF function computing ``fn`` element-wise (no keyword but ``name``)."""

    def factory(spec: KernelSpec) -> Kernel:
        def kernel(x: Any, **kwargs: Any) -> np.ndarray:
            _tf_kwargs(spec, kwargs, {})
            return _apply_unary(fn, x)

        return kernel

    return factory


_tf("math.negative")(_tf_unary(np.negative))
_tf("math.abs")(_tf_unary(np.abs))
_tf("math.square")(_tf_unary(np.square))
_tf("math.sqrt")(_tf_unary(np.sqrt))
_tf("math.rsqrt")(_tf_unary(_rsqrt))
_tf("math.exp")(_tf_unary(np.exp))
_tf("math.log")(_tf_unary(np.log))
_tf("math.log1p")(_tf_unary(np.log1p))
_tf("math.expm1")(_tf_unary(np.expm1))
_tf("math.tanh")(_tf_unary(np.tanh))
_tf("math.sin")(_tf_unary(np.sin))
_tf("math.cos")(_tf_unary(np.cos))
_tf("math.floor")(_tf_unary(np.floor))
_tf("math.ceil")(_tf_unary(np.ceil))
_tf("math.sign")(_tf_unary(np.sign))
_tf("math.reciprocal")(_tf_unary(np.reciprocal))
_tf("math.logical_not")(_tf_unary(np.logical_not))
_tf("math.erf")(_tf_unary(_erf))
_tf("nn.relu")(_tf_unary(act.relu))
_tf("nn.relu6")(_tf_unary(_relu6))
_tf("math.sigmoid", "nn.sigmoid")(_tf_unary(act.sigmoid))
_tf("math.softplus", "nn.softplus")(_tf_unary(act.softplus))
_tf("math.softsign", "nn.softsign")(_tf_unary(_softsign))
_tf("nn.selu")(_tf_unary(_selu))
_tf("math.log_sigmoid")(_tf_unary(_log_sigmoid))


def _tf_binary(fn: Callable[[Any, Any], Any]) -> KernelFactory:
    """A TF function computing ``fn(x, y)`` element-wise, ``y`` a tensor or a constant."""

    def factory(spec: KernelSpec) -> Kernel:
        def kernel(x: Any, **kwargs: Any) -> Any:
            p = _tf_kwargs(spec, kwargs, {"y": NO_DEFAULT})
            return _apply_binary(fn, x, p["y"])

        return kernel

    return factory


_tf("__operators__.add", "math.add")(_tf_binary(np.add))
_tf("math.subtract")(_tf_binary(np.subtract))
_tf("math.multiply")(_tf_binary(np.multiply))
_tf("math.truediv", "math.divide")(_tf_binary(np.true_divide))
_tf("math.pow")(_tf_binary(np.power))
_tf("math.maximum")(_tf_binary(np.maximum))
_tf("math.minimum")(_tf_binary(np.minimum))
_tf("math.floordiv", "compat.v1.floor_div")(_tf_binary(np.floor_divide))
_tf("math.floormod", "math.mod")(_tf_binary(np.mod))
_tf("math.equal", "__operators__.eq")(_tf_binary(np.equal))
_tf("math.not_equal", "__operators__.ne")(_tf_binary(np.not_equal))
_tf("math.greater")(_tf_binary(np.greater))
_tf("math.greater_equal")(_tf_binary(np.greater_equal))
_tf("math.less")(_tf_binary(np.less))
_tf("math.less_equal")(_tf_binary(np.less_equal))
_tf("math.logical_and")(_tf_binary(np.logical_and))
_tf("math.logical_or")(_tf_binary(np.logical_or))
_tf("math.logical_xor")(_tf_binary(np.logical_xor))
_tf("math.squared_difference")(_tf_binary(_squared_difference))


@_tf("math.divide_no_nan")
def _tf_divide_no_nan(spec: KernelSpec) -> Kernel:
    def kernel(x: Any, **kwargs: Any) -> Any:
        return _divide_no_nan(x, _tf_kwargs(spec, kwargs, {"y": NO_DEFAULT})["y"])

    return kernel


@_tf("linalg.matmul")
def _tf_matmul(spec: KernelSpec) -> Kernel:
    known = {"b": NO_DEFAULT, "transpose_a": False, "transpose_b": False, "adjoint_a": False}
    known |= {"adjoint_b": False, "a_is_sparse": False, "b_is_sparse": False, "output_type": None}

    def kernel(a: Any, **kwargs: Any) -> np.ndarray:
        p = _tf_kwargs(spec, kwargs, known)
        a, b = _operands(a, p["b"])
        a = np.asarray(a)
        b = np.asarray(b)
        if p["transpose_a"] or p["adjoint_a"]:
            a = np.swapaxes(a, -1, -2)
        if p["transpose_b"] or p["adjoint_b"]:
            b = np.swapaxes(b, -1, -2)
        out = np.matmul(a, b)
        if p["output_type"] is not None:
            out = out.astype(dtype_value(spec, "output_type", p["output_type"]))
        return out

    return kernel


@_tf("nn.silu")
def _tf_silu(spec: KernelSpec) -> Kernel:
    def kernel(x: Any, **kwargs: Any) -> np.ndarray:
        beta = _tf_kwargs(spec, kwargs, {"beta": 1.0})["beta"]
        x = _as_array(x)
        return x * act.sigmoid(x * x.dtype.type(beta) if beta != 1.0 else x)

    return kernel


@_tf("nn.gelu")
def _tf_gelu(spec: KernelSpec) -> Kernel:
    def kernel(x: Any, **kwargs: Any) -> np.ndarray:
        return _gelu(_as_array(x), bool(_tf_kwargs(spec, kwargs, {"approximate": False})["approximate"]))

    return kernel


@_tf("nn.leaky_relu")
def _tf_leaky_relu(spec: KernelSpec) -> Kernel:
    def kernel(x: Any, **kwargs: Any) -> np.ndarray:
        return act.leaky_relu(_as_array(x), _tf_kwargs(spec, kwargs, {"alpha": 0.2})["alpha"])

    return kernel


@_tf("nn.elu")
def _tf_elu(spec: KernelSpec) -> Kernel:
    def kernel(x: Any, **kwargs: Any) -> np.ndarray:
        _tf_kwargs(spec, kwargs, {})
        return act.elu(_as_array(x), 1.0)

    return kernel


@_tf("nn.softmax")
def _tf_softmax(spec: KernelSpec) -> Kernel:
    def kernel(x: Any, **kwargs: Any) -> np.ndarray:
        p = _tf_kwargs(spec, kwargs, {"axis": None, "dim": None})
        axis = p["axis"] if p["axis"] is not None else p["dim"]
        axis = -1 if axis is None else axis_value(axis)
        return act.softmax(_as_array(x), axis=axis)

    return kernel


@_tf("nn.log_softmax")
def _tf_log_softmax(spec: KernelSpec) -> Kernel:
    def kernel(x: Any, **kwargs: Any) -> np.ndarray:
        axis = _tf_kwargs(spec, kwargs, {"axis": None})["axis"]
        return _log_softmax(_as_array(x), -1 if axis is None else axis)

    return kernel


def _tf_reduction(fn: Callable[..., Any]) -> KernelFactory:
    """A ``math.reduce_*`` function: ``fn(x, axis=, keepdims=)`` in the input's dtype."""

    def factory(spec: KernelSpec) -> Kernel:
        def kernel(x: Any, **kwargs: Any) -> np.ndarray:
            p = _tf_kwargs(spec, kwargs, {"axis": None, "keepdims": False})
            x = _as_array(x)
            out = np.asarray(fn(x, axis=axis_value(p["axis"]), keepdims=bool(p["keepdims"])))
            return out.astype(x.dtype, copy=False)

        return kernel

    return factory


_tf("math.reduce_mean")(_tf_reduction(np.mean))
_tf("math.reduce_sum")(_tf_reduction(np.sum))
_tf("math.reduce_max")(_tf_reduction(np.max))
_tf("math.reduce_min")(_tf_reduction(np.min))
_tf("math.reduce_prod")(_tf_reduction(np.prod))
_tf("math.reduce_std")(_tf_reduction(np.std))
_tf("math.reduce_variance")(_tf_reduction(np.var))
_tf("math.reduce_any")(_tf_reduction(np.any))
_tf("math.reduce_all")(_tf_reduction(np.all))
_tf("math.reduce_logsumexp")(_tf_reduction(_logsumexp))


def _tf_arg(fn: Callable[..., Any]) -> KernelFactory:
    """``math.argmax``/``argmin``: the index along ``axis`` (0 when None) as ``output_type``."""

    def factory(spec: KernelSpec) -> Kernel:
        def kernel(x: Any, **kwargs: Any) -> np.ndarray:
            p = _tf_kwargs(spec, kwargs, {"axis": None, "output_type": "int64"})
            axis = 0 if p["axis"] is None else p["axis"]
            return fn(_as_array(x), axis=axis).astype(dtype_value(spec, "output_type", p["output_type"]))

        return kernel

    return factory


_tf("math.argmax")(_tf_arg(np.argmax))
_tf("math.argmin")(_tf_arg(np.argmin))


@_tf("concat")
def _tf_concat(spec: KernelSpec) -> Kernel:
    def kernel(values: Any, **kwargs: Any) -> np.ndarray:
        axis = _tf_kwargs(spec, kwargs, {"axis": NO_DEFAULT})["axis"]
        values = values if isinstance(values, list | tuple) else [values]
        return np.concatenate(_operands(*values), axis=axis)

    return kernel


@_tf("stack")
def _tf_stack(spec: KernelSpec) -> Kernel:
    def kernel(values: Any, **kwargs: Any) -> np.ndarray:
        axis = _tf_kwargs(spec, kwargs, {"axis": 0})["axis"]
        return np.stack(_operands(*values), axis=axis)

    return kernel


@_tf("unstack")
def _tf_unstack(spec: KernelSpec) -> Kernel:
    def kernel(value: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        p = _tf_kwargs(spec, kwargs, {"num": None, "axis": 0})
        x = np.moveaxis(_as_array(value), p["axis"], 0)
        return tuple(x[i] for i in range(x.shape[0]))

    return kernel


@_tf("reshape")
def _tf_reshape(spec: KernelSpec) -> Kernel:
    def kernel(tensor: Any, **kwargs: Any) -> np.ndarray:
        shape = _tf_kwargs(spec, kwargs, {"shape": NO_DEFAULT})["shape"]
        shape = np.asarray(shape).astype(np.int64).reshape(-1)
        return np.reshape(_as_array(tensor), tuple(int(d) for d in shape))

    return kernel


@_tf("transpose", "compat.v1.transpose")
def _tf_transpose(spec: KernelSpec) -> Kernel:
    def kernel(a: Any, **kwargs: Any) -> np.ndarray:
        perm = _tf_kwargs(spec, kwargs, {"perm": None, "conjugate": False})["perm"]
        return np.transpose(_as_array(a), None if perm is None else tuple(int(v) for v in perm))

    return kernel


@_tf("linalg.matrix_transpose", "linalg.adjoint")
def _tf_matrix_transpose(spec: KernelSpec) -> Kernel:
    def kernel(a: Any, **kwargs: Any) -> np.ndarray:
        _tf_kwargs(spec, kwargs, {"conjugate": False})
        return np.swapaxes(_as_array(a), -1, -2)

    return kernel


@_tf("expand_dims", "compat.v1.expand_dims")
def _tf_expand_dims(spec: KernelSpec) -> Kernel:
    def kernel(x: Any, **kwargs: Any) -> np.ndarray:
        p = _tf_kwargs(spec, kwargs, {"axis": None, "dim": None})
        axis = p["axis"] if p["axis"] is not None else p["dim"]
        if axis is None:
            raise UnsupportedConfigError(spec.class_name, "call argument axis", None, spec.name)
        return np.expand_dims(_as_array(x), int(axis))

    return kernel


@_tf("squeeze", "compat.v1.squeeze")
def _tf_squeeze(spec: KernelSpec) -> Kernel:
    def kernel(x: Any, **kwargs: Any) -> np.ndarray:
        p = _tf_kwargs(spec, kwargs, {"axis": None, "squeeze_dims": None})
        axis = p["axis"] if p["axis"] is not None else p["squeeze_dims"]
        axis = tuple(axis) if isinstance(axis, list | tuple) else axis
        if axis == ():
            axis = None
        return np.squeeze(_as_array(x), axis=axis)

    return kernel


@_tf("split")
def _tf_split(spec: KernelSpec) -> Kernel:
    def kernel(value: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        p = _tf_kwargs(spec, kwargs, {"num_or_size_splits": NO_DEFAULT, "axis": 0, "num": None})
        x = _as_array(value)
        splits = p["num_or_size_splits"]
        axis = int(p["axis"])
        if isinstance(splits, list | tuple | np.ndarray):
            sizes = [int(s) for s in np.asarray(splits).reshape(-1)]
            if -1 in sizes:
                sizes[sizes.index(-1)] = x.shape[axis] - (sum(sizes) + 1)
            return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=axis))
        return tuple(np.split(x, int(splits), axis=axis))

    return kernel


@_tf("tile")
def _tf_tile(spec: KernelSpec) -> Kernel:
    def kernel(x: Any, **kwargs: Any) -> np.ndarray:
        return np.tile(_as_array(x), _tf_kwargs(spec, kwargs, {"multiples": NO_DEFAULT})["multiples"])

    return kernel


@_tf("pad", "compat.v1.pad")
def _tf_pad(spec: KernelSpec) -> Kernel:
    modes = {"CONSTANT": "constant", "REFLECT": "reflect", "SYMMETRIC": "symmetric"}

    def kernel(x: Any, **kwargs: Any) -> np.ndarray:
        p = _tf_kwargs(spec, kwargs, {"paddings": NO_DEFAULT, "mode": "CONSTANT", "constant_values": 0})
        mode = str(p["mode"]).upper()
        if mode not in modes:
            raise UnsupportedConfigError(spec.class_name, "call argument mode", p["mode"], spec.name)
        x = _as_array(x)
        width = [tuple(int(v) for v in pair) for pair in p["paddings"]]
        if mode == "CONSTANT":
            return np.pad(x, width, mode="constant", constant_values=p["constant_values"])
        return np.pad(x, width, mode=modes[mode])

    return kernel


@_tf("reverse")
def _tf_reverse(spec: KernelSpec) -> Kernel:
    def kernel(x: Any, **kwargs: Any) -> np.ndarray:
        axis = axis_value(_tf_kwargs(spec, kwargs, {"axis": NO_DEFAULT})["axis"])
        return np.flip(_as_array(x), axis=axis)

    return kernel


@_tf("gather", "compat.v1.gather")
def _tf_gather(spec: KernelSpec) -> Kernel:
    known = {"indices": NO_DEFAULT, "axis": None, "batch_dims": 0, "validate_indices": None}

    def kernel(params: Any, **kwargs: Any) -> np.ndarray:
        p = _tf_kwargs(spec, kwargs, known)
        if p["batch_dims"]:
            raise UnsupportedConfigError(
                spec.class_name, "call argument batch_dims", p["batch_dims"], spec.name
            )
        axis = 0 if p["axis"] is None else int(p["axis"])
        return np.take(_as_array(params), np.asarray(p["indices"]).astype(np.int64), axis=axis)

    return kernel


@_tf("cast")
def _tf_cast(spec: KernelSpec) -> Kernel:
    def kernel(x: Any, **kwargs: Any) -> np.ndarray:
        dtype = dtype_value(
            spec, "call argument dtype", _tf_kwargs(spec, kwargs, {"dtype": NO_DEFAULT})["dtype"]
        )
        x = _as_array(x)
        if x.dtype.kind == "f" and dtype.kind in "iu":
            x = np.trunc(x)
        return x.astype(dtype)

    return kernel


@_tf("clip_by_value")
def _tf_clip(spec: KernelSpec) -> Kernel:
    def kernel(t: Any, **kwargs: Any) -> np.ndarray:
        p = _tf_kwargs(spec, kwargs, {"clip_value_min": NO_DEFAULT, "clip_value_max": NO_DEFAULT})
        x = _as_array(t)
        lo, hi = _operands(x, p["clip_value_min"], p["clip_value_max"])[1:]
        return np.minimum(np.maximum(x, lo), hi).astype(x.dtype, copy=False)

    return kernel


@_tf("where")
def _tf_where(spec: KernelSpec) -> Kernel:
    def kernel(condition: Any, **kwargs: Any) -> np.ndarray:
        p = _tf_kwargs(spec, kwargs, {"x": None, "y": None})
        if p["x"] is None or p["y"] is None:
            raise UnsupportedConfigError(spec.class_name, "call argument x/y", None, spec.name)
        x, y = _operands(p["x"], p["y"])
        return _fix_float(np.where(np.asarray(condition, dtype=bool), x, y), [x, y])

    return kernel


@_tf("math.cumsum")
def _tf_cumsum(spec: KernelSpec) -> Kernel:
    def kernel(x: Any, **kwargs: Any) -> np.ndarray:
        p = _tf_kwargs(spec, kwargs, {"axis": 0, "exclusive": False, "reverse": False})
        x = _as_array(x)
        axis = int(p["axis"])
        if p["reverse"]:
            x = np.flip(x, axis)
        out = np.cumsum(x, axis=axis, dtype=x.dtype)
        if p["exclusive"]:
            out = out - x
        return np.flip(out, axis) if p["reverse"] else out

    return kernel


@_tf("math.l2_normalize")
def _tf_l2_normalize(spec: KernelSpec) -> Kernel:
    def kernel(x: Any, **kwargs: Any) -> np.ndarray:
        p = _tf_kwargs(spec, kwargs, {"axis": None, "epsilon": 1e-12, "dim": None})
        axis = p["axis"] if p["axis"] is not None else p["dim"]
        x = _as_array(x)
        sq = np.sum(np.square(x), axis=axis_value(axis), keepdims=True)
        return (x / np.sqrt(np.maximum(sq, p["epsilon"]))).astype(x.dtype, copy=False)

    return kernel


@_tf("identity")
def _tf_identity(spec: KernelSpec) -> Kernel:
    def kernel(x: Any, **kwargs: Any) -> np.ndarray:
        _tf_kwargs(spec, kwargs, {})
        return _as_array(x)

    return kernel


@_tf("__operators__.getitem")
def _tf_getitem(spec: KernelSpec) -> Kernel:
    def kernel(x: Any, **kwargs: Any) -> np.ndarray:
        key = _tf_kwargs(spec, kwargs, {"slice_spec": NO_DEFAULT, "var": None})["slice_spec"]
        return _as_array(x)[decode_key(key)]

    return kernel


@register("op:Log2")
def _op_log2(spec: KernelSpec) -> Kernel:
    """``keras.ops.log2``: the base-2 logarithm (integers as float32, as Keras computes them)."""
    config_params(spec, spec.config, {}, "")

    def kernel(x: Any) -> np.ndarray:
        return _apply_unary(np.log2, x)

    return kernel
