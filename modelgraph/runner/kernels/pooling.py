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

from dataclasses import dataclass
from typing import Any

import numpy as np

from modelgraph.runner.kernels._conv_utils import (
    Pads,
    check_keys,
    data_format,
    float_dtype,
    from_last,
    int_tuple,
    out_sizes,
    pad_spatial,
    padding_mode,
    ranked_factory,
    taps,
    to_last,
    window_pads,
)
from modelgraph.runner.registry import Kernel, KernelFactory, KernelSpec, register

POOL_KEYS = ("pool_size", "strides", "padding", "data_format")
RANKS = (1, 2, 3)


@dataclass(frozen=True)
class PoolParams:
    """A pooling layer's options, read and checked once (the reference and fast kernels both build
    from this): compute dtype, data format, pool size, strides (``pool_size`` when None) and padding
    mode."""

    dtype: np.dtype
    fmt: str
    pool: tuple[int, ...]
    strides: tuple[int, ...]
    mode: str

    @property
    def rank(self) -> int:
        return len(self.pool)

    def channels_last_input(self, inputs: Any) -> np.ndarray:
        """The layer's input as a channels-last array of the compute dtype, checked for its rank."""
        x = to_last(np.asarray(inputs, dtype=self.dtype), self.fmt)
        if x.ndim != self.rank + 2:
            raise ValueError(f"expected a rank-{self.rank + 2} input, got shape {x.shape}")
        return x

    def pads(self, x: np.ndarray) -> Pads:
        """The ``(before, after)`` padding of each spatial axis of the channels-last input ``x``."""
        return window_pads(self.mode, x.shape[1:-1], self.pool, self.strides, (1,) * self.rank)


def pool_params(spec: KernelSpec, rank: int) -> PoolParams:
    """The checked :class:`PoolParams` of a Max/AveragePoolingND layer of spatial rank ``rank``."""
    check_keys(spec, POOL_KEYS)
    pool = int_tuple(spec, "pool_size", rank, 2)
    strides = pool if spec.get("strides") is None else int_tuple(spec, "strides", rank, None)
    mode = padding_mode(spec, ("valid", "same"))
    return PoolParams(float_dtype(spec), data_format(spec), pool, strides, mode)


# --- the reference computations (channels-last) --------------------------------------------------


def reference_max_pool(
    x: np.ndarray, pool: tuple[int, ...], strides: tuple[int, ...], pads: Pads
) -> np.ndarray:
    """``y[b, o..., c] = max over taps t of x[b, o*s + t - before, c]``, the taps falling in the
    padding left out (they read minus infinity)."""
    ones = (1,) * len(pool)
    padded = pad_spatial(x, pads, -np.inf)
    out = out_sizes(padded.shape[1:-1], pool, strides, ones)
    y = np.full((x.shape[0], *out, x.shape[-1]), -np.inf, dtype=x.dtype)
    for _, window in taps(pool, strides, ones, out):
        y = np.maximum(y, padded[(slice(None), *window)])
    return y


def reference_avg_pool(
    x: np.ndarray, pool: tuple[int, ...], strides: tuple[int, ...], pads: Pads
) -> np.ndarray:
    """``y[b, o..., c] = (sum over the taps t inside x of x[b, o*s + t - before, c]) / (how many taps
    are inside x)``: padded cells count neither in the sum nor in the divisor."""
    ones = (1,) * len(pool)
    padded = pad_spatial(x, pads, 0.0)
    inside = pad_spatial(np.ones((1, *x.shape[1:-1], 1), dtype=x.dtype), pads, 0.0)
    out = out_sizes(padded.shape[1:-1], pool, strides, ones)
    total = np.zeros((x.shape[0], *out, x.shape[-1]), dtype=x.dtype)
    count = np.zeros((1, *out, 1), dtype=x.dtype)
    for _, window in taps(pool, strides, ones, out):
        total += padded[(slice(None), *window)]
        count += inside[(slice(None), *window)]
    return total / count


# --- kernels ------------------------------------------------------------------------------------


def _make_pool(spec: KernelSpec, rank: int, kind: str) -> Kernel:
    p = pool_params(spec, rank)
    compute = reference_max_pool if kind == "max" else reference_avg_pool

    def run(inputs: Any) -> np.ndarray:
        x = p.channels_last_input(inputs)
        return from_last(compute(x, p.pool, p.strides, p.pads(x)), p.fmt)

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


# (kind, rank) -> the registered factory; ``modelgraph/runner/fast/__init__.py`` keys the fast
# pooling kernels by these.
POOLING: dict[tuple[str, int], KernelFactory] = {}
for _rank in RANKS:
    for _kind, _name, _alias in (("max", "MaxPooling", "MaxPool"), ("avg", "AveragePooling", "AvgPool")):
        POOLING[_kind, _rank] = register(f"{_name}{_rank}D", f"{_alias}{_rank}D")(
            ranked_factory(_make_pool, _rank, _kind, name=f"{_kind}_pooling{_rank}d")
        )
        register(f"Global{_name}{_rank}D", f"Global{_alias}{_rank}D")(
            ranked_factory(_make_global, _rank, _kind, name=f"global_{_kind}_pooling{_rank}d")
        )
