"""modelgraph plugin: ``gelu_tanh``, a custom activation function registered by name.

A model whose Keras code defines ``@keras.saving.register_keras_serializable(package="plugins")
def gelu_tanh(x)`` (GELU, tanh approximation, as in GPT-2 and BERT ports) and uses it as
``Dense(activation=gelu_tanh)`` or ``Activation(gelu_tanh)`` stores the name ``plugins>gelu_tanh``.
Registered here, every layer that names it runs and exports; ``convert`` keeps the name as it is.
"""

from __future__ import annotations

import numpy as np

from modelgraph.catalogue import register_activation

C = 0.7978845608028654  # sqrt(2 / pi)


def kernel(x):
    """The activation in NumPy (elementwise, keeping the input's dtype)."""
    return (0.5 * x * (1.0 + np.tanh(C * (x + 0.044715 * x * x * x)))).astype(x.dtype, copy=False)


def onnx(e, x):
    """The activation as ONNX nodes: ``x`` is a tensor name; returns the output's name."""
    cube = e.op("Mul", [e.op("Mul", [x, x]), x])
    inner = e.op(
        "Mul", [e.op("Add", [x, e.op("Mul", [cube, e.const(np.float32(0.044715))])]), e.const(np.float32(C))]
    )
    gate = e.op("Add", [e.const(np.float32(1.0)), e.op("Tanh", [inner])])
    return e.op("Mul", [e.op("Mul", [x, e.const(np.float32(0.5))]), gate])


register_activation("gelu_tanh", kernel=kernel, onnx=onnx)
