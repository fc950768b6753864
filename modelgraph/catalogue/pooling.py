"""Pooling layers."""

from modelgraph import weight_names as wn
from modelgraph.catalogue.spec import Alias, Masks, layer, zero_macs

SPECS = (
    layer(
        "AveragePooling1D", aliases=(Alias("AvgPool1D", "2, 3"),), macs=zero_macs, weight_names=wn.no_weights
    ),
    layer(
        "AveragePooling2D", aliases=(Alias("AvgPool2D", "2, 3"),), macs=zero_macs, weight_names=wn.no_weights
    ),
    layer(
        "AveragePooling3D", aliases=(Alias("AvgPool3D", "2, 3"),), macs=zero_macs, weight_names=wn.no_weights
    ),
    layer(
        "GlobalAveragePooling1D",
        aliases=(Alias("GlobalAvgPool1D", "2, 3"),),
        macs=zero_macs,
        weight_names=wn.no_weights,
        masks=Masks(produces="drops", consumes="first"),
    ),
    layer(
        "GlobalAveragePooling2D",
        aliases=(Alias("GlobalAvgPool2D", "2, 3"),),
        macs=zero_macs,
        weight_names=wn.no_weights,
    ),
    layer(
        "GlobalAveragePooling3D",
        aliases=(Alias("GlobalAvgPool3D", "2, 3"),),
        macs=zero_macs,
        weight_names=wn.no_weights,
    ),
    layer(
        "GlobalMaxPooling1D",
        aliases=(Alias("GlobalMaxPool1D", "2, 3"),),
        macs=zero_macs,
        weight_names=wn.no_weights,
    ),
    layer(
        "GlobalMaxPooling2D",
        aliases=(Alias("GlobalMaxPool2D", "2, 3"),),
        macs=zero_macs,
        weight_names=wn.no_weights,
    ),
    layer(
        "GlobalMaxPooling3D",
        aliases=(Alias("GlobalMaxPool3D", "2, 3"),),
        macs=zero_macs,
        weight_names=wn.no_weights,
    ),
    layer("MaxPooling1D", aliases=(Alias("MaxPool1D", "2, 3"),), macs=zero_macs, weight_names=wn.no_weights),
    layer("MaxPooling2D", aliases=(Alias("MaxPool2D", "2, 3"),), macs=zero_macs, weight_names=wn.no_weights),
    layer("MaxPooling3D", aliases=(Alias("MaxPool3D", "2, 3"),), macs=zero_macs, weight_names=wn.no_weights),
)
