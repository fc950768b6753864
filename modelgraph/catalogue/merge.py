"""Merge layers (Add, Concatenate, ...) and Keras 1's Merge."""

from modelgraph import weight_names as wn
from modelgraph.catalogue.spec import NO_KERNEL, Masks, layer, zero_macs

SPECS = (
    layer("Add", macs=zero_macs, weight_names=wn.no_weights, masks=Masks(produces="merge_and")),
    layer("Average", macs=zero_macs, weight_names=wn.no_weights, masks=Masks(produces="merge_and")),
    layer("Concatenate", macs=zero_macs, weight_names=wn.no_weights, masks=Masks(produces="concatenate")),
    layer("Dot", weight_names=wn.no_weights),
    layer("Maximum", macs=zero_macs, weight_names=wn.no_weights, masks=Masks(produces="merge_and")),
    layer("Merge", keras_versions=("1",), kernel=NO_KERNEL, macs=zero_macs, weight_names=wn.no_weights),
    layer("Minimum", macs=zero_macs, weight_names=wn.no_weights, masks=Masks(produces="merge_and")),
    layer("Multiply", macs=zero_macs, weight_names=wn.no_weights, masks=Masks(produces="merge_and")),
    layer("Subtract", macs=zero_macs, weight_names=wn.no_weights, masks=Masks(produces="merge_and")),
)
