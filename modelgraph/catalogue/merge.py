"""Merge layers (Add, Concatenate, ...) and Keras 1's Merge."""

from modelgraph import weight_names as wn
from modelgraph.catalogue.spec import NO_KERNEL, WEIGHTLESS, Masks, layer, layers

SPECS = (
    *layers(
        ("Add", "Average", "Maximum", "Minimum", "Multiply", "Subtract"),
        **WEIGHTLESS,
        masks=Masks(produces="merge_and"),
    ),
    layer("Concatenate", **WEIGHTLESS, masks=Masks(produces="concatenate")),
    layer("Dot", weight_names=wn.no_weights),
    layer("Merge", keras_versions=("1",), kernel=NO_KERNEL, **WEIGHTLESS),
)
