"""Attention layers."""

from modelgraph import weight_names as wn
from modelgraph.catalogue import upgrades
from modelgraph.catalogue.spec import ConfigSpec, Masks, layer

SPECS = (
    layer(
        "AdditiveAttention",
        weight_names=wn.additive_attention,
        masks=Masks(produces="attention", consumes="list"),
    ),
    layer("Attention", weight_names=wn.attention, masks=Masks(produces="attention", consumes="list")),
    layer(
        "MultiHeadAttention",
        config=ConfigSpec(upgrade=upgrades.multi_head_attention),
        weight_names=wn.wrapped,
        keras3_weights=wn.attention_projections,
        masks=Masks(produces="multi_head_attention", consumes="mha"),
    ),
)
