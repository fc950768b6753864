"""Lazy access to arrays in HDF5 files (Keras 3 trees, legacy layouts), refusing unsafe HDF5 features."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from modelgraph import safe_io
from modelgraph.loading.weights import Keras3Tree, StoredArray


def stored_array(dset: Any, name: str, location: str) -> StoredArray:
    """Describe one HDF5 dataset without reading it; reading goes through safe_io's checks."""
    dt = dset.dtype
    dtype = "bfloat16" if dt.kind == "V" and dt.itemsize == 2 else str(dt)
    shape = tuple(int(d) for d in dset.shape)

    def reader(dset: Any = dset) -> np.ndarray:
        return safe_io.read_dataset(dset, untagged_v2_is_bfloat16=True)

    return StoredArray(name, shape, dtype, location, reader)


def keras3_tree(files: Sequence[Any], source: str) -> Keras3Tree:
    """A Keras 3 weights tree spread over one or more open HDF5 files (shards).

    Each file is indexed once (:func:`modelgraph.safe_io.safe_tree`); lookups are then dict reads.
    """
    indexes = [safe_io.safe_tree(f) for f in files]
    root = "layers"
    if not any("layers" in idx for idx in indexes) and any(
        "_layer_checkpoint_dependencies" in idx for idx in indexes
    ):
        root = "_layer_checkpoint_dependencies"  # tf.keras 2.13 wrote this prefix

    def lookup(path: str) -> Mapping[str, StoredArray] | None:
        found: dict[str, StoredArray] = {}
        seen = False
        for idx in indexes:
            datasets = idx.get(path.strip("/"))
            if datasets is None:
                continue
            seen = True
            for key, dset in datasets.items():
                found[key] = stored_array(dset, key, f"{source}:/{path}/{key}")
        return found if seen else None

    return Keras3Tree(lookup, root)
