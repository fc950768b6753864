"""modelgraph plugin: ``PositionEmbedding``, a learned positional embedding.

The layer is keras-hub's (``keras_hub.layers.PositionEmbedding``, also written by hand in many
transformer examples): one weight ``embeddings`` of shape ``(sequence_length, features)``; the output
is its first ``time`` rows broadcast to the input's shape, which the model then adds to the tokens.

Load it with ``modelgraph --plugin examples/plugins/position_embedding.py run model.keras --random``.
"""

from __future__ import annotations

import numpy as np

from modelgraph.catalogue import Keras3Writing, LayerSpec, register
from modelgraph.catalogue.spec import PROPAGATES_MASK, zero_macs
from modelgraph.shape_rules import ShapeError


def shape(call):
    """The output has the input's shape; a sequence longer than the table is a broken model."""
    x = call.x()
    length = call.get("sequence_length")
    if len(x) < 2:
        raise ShapeError(f"PositionEmbedding expects (batch, time, features), got {x}", "rank")
    if x[-2] is not None and isinstance(length, int) and x[-2] > length:
        raise ShapeError(f"PositionEmbedding: {x[-2]} time steps, but sequence_length={length}", "config")
    return x


def weight_shapes(config, input_shapes):
    return {"embeddings": (config["sequence_length"], input_shapes[0][-1])}


def kernel(spec):
    table = spec.weight("embeddings").astype(np.float32)

    def run(x):
        time, features = x.shape[-2], x.shape[-1]
        return np.broadcast_to(table[:time, :features], x.shape).astype(np.float32)

    return run


def onnx(ctx, x):
    e = ctx.e
    x = ctx.x(x)
    dims = e.op("Shape", [x])
    time = e.op("Slice", [dims, e.ints([-2]), e.ints([-1])])  # the input's time steps, a 1-D tensor
    rows = e.op("Slice", [ctx.const(ctx.weight("embeddings")), e.ints([0]), time, e.ints([0])])
    return e.op("Expand", [rows, dims])


def upgrade(config):
    """Older copies of the layer call the length ``max_length``; Keras 3's reads ``sequence_length``."""
    out = dict(config)
    if "max_length" in out:
        out["sequence_length"] = out.pop("max_length")
    return out


register(
    LayerSpec(
        "PositionEmbedding",
        weight_names=("embeddings",),
        weight_shapes=weight_shapes,
        shape=shape,
        macs=zero_macs,
        kernel=kernel,
        onnx=onnx,
        masks=PROPAGATES_MASK,
        keras3=Keras3Writing(registered_name="plugins>PositionEmbedding", upgrade=upgrade),
    )
)
