"""Convolution layers (Keras 1 to 3 names), and Keras's rule for grouped convolutions."""

from __future__ import annotations

from typing import Any

from modelgraph import weight_names as wn
from modelgraph.catalogue import upgrades
from modelgraph.catalogue.spec import NO_KERNEL, Alias, ConfigSpec, layer, layers


def check_groups(groups: Any, in_channels: int | None, filters: int | None) -> int:
    """A convolution's ``groups`` (None means 1), checked as Keras checks it when it builds the layer:
    TypeError when it is not a positive integer, ValueError when the input channels or the filters
    do not split into that many groups (an unknown count is not checked). Shape inference and the
    kernel both ask this."""
    groups = 1 if groups is None else groups
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        raise TypeError(f"groups={groups!r} is not a positive integer")
    if in_channels is not None and in_channels % groups:
        raise ValueError(f"{in_channels} input channels are not divisible by groups={groups}")
    if filters is not None and filters % groups:
        raise ValueError(f"filters={filters} is not divisible by groups={groups}")
    return groups


SPECS = (
    *layers(("AtrousConvolution1D", "AtrousConvolution2D"), keras_versions=("1",), kernel=NO_KERNEL),
    *(
        layer(f"Conv{n}D", aliases=(Alias(f"Convolution{n}D", "1"),), weight_names=wn.kernel_bias)
        for n in (1, 2, 3)
    ),
    layer("Conv1DTranspose", aliases=(Alias("Convolution1DTranspose", "1"),), weight_names=wn.kernel_bias),
    *(
        layer(
            f"Conv{n}DTranspose",
            aliases=(Alias(f"Convolution{n}DTranspose", "1"), Alias(f"Deconv{n}D", "2")),
            weight_names=wn.kernel_bias,
        )
        for n in (2, 3)
    ),
    layer("Deconvolution2D", keras_versions=("1",), weight_names=wn.kernel_bias),
    layer("Deconvolution3D", keras_versions=("1",)),
    *layers(
        ("DepthwiseConv1D", "DepthwiseConv2D"),
        config=ConfigSpec(upgrade=upgrades.depthwise),
        weight_names=wn.kernel_bias,
        legacy_weight_names={"depthwise_kernel": "kernel"},  # tf.keras's name for it
    ),
    *(
        layer(
            f"SeparableConv{n}D",
            aliases=(Alias(f"SeparableConvolution{n}D", "2"),),
            config=ConfigSpec(upgrade=upgrades.separable),
            weight_names=wn.separable,
        )
        for n in (1, 2)
    ),
)
