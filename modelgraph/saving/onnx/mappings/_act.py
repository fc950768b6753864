"""Keras's built-in activations as ONNX nodes, attached as the lowerings of the catalogue's entries
(the semantics of ``modelgraph.runner.activations``, whose kernels attach to the same entries).

Elementwise activations keep the stored layout of their input; the others (softmax, log_softmax,
glu, sparsemax) work on Keras's layout, along the last axis. A plugin's activation is looked up
the same way (:func:`modelgraph.catalogue.register_activation`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from modelgraph import catalogue
from modelgraph.errors import UnsupportedConfigError
from modelgraph.runner.activations import activation_name
from modelgraph.saving.onnx._onnx import numpy_helper
from modelgraph.saving.onnx.emitter import Emitter, Value

_SELU_ALPHA = 1.6732632423543772
_SELU_SCALE = 1.0507009873554805


def _f(e: Emitter, value: float) -> str:
    return e.const(np.float32(value), "c")


def elementwise(e: Emitter, name: str, x: str, keras_major: int) -> str | None:
    """The elementwise activation ``name`` (as Keras ``keras_major`` means it) applied to tensor ``x``
    in whatever layout it is stored; None when ``name`` is not a registered elementwise activation
    with a lowering."""
    spec = catalogue.function_spec("activation", name, keras_major)
    if spec is None or not spec.elementwise or not callable(spec.onnx):
        return None
    return spec.onnx(e, x)


def _lowering(name: str, lower: Callable[..., str], keras_version: str | None = None) -> None:
    """Attach ``lower(e, x, name)`` as the ONNX lowering of the built-in activation ``name`` (its
    nodes named after it)."""
    catalogue.attach_function("activation", name, "onnx", partial(lower, name=name), keras_version)


def _single(op_type: str, **attrs: Any) -> Callable[..., str]:
    """One ONNX node of ``op_type`` with ``attrs``."""
    return lambda e, x, name: e.op(op_type, [x], name, **attrs)


def _relu6(e: Emitter, x: str, name: str) -> str:
    return e.op("Clip", [x, _f(e, 0.0), _f(e, 6.0)], name)


def _hard_silu(e: Emitter, x: str, name: str) -> str:
    return e.op("Mul", [x, e.op("HardSigmoid", [x], name, alpha=1.0 / 6.0, beta=0.5)], name)


def _silu(e: Emitter, x: str, name: str) -> str:
    return e.op("Mul", [x, e.op("Sigmoid", [x], name)], name)


def _gelu(e: Emitter, x: str, name: str) -> str:
    op = e.op
    half_x = op("Mul", [x, _f(e, 0.5)], name)
    return op(
        "Mul",
        [half_x, op("Add", [_f(e, 1.0), op("Erf", [op("Div", [x, _f(e, 2**0.5)], name)], name)], name)],
        name,
    )


def _mish(e: Emitter, x: str, name: str) -> str:
    return e.op("Mul", [x, e.op("Tanh", [e.op("Softplus", [x], name)], name)], name)


def _hard_tanh(e: Emitter, x: str, name: str) -> str:
    return e.op("Clip", [x, _f(e, -1.0), _f(e, 1.0)], name)


def _tanh_shrink(e: Emitter, x: str, name: str) -> str:
    return e.op("Sub", [x, e.op("Tanh", [x], name)], name)


def _log_sigmoid(e: Emitter, x: str, name: str) -> str:
    return e.op("Neg", [e.op("Softplus", [e.op("Neg", [x], name)], name)], name)


def _sparse_plus(e: Emitter, x: str, name: str) -> str:
    op = e.op
    one, minus_one = _f(e, 1.0), _f(e, -1.0)
    sq = op("Mul", [op("Add", [x, one]), op("Add", [x, one])])
    inner = op("Where", [op("Less", [x, one]), op("Div", [sq, _f(e, 4.0)]), x])
    return op("Where", [op("LessOrEqual", [x, minus_one]), _f(e, 0.0), inner], name)


def _sparse_sigmoid(e: Emitter, x: str, name: str) -> str:
    op = e.op
    one = _f(e, 1.0)
    return op("Clip", [op("Mul", [op("Add", [x, one]), _f(e, 0.5)]), _f(e, 0.0), one], name)


def _squareplus(e: Emitter, x: str, name: str) -> str:
    op = e.op
    root = op("Sqrt", [op("Add", [op("Mul", [x, x], name), _f(e, 4.0)], name)], name)
    return op("Div", [op("Add", [x, root], name), _f(e, 2.0)], name)


_lowering("linear", lambda e, x, name: x)
_lowering("relu", _single("Relu"))
_lowering("sigmoid", _single("Sigmoid"))
_lowering("tanh", _single("Tanh"))
_lowering("softplus", _single("Softplus"))
_lowering("softsign", _single("Softsign"))
_lowering("exponential", _single("Exp"))
_lowering("relu6", _relu6)
_lowering("elu", _single("Elu", alpha=1.0))
_lowering("selu", _single("Selu", alpha=_SELU_ALPHA, gamma=_SELU_SCALE))
_lowering("hard_sigmoid", _single("HardSigmoid", alpha=0.2, beta=0.5), keras_version="2")
_lowering("hard_sigmoid", _single("HardSigmoid", alpha=1.0 / 6.0, beta=0.5), keras_version="3")
_lowering("hard_silu", _hard_silu)
_lowering("hard_swish", _hard_silu)
_lowering("swish", _silu)
_lowering("silu", _silu)
_lowering("gelu", _gelu)
_lowering("leaky_relu", _single("LeakyRelu", alpha=0.2))
_lowering("mish", _mish)
_lowering("celu", _single("Celu", alpha=1.0))
_lowering("hard_tanh", _hard_tanh)
_lowering("tanh_shrink", _tanh_shrink)
_lowering("log_sigmoid", _log_sigmoid)
_lowering("soft_shrink", _single("Shrink", lambd=0.5, bias=0.5))
_lowering("hard_shrink", _single("Shrink", lambd=0.5, bias=0.0))
_lowering("sparse_plus", _sparse_plus)
_lowering("sparse_sigmoid", _sparse_sigmoid)
_lowering("squareplus", _squareplus)


def _halves(e: Emitter, x: str) -> list[str]:
    """The two halves of the last axis (opset 17 Split needs the sizes)."""
    last = e.op("Slice", [e.op("Shape", [x]), e.ints([-1], "s"), e.ints([2**62], "e")])
    half = e.op("Div", [last, e.ints([2], "two")])
    return e.op("Split", [x, e.op("Concat", [half, half], axis=0)], "glu", outputs=2, axis=-1)


def _glu(e: Emitter, x: str, name: str) -> str:
    a, b = e.op("Split", [x], name, outputs=2, axis=-1, num_outputs=2) if e.opset >= 18 else _halves(e, x)
    return e.op("Mul", [a, e.op("Sigmoid", [b])], name)


def _sparsemax(e: Emitter, x: str, name: str) -> str:
    """Keras 3's sparsemax over the last axis (its threshold: (sum of the cumulative sums over the
    support - 1) / k, see modelgraph.runner.activations.sparsemax); the size of the last axis is
    read when the model runs."""
    size = e.op("Slice", [e.op("Shape", [x]), e.ints([-1], "s"), e.ints([2**62], "e")])  # (1,) int64
    z = e.op("TopK", [x, size], name, outputs=2, axis=-1, largest=1, sorted=1)[0]
    cumsum = e.op("CumSum", [z, e.ints(-1, "axis")])
    ones = e.op(
        "ConstantOfShape", [e.op("Shape", [z])], value=numpy_helper.from_array(np.ones(1, np.float32))
    )
    r = e.op("CumSum", [ones, e.ints(-1, "axis")], "r")  # 1, 2, ..., size along the last axis
    support = e.op(
        "Greater", [e.op("Sub", [z, e.op("Div", [e.op("Sub", [cumsum, _f(e, 1.0)]), r])]), _f(e, 0.0)]
    )
    k = e.reduce("ReduceSum", e.cast(support, "float32"), [-1], 1)
    picked = e.reduce("ReduceSum", e.op("Where", [support, cumsum, _f(e, 0.0)]), [-1], 1)
    tau = e.op("Div", [e.op("Sub", [picked, _f(e, 1.0)]), k])
    return e.op("Relu", [e.op("Sub", [x, tau])], name)


_lowering("softmax", _single("Softmax", axis=-1))
_lowering("log_softmax", _single("LogSoftmax", axis=-1))
_lowering("glu", _glu)
_lowering("sparsemax", _sparsemax)


def apply(
    e: Emitter,
    value: Any,
    x: Value,
    keras_version: tuple[int, int, int],
    class_name: str,
    layer: str,
) -> Value:
    """The activation named by a config value (a registered one: modelgraph's own or a plugin's, as
    the Keras version that wrote the file means it) applied to ``x``: an elementwise one in ``x``'s
    stored layout, another one in Keras's."""
    name = activation_name(value)
    spec = catalogue.function_spec("activation", name, keras_version[0]) if name is not None else None
    if spec is None or not callable(spec.onnx):
        raise UnsupportedConfigError(class_name, "activation", value, layer)
    if spec.elementwise:
        return Value(spec.onnx(e, x.name), x.rank, x.perm, x.dtype)
    return Value(spec.onnx(e, e.logical(x)), x.rank)
