"""Normalization layers.

``RMSNormalization`` is the example of a class described in full in its catalogue module: its config
defaults, weight names and shapes, shape rule, MAC rule and reference kernel all sit below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from modelgraph import weight_names as wn
from modelgraph.catalogue import upgrades, writing
from modelgraph.catalogue.spec import (
    NO_KERNEL,
    PASS_MASK,
    PROPAGATES_MASK,
    WEIGHTLESS,
    ConfigSpec,
    Fusion,
    Keras3Rules,
    MaskBehaviour,
    layer,
    layers,
    masks,
    zero_macs,
)

if TYPE_CHECKING:
    from modelgraph.runner.registry import KernelSpec
    from modelgraph.shape_rules import Call, Shape


# --- RMSNormalization (Keras 3.9+): x * rsqrt(mean(x**2 over axis) + epsilon) * scale --------------


def _rms_axes(axis: Any, rank: int) -> tuple[int, ...]:
    """The normalized axes as non-negative indices; ValueError when one is out of range."""
    axes = axis if isinstance(axis, list | tuple) else [axis]
    if not axes or not all(
        isinstance(a, int) and not isinstance(a, bool) and -rank <= a < rank for a in axes
    ):
        raise ValueError(f"RMSNormalization axis {axis!r} is out of range for a rank-{rank} input")
    return tuple(sorted(a % rank for a in axes))


def _rms_shape(call: Call) -> Shape:
    from modelgraph.shape_rules import ShapeError

    shape = call.x()
    try:
        _rms_axes(call.get("axis", -1), len(shape))
    except ValueError as exc:
        raise ShapeError(str(exc), "config") from None
    return shape


def _rms_weight_shapes(config: Mapping[str, Any], ins: list[Shape | None]) -> dict[str, Shape]:
    from modelgraph.shape_rules import need

    shape = need(ins[0] if ins else None)
    try:
        axes = _rms_axes(config.get("axis", -1), len(shape))
    except ValueError as exc:
        from modelgraph.shape_rules import ShapeError

        raise ShapeError(str(exc), "config") from None
    return {"scale": tuple(shape[a] for a in axes)}


def _rms_kernel(spec: KernelSpec) -> Callable[[Any], Any]:
    import numpy as np

    axis = spec.get("axis", -1)
    epsilon = spec.get("epsilon", 1e-6)
    if not isinstance(epsilon, int | float) or isinstance(epsilon, bool):
        raise spec.unsupported("epsilon", epsilon)
    scale = spec.weight("scale")

    def run(x: Any) -> Any:
        x = np.asarray(x)
        try:
            axes = _rms_axes(axis, x.ndim)
        except ValueError:
            raise spec.unsupported("axis", axis) from None
        # Keras computes in at least float32 and casts the result back to the input's dtype.
        wide = x.astype(np.result_type(x.dtype, np.float32), copy=False)
        mean_square = np.mean(np.square(wide), axis=axes, keepdims=True)
        out = wide / np.sqrt(mean_square + wide.dtype.type(epsilon))
        return (out * scale.astype(wide.dtype, copy=False)).astype(x.dtype, copy=False)

    return run


def _rms_weight_names(config: Mapping[str, Any]) -> tuple[str, ...]:
    return ("scale",)


#: Keras keeps these layers' statistics in float32 under mixed precision; they count no MACs.
_FLOAT32_STATISTICS: dict[str, Any] = {"macs": zero_macs, "dtype": "float32_variables"}
_AXIS_UPGRADE = ConfigSpec(upgrade=upgrades.normalization_axis)

SPECS = (
    *layers(
        ("BatchNormalizationV1", "BatchNormalizationV2", "SyncBatchNormalization"),
        keras_versions=("2",),
        kernel=NO_KERNEL,
        macs=zero_macs,
    ),
    layer(
        "BatchNormalization",
        config=ConfigSpec(upgrade=upgrades.keras1_batch_normalization),
        keras3_rules=Keras3Rules(writing.batch_norm),
        training_sensitive=True,
        frozen_is_inference=True,
        non_trainable_weights=("moving_mean", "moving_variance"),
        input_axis=True,
        fusion=Fusion(batchnorm=True),
        weight_names=wn.batch_normalization,
        masks=masks(
            PASS_MASK,
            MaskBehaviour(
                None, "pass", note="call(inputs, training, mask) uses the mask for batch moments only"
            ),
        ),
        **_FLOAT32_STATISTICS,
    ),
    layer(
        "GroupNormalization",
        config=_AXIS_UPGRADE,
        input_axis=True,
        weight_names=wn.gamma_beta,
        masks=masks(k3=PASS_MASK),
        **_FLOAT32_STATISTICS,
    ),
    layer(
        "LayerNormalization",
        config=_AXIS_UPGRADE,
        input_axis=True,
        weight_names=wn.layer_normalization,
        masks=PROPAGATES_MASK,
        **_FLOAT32_STATISTICS,
    ),
    layer(
        "RMSNormalization",
        keras_versions=("3",),
        input_axis=True,
        config=ConfigSpec({"axis": -1, "epsilon": 1e-6}),
        weight_names=_rms_weight_names,
        weight_shapes=_rms_weight_shapes,
        shape=_rms_shape,
        macs=zero_macs,
        kernel=_rms_kernel,
    ),
    layer(
        "UnitNormalization",
        **WEIGHTLESS,
        input_axis=True,
        masks=PROPAGATES_MASK,
        dtype="float32_variables",
    ),
)
