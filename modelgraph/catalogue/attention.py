"""Attention layers."""

from modelgraph import weight_names as wn
from modelgraph.catalogue import upgrades
from modelgraph.catalogue.spec import ConfigSpec, MaskBehaviour, layer, masks

ATTENTION_CALL = ("inputs", "mask", "training", "return_attention_scores", "use_causal_mask")
"""The call arguments of Attention / AdditiveAttention, in order."""
_ATTENTION_MASKS = masks(
    MaskBehaviour("list", "query"),
    MaskBehaviour("call", "query", ATTENTION_CALL),
)
MHA_CALL = (
    "query",
    "value",
    "key",
    "query_mask",
    "value_mask",
    "key_mask",
    "attention_mask",
    "return_attention_scores",
    "training",
    "use_causal_mask",
)
"""Keras 3 MultiHeadAttention's call arguments, in order."""

SPECS = (
    layer(
        "AdditiveAttention",
        weight_names=wn.additive_attention,
        masks=_ATTENTION_MASKS,
    ),
    layer("Attention", weight_names=wn.attention, masks=_ATTENTION_MASKS),
    layer(
        "MultiHeadAttention",
        config=ConfigSpec(upgrade=upgrades.multi_head_attention),
        weight_names=wn.wrapped,
        keras3_weights=wn.attention_projections,
        masks=masks(
            MaskBehaviour("mha", "mha_scores"),
            MaskBehaviour(
                "call",
                "attention_scores",
                MHA_CALL,
                note="call() also clears the masks of its input tensors; returned scores keep the mask "
                "its softmax applied (attention_mask argument included)",
            ),
        ),
    ),
)
