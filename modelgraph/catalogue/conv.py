"""Convolution layers (Keras 1 to 3 names)."""

from modelgraph import weight_names as wn
from modelgraph.catalogue.spec import NO_KERNEL, Alias, layer

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
    layer("DepthwiseConv1D", weight_names=wn.kernel_bias),
    layer("DepthwiseConv2D", weight_names=wn.kernel_bias),
    layer("SeparableConv1D", aliases=(Alias("SeparableConvolution1D", "2"),), weight_names=wn.separable),
    layer("SeparableConv2D", aliases=(Alias("SeparableConvolution2D", "2"),), weight_names=wn.separable),
)
