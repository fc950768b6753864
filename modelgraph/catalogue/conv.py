"""Convolution layers (Keras 1 to 3 names), and Keras's rule for grouped convolutions."""

from __future__ import annotations

from typing import Any

from modelgraph import weight_names as wn
from modelgraph.catalogue import upgrades
from modelgraph.catalogue.spec import NO_KERNEL, Alias, ConfigSpec, layer


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
    layer("AtrousConvolution1D", keras_versions=("1",), kernel=NO_KERNEL),
    layer("AtrousConvolution2D", keras_versions=("1",), kernel=NO_KERNEL),
    layer("Conv1D", aliases=(Alias("Convolution1D", "1"),), weight_names=wn.kernel_bias),
    layer("Conv1DTranspose", aliases=(Alias("Convolution1DTranspose", "1"),), weight_names=wn.kernel_bias),
    layer("Conv2D", aliases=(Alias("Convolution2D", "1"),), weight_names=wn.kernel_bias),
    layer(
        "Conv2DTranspose",
        aliases=(
            Alias("Convolution2DTranspose", "1"),
            Alias("Deconv2D", "2"),
        ),
        weight_names=wn.kernel_bias,
    ),
    layer("Conv3D", aliases=(Alias("Convolution3D", "1"),), weight_names=wn.kernel_bias),
    layer(
        "Conv3DTranspose",
        aliases=(
            Alias("Convolution3DTranspose", "1"),
            Alias("Deconv3D", "2"),
        ),
        weight_names=wn.kernel_bias,
    ),
    layer("Deconvolution2D", keras_versions=("1",), weight_names=wn.kernel_bias),
    layer("Deconvolution3D", keras_versions=("1",)),
    layer(
        "DepthwiseConv1D",
        config=ConfigSpec(upgrade=upgrades.depthwise),
        weight_names=wn.kernel_bias,
        legacy_weight_names={"depthwise_kernel": "kernel"},  # tf.keras's name for it
    ),
    layer(
        "DepthwiseConv2D",
        config=ConfigSpec(upgrade=upgrades.depthwise),
        weight_names=wn.kernel_bias,
        legacy_weight_names={"depthwise_kernel": "kernel"},  # tf.keras's name for it
    ),
    layer("SeparableConv1D", aliases=(Alias("SeparableConvolution1D", "2"),), weight_names=wn.separable),
    layer("SeparableConv2D", aliases=(Alias("SeparableConvolution2D", "2"),), weight_names=wn.separable),
)
