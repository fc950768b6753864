"""Reshaping layers: padding, cropping, upsampling, reshape, permute."""

from modelgraph.catalogue import upgrades
from modelgraph.catalogue.spec import WEIGHTLESS, ConfigSpec, layer, layers

SPECS = (
    *layers(
        ("CenterCrop", "Resizing"),
        **WEIGHTLESS,
    ),
    *layers(
        (
            "Flatten",
            "Permute",
            "RepeatVector",
            "Reshape",
        ),
        **WEIGHTLESS,
        dtype="follows_input",
        keeps_values=True,
    ),
    layer(
        "Cropping1D",
        **WEIGHTLESS,
        config=ConfigSpec(upgrade=upgrades.dim_ordering),
        dtype="follows_input",
        keeps_values=True,
    ),
    *layers(
        (
            "Cropping2D",
            "Cropping3D",
            "UpSampling1D",
            "UpSampling2D",
            "UpSampling3D",
            "ZeroPadding1D",
            "ZeroPadding2D",
            "ZeroPadding3D",
        ),
        **WEIGHTLESS,
        config=ConfigSpec(upgrade=upgrades.dim_ordering),
        dtype="follows_input",
    ),
)
