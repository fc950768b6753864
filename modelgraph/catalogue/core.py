"""Core layers: Dense, EinsumDense, Embedding, activations, dropout and noise, Lambda, the model input."""

from collections.abc import Mapping
from typing import Any

from modelgraph import weight_names as wn
from modelgraph.catalogue import upgrades, writing
from modelgraph.catalogue.spec import (
    FED,
    NEEDS_SHAPES,
    NO_KERNEL,
    NO_SHAPE_RULE,
    PASS_MASK,
    PROPAGATES_MASK,
    WEIGHTLESS,
    ConfigSpec,
    Fusion,
    Keras3Rules,
    LegacyH5Rules,
    MaskBehaviour,
    layer,
    layers,
    masks,
    zero_macs,
)

# Keras 3 stores a quantized kernel's variables in this order after the float ones (its
# variable_serialization_spec, Keras 3.15); bias is skipped when absent, so later indices shift.
KERNEL_QUANTIZED = {
    "int8": ("kernel_scale",),
    "int4": ("kernel_scale",),
    "int4_grouped": ("kernel_zero", "g_idx"),
}


def activation_of(config: Mapping[str, Any]) -> Any:
    """An ``Activation`` layer is the activation its config names."""
    return config.get("activation")


def relu_activation(config: Mapping[str, Any]) -> str | None:
    """A ``ReLU`` without slope or threshold is ``relu``, capped at a plain 6 ``relu6``; None for
    any other settings (another cap, a malformed value: its kernel runs or refuses them)."""
    slope = config.get("negative_slope", config.get("alpha", 0.0)) or 0.0
    threshold = config.get("threshold", 0.0) or 0.0
    if slope != 0.0 or threshold != 0.0:
        return None
    cap = config.get("max_value")
    if cap is None:
        return "relu"
    plain = isinstance(cap, int | float) and not isinstance(cap, bool)
    return "relu6" if plain and float(cap) == 6.0 else None


def _embedding_ids(config: Mapping[str, Any]) -> int | None:
    """An Embedding's ids are in ``[0, input_dim)`` (None when ``input_dim`` is unusable: its kernel
    refuses it)."""
    size = config.get("input_dim")
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        return None
    return size


SPECS = (
    *layers(("ActivityRegularization", "ELU", "LeakyReLU"), **WEIGHTLESS, masks=PROPAGATES_MASK),
    layer("Activation", **WEIGHTLESS, masks=PROPAGATES_MASK, fusion=Fusion(activation=activation_of)),
    layer("ReLU", **WEIGHTLESS, masks=PROPAGATES_MASK, fusion=Fusion(activation=relu_activation)),
    # Keras 3 dropped it: written as the ReLU that computes the same.
    layer(
        "ThresholdedReLU",
        **WEIGHTLESS,
        masks=masks(k2=PASS_MASK),
        keras3_rules=Keras3Rules(writing.thresholded_relu, class_name="ReLU"),
    ),
    *layers(
        ("AlphaDropout", "GaussianDropout", "GaussianNoise"),
        training_sensitive=True,
        **WEIGHTLESS,
        masks=PROPAGATES_MASK,
    ),
    *(
        layer(
            key,
            config=ConfigSpec(upgrade=upgrades.dropout),
            training_sensitive=True,
            **WEIGHTLESS,
            masks=PROPAGATES_MASK,
            dtype="follows_input",
            keras3_rules=rules,
        )
        for key, rules in (
            ("Dropout", None),
            *((f"SpatialDropout{n}D", Keras3Rules(writing.spatial_dropout)) for n in (1, 2, 3)),
        )
    ),
    layer(
        "Dense",
        config=ConfigSpec(upgrade=upgrades.dense),
        linear_weights=("kernel", "bias"),
        weight_names=wn.kernel_bias,
        quantized_weight_names=KERNEL_QUANTIZED,
        masks=PROPAGATES_MASK,
        fusion=Fusion(channel_axis=1),
        input_quantizer_axis=-1,
    ),
    layer("EinsumDense", weight_names=wn.einsum_dense, quantized_weight_names=KERNEL_QUANTIZED),
    layer(
        "Embedding",
        config=ConfigSpec(upgrade=upgrades.embedding),
        keras3_rules=Keras3Rules(writing.embedding),
        macs=zero_macs,
        weight_names=wn.embeddings,
        keras1_weight_names={"kernel": "embeddings"},
        id_range=_embedding_ids,
        quantized_weight_names={
            "int8": ("embeddings_scale",),
            "int4": ("embeddings_scale",),
            "int4_grouped": ("embeddings_zero", "g_idx"),
        },
        masks=masks(
            MaskBehaviour(None, "embedding"),
            MaskBehaviour(None, "embedding", note="supports_masking = mask_zero"),
        ),
    ),
    # tf_keras's Identity never sets supports_masking (it drops the mask); Keras 3's keeps it.
    layer("Identity", **WEIGHTLESS, dtype="follows_input", masks=masks(k3=PASS_MASK), keeps_values=True),
    layer(
        "InputLayer",
        config=ConfigSpec(upgrade=upgrades.keras1_input),
        kernel=FED,
        **WEIGHTLESS,
        keras3_rules=Keras3Rules(writing.input_layer),
        legacy_h5=LegacyH5Rules(renamed_keys={"batch_shape": "batch_input_shape"}),
    ),
    layer(
        "Lambda",
        shape=NO_SHAPE_RULE,
        kernel=NO_KERNEL,
        macs=NEEDS_SHAPES,
        weight_names=wn.no_weights,
        keras3_rules=Keras3Rules(
            refuse="a Lambda layer carries Python bytecode, which is never executed or written"
        ),
    ),
    layer(
        "Masking",
        **WEIGHTLESS,
        masks=masks(MaskBehaviour(None, "masking"), MaskBehaviour(None, "masking")),
        keeps_values=True,
    ),
    layer("PReLU", macs=zero_macs, weight_names=wn.alpha, masks=PROPAGATES_MASK),
    layer(
        "Softmax",
        **WEIGHTLESS,
        input_axis=True,
        masks=masks(MaskBehaviour("first", "pass"), MaskBehaviour("call", "pass", ("inputs", "mask"))),
    ),
)
