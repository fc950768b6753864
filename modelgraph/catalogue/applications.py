"""Layers of keras.applications models that are not in keras.layers."""

from modelgraph import weight_names as wn
from modelgraph.catalogue.spec import WEIGHTLESS, layer, zero_macs

SPECS = (
    layer("CustomScaleLayer", **WEIGHTLESS),
    layer("LayerScale", macs=zero_macs, weight_names=wn.gamma),
)
