"""Keras activations as ONNX nodes (the semantics of ``modelgraph.runner.activations``).

Elementwise activations keep the stored layout of their input; axis activations (softmax,
log_softmax) work on Keras's layout.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from modelgraph.errors import UnsupportedConfigError
from modelgraph.runner.activations import activation_name
from modelgraph.saving.onnx.emitter import Emitter, Value

_SELU_ALPHA = 1.6732632423543772
_SELU_SCALE = 1.0507009873554805


def _f(e: Emitter, value: float) -> str:
    return e.const(np.float32(value), "c")


def elementwise(e: Emitter, name: str, x: str, keras_major: int) -> str | None:
    """``name`` applied elementwise to tensor ``x``; None when ``name`` is not elementwise."""
    op = e.op
    if name == "linear":
        return x
    from modelgraph import catalogue

    registered = catalogue.function_spec("activation", name)
    if registered is not None:  # a plugin's activation (catalogue.register_activation)
        return registered.onnx(e, x) if callable(registered.onnx) else None
    simple = {
        "relu": "Relu",
        "sigmoid": "Sigmoid",
        "tanh": "Tanh",
        "softplus": "Softplus",
        "softsign": "Softsign",
        "exponential": "Exp",
    }
    if name in simple:
        return op(simple[name], [x], name)
    if name == "relu6":
        return op("Clip", [x, _f(e, 0.0), _f(e, 6.0)], name)
    if name == "elu":
        return op("Elu", [x], name, alpha=1.0)
    if name == "selu":
        return op("Selu", [x], name, alpha=_SELU_ALPHA, gamma=_SELU_SCALE)
    if name == "hard_sigmoid":
        if keras_major < 3:
            return op("HardSigmoid", [x], name, alpha=0.2, beta=0.5)
        return op("HardSigmoid", [x], name, alpha=1.0 / 6.0, beta=0.5)
    if name in ("hard_silu", "hard_swish"):
        return op("Mul", [x, op("HardSigmoid", [x], name, alpha=1.0 / 6.0, beta=0.5)], name)
    if name in ("swish", "silu"):
        return op("Mul", [x, op("Sigmoid", [x], name)], name)
    if name == "gelu":
        return op(
            "Mul",
            [
                op("Mul", [x, _f(e, 0.5)], name),
                op("Add", [_f(e, 1.0), op("Erf", [op("Div", [x, _f(e, 2**0.5)], name)], name)], name),
            ],
            name,
        )
    if name == "leaky_relu":
        return op("LeakyRelu", [x], name, alpha=0.2)
    if name == "mish":
        return op("Mul", [x, op("Tanh", [op("Softplus", [x], name)], name)], name)
    if name == "celu":
        return op("Celu", [x], name, alpha=1.0)
    if name == "hard_tanh":
        return op("Clip", [x, _f(e, -1.0), _f(e, 1.0)], name)
    if name == "tanh_shrink":
        return op("Sub", [x, op("Tanh", [x], name)], name)
    if name == "log_sigmoid":
        return op("Neg", [op("Softplus", [op("Neg", [x], name)], name)], name)
    if name == "soft_shrink":
        return op("Shrink", [x], name, lambd=0.5, bias=0.5)
    if name == "hard_shrink":
        return op("Shrink", [x], name, lambd=0.5, bias=0.0)
    if name in ("sparse_plus", "sparse_sigmoid"):
        one, minus_one = _f(e, 1.0), _f(e, -1.0)
        if name == "sparse_sigmoid":
            return op("Clip", [op("Mul", [op("Add", [x, one]), _f(e, 0.5)]), _f(e, 0.0), one], name)
        sq = op("Mul", [op("Add", [x, one]), op("Add", [x, one])])
        inner = op("Where", [op("Less", [x, one]), op("Div", [sq, _f(e, 4.0)]), x])
        return op("Where", [op("LessOrEqual", [x, minus_one]), _f(e, 0.0), inner], name)
    if name == "squareplus":
        return op(
            "Div",
            [
                op(
                    "Add",
                    [x, op("Sqrt", [op("Add", [op("Mul", [x, x], name), _f(e, 4.0)], name)], name)],
                    name,
                ),
                _f(e, 2.0),
            ],
            name,
        )
    return None


def _halves(e: Emitter, x: str) -> list[str]:
    """The two halves of the last axis (opset 17 Split needs the sizes)."""
    last = e.op("Slice", [e.op("Shape", [x]), e.ints([-1], "s"), e.ints([2**62], "e")])
    half = e.op("Div", [last, e.ints([2], "two")])
    return e.op("Split", [x, e.op("Concat", [half, half], axis=0)], "glu", outputs=2, axis=-1)


def _sparsemax(e: Emitter, x: str, size: int) -> str:
    """Keras 3's sparsemax over the last axis (its threshold: (sum of the cumulative sums over the
    support - 1) / k, see modelgraph.runner.activations.sparsemax)."""
    z = e.op("TopK", [x, e.ints([size], "k")], "sparsemax", outputs=2, axis=-1, largest=1, sorted=1)[0]
    cumsum = e.op("CumSum", [z, e.ints(-1, "axis")])
    r = e.const(np.arange(1, size + 1, dtype=np.float32), "r")
    support = e.op(
        "Greater", [e.op("Sub", [z, e.op("Div", [e.op("Sub", [cumsum, _f(e, 1.0)]), r])]), _f(e, 0.0)]
    )
    k = e.reduce("ReduceSum", e.cast(support, "float32"), [-1], 1)
    picked = e.reduce("ReduceSum", e.op("Where", [support, cumsum, _f(e, 0.0)]), [-1], 1)
    tau = e.op("Div", [e.op("Sub", [picked, _f(e, 1.0)]), k])
    return e.op("Relu", [e.op("Sub", [x, tau])], "sparsemax")


def apply(
    e: Emitter,
    value: Any,
    x: Value,
    keras_version: tuple[int, int, int],
    class_name: str,
    layer: str,
    last_size: int | None = None,
) -> Value:
    """The Keras activation named by a config value applied to ``x`` (a Value); ``last_size`` (the
    static size of the last axis) is needed by sparsemax only."""
    name = activation_name(value)
    if name is None:
        raise UnsupportedConfigError(class_name, "activation", value, layer)
    out = elementwise(e, name, x.name, keras_version[0])
    if out is not None:
        return Value(out, x.rank, x.perm, x.dtype)
    logical = e.logical(x)
    if name == "softmax":
        return Value(e.op("Softmax", [logical], name, axis=-1), x.rank)
    if name == "log_softmax":
        return Value(e.op("LogSoftmax", [logical], name, axis=-1), x.rank)
    if name == "sparsemax" and last_size is not None:
        return Value(_sparsemax(e, logical, last_size), x.rank)
    if name == "glu":
        a, b = (
            e.op("Split", [logical], name, outputs=2, axis=-1, num_outputs=2)
            if e.opset >= 18
            else _halves(e, logical)
        )
        return Value(e.op("Mul", [a, e.op("Sigmoid", [b])], name), x.rank)
    raise UnsupportedConfigError(class_name, "activation", value, layer)
