"""Attention layers."""

from modelgraph import weight_names as wn
from modelgraph.catalogue import upgrades, writing
from modelgraph.catalogue.spec import ConfigSpec, Keras3Rules, LegacyH5Rules, MaskBehaviour, layer, masks

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
# tf.keras MultiHeadAttention.call(query, value, key, attention_mask, return_attention_scores, training, use_causal_mask);
# the Keras masks of query/value/key are implicit there, accepted here as keyword arguments.
MHA_CALL_K2 = (
    "query",
    "value",
    "key",
    "attention_mask",
    "return_attention_scores",
    "training",
    "use_causal_mask",
    "query_mask",
    "value_mask",
    "key_mask",
)
"""tf.keras MultiHeadAttention's call arguments, in order (the masks are implicit there)."""

SPECS = (
    layer(
        "AdditiveAttention",
        weight_names=wn.additive_attention,
        masks=_ATTENTION_MASKS,
    ),
    layer(
        "Attention",
        weight_names=wn.attention,
        masks=_ATTENTION_MASKS,
        # tf.keras's Attention(use_scale=True) stored its scale as shape (1,); Keras 3's is a scalar.
        keras3_weight_upgrades={"scale": lambda array: array.reshape(()) if array.size == 1 else array},
    ),
    layer(
        "MultiHeadAttention",
        config=ConfigSpec(upgrade=upgrades.multi_head_attention),
        keras3_rules=Keras3Rules(writing.multi_head_attention),
        # measured with tf_keras 2.21 and Keras 3.15.1
        legacy_h5=LegacyH5Rules(
            refuse=(
                "tf_keras's from_config requires query_shape/key_shape/value_shape keys that Keras 3's "
                "constructor rejects (and Keras 3's .h5 loader does not resolve its value= tensor)"
            )
        ),
        weight_names=wn.wrapped,
        keras3_weights=wn.attention_projections,
        legacy_weight_path=wn.projection_path,
        masks=masks(
            MaskBehaviour(
                "mha",
                "mha_scores",
                MHA_CALL_K2,
                note="returned scores keep the mask its softmax applied (attention_mask argument and causal "
                "mask included), as in Keras 3",
            ),
            MaskBehaviour(
                "call",
                "attention_scores",
                MHA_CALL,
                note="returned scores keep the mask its softmax applied (attention_mask argument included)",
                clears=("query", "value", "key"),
            ),
        ),
    ),
)
