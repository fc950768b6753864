"""Preprocessing layers (those that run at inference)."""

from modelgraph import weight_names as wn
from modelgraph.catalogue.spec import NO_KERNEL, layer, zero_macs

SPECS = (
    layer(
        "AutoContrast", keras_versions=("3",), kernel=NO_KERNEL, macs=zero_macs, weight_names=wn.no_weights
    ),
    layer("CategoryEncoding", kernel=NO_KERNEL, macs=zero_macs, weight_names=wn.no_weights),
    layer(
        "Equalization", keras_versions=("3",), kernel=NO_KERNEL, macs=zero_macs, weight_names=wn.no_weights
    ),
    layer("Normalization", macs=zero_macs, weight_names=wn.normalization, dtype="float32_variables"),
    layer("RandomBrightness", kernel=NO_KERNEL, macs=zero_macs, weight_names=wn.no_weights),
    layer("RandomContrast", kernel=NO_KERNEL, macs=zero_macs, weight_names=wn.no_weights),
    layer("RandomCrop", kernel=NO_KERNEL, macs=zero_macs, weight_names=wn.no_weights),
    layer("RandomFlip", kernel=NO_KERNEL, macs=zero_macs, weight_names=wn.no_weights),
    layer(
        "RandomGrayscale", keras_versions=("3",), kernel=NO_KERNEL, macs=zero_macs, weight_names=wn.no_weights
    ),
    layer("RandomRotation", kernel=NO_KERNEL, macs=zero_macs, weight_names=wn.no_weights),
    layer("RandomTranslation", kernel=NO_KERNEL, macs=zero_macs, weight_names=wn.no_weights),
    layer("RandomZoom", kernel=NO_KERNEL, macs=zero_macs, weight_names=wn.no_weights),
    layer("Rescaling", macs=zero_macs, weight_names=wn.no_weights),
    layer(
        "Solarization", keras_versions=("3",), kernel=NO_KERNEL, macs=zero_macs, weight_names=wn.no_weights
    ),
)
