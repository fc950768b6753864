"""Reshaping layers: padding, cropping, upsampling, reshape, permute."""

from collections.abc import Mapping
from typing import Any

from modelgraph.catalogue import upgrades
from modelgraph.catalogue.spec import WEIGHTLESS, ConfigSpec, Fusion, layer, layers
from modelgraph.layer_params import zero_pads_2d


def zero_padding_2d(config: Mapping[str, Any]) -> list[list[int]] | None:
    """ZeroPadding2D's explicit pads (``padding`` defaults to 1), for the window op after it."""
    return zero_pads_2d(config.get("padding", 1))


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
            "ZeroPadding3D",
        ),
        **WEIGHTLESS,
        config=ConfigSpec(upgrade=upgrades.dim_ordering),
        dtype="follows_input",
    ),
    layer(
        "ZeroPadding2D",
        **WEIGHTLESS,
        config=ConfigSpec(upgrade=upgrades.dim_ordering),
        dtype="follows_input",
        fusion=Fusion(zero_padding=zero_padding_2d),
    ),
)
