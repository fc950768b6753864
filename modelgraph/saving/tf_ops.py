"""tf.keras ``TFOpLambda`` / ``SlicingOpLambda`` calls -> the equivalent Keras 3 operation node.

A tf.keras model that used a TensorFlow function on a symbolic tensor (``x * 3.0``, ``tf.concat``,
``x[:, 1:]``) saved a ``TFOpLambda`` layer whose ``function`` names the TF symbol and whose node
holds the call's arguments. Keras 3 cannot load those layers; it records the same computation as a
raw op node (``{"module": "keras.src.ops.numpy", "class_name": "Add", ...}``). Each TF function whose
semantics a Keras 3 op reproduces exactly gets a converter in the ``keras3_op`` slot of its catalogue
entry (``tf:<function>``), attached below as the kernels attach theirs; any other function is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from modelgraph import catalogue
from modelgraph.graph import TensorRef
from modelgraph.saving.upgrades import NotConvertible


@dataclass(frozen=True)
class OpCall:
    """One Keras 3 op node: its class, its constructor config (without ``name``) and call args."""

    class_name: str
    config: dict[str, Any]
    args: list[Any]


Converter = Callable[[tuple[Any, ...], dict[str, Any]], OpCall]


def convert_tf_op(function: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> OpCall:
    """The Keras 3 op node computing ``tf.<function>(*args, **kwargs)``, or :class:`NotConvertible`."""
    spec = catalogue.spec_for(f"tf:{function}")
    converter = spec.keras3_op if spec is not None else None
    if not callable(converter):
        raise NotConvertible(f"TF function tf.{function} has no Keras 3 op equivalent")
    call_kwargs = {k: v for k, v in kwargs.items() if k != "name"}
    return converter(tuple(args), call_kwargs)


def _take(kwargs: dict[str, Any], function: str, allowed: Mapping[str, Any]) -> dict[str, Any]:
    """The call's keyword arguments with defaults; one the op cannot express is refused."""
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise NotConvertible(f"tf.{function} argument(s) {unknown} have no Keras 3 op equivalent")
    return {k: kwargs.get(k, default) for k, default in allowed.items()}


_REQUIRED = object()


def _first(args: tuple[Any, ...], kwargs: dict[str, Any], function: str, names: Sequence[str]) -> Any:
    if args:
        return args[0]
    for name in names:
        if name in kwargs:
            return kwargs.pop(name)
    raise NotConvertible(f"tf.{function} call without its first argument")


def _unary(op: str, function: str) -> Converter:
    def convert(args: tuple[Any, ...], kwargs: dict[str, Any]) -> OpCall:
        x = _first(args, kwargs, function, ("x", "features"))
        _take(kwargs, function, {})
        return OpCall(op, {}, [x])

    return convert


def _binary(op: str, function: str) -> Converter:
    def convert(args: tuple[Any, ...], kwargs: dict[str, Any]) -> OpCall:
        x = _first(args, kwargs, function, ("x",))
        y = args[1] if len(args) > 1 else kwargs.pop("y", _REQUIRED)
        if y is _REQUIRED:
            raise NotConvertible(f"tf.{function} call without its second operand")
        _take(kwargs, function, {})
        return OpCall(op, {}, [x, y])

    return convert


def _reduction(op: str, function: str, initial: bool) -> Converter:
    """``initial``: the op takes Keras 3's ``initial`` (Max, Min), written as None."""

    def convert(args: tuple[Any, ...], kwargs: dict[str, Any]) -> OpCall:
        x = _first(args, kwargs, function, ("input_tensor",))
        p = _take(kwargs, function, {"axis": None, "keepdims": False})
        config = {"axis": p["axis"], "keepdims": bool(p["keepdims"])}
        if initial:
            config["initial"] = None
        return OpCall(op, config, [x])

    return convert


# (TF function, Keras 3 op) of the element-wise functions; (..., takes initial) of the reductions.
for _f, _op in (
    ("math.negative", "Negative"),
    ("math.abs", "Absolute"),
    ("math.square", "Square"),
    ("math.sqrt", "Sqrt"),
    ("math.rsqrt", "Rsqrt"),
    ("math.exp", "Exp"),
    ("math.log", "Log"),
    ("math.log1p", "Log1p"),
    ("math.expm1", "Expm1"),
    ("math.tanh", "Tanh"),
    ("nn.tanh", "Tanh"),
    ("math.sin", "Sin"),
    ("math.cos", "Cos"),
    ("math.floor", "Floor"),
    ("math.ceil", "Ceil"),
    ("math.sign", "Sign"),
    ("math.reciprocal", "Reciprocal"),
    ("math.logical_not", "LogicalNot"),
    ("math.erf", "Erf"),
    ("nn.relu", "Relu"),
    ("nn.relu6", "Relu6"),
    ("math.sigmoid", "Sigmoid"),
    ("nn.sigmoid", "Sigmoid"),
    ("math.softplus", "Softplus"),
    ("nn.softplus", "Softplus"),
    ("math.softsign", "Softsign"),
    ("nn.softsign", "Softsign"),
    ("nn.selu", "Selu"),
    ("math.log_sigmoid", "LogSigmoid"),
):
    catalogue.attach(f"tf:{_f}", "keras3_op", _unary(_op, _f))
