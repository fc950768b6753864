"""Depthwise convolutions of padded row slabs as einsums over strided views (one per column phase
for narrow strided layers, so the inner loop runs over whole output rows)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from modelgraph.runner.fast import jit
from modelgraph.runner.fast.blocks import scratch
from modelgraph.runner.fast.gemm import effective_strides, strided_view

# What a depthwise multiply-add counts in a kernel's ``work`` (for_each's spreading threshold, which
# is in GEMM multiply-adds): its einsum over strided windows runs at about 7 G/s on one core, a
# GEMM's at 50-100 G/s. Counted as one, MobileNetV2's 14x14 bottlenecks at batch 8 ran their bands
# on one thread (1.3 of 2 cores busy); batch 1's largest bottleneck still stays under the threshold.
DEPTHWISE_WORK = 8

# Strided depthwise layers narrower than this split the slab into column phases (long einsum inner
# loops over whole rows, at the price of copying the slab); wider ones run the einsum over the
# channels directly. Measured at batch 8 (3x3, stride 2): 16 and 96 channels ran 1.2-1.8x faster
# with phases, 144 broke even, 192 and 576 ran 1.3-1.8x slower.
PHASES_BELOW_CHANNELS = 144


def depthwise_tiled(kernel: np.ndarray, out_width: int) -> np.ndarray:
    """A ``(kh, kw, width)`` depthwise kernel repeated along an output row: ``(kh, kw, out_width*width)``,
    for :func:`depthwise_slab`'s NumPy row einsums."""
    kh, kw, width = kernel.shape
    tiled = np.broadcast_to(kernel[:, :, None, :], (kh, kw, out_width, width))
    return np.ascontiguousarray(tiled).reshape(kh, kw, out_width * width)


def tiled_for(cache: dict[int, np.ndarray], kernel: np.ndarray, out_width: int) -> np.ndarray:
    """:func:`depthwise_tiled` of ``kernel`` for ``out_width``, built once per width and kept in
    ``cache`` (the calling layer's own: its kernel never changes)."""
    tiled = cache.get(out_width)
    if tiled is None:
        tiled = cache[out_width] = depthwise_tiled(kernel, out_width)
    return tiled


def depthwise_slab(
    src: np.ndarray,
    kernel: np.ndarray,
    tiles: dict[int, np.ndarray],
    strides: Sequence[int],
    dilation: Sequence[int],
    dst: np.ndarray,
) -> None:
    """``dst`` (``(nb, hb, ow, width)``) = the depthwise conv of a padded slab ``src`` (``(nb, rows, Wp,
    width)``, rows starting at the first input row of ``dst``'s first output row), kernel ``(kh, kw,
    width)``.

    Without column dilation, each tap's window of one output row is one contiguous run of ``ow *
    width`` values (for a column stride s > 1, after the slab's columns are split into s phases, tap j
    reading phase j % s), so one einsum per phase, against the kernel tiled along the row
    (:func:`tiled_for`, kept in ``tiles``, the calling layer's own dict), runs its inner loop over
    whole rows whatever the channel count. Otherwise (and for strided layers of at least
    ``PHASES_BELOW_CHANNELS`` channels) one einsum over a strided (pixels, taps, channels) view runs
    it over the channels, which is slow for narrow layers. With the optional ``jit`` extra
    (:mod:`modelgraph.runner.fast.jit`), compiled loops do the same sums instead, with no tiled
    kernel (``tiles`` stays empty).
    """
    nb, hb, ow, width = dst.shape
    kh, kw = kernel.shape[:2]
    sh, sw = strides
    if jit.available() and src.dtype == dst.dtype == kernel.dtype == np.float32:
        jit.depthwise(src, kernel, dst, (sh, sw), (dilation[0], dilation[1]))
        return
    if dilation[1] != 1 or (sw > 1 and width >= PHASES_BELOW_CHANNELS):
        s_n, s_h, s_w, s_c = effective_strides(src)
        view = strided_view(
            src,
            (nb, hb, ow, kh, kw, width),
            (s_n, s_h * sh, s_w * sw, s_h * dilation[0], s_w * dilation[1], s_c),
        )
        np.einsum("nhwijc,ijc->nhwc", view, kernel, out=dst)
        return
    tiled = tiled_for(tiles, kernel, ow)
    flat_dst = dst.reshape(nb, hb, ow * width)
    for phase in range(min(sw, kw)):
        taps = len(range(phase, kw, sw))
        if sw == 1:
            columns = src
        else:
            # Phase p: columns p, p + s, ...; tap j = p + q*s reads it from pixel q on.
            pixels = taps - 1 + ow
            columns = scratch(3, (nb, src.shape[1], pixels, width), src.dtype)
            columns[...] = src[:, :, phase : phase + (pixels - 1) * sw + 1 : sw]
        s_n, s_h, s_w, s_c = effective_strides(columns)
        view = strided_view(
            columns, (nb, hb, kh, taps, ow * width), (s_n, s_h * sh, s_h * dilation[0], s_w, s_c)
        )
        weights = tiled[:, phase::sw]
        if phase == 0:
            np.einsum("nhijk,ijk->nhk", view, weights, out=flat_dst)
        else:
            partial = scratch(4, flat_dst.shape, dst.dtype)
            np.einsum("nhijk,ijk->nhk", view, weights, out=partial)
            np.add(flat_dst, partial, out=flat_dst)
