"""modelgraph plugin: ``AttentionWeightedAverage``, attention-weighted average pooling over time.

The layer comes from DeepMoji (and its many copies in text classifiers): one weight ``W`` of shape
``(features, 1)`` scores every time step, a softmax over time turns the scores into weights, and the
output is the weighted average of the time steps, ``(batch, features)``; with
``return_attention=True`` the weights are a second output, ``(batch, time)``.

Load it with ``modelgraph --plugin examples/plugins/attention_pooling.py inspect model.keras``.
"""

from __future__ import annotations

import numpy as np

from modelgraph.catalogue import Keras3Writing, LayerSpec, register
from modelgraph.shape_rules import ShapeError

EPSILON = 1e-7  # keras.config.epsilon(), added to the softmax's denominator by the layer


def shape(call):
    """Output shapes from the input's: ``(batch, features)`` [and ``(batch, time)``]."""
    x = call.x()  # the input's shape, e.g. (None, 12, 16)
    if len(x) != 3:
        raise ShapeError(f"AttentionWeightedAverage expects (batch, time, features), got {x}", "rank")
    pooled = (x[0], x[2])
    return [pooled, (x[0], x[1])] if call.get("return_attention", False) else pooled


def weight_shapes(config, input_shapes):
    """The weights Keras creates in ``build``: ``W`` of shape (features, 1)."""
    return {"W": (input_shapes[0][-1], 1)}


def macs(layer, inputs, outputs, call):
    """Per sample: the scores (time x features) and the weighted sum (time x features)."""
    _, time, features = inputs[0].shape
    return 2 * time * features


def _attention(x, w):
    logits = (x @ w)[..., 0]
    ai = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return ai / (ai.sum(axis=1, keepdims=True) + EPSILON)


def kernel(spec):
    """The NumPy kernel: called once per layer with its config and weights, returns the function."""
    w = spec.weight("W").astype(np.float32)
    return_attention = spec.flag("return_attention")

    def run(x):
        att = _attention(x, w)
        pooled = (x * att[..., None]).sum(axis=1)
        return (pooled, att) if return_attention else pooled

    return run


def onnx(ctx, x):
    """The ONNX lowering: the same steps as ONNX nodes (``x`` arrives in Keras's layout)."""
    e = ctx.e
    x = ctx.x(x)
    logits = e.op("Squeeze", [e.op("MatMul", [x, ctx.const(ctx.weight("W"))]), e.ints([-1])])
    shifted = e.op("Sub", [logits, e.reduce("ReduceMax", logits, [-1], keepdims=1)])
    ai = e.op("Exp", [shifted])
    total = e.op("Add", [e.reduce("ReduceSum", ai, [1], keepdims=1), ctx.const(EPSILON)])
    att = e.op("Div", [ai, total])
    weighted = e.op("Mul", [x, e.op("Unsqueeze", [att, e.ints([-1])])])
    pooled = e.reduce("ReduceSum", weighted, [1], keepdims=0)
    return (pooled, att) if ctx.flag("return_attention") else pooled


register(
    LayerSpec(
        "AttentionWeightedAverage",
        weight_names=("W",),
        weight_shapes=weight_shapes,
        shape=shape,
        macs=macs,
        kernel=kernel,
        onnx=onnx,
        keras3=Keras3Writing(registered_name="plugins>AttentionWeightedAverage"),
    )
)
