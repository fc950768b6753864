"""Reference kernels: pooling family (see modelgraph/runner/registry.py for the contract).

Plain NumPy that states Keras's semantics; the speed paths (reshape + reduce for non-overlapping
windows, separable blocked max pooling, blocked tap loops spread over threads) live in
``modelgraph/runner/fast/pooling.py`` and are chosen at plan time in place of these
(``modelgraph run --reference``, ``Runner(graph, reference=True)`` runs these only).

Semantics (docs/formats.md, "Convolution and pooling numerics"; docs/runner.md, "Pooling"):
``strides`` of None means ``pool_size``; ``same`` padding is TensorFlow's (the odd extra cell goes
after); max pooling takes the maximum over the window's cells inside the input (padding is minus
infinity); average pooling divides the sum over the window's cells inside the input by how many
there are, so with ``same`` the padded cells count neither in the sum nor in the divisor. Global
pooling reduces every spatial axis (``keepdims`` keeps them as length 1); GlobalAveragePooling1D
with a mask averages the unmasked steps only (a fully masked row gives NaN, as in Keras).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from modelgraph.layer_params import check_keys, data_format
from modelgraph.runner.kernels.conv_utils import (
    Pads,
    WindowParams,
    float_dtype,
    from_last,
    out_sizes,
    pad_spatial,
    ranked_factory,
    window_params,
)
from modelgraph.runner.registry import Kernel, KernelFactory, KernelSpec, register

POOL_KEYS = ("pool_size", "strides", "padding", "data_format")
RANKS = (1, 2, 3)


def pool_params(spec: KernelSpec, rank: int) -> WindowParams:
    """The checked options of a Max/AveragePoolingND layer of spatial rank ``rank`` (read once; the
    reference and fast kernels both build from them): its pool is the window, never dilated."""
    check_keys(spec, POOL_KEYS)
    return window_params(
        spec, rank, ("valid", "same"), window_key="pool_size", window_default=2, dilated=False
    )


# --- the reference computations (channels-last) --------------------------------------------------


def _windows(x: np.ndarray, pool: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    """The pooling windows of a padded channels-last ``x`` as a read-only view
    ``(B, *out, C, *pool)``: window ``o`` starts at ``o * strides`` and covers ``pool`` cells."""
    out_sizes(x.shape[1:-1], pool, strides, (1,) * len(pool))  # refuses a pool larger than x
    spatial = tuple(range(1, len(pool) + 1))
    every = np.lib.stride_tricks.sliding_window_view(x, pool, axis=spatial)
    return every[(slice(None), *(slice(None, None, s) for s in strides))]


def reference_max_pool(
    x: np.ndarray, pool: tuple[int, ...], strides: tuple[int, ...], pads: Pads
) -> np.ndarray:
    """``y[b, o..., c] = max over the cells t of the window of x[b, o*s + t - before, c]``, the cells
    in the padding left out (they read minus infinity)."""
    window_axes = tuple(range(-len(pool), 0))
    return _windows(pad_spatial(x, pads, -np.inf), pool, strides).max(axis=window_axes)


def reference_avg_pool(
    x: np.ndarray, pool: tuple[int, ...], strides: tuple[int, ...], pads: Pads
) -> np.ndarray:
    """``y[b, o..., c] = (sum over the window's cells inside x) / (how many cells of the window are
    inside x)``: padded cells count neither in the sum nor in the divisor."""
    window_axes = tuple(range(-len(pool), 0))
    total = _windows(pad_spatial(x, pads, 0.0), pool, strides).sum(axis=window_axes)
    inside = pad_spatial(np.ones((1, *x.shape[1:-1], 1), dtype=x.dtype), pads, 0.0)
    return total / _windows(inside, pool, strides).sum(axis=window_axes)


# --- kernels ------------------------------------------------------------------------------------


def _make_pool(spec: KernelSpec, rank: int, kind: str) -> Kernel:
    p = pool_params(spec, rank)
    compute = reference_max_pool if kind == "max" else reference_avg_pool

    def run(inputs: Any) -> np.ndarray:
        x = p.channels_last_input(inputs)
        return from_last(compute(x, p.kernel_size, p.strides, p.pads(x)), p.fmt)

    return run


def _make_global(spec: KernelSpec, rank: int, kind: str) -> Kernel:
    check_keys(spec, ("data_format", "keepdims"))
    dtype = float_dtype(spec)
    fmt = data_format(spec)
    keepdims = spec.get("keepdims", False)
    if keepdims not in (True, False, None):
        raise spec.unsupported("keepdims", keepdims)
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
            total = np.sum(np.where(m, x, dtype.type(0)), axis=axes, keepdims=keepdims)
            count = np.sum(m.astype(dtype), axis=axes, keepdims=keepdims)
            # A fully masked row gives 0 / 0 = NaN, as in Keras; that is the answer, not a warning.
            with np.errstate(invalid="ignore", divide="ignore"):
                return total / count
        if kind == "max":
            return np.max(x, axis=axes, keepdims=keepdims)
        return np.mean(x, axis=axes, keepdims=keepdims)

    return run


# (kind, rank) -> the registered factory of the window / global pooling layers;
# ``modelgraph/runner/fast/__init__.py`` keys the fast pooling kernels by these.
POOLING: dict[tuple[str, int], KernelFactory] = {}
GLOBAL_POOLING: dict[tuple[str, int], KernelFactory] = {}
for _rank in RANKS:
    for _kind, _name, _alias in (("max", "MaxPooling", "MaxPool"), ("avg", "AveragePooling", "AvgPool")):
        POOLING[_kind, _rank] = register(f"{_name}{_rank}D", f"{_alias}{_rank}D")(
            ranked_factory(_make_pool, _rank, _kind, name=f"{_kind}_pooling{_rank}d")
        )
        GLOBAL_POOLING[_kind, _rank] = register(f"Global{_name}{_rank}D", f"Global{_alias}{_rank}D")(
            ranked_factory(_make_global, _rank, _kind, name=f"global_{_kind}_pooling{_rank}d")
        )
