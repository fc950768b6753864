"""Lazy access to arrays in HDF5 files (Keras 3 trees, legacy layouts), refusing unsafe HDF5 features."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from modelgraph import safe_io
from modelgraph.errors import FormatError
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
    """A Keras 3 weights tree spread over one or more open HDF5 files (shards)."""
    root = "layers"
    if not any(_has(f, "layers") for f in files) and any(
        _has(f, "_layer_checkpoint_dependencies") for f in files
    ):
        root = "_layer_checkpoint_dependencies"  # tf.keras 2.13 wrote this prefix

    def lookup(path: str) -> Mapping[str, StoredArray] | None:
        found: dict[str, StoredArray] = {}
        seen = False
        for f in files:
            group = safe_io.safe_group(f, path, required=False)
            if group is None:
                continue
            seen = True
            try:
                keys = list(group.keys())
            except safe_io.H5_ERRORS as exc:
                raise FormatError(f"{source}: cannot list {path}: {exc}") from None
            for key in keys:
                item = safe_io.safe_dataset(group, key, required=False)
                if item is not None:
                    found[key] = stored_array(item, key, f"{source}:/{path}/{key}")
        return found if seen else None

    return Keras3Tree(lookup, root)


def _has(f: Any, name: str) -> bool:
    return safe_io.safe_group(f, name, required=False) is not None
