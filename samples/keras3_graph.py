"""Reading a Keras 3 model's graph from inside Keras (dev-time, for the sample generators).

Imports Keras only, never TensorFlow: the caller sets ``KERAS_BACKEND`` before importing this
module (``gen_k3.py`` runs on TensorFlow, ``fuzz/referee.py`` on JAX).
"""

from __future__ import annotations

import keras
import numpy as np


def functional_of(model):
    """The Functional graph of ``model`` (a Sequential's internal one; None if it was never built)."""
    if isinstance(model, keras.Sequential):
        return getattr(model, "_functional", None)
    return model


def feed(model, arrays: dict):
    """``arrays`` (keyed by input layer name) in the structure the model's call takes."""
    fn = functional_of(model)
    if fn is None:
        return next(iter(arrays.values()))
    return keras.tree.map_structure(lambda t: arrays[t._keras_history[0].name], fn._inputs_struct)


def intermediates(model, arrays: dict) -> dict[str, np.ndarray]:
    """Every layer output of the top-level graph as ``intermediate/<layer>/<node>/<tensor>``, the
    node counted among the graph's own calls of the layer."""
    fn = functional_of(model)
    in_model = {id(n) for ns in fn._nodes_by_depth.values() for n in ns}
    keys, tensors = [], []
    for op in fn.operations:
        if isinstance(op, keras.layers.InputLayer):
            continue
        k = 0
        for n in op._inbound_nodes:
            if id(n) not in in_model:
                continue
            for ti, t in enumerate(n.outputs):
                keys.append(f"intermediate/{op.name}/{k}/{ti}")
                tensors.append(t)
            k += 1
    probe = keras.Model(fn.inputs, tensors)
    vals = probe(feed(model, arrays), training=False)
    return {k: np.asarray(keras.ops.convert_to_numpy(v)) for k, v in zip(keys, keras.tree.flatten(vals), strict=True)}
