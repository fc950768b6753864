"""Keras 3 raw-op nodes (keys ``op:<Class>``) and tf.keras TFOpLambda functions (``tf:<function>``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from modelgraph.shape_rules._base import (
    Call,
    Dim,
    Shape,
    ShapeError,
    TensorSpec,
    Unknown,
    axis_index,
    broadcast,
    fmt,
    need,
    result_dtype,
    same_dim,
    shape_rule,
)
from modelgraph.shape_rules.core import concat_shapes
from modelgraph.shape_rules.spatial import reshape_to

# ------------------------------------------------------------------------------------------------
# Operands


def operand_shape(value: Any) -> Shape | None:
    """Shape of a call operand: a tensor, a Python scalar, a nested list, or a NumPy constant."""
    if isinstance(value, TensorSpec):
        return need(value)
    if isinstance(value, bool | int | float | complex):
        return ()
    if isinstance(value, np.ndarray):
        return tuple(int(d) for d in value.shape)
    if isinstance(value, list | tuple):
        try:
            arr = np.asarray(value, dtype=float)
        except (TypeError, ValueError):
            return None
        return tuple(int(d) for d in arr.shape)
    return None


def _operands(call: Call, skip: Sequence[str] = ("name",)) -> list[Any]:
    values = list(call.args)
    for k in sorted(call.kwargs):
        if k not in skip and call.kwargs[k] is not None:
            values.append(call.kwargs[k])
    return values


def _broadcast_all(call: Call, operands: list[Any]) -> Shape:
    shapes = [operand_shape(v) for v in operands]
    if any(s is None for s in shapes) or not shapes:
        raise Unknown()
    out: Shape = shapes[0]  # type: ignore[assignment]
    for s in shapes[1:]:
        out = broadcast(out, s, f"{call.class_name} operands")  # type: ignore[arg-type]
    if not any(isinstance(v, TensorSpec) for v in operands):
        raise ShapeError(f"{call.class_name} has no tensor operand", "arity")
    return out


def _set_dtype(call: Call, dtype: str | None) -> None:
    call.out_dtypes = [dtype]


def _float_of_inputs(call: Call) -> str | None:
    return result_dtype(t.dtype for t in call.inputs)


# ------------------------------------------------------------------------------------------------
# Element-wise


@shape_rule(
    "op:Add", "op:Subtract", "op:Multiply", "op:Divide", "op:TrueDivide", "op:FloorDivide", "op:Mod",
    "op:Power", "op:Maximum", "op:Minimum", "op:Arctan2", "op:Hypot", "op:Where", "op:BitwiseAnd",
    "op:BitwiseOr", "op:BitwiseXor", "op:Heaviside", "op:Relu", "op:Relu6", "op:Sigmoid", "op:Gelu",
    "op:Softmax", "op:LogSoftmax", "op:Tanh", "op:Exp", "op:Exp2", "op:Log", "op:Log2", "op:Log10",
    "op:Log1p", "op:Expm1", "op:Sqrt", "op:Rsqrt", "op:Abs", "op:Absolute", "op:Negative", "op:Square",
    "op:Silu", "op:Swish", "op:Erf", "op:Erfinv", "op:Sin", "op:Cos", "op:Tan", "op:Arcsin", "op:Arccos",
    "op:Arctan", "op:Sinh", "op:Cosh", "op:Arcsinh", "op:Arccosh", "op:Arctanh", "op:Floor", "op:Ceil",
    "op:Round", "op:Sign", "op:Reciprocal", "op:Softplus", "op:Softsign", "op:HardSigmoid", "op:HardSilu",
    "op:HardSwish", "op:LeakyRelu", "op:Elu", "op:Selu", "op:Celu", "op:Mish", "op:LogSigmoid",
    "op:HardTanh", "op:SoftShrink", "op:HardShrink", "op:TanhShrink", "op:Squareplus", "op:SparsePlus",
    "op:Sparsemax", "op:Threshold", "op:SparseSigmoid", "op:Clip", "op:StopGradient", "op:Identity",
    "op:Copy", "op:Trunc", "op:Conjugate", "op:Real", "op:Imag", "op:Cbrt", "op:NanToNum",
    "op:ConvertToTensor", "op:Normalize", "op:Cumsum", "op:Cumprod", "op:Sort", "op:Roll", "op:Flip",
    "op:Tril", "op:Triu",
)  # fmt: skip
def _op_elementwise(call: Call) -> Shape:
    return _broadcast_all(call, list(call.args))


@shape_rule(
    "op:Equal", "op:NotEqual", "op:Greater", "op:GreaterEqual", "op:Less", "op:LessEqual", "op:LogicalAnd",
    "op:LogicalOr", "op:LogicalXor", "op:LogicalNot", "op:IsNan", "op:IsInf", "op:IsFinite", "op:Signbit",
)  # fmt: skip
def _op_compare(call: Call) -> Shape:
    out = _broadcast_all(call, list(call.args))
    _set_dtype(call, "bool")
    return out


@shape_rule("op:Cast", "op:ZerosLike", "op:OnesLike")
def _op_cast(call: Call) -> Shape:
    shape = need(call.first())
    dtype = call.config.get("dtype")  # ZerosLike/OnesLike without one keep their input's
    _set_dtype(call, str(dtype) if dtype else _float_of_inputs(call))
    return shape


@shape_rule("op:Glu")
def _op_glu(call: Call) -> Shape:
    shape = need(call.first())
    a = axis_index(call.config.get("axis", -1), len(shape))
    d = shape[a]
    if d is not None and d % 2:
        raise ShapeError(f"glu needs an even size on axis {a}, got {d}", "shape")
    return (*shape[:a], None if d is None else d // 2, *shape[a + 1 :])


# ------------------------------------------------------------------------------------------------
# Shape manipulation


@shape_rule("op:Reshape")
def _op_reshape(call: Call) -> Shape:
    shape = need(call.first())
    target = call.config.get("newshape", call.config.get("new_shape"))
    if target is None:
        target = call.param(1, "newshape")
    if isinstance(target, int):
        target = [target]
    if not isinstance(target, list | tuple):
        raise Unknown()
    return reshape_to(shape, list(target), "reshape", with_batch=True)


def split_shapes(shape: Shape, spec: Any, axis: Any, as_indices: bool, who: str) -> list[Shape]:
    a = axis_index(axis, len(shape))
    d = shape[a]
    if isinstance(spec, int) and not isinstance(spec, bool):
        if spec <= 0:
            raise ShapeError(f"{who} into {spec} sections", "config")
        if d is not None and d % spec:
            raise ShapeError(f"{who}: axis {a} of size {d} does not split into {spec} equal parts", "split")
        sizes: list[Dim] = [None if d is None else d // spec] * spec
    elif isinstance(spec, list | tuple):
        if as_indices:  # NumPy split points
            points = [int(p) for p in spec]
            if d is None:
                sizes = [None] * (len(points) + 1)
                if points:
                    sizes[0] = points[0] if points[0] >= 0 else None
                    for i in range(1, len(points)):
                        if points[i] >= 0 and points[i - 1] >= 0:
                            sizes[i] = max(points[i] - points[i - 1], 0)
            else:
                bounds = [0, *(min(p if p >= 0 else d + p, d) for p in points), d]
                sizes = [max(b - a_, 0) for a_, b in zip(bounds[:-1], bounds[1:], strict=True)]
        else:  # TF sizes, one may be -1
            sizes = [None if s == -1 else int(s) for s in spec]
            known = sum(s for s in sizes if s is not None)
            if sizes.count(None) > 1:
                raise ShapeError(f"{who} sizes {spec} have more than one -1", "config")
            if d is not None:
                if None in sizes:
                    sizes[sizes.index(None)] = d - known
                elif known != d:
                    raise ShapeError(f"{who} sizes {spec} sum to {known}, but axis {a} has size {d}", "split")
    else:
        raise Unknown()
    return [(*shape[:a], s, *shape[a + 1 :]) for s in sizes]


@shape_rule("op:Split")
def _op_split(call: Call) -> list[Shape]:
    shape = need(call.first())
    spec = call.config.get("indices_or_sections", call.param(1, "indices_or_sections"))
    return split_shapes(shape, spec, call.config.get("axis", 0), True, "split")


def _key_item(item: Any) -> Any:
    if isinstance(item, Mapping):
        if item.get("class_name") == "__ellipsis__":
            return Ellipsis
        if set(item) <= {"start", "stop", "step"}:
            return slice(item.get("start"), item.get("stop"), item.get("step"))
        cfg = item.get("config")
        if item.get("class_name") == "__slice__" and isinstance(cfg, Mapping):
            return slice(cfg.get("start"), cfg.get("stop"), cfg.get("step"))
    return item


def getitem_shape(shape: Shape, key: Any) -> Shape:
    items = [_key_item(k) for k in key] if isinstance(key, list | tuple) else [_key_item(key)]
    consuming = sum(1 for it in items if it is not None and it is not Ellipsis)
    if consuming > len(shape):
        raise ShapeError(f"too many indices ({consuming}) for a tensor of shape {fmt(shape)}", "index")
    out: list[Dim] = []
    dim = 0
    for it in items:
        if it is None:
            out.append(1)
        elif it is Ellipsis:
            n = len(shape) - consuming
            out.extend(shape[dim : dim + n])
            dim += n
        elif isinstance(it, bool):
            raise Unknown()
        elif isinstance(it, int):
            d = shape[dim]
            if d is not None and not -d <= it < d:
                raise ShapeError(f"index {it} is out of range for axis {dim} of size {d}", "index")
            dim += 1
        elif isinstance(it, slice):
            d = shape[dim]
            if it.step == 0:
                raise ShapeError("slice step cannot be zero", "index")
            if d is None:
                out.append(None)
            else:
                out.append(len(range(*it.indices(d))))
            dim += 1
        else:  # tensors, lists of indices: advanced indexing
            raise Unknown()
    out.extend(shape[dim:])
    return tuple(out)


@shape_rule("op:GetItem")
def _op_getitem(call: Call) -> Shape:
    shape = need(call.first())
    key = call.param(1, "key")
    return getitem_shape(shape, key)


@shape_rule("op:Concatenate")
def _op_concatenate(call: Call) -> Shape:
    shapes = [need(t) for t in call.arg_tensors()]
    if not shapes:
        raise ShapeError("concatenate without tensors", "arity")
    return concat_shapes(shapes, call.config.get("axis", 0), "concatenate")


@shape_rule("op:Stack")
def _op_stack(call: Call) -> Shape:
    shapes = [need(t) for t in call.arg_tensors()]
    if not shapes:
        raise ShapeError("stack without tensors", "arity")
    return stack_shapes(shapes, call.config.get("axis", 0))


def stack_shapes(shapes: list[Shape], axis: Any) -> Shape:
    base = list(shapes[0])
    for s in shapes[1:]:
        if len(s) != len(base) or not all(same_dim(a, b) for a, b in zip(base, s, strict=True)):
            raise ShapeError(f"stack needs equal shapes, got {', '.join(fmt(x) for x in shapes)}", "concat")
        base = [a if a is not None else b for a, b in zip(base, s, strict=True)]
    a = axis_index(axis, len(base) + 1)
    return (*base[:a], len(shapes), *base[a:])


def transpose_shape(shape: Shape, axes: Any) -> Shape:
    if axes is None:
        return tuple(reversed(shape))
    perm = [axis_index(a, len(shape)) for a in axes]
    if sorted(perm) != list(range(len(shape))):
        raise ShapeError(f"transpose axes {list(axes)} are not a permutation for {fmt(shape)}", "config")
    return tuple(shape[p] for p in perm)


@shape_rule("op:Transpose")
def _op_transpose(call: Call) -> Shape:
    return transpose_shape(need(call.first()), call.config.get("axes", call.param(1, "axes")))


def reduce_shape(shape: Shape, axis: Any, keepdims: bool) -> Shape:
    if axis is None:
        return (1,) * len(shape) if keepdims else ()
    axes = {axis_index(a, len(shape)) for a in (axis if isinstance(axis, list | tuple) else [axis])}
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


@shape_rule(
    "op:Mean", "op:Sum", "op:Max", "op:Min", "op:Prod", "op:Std", "op:Var", "op:Amax", "op:Amin",
    "op:Logsumexp", "op:Median",
)  # fmt: skip
def _op_reduce(call: Call) -> Shape:
    return reduce_shape(need(call.first()), call.config.get("axis"), bool(call.config.get("keepdims", False)))


@shape_rule("op:Any", "op:All")
def _op_reduce_bool(call: Call) -> Shape:
    out = _op_reduce(call)
    _set_dtype(call, "bool")
    return out


@shape_rule("op:Argmax", "op:Argmin")
def _op_argmax(call: Call) -> Shape:
    out = reduce_shape(need(call.first()), call.config.get("axis"), bool(call.config.get("keepdims", False)))
    _set_dtype(call, "int32")
    return out


def expand_shape(shape: Shape, axis: Any) -> Shape:
    axes = axis if isinstance(axis, list | tuple) else [axis]
    rank = len(shape) + len(axes)
    positions = sorted(axis_index(a, rank) for a in axes)
    out: list[Dim] = list(shape)
    for p in positions:
        out.insert(p, 1)
    return tuple(out)


@shape_rule("op:ExpandDims")
def _op_expand(call: Call) -> Shape:
    return expand_shape(need(call.first()), call.config.get("axis", call.param(1, "axis")))


def squeeze_shape(shape: Shape, axis: Any) -> Shape:
    if axis is None or (isinstance(axis, list | tuple) and not axis):
        if any(d is None for d in shape):
            raise Unknown()
        return tuple(d for d in shape if d != 1)
    axes = {axis_index(a, len(shape)) for a in (axis if isinstance(axis, list | tuple) else [axis])}
    for a in axes:
        if shape[a] is not None and shape[a] != 1:
            raise ShapeError(f"cannot squeeze axis {a} of size {shape[a]} in {fmt(shape)}", "shape")
    return tuple(d for i, d in enumerate(shape) if i not in axes)


@shape_rule("op:Squeeze")
def _op_squeeze(call: Call) -> Shape:
    return squeeze_shape(need(call.first()), call.config.get("axis"))


def matmul_shape(a: Shape, b: Shape) -> Shape:
    if not a or not b:
        raise ShapeError("matmul of a scalar", "rank")
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    if not same_dim(a2[-1], b2[-2]):
        raise ShapeError(f"matmul inner dims differ: {fmt(a)} @ {fmt(b)}", "matmul")
    batch = broadcast(a2[:-2], b2[:-2], "matmul batch dims")
    out = [*batch, a2[-2], b2[-1]]
    if len(a) == 1:
        out.pop(-2)
    if len(b) == 1:
        out.pop(-1)
    return tuple(out)


@shape_rule("op:Matmul", "op:Dot")
def _op_matmul(call: Call) -> Shape:
    tensors = [v for v in call.args[:2]]
    if len(tensors) < 2:
        raise ShapeError("matmul needs two operands", "arity")
    a, b = (operand_shape(t) for t in tensors)
    if a is None or b is None:
        raise Unknown()
    return matmul_shape(a, b)


@shape_rule("op:Tile")
def _op_tile(call: Call) -> Shape:
    shape = need(call.first())
    reps = call.config.get("repeats", call.param(1, "repeats"))
    return tile_shape(shape, reps)


def tile_shape(shape: Shape, reps: Any) -> Shape:
    if isinstance(reps, int):
        reps = [reps]
    if not isinstance(reps, list | tuple) or not all(isinstance(r, int) for r in reps):
        raise Unknown()
    n = max(len(shape), len(reps))
    s = (1,) * (n - len(shape)) + tuple(shape)
    r = (1,) * (n - len(reps)) + tuple(reps)
    return tuple(None if d is None else d * k for d, k in zip(s, r, strict=True))


@shape_rule("op:Einsum")
def _op_einsum(call: Call) -> Shape:
    subscripts = str(call.config.get("subscripts", "")).replace(" ", "")
    if "->" not in subscripts or "." in subscripts:
        raise Unknown()
    lhs, rhs = subscripts.split("->")
    specs = lhs.split(",")
    tensors = [need(t) for t in call.arg_tensors()]
    if len(specs) != len(tensors):
        raise ShapeError(f"einsum '{subscripts}' has {len(specs)} operands, got {len(tensors)}", "arity")
    sizes: dict[str, Dim] = {}
    for spec, shape in zip(specs, tensors, strict=True):
        if len(spec) != len(shape):
            raise ShapeError(f"einsum operand '{spec}' does not match shape {fmt(shape)}", "rank")
        for c, d in zip(spec, shape, strict=True):
            if c in sizes and not same_dim(sizes[c], d) and sizes[c] != 1 and d != 1:
                raise ShapeError(f"einsum index '{c}' has sizes {sizes[c]} and {d}", "shape")
            if sizes.get(c) in (None, 1):
                sizes[c] = d
    return tuple(sizes.get(c) for c in rhs)


# ------------------------------------------------------------------------------------------------
# tf.keras TFOpLambda / SlicingOpLambda functions


def _tf_operands(call: Call) -> list[Any]:
    values = list(call.args)
    for k in ("y", "b", "x", "bias", "condition"):
        if k in call.kwargs and call.kwargs[k] is not None:
            values.append(call.kwargs[k])
    return values


@shape_rule(
    "tf:__operators__.add", "tf:__operators__.sub", "tf:__operators__.mul", "tf:__operators__.truediv",
    "tf:__operators__.floordiv", "tf:__operators__.mod", "tf:__operators__.pow", "tf:math.add",
    "tf:math.multiply", "tf:math.subtract", "tf:math.truediv", "tf:math.divide", "tf:math.divide_no_nan",
    "tf:math.maximum", "tf:math.minimum", "tf:math.pow", "tf:math.squared_difference", "tf:math.floordiv",
    "tf:math.floormod", "tf:math.multiply_no_nan", "tf:nn.bias_add",
    "tf:nn.relu", "tf:nn.relu6", "tf:math.sigmoid", "tf:nn.sigmoid", "tf:math.tanh", "tf:nn.tanh",
    "tf:nn.softmax", "tf:math.softmax", "tf:nn.log_softmax", "tf:nn.gelu", "tf:math.exp", "tf:math.log",
    "tf:math.sqrt", "tf:math.rsqrt", "tf:math.abs", "tf:math.negative", "tf:__operators__.neg",
    "tf:math.square", "tf:nn.silu", "tf:nn.swish", "tf:math.erf", "tf:nn.leaky_relu", "tf:nn.elu",
    "tf:nn.selu", "tf:math.softplus", "tf:nn.softplus", "tf:math.softsign", "tf:identity",
    "tf:stop_gradient", "tf:math.reciprocal", "tf:math.sign", "tf:math.floor", "tf:math.ceil",
    "tf:math.round", "tf:clip_by_value", "tf:math.log1p", "tf:math.sin", "tf:math.cos",
    "tf:math.l2_normalize", "tf:nn.l2_normalize", "tf:math.cumsum", "tf:reverse",
)  # fmt: skip
def _tf_elementwise(call: Call) -> Shape:
    return _broadcast_all(call, _tf_operands(call))


@shape_rule("tf:math.add_n")
def _tf_add_n(call: Call) -> Shape:
    values = _tf_operands(call)
    if len(values) == 1 and isinstance(values[0], list):  # add_n([a, b, c])
        values = list(values[0])
    return _broadcast_all(call, values)


@shape_rule("tf:where")
def _tf_where(call: Call) -> Shape:
    values = [call.param(0, "condition"), call.param(1, "x"), call.param(2, "y")]
    return _broadcast_all(call, [v for v in values if v is not None])


@shape_rule(
    "tf:math.equal", "tf:math.not_equal", "tf:math.greater", "tf:math.greater_equal", "tf:math.less",
    "tf:math.less_equal", "tf:math.logical_and", "tf:math.logical_or", "tf:math.logical_not",
    "tf:math.is_nan", "tf:__operators__.eq", "tf:__operators__.ne", "tf:__operators__.gt",
    "tf:__operators__.ge", "tf:__operators__.lt", "tf:__operators__.le",
)  # fmt: skip
def _tf_compare(call: Call) -> Shape:
    out = _broadcast_all(call, _tf_operands(call))
    _set_dtype(call, "bool")
    return out


@shape_rule("tf:cast", "tf:dtypes.cast", "tf:image.convert_image_dtype")
def _tf_cast(call: Call) -> Shape:
    shape = need(call.first())
    dtype = call.param(1, "dtype")
    _set_dtype(call, str(dtype) if isinstance(dtype, str) else None)
    return shape


@shape_rule("tf:concat")
def _tf_concat(call: Call) -> Shape:
    shapes = [need(t) for t in call.arg_tensors()]
    if not shapes:
        raise ShapeError("tf.concat without tensors", "arity")
    return concat_shapes(shapes, call.param(1, "axis", 0), "tf.concat")


@shape_rule("tf:stack")
def _tf_stack(call: Call) -> Shape:
    shapes = [need(t) for t in call.arg_tensors()]
    if not shapes:
        raise ShapeError("tf.stack without tensors", "arity")
    return stack_shapes(shapes, call.param(1, "axis", 0))


@shape_rule("tf:reshape")
def _tf_reshape(call: Call) -> Shape:
    shape = need(call.first())
    target = call.param(1, "shape")
    if not isinstance(target, list | tuple) or not all(isinstance(d, int) or d is None for d in target):
        raise Unknown()
    return reshape_to(shape, list(target), "tf.reshape", with_batch=True)


@shape_rule("tf:split")
def _tf_split(call: Call) -> list[Shape]:
    shape = need(call.first())
    spec = call.param(1, "num_or_size_splits")
    return split_shapes(shape, spec, call.param(2, "axis", 0), False, "tf.split")


@shape_rule(
    "tf:math.reduce_mean", "tf:math.reduce_sum", "tf:math.reduce_max", "tf:math.reduce_min",
    "tf:math.reduce_prod", "tf:math.reduce_std", "tf:math.reduce_variance", "tf:math.reduce_any",
    "tf:math.reduce_all", "tf:math.reduce_logsumexp", "tf:reduce_mean", "tf:reduce_sum", "tf:reduce_max",
    "tf:reduce_min",
)  # fmt: skip
def _tf_reduce(call: Call) -> Shape:
    keep = call.param(2, "keepdims", call.kwargs.get("keep_dims", False))
    out = reduce_shape(need(call.first()), call.param(1, "axis"), bool(keep))
    if call.config.get("function", "").endswith(("_any", "_all")):
        _set_dtype(call, "bool")
    return out


@shape_rule("tf:math.argmax", "tf:math.argmin", "tf:argmax", "tf:argmin")
def _tf_argmax(call: Call) -> Shape:
    shape = need(call.first())
    axis = call.param(1, "axis", 0)
    _set_dtype(call, str(call.kwargs.get("output_type") or "int64"))
    return reduce_shape(shape, 0 if axis is None else axis, False)


@shape_rule("tf:expand_dims")
def _tf_expand(call: Call) -> Shape:
    return expand_shape(need(call.first()), call.param(1, "axis"))


@shape_rule("tf:squeeze")
def _tf_squeeze(call: Call) -> Shape:
    return squeeze_shape(need(call.first()), call.param(1, "axis"))


@shape_rule("tf:transpose", "tf:compat.v1.transpose", "tf:linalg.transpose")
def _tf_transpose(call: Call) -> Shape:
    return transpose_shape(need(call.first()), call.param(1, "perm", call.kwargs.get("a")))


@shape_rule("tf:linalg.matmul", "tf:matmul", "tf:__operators__.matmul")
def _tf_matmul(call: Call) -> Shape:
    a = operand_shape(call.param(0, "a"))
    b = operand_shape(call.param(1, "b"))
    if a is None or b is None:
        raise Unknown()
    if call.kwargs.get("transpose_a") or call.kwargs.get("adjoint_a"):
        a = (*a[:-2], a[-1], a[-2])
    if call.kwargs.get("transpose_b") or call.kwargs.get("adjoint_b"):
        b = (*b[:-2], b[-1], b[-2])
    return matmul_shape(a, b)


@shape_rule("tf:tile")
def _tf_tile(call: Call) -> Shape:
    return tile_shape(need(call.first()), call.param(1, "multiples"))


@shape_rule("tf:__operators__.getitem")
def _tf_getitem(call: Call) -> Shape:
    shape = need(call.first())
    spec = call.param(1, "slice_spec")
    return getitem_shape(shape, spec)


@shape_rule("tf:image.resize", "tf:compat.v1.image.resize")
def _tf_resize(call: Call) -> Shape:
    shape = need(call.first())
    size = call.param(1, "size")
    if not isinstance(size, list | tuple) or len(size) != 2 or len(shape) not in (3, 4):
        raise Unknown()
    return (*shape[:-3], size[0], size[1], shape[-1])


def dtype_of_inputs(call: Call) -> str | None:
    return _float_of_inputs(call)
