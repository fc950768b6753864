"""Shared helpers for the conv, pooling and reshaping kernels: config parsing, TF padding, windows.

Everything here works on channels-last arrays ``(batch, *spatial, channels)``; kernels move
channels-first inputs to channels-last on entry and back on exit.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from modelgraph.errors import UnsupportedConfigError
from modelgraph.runner.activations import Activation, activation_name, get_activation
from modelgraph.runner.registry import KernelSpec

# Config keys that never change what a layer computes at inference time.
INERT_KEYS = frozenset(
    {
        "name",
        "trainable",
        "dtype",
        "batch_input_shape",
        "batch_shape",
        "input_shape",
        "input_dtype",
        "kernel_initializer",
        "bias_initializer",
        "depthwise_initializer",
        "pointwise_initializer",
        "kernel_regularizer",
        "bias_regularizer",
        "depthwise_regularizer",
        "pointwise_regularizer",
        "activity_regularizer",
        "kernel_constraint",
        "bias_constraint",
        "depthwise_constraint",
        "pointwise_constraint",
        # Keras 3 saves the LoRA-merged kernel (``save_own_variables`` stores ``self.kernel``).
        "lora_rank",
        "lora_alpha",
    }
)

Pads = list[tuple[int, int]]


def unsupported(spec: KernelSpec, key: str, value: Any) -> UnsupportedConfigError:
    return UnsupportedConfigError(spec.class_name, key, value, spec.name)


def check_keys(spec: KernelSpec, used: Iterable[str]) -> None:
    """Refuse any config key this kernel neither implements nor knows to be inert."""
    known = INERT_KEYS.union(used)
    for key, value in spec.config.items():
        if key not in known:
            raise unsupported(spec, key, value)


def float_dtype(spec: KernelSpec) -> np.dtype:
    """The NumPy dtype a kernel computes in: float64 only when Keras did, float32 otherwise."""
    return np.dtype(np.float64) if str(spec.compute_dtype) == "float64" else np.dtype(np.float32)


def as_float(x: Any, dtype: np.dtype) -> np.ndarray:
    return np.asarray(x, dtype=dtype)


def int_tuple(spec: KernelSpec, key: str, n: int, default: Any) -> tuple[int, ...]:
    """An int or a list of ``n`` ints (Keras ``standardize_tuple``)."""
    value = spec.get(key, default)
    if value is None:
        value = default
    if isinstance(value, bool):
        raise unsupported(spec, key, value)
    if isinstance(value, (int, np.integer)):
        return (int(value),) * n
    if (
        isinstance(value, (list, tuple))
        and len(value) == n
        and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value)
    ):
        return tuple(int(v) for v in value)
    raise unsupported(spec, key, value)


def pair_tuple(spec: KernelSpec, key: str, n: int, default: Any) -> list[tuple[int, int]]:
    """ZeroPadding/Cropping amounts: an int, ``n`` ints (symmetric), or ``n`` pairs."""
    value = spec.get(key, default)

    def is_int(v: Any) -> bool:
        return isinstance(v, (int, np.integer)) and not isinstance(v, bool)

    if is_int(value):
        return [(int(value), int(value))] * n
    if isinstance(value, (list, tuple)):
        if n == 1 and len(value) == 2 and all(is_int(v) for v in value):
            return [(int(value[0]), int(value[1]))]
        if len(value) == n and all(is_int(v) for v in value):
            return [(int(v), int(v)) for v in value]
        if len(value) == n and all(
            isinstance(p, (list, tuple)) and len(p) == 2 and all(is_int(v) for v in p) for p in value
        ):
            return [(int(p[0]), int(p[1])) for p in value]
    raise unsupported(spec, key, value)


def data_format(spec: KernelSpec) -> str:
    value = spec.get("data_format")
    if value is None:
        return "channels_last"
    if value in ("channels_last", "channels_first"):
        return value
    raise unsupported(spec, "data_format", value)


def padding_mode(spec: KernelSpec, allowed: Sequence[str], default: str = "valid") -> str:
    value = spec.get("padding", default)
    mode = value.lower() if isinstance(value, str) else value
    if mode not in allowed:
        raise unsupported(spec, "padding", value)
    return mode


def fused_activation(spec: KernelSpec) -> Activation | None:
    """The fused ``activation`` (None for linear, so callers can skip it)."""
    value = spec.get("activation")
    act = get_activation(value, spec.keras_version, spec.class_name)
    return None if activation_name(value) == "linear" else act


def same_pads(size: int, kernel: int, stride: int, dilation: int = 1) -> tuple[int, int]:
    """TF ``SAME`` padding for one axis: the extra pixel goes after."""
    effective = (kernel - 1) * dilation + 1
    out = -(-size // stride)
    total = max((out - 1) * stride + effective - size, 0)
    return total // 2, total - total // 2


def window_pads(
    mode: str, sizes: Sequence[int], kernel: Sequence[int], strides: Sequence[int], dilation: Sequence[int]
) -> Pads:
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


def im2col(
    x: np.ndarray, kernel: Sequence[int], strides: Sequence[int], dilation: Sequence[int], groups: int = 1
) -> np.ndarray:
    """Patches of a padded channels-last array.

    groups == 1: ``(N, prod(kernel) * C)`` with columns ordered (taps..., channel), N = batch*prod(out).
    groups > 1: ``(groups, N, prod(kernel) * C/groups)``.
    """
    rank = len(kernel)
    batch, sizes, channels = x.shape[0], x.shape[1:-1], x.shape[-1]
    out = out_sizes(sizes, kernel, strides, dilation)
    n = batch * int(np.prod(out))
    ktot = int(np.prod(kernel))
    if groups == 1 and dilation[-1] == 1:
        # The last kernel axis and the channels are contiguous in a C-ordered input: copy them as one
        # chunk of kernel[-1] * C values per leading tap (few, long copies instead of many short ones).
        x = np.ascontiguousarray(x)
        chunk = kernel[-1] * channels
        lead = int(np.prod(kernel[:-1]))
        st = x.strides
        view_strides = (st[0], *(st[i + 1] * strides[i] for i in range(rank)))[: rank + 1] + (st[-1],)
        flat = x.reshape(-1)
        cols = np.empty((batch, *out, lead, chunk), dtype=x.dtype)
        for i, tap in enumerate(itertools.product(*(range(k) for k in kernel[:-1]))):
            offset = sum(t * d * st[ax + 1] for ax, (t, d) in enumerate(zip(tap, dilation, strict=False)))
            view = np.lib.stride_tricks.as_strided(
                flat[offset // x.itemsize :],
                shape=(batch, *out, chunk),
                strides=view_strides,
                writeable=False,
            )
            cols[(slice(None),) * (rank + 1) + (i,)] = view
        return cols.reshape(n, ktot * channels)
    if groups == 1:
        cols = np.empty((batch, *out, ktot, channels), dtype=x.dtype)
        for i, (_, sl) in enumerate(taps(kernel, strides, dilation, out)):
            cols[(slice(None),) * (rank + 1) + (i,)] = x[(slice(None), *sl)]
        return cols.reshape(n, ktot * channels)
    cg = channels // groups
    cols = np.empty((groups, batch, *out, ktot, cg), dtype=x.dtype)
    for i, (_, sl) in enumerate(taps(kernel, strides, dilation, out)):
        patch = x[(slice(None), *sl)].reshape(batch, *out, groups, cg)
        cols[(slice(None),) * (rank + 2) + (i,)] = np.moveaxis(patch, -2, 0)
    return cols.reshape(groups, n, ktot * cg)


# Output elements per block in tap loops: small enough that the block and one tap's operand stay in
# cache while all taps are accumulated into it.
BLOCK = 1 << 17


def tap_reduce(
    x: np.ndarray,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilation: Sequence[int],
    channels: int,
    first: Callable[[np.ndarray, np.ndarray, tuple[int, ...]], None],
    step: Callable[[np.ndarray, np.ndarray, tuple[int, ...]], None],
) -> np.ndarray:
    """Reduce over kernel taps of a padded channels-last array, block by block.

    ``first(dst, src, tap)`` initialises an output block from the first tap's input window, ``step``
    folds in every further tap. ``src`` has the input's channel count, ``dst`` has ``channels``.
    """
    batch = x.shape[0]
    out = out_sizes(x.shape[1:-1], kernel, strides, dilation)
    acc = np.empty((batch, *out, channels), dtype=x.dtype)
    per_image = int(np.prod(out)) * channels
    row = per_image // out[0]
    if per_image >= BLOCK:
        rows = max(1, BLOCK // row)
        blocks = [
            (b, b + 1, r0, min(out[0], r0 + rows)) for b in range(batch) for r0 in range(0, out[0], rows)
        ]
    else:
        images = max(1, BLOCK // per_image)
        blocks = [(b0, min(batch, b0 + images), 0, out[0]) for b0 in range(0, batch, images)]
    all_taps = list(itertools.product(*(range(k) for k in kernel)))
    for b0, b1, r0, r1 in blocks:
        dst = acc[b0:b1, r0:r1]
        for i, tap in enumerate(all_taps):
            start = tap[0] * dilation[0] + r0 * strides[0]
            sl = (
                slice(b0, b1),
                slice(start, start + (r1 - r0 - 1) * strides[0] + 1, strides[0]),
                *(
                    slice(t * d, t * d + (o - 1) * s + 1, s)
                    for t, d, o, s in zip(tap[1:], dilation[1:], out[1:], strides[1:], strict=True)
                ),
            )
            (first if i == 0 else step)(dst, x[sl], tap)
    return acc


def to_last(x: np.ndarray, fmt: str) -> np.ndarray:
    return np.moveaxis(x, 1, -1) if fmt == "channels_first" else x


def from_last(x: np.ndarray, fmt: str) -> np.ndarray:
    return np.moveaxis(x, -1, 1) if fmt == "channels_first" else x
