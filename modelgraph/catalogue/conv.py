"""Convolution layers (Keras 1 to 3 names), and Keras's rule for grouped convolutions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modelgraph import weight_names as wn
from modelgraph.catalogue import upgrades, writing
from modelgraph.catalogue.spec import NO_KERNEL, Alias, ConfigSpec, Fusion, Keras3Rules, layer, layers


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


KERAS1_CONV = ConfigSpec(upgrade=upgrades.convolution)


def keras1_kernel(rank: int, array: Any, channels_first: bool, theano: bool) -> Any:
    """A Keras 1 ``Convolution{rank}D`` kernel in Keras 2's layout (spatial axes, input channels,
    filters). Keras 1 stored a 1D kernel with an extra unit axis (``(length, 1, in, filters)``, or
    ``(filters, in, length, 1)`` before 1.2) and a ``th``-ordered one filters-first; its Theano backend
    computed a true convolution, i.e. with the kernel's spatial axes reversed."""
    if rank == 1:
        if array.shape[1] != 1 and array.shape[3] == 1:  # Keras 1.1: (filters, in, length, 1)
            array = array.transpose(2, 3, 1, 0)
        array = array[:, 0, :, :]
    elif channels_first:
        array = array.transpose(*range(2, 2 + rank), 1, 0)
    if theano:
        array = array[(slice(None, None, -1),) * rank]
    return array


# The convolution kinds: the shape, weight and MAC rules of each attach to every class of the kind.
CONVOLUTIONS = ("Conv1D", "Conv2D", "Conv3D", "AtrousConvolution1D", "AtrousConvolution2D")
TRANSPOSED_CONVOLUTIONS = (
    "Conv1DTranspose",
    "Conv2DTranspose",
    "Conv3DTranspose",
    "Deconvolution2D",
    "Deconvolution3D",
)
DEPTHWISE_CONVOLUTIONS = ("DepthwiseConv1D", "DepthwiseConv2D")
SEPARABLE_CONVOLUTIONS = ("SeparableConv1D", "SeparableConv2D")


def one_group(config: Mapping[str, Any], _pads: Any = None) -> bool:
    """An ungrouped convolution (``groups`` 1 or unset): what the fused Conv2D kernels compute."""
    return (config.get("groups") or 1) == 1


def any_padding(_config: Mapping[str, Any], _pads: Any) -> bool:
    """A window op that reads any explicit zero padding itself (DepthwiseConv2D)."""
    return True


# What the runner's fusion passes may merge each convolution with (see spec.Fusion): every one
# absorbs a BatchNormalization on its channels; Conv2D and DepthwiseConv2D are also the stages of an
# inverted bottleneck, read zero padding themselves, and a Conv2D takes a residual sum.
CONV_FUSION = {
    1: Fusion(channel_axis=2),
    2: Fusion(channel_axis=3, bottleneck="pointwise", residual=True, takes_zero_padding=one_group),
    3: Fusion(channel_axis=4),
}
DEPTHWISE_FUSION = {
    1: Fusion(channel_axis=2, depthwise=True),
    2: Fusion(channel_axis=3, depthwise=True, bottleneck="depthwise", takes_zero_padding=any_padding),
}
# A 2-D separable conv also applies the ReLU and zero padding before it to its depthwise row slabs.
SEPARABLE_FUSION = {1: Fusion(channel_axis=2), 2: Fusion(channel_axis=3, separable=True)}


def _keras1_kernel(rank: int) -> Any:
    def convert(array: Any, config: Any, theano: bool) -> Any:
        return keras1_kernel(rank, array, config.get("data_format") == "channels_first", theano)

    return convert


SPECS = (
    *layers(("AtrousConvolution1D", "AtrousConvolution2D"), keras_versions=("1",), kernel=NO_KERNEL),
    *(
        layer(
            f"Conv{n}D",
            aliases=(Alias(f"Convolution{n}D", "1"),),
            config=KERAS1_CONV,
            weight_names=wn.kernel_bias,
            linear_weights=("kernel", "bias"),
            leading_batch_rank=n + 2,
            keras1_kernel=_keras1_kernel(n),
            # Keras 3 builds a Conv1D for rank-3 inputs only (tf.keras took more, see above).
            keras3_rules=Keras3Rules(exact_input_rank=3) if n == 1 else None,
            fusion=CONV_FUSION[n],
        )
        for n in (1, 2, 3)
    ),
    layer(
        "Conv1DTranspose",
        aliases=(Alias("Convolution1DTranspose", "1"),),
        weight_names=wn.kernel_bias,
        linear_weights=("kernel", "bias"),
        keras3_rules=Keras3Rules(writing.no_groups, exact_input_rank=3),
    ),
    *(
        layer(
            f"Conv{n}DTranspose",
            aliases=(Alias(f"Convolution{n}DTranspose", "1"), Alias(f"Deconv{n}D", "2")),
            weight_names=wn.kernel_bias,
            linear_weights=("kernel", "bias"),
            keras3_rules=Keras3Rules(writing.no_groups),
        )
        for n in (2, 3)
    ),
    layer("Deconvolution2D", keras_versions=("1",), weight_names=wn.kernel_bias),
    layer("Deconvolution3D", keras_versions=("1",)),
    *(
        layer(
            f"DepthwiseConv{n}D",
            config=ConfigSpec(upgrade=upgrades.depthwise),
            weight_names=wn.kernel_bias,
            legacy_weight_names={"depthwise_kernel": "kernel"},  # tf.keras's name for it
            linear_weights=("kernel", "bias"),  # canonical names: the kernel is "kernel"
            keras3_rules=Keras3Rules(writing.no_groups, exact_input_rank=3 if n == 1 else None),
            fusion=DEPTHWISE_FUSION[n],
        )
        for n in (1, 2)
    ),
    *(
        layer(
            f"SeparableConv{n}D",
            aliases=(Alias(f"SeparableConvolution{n}D", "2"),),
            config=ConfigSpec(upgrade=upgrades.separable),
            weight_names=wn.separable,
            linear_weights=("pointwise_kernel", "bias"),
            keras3_rules=Keras3Rules(writing.separable, exact_input_rank=3 if n == 1 else None),
            fusion=SEPARABLE_FUSION[n],
        )
        for n in (1, 2)
    ),
)
