"""Reshaping layers: padding, cropping, upsampling, reshape, permute."""

from modelgraph import weight_names as wn
from modelgraph.catalogue.spec import layer, zero_macs

SPECS = (
    layer("CenterCrop", macs=zero_macs, weight_names=wn.no_weights),
    layer("Cropping1D", macs=zero_macs, weight_names=wn.no_weights, dtype="follows_input"),
    layer("Cropping2D", macs=zero_macs, weight_names=wn.no_weights, dtype="follows_input"),
    layer("Cropping3D", macs=zero_macs, weight_names=wn.no_weights, dtype="follows_input"),
    layer("Flatten", macs=zero_macs, weight_names=wn.no_weights, dtype="follows_input"),
    layer("Permute", macs=zero_macs, weight_names=wn.no_weights, dtype="follows_input"),
    layer("RepeatVector", macs=zero_macs, weight_names=wn.no_weights, dtype="follows_input"),
    layer("Reshape", macs=zero_macs, weight_names=wn.no_weights, dtype="follows_input"),
    layer("Resizing", macs=zero_macs, weight_names=wn.no_weights),
    layer("UpSampling1D", macs=zero_macs, weight_names=wn.no_weights, dtype="follows_input"),
    layer("UpSampling2D", macs=zero_macs, weight_names=wn.no_weights, dtype="follows_input"),
    layer("UpSampling3D", macs=zero_macs, weight_names=wn.no_weights, dtype="follows_input"),
    layer("ZeroPadding1D", macs=zero_macs, weight_names=wn.no_weights, dtype="follows_input"),
    layer("ZeroPadding2D", macs=zero_macs, weight_names=wn.no_weights, dtype="follows_input"),
    layer("ZeroPadding3D", macs=zero_macs, weight_names=wn.no_weights, dtype="follows_input"),
)
