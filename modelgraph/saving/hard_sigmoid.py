"""Keras 1/2's ``hard_sigmoid`` in a Keras 3 file, exactly: as Keras 3's, on inputs scaled by 1.2.

Keras 1 and 2 computed ``hard_sigmoid(x) = clip(0.2 x + 0.5, 0, 1)``; Keras 3's is
``clip(x / 6 + 0.5, 0, 1)``, so the old one is Keras 3's applied to ``1.2 x``. Where the activation's
input is a linear function of a layer's weights (a Dense or convolution output, a recurrent gate's
pre-activation), scaling exactly those weights by 1.2 makes Keras 3's ``hard_sigmoid`` compute the
old numbers (to float32 rounding). The recurrent layers apply ``recurrent_activation`` to some gates
only: the gates' column blocks are in the catalogue (``catalogue.recurrent.RECURRENT_ACTIVATION_GATES``).
A layer without weights (an ``Activation`` layer) applies its ``activation`` to its input as it is:
in a ``.keras`` file the writer scales that input by 1.2 with a ``Multiply`` op node in front of it
(:func:`modelgraph.saving.hard_sigmoid_inputs.plan_scaled_inputs`). Anything else (an LSTM's cell ``activation``) has no such rewrite and
stays refused (the writer says :data:`NOT_RESCALABLE`). See ``docs/writing.md`` ("hard_sigmoid").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from modelgraph import catalogue
from modelgraph.catalogue.recurrent import RECURRENT_ACTIVATION_GATES

SCALE = 1.2  # 0.2 / (1 / 6)
Transform = Callable[[np.ndarray], np.ndarray]


def uses_hard_sigmoid(config: Mapping[str, Any]) -> bool:
    """Whether any activation of this layer config is ``hard_sigmoid``."""
    return any(k.endswith("activation") and v == "hard_sigmoid" for k, v in config.items())


def weight_scales(class_name: str, config: Mapping[str, Any]) -> dict[str, Transform] | None:
    """``{weight name: transform}`` that keeps a Keras 1/2 layer's ``hard_sigmoid`` exact under Keras
    3's; empty when it has none; None when no rescaling keeps it exact (:data:`NOT_RESCALABLE`)."""
    transforms: dict[str, Transform] = {}
    spec = catalogue.spec_for(class_name)
    linear = spec.linear_weights if spec is not None else ()
    for key, value in config.items():
        if not key.endswith("activation") or value != "hard_sigmoid":
            continue
        if key == "activation" and is_weightless(class_name):
            continue  # its input is scaled instead (hard_sigmoid_inputs)
        if key == "activation" and linear:
            for name in linear:  # the entry's weights the activation's input is linear in
                transforms[name] = _scaled_all
        elif key == "recurrent_activation" and class_name in RECURRENT_ACTIVATION_GATES:
            gates, count = RECURRENT_ACTIVATION_GATES[class_name]
            for name in ("kernel", "recurrent_kernel", "bias"):
                transforms[name] = _scaled_blocks(gates, count)
        else:
            return None
    return transforms


def is_weightless(class_name: str) -> bool:
    """Whether the catalogue says the class has no weights (its activation acts on its input)."""
    spec = catalogue.spec_for(class_name)
    return spec is not None and getattr(spec.weight_names, "no_weights", False)


NOT_RESCALABLE = (
    "'hard_sigmoid' means clip(0.2x+0.5) in Keras 1/2; Keras 3's differs and this layer's input to it "
    "is not a product of its weights that can be rescaled"
)


def _scaled_all(array: np.ndarray) -> np.ndarray:
    array = np.asarray(array)
    return (array * np.asarray(SCALE, dtype=array.dtype)).astype(array.dtype)


def _scaled_blocks(gates: tuple[int, ...], count: int) -> Transform:
    """Scale the column blocks ``gates`` of ``count`` equal blocks along the last axis."""

    def scale(array: np.ndarray) -> np.ndarray:
        array = np.asarray(array)
        width = array.shape[-1] // count
        factors = np.ones(array.shape[-1], dtype=array.dtype)
        for gate in gates:
            factors[gate * width : (gate + 1) * width] = SCALE
        return (array * factors).astype(array.dtype)

    return scale