for _f, _op in (
    ("__operators__.add", "Add"),
    ("math.add", "Add"),
    ("math.subtract", "Subtract"),
    ("math.multiply", "Multiply"),
    ("math.truediv", "Divide"),
    ("math.divide", "Divide"),
    ("math.pow", "Power"),
    ("math.maximum", "Maximum"),
    ("math.minimum", "Minimum"),
    ("math.floordiv", "FloorDivide"),
    ("math.floormod", "Mod"),
    ("math.equal", "Equal"),
    ("__operators__.eq", "Equal"),
    ("math.not_equal", "NotEqual"),
    ("__operators__.ne", "NotEqual"),
    ("math.greater", "Greater"),
    ("math.greater_equal", "GreaterEqual"),
    ("math.less", "Less"),
    ("math.less_equal", "LessEqual"),
    ("math.logical_and", "LogicalAnd"),
    ("math.logical_or", "LogicalOr"),
    ("math.logical_xor", "LogicalXor"),
):
    catalogue.attach(f"tf:{_f}", "keras3_op", _binary(_op, _f))
for _f, _op, _initial in (
    ("math.reduce_mean", "Mean", False),
    ("math.reduce_sum", "Sum", False),
    ("math.reduce_max", "Max", True),
    ("math.reduce_min", "Min", True),
    ("math.reduce_std", "Std", False),
    ("math.reduce_variance", "Var", False),
    ("math.reduce_any", "Any", False),
    ("math.reduce_all", "All", False),
    ("math.reduce_logsumexp", "Logsumexp", False),
):
    catalogue.attach(f"tf:{_f}", "keras3_op", _reduction(_op, _f, _initial))


def _list_op(op: str, function: str, default_axis: int | None) -> Converter:
    def convert(args: tuple[Any, ...], kwargs: dict[str, Any]) -> OpCall:
        values = _first(args, kwargs, function, ("values",))
        allowed: dict[str, Any] = {"axis": default_axis if default_axis is not None else _REQUIRED}
        p = _take(kwargs, function, allowed)
        if p["axis"] is _REQUIRED:
            raise NotConvertible(f"tf.{function} call without an axis")
        return OpCall(
            op, {"axis": p["axis"]}, [list(values) if isinstance(values, list | tuple) else [values]]
        )

    return convert


catalogue.provides("keras3_op", "tf:concat")(_list_op("Concatenate", "concat", None))
catalogue.provides("keras3_op", "tf:stack")(_list_op("Stack", "stack", 0))


def _reshape(args: tuple[Any, ...], kwargs: dict[str, Any]) -> OpCall:
    x = _first(args, kwargs, "reshape", ("tensor",))
    shape = args[1] if len(args) > 1 else kwargs.pop("shape", None)
    _take(kwargs, "reshape", {})
    if not isinstance(shape, list | tuple) or not all(isinstance(d, int) for d in shape):
        raise NotConvertible("tf.reshape with a shape that is not a list of integers")
    return OpCall("Reshape", {"newshape": list(shape)}, [x])


def _transpose(args: tuple[Any, ...], kwargs: dict[str, Any]) -> OpCall:
    x = _first(args, kwargs, "transpose", ("a",))
    p = _take(kwargs, "transpose", {"perm": None, "conjugate": False})
    return OpCall("Transpose", {"axes": None if p["perm"] is None else list(p["perm"])}, [x])


def _expand_dims(args: tuple[Any, ...], kwargs: dict[str, Any]) -> OpCall:
    x = _first(args, kwargs, "expand_dims", ("input",))
    p = _take(kwargs, "expand_dims", {"axis": _REQUIRED})
    if not isinstance(p["axis"], int):
        raise NotConvertible("tf.expand_dims without an integer axis")
    return OpCall("ExpandDims", {"axis": p["axis"]}, [x])


def _squeeze(args: tuple[Any, ...], kwargs: dict[str, Any]) -> OpCall:
    x = _first(args, kwargs, "squeeze", ("input",))
    p = _take(kwargs, "squeeze", {"axis": None})
    axis = p["axis"]
    return OpCall("Squeeze", {"axis": list(axis) if isinstance(axis, list | tuple) else axis}, [x])


def _split(args: tuple[Any, ...], kwargs: dict[str, Any]) -> OpCall:
    x = _first(args, kwargs, "split", ("value",))
    p = _take(kwargs, "split", {"num_or_size_splits": _REQUIRED, "axis": 0, "num": None})
    splits = p["num_or_size_splits"]
    if isinstance(splits, int) and not isinstance(splits, bool):
        sections: Any = splits
    elif isinstance(splits, list) and all(isinstance(s, int) and s >= 0 for s in splits):
        sections, total = [], 0
        for size in splits[:-1]:  # sizes -> the indices Keras 3 splits at
            total += size
            sections.append(total)
    else:
        raise NotConvertible(f"tf.split with num_or_size_splits={splits!r}")
    return OpCall("Split", {"indices_or_sections": sections, "axis": p["axis"]}, [x])


