"""Reshaping layers: padding, cropping, upsampling, reshape, permute."""

from modelgraph.catalogue.spec import WEIGHTLESS, layers

SPECS = (
    *layers(
        ("CenterCrop", "Resizing"),
        **WEIGHTLESS,
    ),
    *layers(
        (
            "Cropping1D",
            "Cropping2D",
            "Cropping3D",
            "Flatten",
            "Permute",
            "RepeatVector",
            "Reshape",
            "UpSampling1D",
            "UpSampling2D",
            "UpSampling3D",
            "ZeroPadding1D",
            "ZeroPadding2D",
            "ZeroPadding3D",
        ),
        **WEIGHTLESS,
        dtype="follows_input",
    ),
)
