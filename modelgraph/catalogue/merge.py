"""Merge layers (Add, Concatenate, ...) and Keras 1's Merge."""

from modelgraph import weight_names as wn
from modelgraph.catalogue.spec import NO_KERNEL, WEIGHTLESS, MaskBehaviour, layer, layers, masks

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

SPECS = (
    # tf.keras ANDs the masks present, Keras 3 ORs them and has none if one input has none.
    *layers(
        ("Add", "Average", "Subtract"),
        **WEIGHTLESS,
        masks=masks(MaskBehaviour(None, "and"), MaskBehaviour(None, "or")),
    ),
    # Keras 3's Multiply, Maximum and Minimum also read their inputs' masks in call(): a masked
    # position counts as 1 / takes the other operand's value (kernels/merge.py).
    *layers(
        ("Maximum", "Minimum", "Multiply"),
        **WEIGHTLESS,
        masks=masks(
            MaskBehaviour(None, "and"), MaskBehaviour("merge", "or", note="call() reads the inputs' masks")
        ),
    ),
    layer(
        "Concatenate",
        **WEIGHTLESS,
        input_axis=True,
        masks=masks(MaskBehaviour(None, "concat_all"), MaskBehaviour(None, "concat_any")),
    ),
    layer("Dot", weight_names=wn.no_weights),
    layer("Merge", keras_versions=("1",), kernel=NO_KERNEL, **WEIGHTLESS),
)
