"""Keras's built-in activation functions, by the name a config stores.

They are registered with :func:`modelgraph.catalogue.register_activation`, the call a plugin makes
for its own activations, and their implementations attach to the entries like a built-in layer's:
the NumPy kernels from :mod:`modelgraph.runner.activations`, the ONNX lowerings from
:mod:`modelgraph.saving.onnx.mappings._act`.

Every Keras version means the same function by each name but one: ``hard_sigmoid`` is
``clip(0.2 x + 0.5, 0, 1)`` in Keras 1 and 2 (and tf.keras) and ``relu6(x + 3) / 6`` in Keras 3, so it
has one entry per meaning, each naming the versions whose files mean it.
"""

from __future__ import annotations

#: Applied to each value on its own (the exporter keeps the stored layout of their input).
ELEMENTWISE = (
    "linear", "relu", "relu6", "sigmoid", "tanh", "softplus", "softsign", "exponential", "elu", "selu",
    "hard_silu", "hard_swish", "swish", "silu", "gelu", "leaky_relu", "mish", "celu", "squareplus",
    "sparse_plus", "soft_shrink", "hard_shrink", "hard_tanh", "tanh_shrink", "log_sigmoid",
    "sparse_sigmoid",
)  # fmt: skip

#: Along the last axis (they see the tensor in Keras's layout).
ALONG_LAST_AXIS = ("softmax", "log_softmax", "glu", "sparsemax")

#: One name, a meaning per group of Keras versions: ``(name, versions)``.
BY_VERSION = (
    ("hard_sigmoid", ("1", "2")),
    ("hard_sigmoid", ("3",)),
)
