"""Shared helpers of the spatial families: layouts, window padding, per-axis pads."""

from __future__ import annotations

from collections.abc import Sequence

from modelgraph.runner.kernels.conv_utils import same_pads
from modelgraph.saving.onnx.emitter import Emitter, Perm, Value
from modelgraph.saving.onnx.registry import MapContext


def channels_first_perm(fmt: str, rank: int) -> Perm:
    """The stored layout ONNX's window ops need (N, C, spatial...) as a permutation of Keras's
    layout: channels_last (N, spatial..., C) moves its last axis to position 1; channels_first is
    already in place."""
    if fmt == "channels_first":
        return tuple(range(rank + 2))
    return (0, rank + 1, *range(1, rank + 1))


def spatial_sizes(ctx: MapContext, fmt: str) -> tuple[int | None, ...] | None:
    shape = ctx.in_shapes[0] if ctx.in_shapes else None
    if shape is None:
        return None
    return tuple(shape[2:]) if fmt == "channels_first" else tuple(shape[1:-1])


def window_pads(
    mode: str,
    sizes: Sequence[int | None] | None,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilation: Sequence[int],
) -> tuple[list[int] | None, str | None]:
    """ONNX ``pads`` (all begins, then all ends) or an ``auto_pad`` for Keras's padding mode. TF's
    ``same`` puts the extra cell after (ONNX SAME_UPPER); with known sizes the pads are explicit.

    A dilated window with an unknown size gets explicit pads too: onnxruntime refuses dilation with
    ``SAME_UPPER``, and Keras allows dilation only with stride 1, where ``same`` pads a total of
    ``(k - 1) * d`` cells whatever the size (the smaller half before)."""
    rank = len(kernel)
    if mode == "valid":
        return [0] * (2 * rank), None
    if mode == "causal":
        return [(k - 1) * d for k, d in zip(kernel, dilation, strict=True)] + [0] * rank, None
    known = sizes is not None and all(s is not None for s in sizes)
    dilated_stride1 = any(d != 1 for d in dilation) and all(s == 1 for s in strides)
    if not known and not dilated_stride1:
        return None, "SAME_UPPER"
    pairs = [
        same_pads(n, k, s, d) if n is not None else _stride1_same(k, d)
        for n, k, s, d in zip(sizes or (None,) * rank, kernel, strides, dilation, strict=True)
    ]
    return [a for a, _ in pairs] + [b for _, b in pairs], None


def _stride1_same(kernel: int, dilation: int) -> tuple[int, int]:
    """TF's ``same`` padding at stride 1, which does not depend on the input size."""
    total = (kernel - 1) * dilation
    return total // 2, total - total // 2


def out_value(name: str, rank: int, perm: Perm, dtype: str = "float32") -> Value:
    """A window op's output: stored in ``perm`` relative to Keras's layout."""
    return Value(name, rank, None if perm == tuple(range(rank)) else perm, dtype)


def physical_pads(e: Emitter, logical_pads: Sequence[tuple[int, int]], perm: Perm | None) -> list[int]:
    """ONNX Pad's pads (begins then ends) for a tensor stored in ``perm``, from per-logical-axis
    (before, after) pairs."""
    order = perm if perm is not None else tuple(range(len(logical_pads)))
    begins = [logical_pads[a][0] for a in order]
    ends = [logical_pads[a][1] for a in order]
    return begins + ends
