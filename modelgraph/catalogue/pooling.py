"""Pooling layers: for each rank 1-3, max and average pooling and their global forms."""

from modelgraph.catalogue import upgrades
from modelgraph.catalogue.spec import DROPS_MASK, WEIGHTLESS, Alias, ConfigSpec, MaskBehaviour, layer, masks

# (class prefix, Keras 2/3 export alias prefix)
_POOLINGS = (
    ("MaxPooling", "MaxPool"),
    ("AveragePooling", "AvgPool"),
    ("GlobalMaxPooling", "GlobalMaxPool"),
    ("GlobalAveragePooling", "GlobalAvgPool"),
)
#: GlobalAveragePooling1D takes a mask (a masked mean over time); the others drop it.
_MASKED = {
    "GlobalAveragePooling1D": masks(
        MaskBehaviour("first", "drop"), MaskBehaviour("call", "drop", ("inputs", "mask"))
    )
}

SPECS = tuple(
    layer(
        f"{name}{n}D",
        aliases=(Alias(f"{alias}{n}D", "2, 3"),),
        **WEIGHTLESS,
        config=ConfigSpec(upgrade=upgrades.dim_ordering if name.startswith("Global") else upgrades.pooling),
        masks=_MASKED.get(f"{name}{n}D", DROPS_MASK),
    )
    for name, alias in _POOLINGS
    for n in (1, 2, 3)
)
