"""Pooling layers: for each rank 1-3, max and average pooling and their global forms."""

from collections.abc import Mapping
from typing import Any

from modelgraph.catalogue import upgrades
from modelgraph.catalogue.spec import (
    DROPS_MASK,
    WEIGHTLESS,
    Alias,
    ConfigSpec,
    Fusion,
    MaskBehaviour,
    layer,
    masks,
)
from modelgraph.layer_params import plain_ints

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


def pool_takes_zero_padding(config: Mapping[str, Any], pads: list[list[int]]) -> bool:
    """A valid 2-D pooling reads explicit zero pads narrower than its pool itself: no window is then
    all padding; a max pooling window that reaches into it takes the max with 0, an average pooling
    window counts its padded cells as zeros (divided by the pool's area)."""
    pool = plain_ints(config.get("pool_size", 2))
    if pool is None or config.get("padding", "valid") != "valid":
        return False
    pool = pool * 2 if len(pool) == 1 else pool
    return len(pool) == 2 and all(max(p) < k for p, k in zip(pads, pool, strict=True))


#: What the fusion passes may do with a pooling layer: share one call among calls of the same config
#: on the same tensor (every pooling), and merge explicit zero padding into the valid 2-D ones.
_SHAREABLE = Fusion(shareable=True)
_FUSION = {
    "MaxPooling2D": Fusion(shareable=True, takes_zero_padding=pool_takes_zero_padding),
    "AveragePooling2D": Fusion(shareable=True, takes_zero_padding=pool_takes_zero_padding),
}

SPECS = tuple(
    layer(
        f"{name}{n}D",
        aliases=(Alias(f"{alias}{n}D", "2, 3"),),
        **WEIGHTLESS,
        config=ConfigSpec(upgrade=upgrades.dim_ordering if name.startswith("Global") else upgrades.pooling),
        masks=_MASKED.get(f"{name}{n}D", DROPS_MASK),
        fusion=_FUSION.get(f"{name}{n}D", _SHAREABLE),
    )
    for name, alias in _POOLINGS
    for n in (1, 2, 3)
)
