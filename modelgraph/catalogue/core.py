"""Core layers: Dense, EinsumDense, Embedding, activations, dropout and noise, Lambda, the model input."""

from modelgraph import weight_names as wn
from modelgraph.catalogue.spec import FED, NEEDS_SHAPES, NO_KERNEL, NO_SHAPE_RULE, Masks, layer, zero_macs

# Keras 3 stores a quantized kernel's variables in this order after the float ones (its
# variable_serialization_spec, Keras 3.15); bias is skipped when absent, so later indices shift.
KERNEL_QUANTIZED = {
    "int8": ("kernel_scale",),
    "int4": ("kernel_scale",),
    "int4_grouped": ("kernel_zero", "g_idx"),
}

SPECS = (
    layer("Activation", macs=zero_macs, weight_names=wn.no_weights, masks=Masks(produces="propagates")),
    layer(
        "ActivityRegularization",
        macs=zero_macs,
        weight_names=wn.no_weights,
        masks=Masks(produces="propagates"),
    ),
    layer(
        "AlphaDropout",
        training_sensitive=True,
        macs=zero_macs,
        weight_names=wn.no_weights,
        masks=Masks(produces="propagates"),
    ),
    layer(
        "Dense",
        weight_names=wn.kernel_bias,
        quantized_weight_names=KERNEL_QUANTIZED,
        masks=Masks(produces="propagates"),
    ),
    layer(
        "Dropout",
        training_sensitive=True,
        macs=zero_macs,
        weight_names=wn.no_weights,
        masks=Masks(produces="propagates"),
        dtype="follows_input",
    ),
    layer("ELU", macs=zero_macs, weight_names=wn.no_weights, masks=Masks(produces="propagates")),
    layer("EinsumDense", weight_names=wn.einsum_dense, quantized_weight_names=KERNEL_QUANTIZED),
    layer(
        "Embedding",
        macs=zero_macs,
        weight_names=wn.embeddings,
        quantized_weight_names={
            "int8": ("embeddings_scale",),
            "int4": ("embeddings_scale",),
            "int4_grouped": ("embeddings_zero", "g_idx"),
        },
        masks=Masks(produces="embedding_zero"),
    ),
    layer(
        "GaussianDropout",
        training_sensitive=True,
        macs=zero_macs,
        weight_names=wn.no_weights,
        masks=Masks(produces="propagates"),
    ),
    layer(
        "GaussianNoise",
        training_sensitive=True,
        macs=zero_macs,
        weight_names=wn.no_weights,
        masks=Masks(produces="propagates"),
    ),
    layer("Identity", macs=zero_macs, weight_names=wn.no_weights, dtype="follows_input"),
    layer("InputLayer", kernel=FED, macs=zero_macs, weight_names=wn.no_weights),
    layer("Lambda", shape=NO_SHAPE_RULE, kernel=NO_KERNEL, macs=NEEDS_SHAPES, weight_names=wn.no_weights),
    layer("LeakyReLU", macs=zero_macs, weight_names=wn.no_weights, masks=Masks(produces="propagates")),
    layer("Masking", macs=zero_macs, weight_names=wn.no_weights, masks=Masks(produces="masking")),
    layer("PReLU", macs=zero_macs, weight_names=wn.alpha, masks=Masks(produces="propagates")),
    layer("ReLU", macs=zero_macs, weight_names=wn.no_weights, masks=Masks(produces="propagates")),
    layer(
        "Softmax",
        macs=zero_macs,
        weight_names=wn.no_weights,
        masks=Masks(produces="propagates", consumes="first"),
    ),
    layer(
        "SpatialDropout1D",
        training_sensitive=True,
        macs=zero_macs,
        weight_names=wn.no_weights,
        masks=Masks(produces="propagates"),
        dtype="follows_input",
    ),
    layer(
        "SpatialDropout2D",
        training_sensitive=True,
        macs=zero_macs,
        weight_names=wn.no_weights,
        masks=Masks(produces="propagates"),
        dtype="follows_input",
    ),
    layer(
        "SpatialDropout3D",
        training_sensitive=True,
        macs=zero_macs,
        weight_names=wn.no_weights,
        masks=Masks(produces="propagates"),
        dtype="follows_input",
    ),
    layer("ThresholdedReLU", macs=zero_macs, weight_names=wn.no_weights, masks=Masks(produces="propagates")),
)
