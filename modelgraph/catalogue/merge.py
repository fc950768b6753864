"""Merge layers (Add, Concatenate, ...) and Keras 1's Merge."""

from collections.abc import Mapping
from typing import Any

from modelgraph import weight_names as wn
from modelgraph.catalogue.spec import NO_KERNEL, WEIGHTLESS, Fusion, MaskBehaviour, layer, layers, masks

#: Keras 1's ``Merge`` (the layer behind its ``merge()`` function) by ``mode``: the Keras 2 layer each
#: mode became (``cos`` and callable modes have none).
KERAS1_MERGE_MODES = {
    "sum": "Add",
    "mul": "Multiply",
    "ave": "Average",
    "max": "Maximum",
    "concat": "Concatenate",
    "dot": "Dot",
}


def keras1_merge(config: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """Keras 1's ``Merge`` as the Keras 2 layer of its mode (left as ``Merge`` when it has none: a
    callable mode, ``cos``)."""
    mode = config.get("mode")
    target = KERAS1_MERGE_MODES.get(mode) if isinstance(mode, str) else None
    if target is None or config.get("mode_type", "raw") != "raw":
        return "Merge", dict(config)
    out = {k: config[k] for k in ("name", "trainable") if k in config}
    if target == "Concatenate":
        out["axis"] = config.get("concat_axis", -1)
    elif target == "Dot":
        out["axes"] = config.get("dot_axes", -1)
        out["normalize"] = False
    return target, out


# tf.keras ANDs the masks present, Keras 3 ORs them and has none if one input has none.
_AND_OR = masks(MaskBehaviour(None, "and"), MaskBehaviour(None, "or"))
# Keras 3's Multiply, Maximum and Minimum also read their inputs' masks in call(): a masked
# position counts as 1 / takes the other operand's value (kernels/merge.py).
_READ_IN_CALL = masks(
    MaskBehaviour(None, "and"), MaskBehaviour("merge", "or", note="call() reads the inputs' masks")
)

SPECS = (
    # The fusion passes run a sum in the epilogue of the step making one of its terms.
    layer("Add", **WEIGHTLESS, masks=_AND_OR, fusion=Fusion(sums=True)),
    *layers(("Average", "Subtract"), **WEIGHTLESS, masks=_AND_OR),
    *layers(("Maximum", "Minimum"), **WEIGHTLESS, masks=_READ_IN_CALL),
    # The fusion passes scale the kernel rows of the 1x1 conv reading a product instead of the tensor.
    layer("Multiply", **WEIGHTLESS, masks=_READ_IN_CALL, fusion=Fusion(multiplies=True)),
    layer(
        "Concatenate",
        **WEIGHTLESS,
        input_axis=True,
        masks=masks(MaskBehaviour(None, "concat_all"), MaskBehaviour(None, "concat_any")),
    ),
    layer("Dot", weight_names=wn.no_weights),
    layer("Merge", keras_versions=("1",), kernel=NO_KERNEL, keras1_class=keras1_merge, **WEIGHTLESS),
)
