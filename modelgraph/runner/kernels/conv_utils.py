"""Shared helpers for the conv, pooling and reshaping kernels: config parsing, TF padding, windows.

Everything here works on channels-last arrays ``(batch, *spatial, channels)``; kernels move
channels-first inputs to channels-last on entry and back on exit. These helpers state what a layer
computes (its options, Keras's padding, its windows); the speed machinery of the fast kernels
(scratch arenas, row blocks, im2col/GEMM, epilogues) lives in ``modelgraph/runner/fast/``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from modelgraph.layer_params import data_format, int_tuple, padding_mode
from modelgraph.runner.activations import Activation, activation_name, get_activation
from modelgraph.runner.registry import Kernel, KernelFactory, KernelSpec

Pads = list[tuple[int, int]]


def float_dtype(spec: KernelSpec) -> np.dtype:
    """The NumPy dtype a kernel computes in: float64 only when Keras did, float32 otherwise."""
    return np.dtype(np.float64) if str(spec.compute_dtype) == "float64" else np.dtype(np.float32)


def as_float(x: Any, dtype: np.dtype) -> np.ndarray:
    return np.asarray(x, dtype=dtype)


def fused_activation(spec: KernelSpec) -> Activation | None:
    """The fused ``activation`` (None for linear, so callers can skip it)."""
    value = spec.get("activation")
    act = get_activation(value, spec.keras_version, spec.class_name)
    return None if activation_name(value) == "linear" else act


# Activations that normalise or split along the last axis: they do not commute with a change of layout.
AXIS_ACTIVATIONS = frozenset({"softmax", "log_softmax", "sparsemax", "glu"})


def same_pads(size: int, kernel: int, stride: int, dilation: int = 1) -> tuple[int, int]:
    """TF ``SAME`` padding for one axis: the extra pixel goes after."""
    effective = (kernel - 1) * dilation + 1
    out = -(-size // stride)
    total = max((out - 1) * stride + effective - size, 0)
    return total // 2, total - total // 2


def window_pads(
    mode: str,
    sizes: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilation: Sequence[int],
    pre: Pads | None = None,
) -> Pads:
    """The padding of a window op in ``mode`` on an input of ``sizes``. With ``pre`` (explicit zero
    padding a merged ZeroPadding layer applied first), the op's own padding is computed on the
    pre-padded sizes and the two are summed."""
    if pre is not None:
        padded = [n + a + b for n, (a, b) in zip(sizes, pre, strict=True)]
        own = window_pads(mode, padded, kernel, strides, dilation)
        return [(a + c, b + d) for (a, b), (c, d) in zip(pre, own, strict=True)]
    if mode == "same":
        return [same_pads(n, k, s, d) for n, k, s, d in zip(sizes, kernel, strides, dilation, strict=True)]
    if mode == "causal":
        return [((k - 1) * d, 0) for k, d in zip(kernel, dilation, strict=True)]
    return [(0, 0)] * len(sizes)


def pad_spatial(x: np.ndarray, pads: Pads, value: float = 0.0) -> np.ndarray:
    """Pad the spatial axes of a channels-last array."""
    if not any(b or a for b, a in pads):
        return x
    return np.pad(x, [(0, 0), *pads, (0, 0)], mode="constant", constant_values=value)


def out_sizes(
    sizes: Sequence[int], kernel: Sequence[int], strides: Sequence[int], dilation: Sequence[int]
) -> tuple[int, ...]:
    """Output sizes of a valid window op over (already padded) sizes."""
    out = tuple(
        (n - (k - 1) * d - 1) // s + 1 for n, k, s, d in zip(sizes, kernel, strides, dilation, strict=True)
    )
    if any(o <= 0 for o in out):
        raise ValueError(
            f"window {tuple(kernel)} (dilation {tuple(dilation)}) larger than input {tuple(sizes)}"
        )
    return out


def taps(
    kernel: Sequence[int], strides: Sequence[int], dilation: Sequence[int], out: Sequence[int]
) -> Iterator[tuple[tuple[int, ...], tuple[slice, ...]]]:
    """For each kernel tap: its index and the strided spatial slice of the padded input it reads."""
    for tap in itertools.product(*(range(k) for k in kernel)):
        yield (
            tap,
            tuple(
                slice(t * d, t * d + (o - 1) * s + 1, s)
                for t, d, o, s in zip(tap, dilation, out, strides, strict=True)
            ),
        )


def channels_last_input(
    inputs: Any, dtype: np.dtype, fmt: str, rank: int, channels: int | None = None
) -> np.ndarray:
    """A window layer's input as a channels-last array of ``dtype``, checked to be of rank
    ``rank + 2`` (with ``channels`` channels when given)."""
    x = to_last(np.asarray(inputs, dtype=dtype), fmt)
    if x.ndim != rank + 2 or (channels is not None and x.shape[-1] != channels):
        having = "" if channels is None else f" with {channels} channels"
        raise ValueError(f"expected a rank-{rank + 2} input{having}, got shape {x.shape}")
    return x


@dataclass(frozen=True)
class WindowParams:
    """What a window layer (a conv or a pooling) reads its input with: compute dtype, data format,
    window (kernel or pool) size, strides, dilation and padding mode."""

    dtype: np.dtype
    fmt: str
    kernel_size: tuple[int, ...]
    strides: tuple[int, ...]
    dilation: tuple[int, ...]
    mode: str

    @property
    def rank(self) -> int:
        """The number of spatial axes."""
        return len(self.kernel_size)

    def channels_last_input(self, inputs: Any, channels: int | None = None) -> np.ndarray:
        """The layer's input as a channels-last array of the compute dtype, checked for its rank (and
        its ``channels`` when given)."""
        return channels_last_input(inputs, self.dtype, self.fmt, self.rank, channels)

    def pads(self, x: np.ndarray) -> Pads:
        """The ``(before, after)`` padding of each spatial axis of the channels-last input ``x``."""
        return window_pads(self.mode, x.shape[1:-1], self.kernel_size, self.strides, self.dilation)


def window_params(
    spec: KernelSpec,
    rank: int,
    modes: Sequence[str],
    *,
    window_key: str = "kernel_size",
    window_default: Any = None,
    dilated: bool = True,
) -> WindowParams:
    """A window layer's :class:`WindowParams` as Keras reads them: its window from ``window_key``
    (an int or ``rank`` ints), ``strides`` (default 1 for a conv; the window for a pooling, which
    has no ``dilation_rate``: ``dilated=False``), ``dilation_rate`` (default 1), a padding of
    ``modes``, the data format and the compute dtype."""
    window = int_tuple(spec, window_key, rank, window_default)
    strides = int_tuple(spec, "strides", rank, 1 if dilated else window)
    dilation = int_tuple(spec, "dilation_rate", rank, 1) if dilated else (1,) * rank
    mode = padding_mode(spec, modes)
    return WindowParams(float_dtype(spec), data_format(spec), window, strides, dilation, mode)


def ranked_factory(make: Callable[..., Kernel], rank: int, *args: Any, name: str) -> KernelFactory:
    """The kernel factory ``spec -> make(spec, rank, *args)``, named ``name``: one family's layers of
    spatial rank 1, 2 and 3 share one ``make``."""

    def factory(spec: KernelSpec) -> Kernel:
        return make(spec, rank, *args)

    factory.__name__ = factory.__qualname__ = name
    return factory


def to_last(x: np.ndarray, fmt: str) -> np.ndarray:
    return np.moveaxis(x, 1, -1) if fmt == "channels_first" else x


def from_last(x: np.ndarray, fmt: str) -> np.ndarray:
    return np.moveaxis(x, -1, 1) if fmt == "channels_first" else x
