"""Preprocessing layers (those that run at inference)."""

from modelgraph import weight_names as wn
from modelgraph.catalogue.spec import NO_KERNEL, PASS_MASK, WEIGHTLESS, layer, layers, masks, zero_macs

SPECS = (
    *layers(
        ("AutoContrast", "Equalization", "RandomGrayscale", "Solarization"),
        keras_versions=("3",),
        kernel=NO_KERNEL,
        **WEIGHTLESS,
    ),
    *layers(
        (
            "CategoryEncoding",
            "RandomBrightness",
            "RandomContrast",
            "RandomCrop",
            "RandomFlip",
            "RandomRotation",
            "RandomTranslation",
            "RandomZoom",
        ),
        kernel=NO_KERNEL,
        **WEIGHTLESS,
    ),
    layer(
        "Normalization",
        macs=zero_macs,
        non_trainable_weights=("mean", "variance", "count"),
        weight_dtypes={"count": "int64"},
        input_axis=True,
        weight_names=wn.normalization,
        dtype="float32_variables",
        masks=masks(k3=PASS_MASK),
    ),
    layer("Rescaling", **WEIGHTLESS, masks=masks(k3=PASS_MASK)),
)
