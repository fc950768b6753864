"""Kernels: pooling family (see modelgraph/runner/registry.py for the contract).

TF semantics (KERAS-FORMATS.md 5.1): ``same`` padding puts the extra cell after; max pooling pads with
-inf; average pooling with ``same`` divides by the number of valid (unpadded) cells. ``strides``
defaults to ``pool_size``. Non-overlapping valid pooling is a reshape + reduce; everything else loops
over the pool taps only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from modelgraph.runner.kernels._conv_utils import (
    check_keys,
    data_format,
    float_dtype,
    from_last,
    int_tuple,
    out_sizes,
    pad_spatial,
    padding_mode,
    tap_reduce,
    to_last,
    unsupported,
    window_pads,
)
from modelgraph.runner.registry import Kernel, KernelSpec, register


def _make_pool(spec: KernelSpec, rank: int, kind: str) -> Kernel:
    check_keys(spec, ("pool_size", "strides", "padding", "data_format"))
    dtype = float_dtype(spec)
    fmt = data_format(spec)
    pool = int_tuple(spec, "pool_size", rank, 2)
    strides = pool if spec.get("strides") is None else int_tuple(spec, "strides", rank, None)
    mode = padding_mode(spec, ("valid", "same"))
    ones = (1,) * rank
    reduce_fn = np.max if kind == "max" else np.mean

    def run(inputs: Any) -> np.ndarray:
        x = to_last(np.asarray(inputs, dtype=dtype), fmt)
        if x.ndim != rank + 2:
            raise ValueError(f"expected a rank-{rank + 2} input, got shape {x.shape}")
        batch, sizes, channels = x.shape[0], x.shape[1:-1], x.shape[-1]
        pads = window_pads(mode, sizes, pool, strides, ones)
        if strides == pool and not any(b or a for b, a in pads):
            out = out_sizes(sizes, pool, strides, ones)
            cropped = x[(slice(None), *(slice(0, o * p) for o, p in zip(out, pool, strict=True)))]
            shape = [batch]
            for o, p in zip(out, pool, strict=True):
                shape += [o, p]
            blocks = cropped.reshape(*shape, channels)
            return from_last(reduce_fn(blocks, axis=tuple(range(2, 2 * rank + 1, 2))), fmt)
        if kind == "max":
            xp = pad_spatial(x, pads, -np.inf)
        else:
            xp = pad_spatial(x, pads, 0.0)
        out = out_sizes(xp.shape[1:-1], pool, strides, ones)
        combine = np.maximum if kind == "max" else np.add

        def first(dst: np.ndarray, src: np.ndarray, tap: tuple[int, ...]) -> None:
            np.copyto(dst, src)

        def step(dst: np.ndarray, src: np.ndarray, tap: tuple[int, ...]) -> None:
            combine(dst, src, out=dst)

        acc = tap_reduce(xp, pool, strides, ones, channels, first, step)
        if kind == "avg":
            acc /= _valid_counts(sizes, pool, strides, pads, out, dtype)[..., None]
        return from_last(acc, fmt)

    return run


def _valid_counts(
    sizes: tuple[int, ...],
    pool: tuple[int, ...],
    strides: tuple[int, ...],
    pads: list[tuple[int, int]],
    out: tuple[int, ...],
    dtype: np.dtype,
) -> np.ndarray:
    """How many unpadded cells each output window covers (outer product of per-axis counts)."""
    counts = np.ones((), dtype=dtype)
    for n, p, s, (before, _), o in zip(sizes, pool, strides, pads, out, strict=True):
        start = np.arange(o) * s - before
        per_axis = (np.minimum(start + p, n) - np.maximum(start, 0)).astype(dtype)
        counts = np.multiply.outer(counts, per_axis)
    return counts


def _pool_factory(rank: int, kind: str):
    def factory(spec: KernelSpec) -> Kernel:
        return _make_pool(spec, rank, kind)

    factory.__name__ = f"{kind}_pooling{rank}d"
    return factory


for _rank in (1, 2, 3):
    register(f"MaxPooling{_rank}D", f"MaxPool{_rank}D")(_pool_factory(_rank, "max"))
    register(f"AveragePooling{_rank}D", f"AvgPool{_rank}D")(_pool_factory(_rank, "avg"))


# --- global pooling --------------------------------------------------------------------------


def _make_global(spec: KernelSpec, rank: int, kind: str) -> Kernel:
    check_keys(spec, ("data_format", "keepdims"))
    dtype = float_dtype(spec)
    fmt = data_format(spec)
    keepdims = spec.get("keepdims", False)
    if keepdims not in (True, False, None):
        raise unsupported(spec, "keepdims", keepdims)
    keepdims = bool(keepdims)
    axes = tuple(range(2, rank + 2)) if fmt == "channels_first" else tuple(range(1, rank + 1))
    masked = kind == "avg" and rank == 1

    def run(inputs: Any, mask: Any = None) -> np.ndarray:
        x = np.asarray(inputs, dtype=dtype)
        if x.ndim != rank + 2:
            raise ValueError(f"expected a rank-{rank + 2} input, got shape {x.shape}")
        if mask is not None:
            if not masked:
                raise TypeError(f"{spec.class_name} takes no mask")
            m = np.expand_dims(np.asarray(mask).astype(bool), 2 if fmt == "channels_last" else 1)
            total = np.sum(
                np.where(m, x, dtype.type(0)), axis=1 if fmt == "channels_last" else 2, keepdims=keepdims
            )
            count = np.sum(m.astype(dtype), axis=1 if fmt == "channels_last" else 2, keepdims=keepdims)
            return total / count
        if kind == "max":
            return np.max(x, axis=axes, keepdims=keepdims)
        return np.mean(x, axis=axes, keepdims=keepdims)

    return run


def _global_factory(rank: int, kind: str):
    def factory(spec: KernelSpec) -> Kernel:
        return _make_global(spec, rank, kind)

    factory.__name__ = f"global_{kind}_pooling{rank}d"
    return factory


for _rank in (1, 2, 3):
    register(f"GlobalMaxPooling{_rank}D", f"GlobalMaxPool{_rank}D")(_global_factory(_rank, "max"))
    register(f"GlobalAveragePooling{_rank}D", f"GlobalAvgPool{_rank}D")(_global_factory(_rank, "avg"))