def _slice(spec: Any) -> Any:
    if isinstance(spec, Mapping) and set(spec) == {"start", "stop", "step"}:
        return {"class_name": "__slice__", "config": dict(spec)}
    if isinstance(spec, int) and not isinstance(spec, bool):
        return spec
    if spec is None:
        return None
    if isinstance(spec, Mapping) and spec.get("class_name") == "__ellipsis__":
        return {"class_name": "__ellipsis__", "config": {}}
    raise NotConvertible(f"slice element {spec!r} has no Keras 3 form")


def _getitem(args: tuple[Any, ...], kwargs: dict[str, Any]) -> OpCall:
    x = _first(args, kwargs, "__operators__.getitem", ("tensor",))
    p = _take(kwargs, "__operators__.getitem", {"slice_spec": _REQUIRED, "var": None})
    spec = p["slice_spec"]
    if isinstance(spec, TensorRef) or p["var"] is not None:
        raise NotConvertible("slicing by a tensor is not written")
    key = [_slice(s) for s in spec] if isinstance(spec, list) else _slice(spec)
    return OpCall("GetItem", {}, [x, key])


def _matmul(args: tuple[Any, ...], kwargs: dict[str, Any]) -> OpCall:
    a = _first(args, kwargs, "linalg.matmul", ("a",))
    b = args[1] if len(args) > 1 else kwargs.pop("b", _REQUIRED)
    neutral = {"transpose_a": False, "transpose_b": False, "adjoint_a": False, "adjoint_b": False}
    neutral |= {"a_is_sparse": False, "b_is_sparse": False, "output_type": None}
    p = _take(kwargs, "linalg.matmul", neutral)
    if b is _REQUIRED or any(p[k] not in (False, None) for k in p):
        raise NotConvertible("tf.linalg.matmul with transposes or an output type")
    return OpCall("Matmul", {}, [a, b])


def _cast(args: tuple[Any, ...], kwargs: dict[str, Any]) -> OpCall:
    x = _first(args, kwargs, "cast", ("x",))
    p = _take(kwargs, "cast", {"dtype": _REQUIRED})
    if not isinstance(p["dtype"], str):
        raise NotConvertible("tf.cast without a dtype name")
    return OpCall("Cast", {"dtype": p["dtype"]}, [x])


def _softmax(args: tuple[Any, ...], kwargs: dict[str, Any]) -> OpCall:
    x = _first(args, kwargs, "nn.softmax", ("logits",))
    p = _take(kwargs, "nn.softmax", {"axis": None})
    return OpCall("Softmax", {"axis": -1 if p["axis"] is None else p["axis"]}, [x])


def _gelu(args: tuple[Any, ...], kwargs: dict[str, Any]) -> OpCall:
    x = _first(args, kwargs, "nn.gelu", ("features",))
    p = _take(kwargs, "nn.gelu", {"approximate": False})
    return OpCall("Gelu", {"approximate": bool(p["approximate"])}, [x])


def _leaky_relu(args: tuple[Any, ...], kwargs: dict[str, Any]) -> OpCall:
    x = _first(args, kwargs, "nn.leaky_relu", ("features",))
    p = _take(kwargs, "nn.leaky_relu", {"alpha": 0.2})
    return OpCall("LeakyRelu", {"negative_slope": p["alpha"]}, [x])


def _tile(args: tuple[Any, ...], kwargs: dict[str, Any]) -> OpCall:
    x = _first(args, kwargs, "tile", ("input",))
    p = _take(kwargs, "tile", {"multiples": _REQUIRED})
    return OpCall("Tile", {"repeats": list(p["multiples"])}, [x])


catalogue.provides("keras3_op", "tf:reshape")(_reshape)
catalogue.provides("keras3_op", "tf:transpose", "tf:compat.v1.transpose")(_transpose)
catalogue.provides("keras3_op", "tf:expand_dims")(_expand_dims)
catalogue.provides("keras3_op", "tf:squeeze")(_squeeze)
catalogue.provides("keras3_op", "tf:split")(_split)
catalogue.provides("keras3_op", "tf:__operators__.getitem")(_getitem)
catalogue.provides("keras3_op", "tf:linalg.matmul", "tf:__operators__.matmul", "tf:matmul")(_matmul)
catalogue.provides("keras3_op", "tf:cast", "tf:dtypes.cast")(_cast)
catalogue.provides("keras3_op", "tf:nn.softmax")(_softmax)
catalogue.provides("keras3_op", "tf:nn.gelu")(_gelu)
catalogue.provides("keras3_op", "tf:nn.leaky_relu")(_leaky_relu)
catalogue.provides("keras3_op", "tf:tile")(_tile)
