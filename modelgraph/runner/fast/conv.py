"""Fast kernels of the conv family, chosen at plan time in place of the reference kernels of
``modelgraph/runner/kernels/conv.py`` (see ``modelgraph/runner/fast/__init__.py``). They compute what
the reference kernels compute; ``tests/runner/test_fast_vs_reference.py`` checks that over random
shapes, strides, dilations, paddings, groups, dtypes, both data formats and non-contiguous inputs.

Speed: weights are reshaped once in the factory; a 2-D (and 1-D, as 2-D) dense conv runs block by
block (padded row slabs, im2col into scratch, one GEMM, the epilogue in cache; Winograd F(2x2, 3x3)
for big 3x3 layers), spread over threads; a 3-D conv is one im2col copy plus one matmul (1x1 convs a
plain matmul); depthwise convs (and grouped convs with one input channel per group) loop over kernel
taps only. Activations that do not commute with a change of layout run after the output is moved
back (``layout_activation``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from modelgraph.runner import rowwise
from modelgraph.runner.activations import Activation
from modelgraph.runner.fast import bias_act, blocks, jit
from modelgraph.runner.fast.blocks import (
    row_blocks,
    scratch,
    slab,
    spread_parts,
    tap_reduce,
    window2d,
    window_rows,
)
from modelgraph.runner.fast.depthwise import DEPTHWISE_WORK, depthwise_slab
from modelgraph.runner.fast.epilogue import (
    Epilogue,
    Region,
    element_work,
    in_place_epilogue,
    layout_activation,
    then_activate,
    with_residual,
)
from modelgraph.runner.fast.gemm import conv2d_gemm, im2col, worth_packing
from modelgraph.runner.fast.gemm_ir import matmul
from modelgraph.runner.fast.packed import PackedWeights
from modelgraph.runner.fast.winograd import (
    conv2d_winograd,
    use_winograd,
    winograd_eligible,
    winograd_kernel,
    worth_keeping,
)
from modelgraph.runner.kernels.conv import (
    conv_params,
    depthwise_conv_params,
    separable_params,
)
from modelgraph.runner.kernels.conv_utils import (
    Pads,
    channels_last_input,
    from_last,
    out_sizes,
    pad_spatial,
    ranked_factory,
    to_last,
    window_pads,
)
from modelgraph.runner.parallel import for_each
from modelgraph.runner.registry import Kernel, KernelSpec


def _finish(
    out: np.ndarray, bias: np.ndarray | None, act: Callable[[np.ndarray], np.ndarray] | None, fmt: str
) -> np.ndarray:
    if bias is not None:
        out += bias
    if act is not None:
        out = act(out)
    return from_last(out, fmt)


def _as_2d(
    x: np.ndarray, pads: Pads, kernel: tuple[int, ...], strides: tuple[int, ...], dilation: tuple[int, ...]
) -> tuple[np.ndarray, Pads, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """A C-ordered ``(B, H, W, C)`` view of a rank-1 or rank-2 channels-last problem."""
    x = np.ascontiguousarray(x)
    if x.ndim == 3:
        return x[:, None], [(0, 0), *pads], (1, *kernel), (1, *strides), (1, *dilation)
    return x, pads, kernel, strides, dilation


# From this many (output) channels on, one einsum per block beats a multiply and an add per tap:
# its inner loop runs over the channels, fusing the multiply-adds of all taps without temporaries.
EINSUM_MIN_CHANNELS = 64


def _depthwise_2d(
    x: np.ndarray,
    kernel: np.ndarray,
    strides: tuple[int, ...],
    dilation: tuple[int, ...],
    pads: Pads,
    epilogue: Epilogue,
    tiles: dict[int, np.ndarray],
    pre: Callable[[np.ndarray], None] | None = None,
) -> np.ndarray:
    """Depthwise conv of an unpadded rank-1/2 channels-last array, kernel ``(k..., C, M)``, one block of
    output rows at a time (padded rows in a scratch slab, ``epilogue`` while the block is in cache).
    ``tiles`` (the calling kernel's own dict) keeps the kernel tiled along an output row by output
    width for the NumPy path (see :func:`depthwise_slab`), built once per layer and input size.

    Without column dilation: one einsum per block (per column phase when strided) whose inner loop
    runs over whole output rows. With it, wide layers: one ``einsum`` over a strided (pixels, taps,
    channels) view of the slab; narrow ones (where einsum's channel inner loop is too short): one
    multiply and one add per tap.

    ``pre`` (in place on an array), when given, is applied to the input first (a merged ReLU before
    the conv): on each block's padded slab while it is in cache where the blocks take slabs, else on
    a copy of the input. Zero padding is left as it is (ReLU keeps 0).
    """
    if pre is not None and dilation[-1] != 1:
        x = np.array(x, dtype=x.dtype, order="C")
        pre(x)
        pre = None
    x2, pads2, ks, st, dil = _as_2d(x, pads, kernel.shape[:-2], strides, dilation)
    channels, mult = kernel.shape[-2:]
    width = channels * mult
    flat = kernel.reshape(*ks, width)
    if dil[1] == 1:
        # Each tap's window of one output row is a contiguous run of out_width * width values (of one
        # column phase when strided): the kernel tiled along the row lets one einsum cover it.
        out = _depthwise_blocks(x2, flat, tiles, st, dil, pads2, epilogue, mult, pre)
    elif width < EINSUM_MIN_CHANNELS:
        by_tap = kernel.reshape(-1, width)

        def first(dst: np.ndarray, src: np.ndarray, tap: int) -> None:
            np.multiply(src, by_tap[tap], out=dst)

        def step(dst: np.ndarray, src: np.ndarray, tmp: np.ndarray, tap: int) -> None:
            np.multiply(src, by_tap[tap], out=tmp)
            np.add(dst, tmp, out=dst)

        def finish(dst: np.ndarray, h0: int, h1: int) -> None:
            epilogue(dst, None)

        out = window2d(x2, ks, st, dil, pads2, 0.0, first, step, finish, repeat=mult)
    else:
        out = _depthwise_blocks(x2, flat, tiles, st, dil, pads2, epilogue, mult)
    return out[:, 0] if x.ndim == 3 else out


def _depthwise_block_units(width: int, itemsize: int) -> int:
    """Output pixels per block of :func:`_depthwise_blocks` for ``width`` channels."""
    return max(1, blocks.DW_BLOCK_BYTES // (width * itemsize))


def _depthwise_work(pixels: int, width: int, kernel_hw: tuple[int, int], epilogue: Epilogue) -> float:
    """What a depthwise conv of ``pixels`` output pixels of ``width`` channels and its ``epilogue``
    count in :func:`spread_parts`'s work."""
    return pixels * width * (kernel_hw[0] * kernel_hw[1] * DEPTHWISE_WORK + element_work(epilogue))


def _depthwise_blocks(
    x: np.ndarray,
    kernel: np.ndarray,
    tiles: dict[int, np.ndarray],
    strides: tuple[int, ...],
    dilation: tuple[int, ...],
    pads: Pads,
    epilogue: Epilogue,
    mult: int,
    pre: Callable[[np.ndarray], None] | None = None,
) -> np.ndarray:
    """Depthwise conv a block of output rows at a time: padded input rows to a scratch slab (``pre``
    applied to it in place), then :func:`depthwise_slab`, then ``epilogue`` while the block is in
    cache."""
    batch, width = x.shape[0], kernel.shape[-1]
    kh = kernel.shape[0]
    padded = [n + b + a for n, (b, a) in zip(x.shape[1:3], pads, strict=True)]
    oh, ow = out_sizes(padded, kernel.shape[:2], strides, dilation)
    out = np.empty((batch, oh, ow, width), dtype=x.dtype)
    target = _depthwise_block_units(width, x.itemsize)

    def block(rows: tuple[int, int, int, int]) -> None:
        n0, n1, h0, h1 = rows
        r0, r1 = window_rows(h0, h1, kh, strides[0], dilation[0])
        src = slab(x, n0, n1, r0, r1, pads, 0.0, 0)
        if mult > 1:
            src = np.repeat(src, mult, axis=-1)
        if pre is not None:
            if np.may_share_memory(src, x):
                # No padding: the slab is a view of the input, which must not change.
                copy = blocks.scratch(0, src.shape, src.dtype)
                copy[...] = src
                src = copy
            pre(src)
        dst = out[n0:n1, h0:h1]
        depthwise_slab(src, kernel, tiles, strides, dilation, dst)
        epilogue(dst, (slice(n0, n1), slice(h0, h1)))

    # Blocks write disjoint output rows (scratch slabs are per thread): spread them when big enough.
    work = _depthwise_work(batch * oh * ow, width, kernel.shape[:2], epilogue)
    for_each(block, row_blocks(batch, oh, ow, target, spread_parts(work)), work)
    return out


def _depthwise_core(
    x: np.ndarray,
    kernel: np.ndarray,
    strides: tuple[int, ...],
    dilation: tuple[int, ...],
) -> np.ndarray:
    """Depthwise conv of a padded channels-last array; kernel ``(k..., C, M)`` -> ``(B, *out, C*M)``.

    Output channel ``c*M + m`` reads input channel ``c``: for M > 1 the input channels are repeated
    M times so every tap is one element-wise multiply-add over contiguous channels.
    """
    ks = kernel.shape[:-2]
    channels, mult = kernel.shape[-2:]
    if mult > 1:
        x = np.repeat(x, mult, axis=-1)
    flat = kernel.reshape(*ks, channels * mult)
    scratch = np.empty(0, dtype=x.dtype)

    def first(dst: np.ndarray, src: np.ndarray, tap: tuple[int, ...]) -> None:
        np.multiply(src, flat[tap], out=dst)

    def step(dst: np.ndarray, src: np.ndarray, tap: tuple[int, ...]) -> None:
        nonlocal scratch
        if scratch.size < dst.size:
            scratch = np.empty(dst.size, dtype=x.dtype)
        tmp = scratch[: dst.size].reshape(dst.shape)
        np.multiply(src, flat[tap], out=tmp)
        np.add(dst, tmp, out=dst)

    return tap_reduce(x, ks, strides, dilation, channels * mult, first, step)


def _no_epilogue(block: np.ndarray, region: Region | None) -> None:
    return None


def _make_conv(
    spec: KernelSpec,
    rank: int,
    residual_activation: tuple[Any, Activation | None] | None = None,
    pre_pads: Pads | None = None,
) -> Kernel:
    """A conv kernel ``run(x)``; with ``residual_activation`` (the name and function of the activation
    after a merged sum; a linear channels-last Conv2D only), a kernel ``run(x, residual)``, see
    :func:`conv2d_with_residual`;
    with ``pre_pads`` (a rank-1/2 conv with groups 1), the input zero-padded by them first."""
    p = conv_params(spec, rank)
    dtype, fmt, kernel_size, strides, dilation = p.dtype, p.fmt, p.kernel_size, p.strides, p.dilation
    mode, groups, kernel, cin_g, filters, bias = p.mode, p.groups, p.kernel, p.cin_g, p.filters, p.bias
    cin = cin_g * groups
    if pre_pads is not None and (rank > 2 or groups != 1):
        raise spec.unsupported("pads", pre_pads)
    act_value, act, after = layout_activation(spec, fmt)
    ktot = int(np.prod(kernel_size))

    if groups > 1 and cin_g == 1:
        # One input channel per group (ConvNeXt's depthwise-as-groups): a depthwise conv.
        depthwise = np.ascontiguousarray(kernel.reshape(*kernel_size, groups, filters // groups))
        if rank <= 2:
            epilogue = in_place_epilogue(bias, act_value, act)
            tiles: dict[int, np.ndarray] = {}

            def run_dw(inputs: Any) -> np.ndarray:
                x = channels_last_input(inputs, dtype, fmt, rank, cin)
                pads = window_pads(mode, x.shape[1:-1], kernel_size, strides, dilation)
                return from_last(_depthwise_2d(x, depthwise, strides, dilation, pads, epilogue, tiles), fmt)

            return then_activate(run_dw, after)

        def core(x: np.ndarray) -> np.ndarray:
            return _depthwise_core(x, depthwise, strides, dilation)

    elif groups > 1:
        fg = filters // groups
        # (k..., cg, G*fg) -> (G, k*cg, fg), matching im2col's (taps..., channel) column order.
        grouped = np.ascontiguousarray(kernel.reshape(ktot * cin_g, groups, fg).transpose(1, 0, 2))

        def core(x: np.ndarray) -> np.ndarray:
            out = out_sizes(x.shape[1:-1], kernel_size, strides, dilation)
            cols = im2col(x, kernel_size, strides, dilation, groups)
            y = np.matmul(cols, grouped)  # (G, N, fg)
            return y.transpose(1, 0, 2).reshape(x.shape[0], *out, filters)

    elif rank <= 2:
        # Replaced by its packed form (for the IR product loops) by the first call that runs it as a
        # GEMM when that is worth it (:func:`gemm.worth_packing`); the plain matrix is then dropped.
        weights: np.ndarray | PackedWeights = np.ascontiguousarray(kernel.reshape(ktot * cin, filters))
        undecided = True
        # 3x3 stride-1 float32 Conv2D: Winograd F(2x2, 3x3) when the call is big enough to gain.
        winograd = rank == 2 and winograd_eligible(kernel_size, strides, dilation, dtype)
        # Its transformed kernel, when worth keeping, is made by the first call that runs Winograd and
        # kept (16/9 of the kernel): layers that never run it (small inputs) never hold one.
        keep = winograd and worth_keeping(cin, filters)
        transformed: list[np.ndarray] = []

        def compute(x: np.ndarray, epilogue: Epilogue) -> np.ndarray:
            """The conv of a channels-last input, ``epilogue`` run on every output block."""
            nonlocal weights, undecided
            if x.ndim != rank + 2 or x.shape[-1] != cin:
                raise ValueError(f"expected a rank-{rank + 2} input with {cin} channels, got shape {x.shape}")
            pads = window_pads(mode, x.shape[1:-1], kernel_size, strides, dilation, pre_pads)
            x2, pads2, ks, st, dil = _as_2d(x, pads, kernel_size, strides, dilation)
            if winograd and use_winograd(x2.shape, pads2, filters):
                # (packed weights are unpacked for it: once when U is kept, else a copy a call,
                # small beside a Winograd call's work)
                matrix = weights if isinstance(weights, np.ndarray) else weights.matrix()
                if keep and not transformed:
                    transformed.append(winograd_kernel(matrix))
                out = conv2d_winograd(x2, matrix, pads2, epilogue, kernel=transformed[0] if keep else None)
            else:
                if undecided:
                    if worth_packing(x2, weights, ks, st, dil, pads2):
                        weights = PackedWeights(weights)
                    undecided = False
                out = conv2d_gemm(x2, weights, ks, st, dil, pads2, epilogue)
            return out[:, 0] if rank == 1 else out

        if residual_activation is not None:
            if rank != 2 or act is not None or fmt != "channels_last":
                raise spec.unsupported("activation", spec.get("activation"))

            act_value, post = residual_activation

            def run_residual(inputs: Any, residual: Any) -> np.ndarray:
                x = np.asarray(inputs, dtype=dtype)
                shape = None
                if x.ndim == 4:
                    pads = window_pads(mode, x.shape[1:-1], kernel_size, strides, dilation, pre_pads)
                    padded = [n + a + b for n, (a, b) in zip(x.shape[1:-1], pads, strict=True)]
                    shape = (x.shape[0], *out_sizes(padded, kernel_size, strides, dilation), filters)
                return with_residual(lambda ep: compute(x, ep), bias, act_value, post, residual, shape, dtype)

            return run_residual
        epilogue = in_place_epilogue(bias, act_value, act)

        def run2d(inputs: Any) -> np.ndarray:
            return from_last(compute(to_last(np.asarray(inputs, dtype=dtype), fmt), epilogue), fmt)

        return then_activate(run2d, after)

    elif ktot == 1:
        flat = np.ascontiguousarray(kernel.reshape(cin, filters))

        def core(x: np.ndarray) -> np.ndarray:
            if any(s != 1 for s in strides):
                x = x[(slice(None), *(slice(None, None, s) for s in strides))]
            return (x.reshape(-1, cin) @ flat).reshape(*x.shape[:-1], filters)

    else:
        flat = np.ascontiguousarray(kernel.reshape(ktot * cin, filters))

        def core(x: np.ndarray) -> np.ndarray:
            out = out_sizes(x.shape[1:-1], kernel_size, strides, dilation)
            return (im2col(x, kernel_size, strides, dilation) @ flat).reshape(x.shape[0], *out, filters)

    def run(inputs: Any) -> np.ndarray:
        x = channels_last_input(inputs, dtype, fmt, rank, cin)
        pads = window_pads(mode, x.shape[1:-1], kernel_size, strides, dilation)
        return _finish(core(pad_spatial(x, pads)), bias, act, fmt)

    return then_activate(run, after)


def padded_conv2d(spec: KernelSpec, pads: Pads) -> Kernel:
    """A Conv2D kernel whose input is first zero-padded by ``pads`` (a merged ZeroPadding2D): the
    padding goes into the conv's padded row slabs, never into a padded copy of the whole input."""
    return _make_conv(spec, 2, pre_pads=pads)


def padded_depthwise_conv2d(spec: KernelSpec, pads: Pads) -> Kernel:
    """A DepthwiseConv2D kernel whose input is first zero-padded by ``pads``, as :func:`padded_conv2d`."""
    return _make_depthwise(spec, 2, pre_pads=pads)


def prepared_separable_conv2d(spec: KernelSpec, pads: Pads | None, activation: str | None) -> Kernel:
    """A channels-last SeparableConv2D whose input first goes through ``activation`` (``relu`` /
    ``relu6``; None: none) and zero padding ``pads`` (None: none), both applied to the depthwise
    conv's row slabs: neither the activated nor the padded tensor is made."""
    return _make_separable(spec, 2, pre_pads=pads, pre_activation=activation)


def conv2d_with_residual(spec: KernelSpec, activation: Any, act: Activation | None) -> Kernel:
    """``run(x, residual) = act(conv2d(x) + residual)`` for a linear channels-last Conv2D, ``act``
    the function of the activation named ``activation`` (None: linear), see :func:`with_residual`."""
    return _make_conv(spec, 2, residual_activation=(activation, act))


# --- depthwise and separable -----------------------------------------------------------------


def _make_depthwise(spec: KernelSpec, rank: int, pre_pads: Pads | None = None) -> Kernel:
    """A depthwise conv kernel; with ``pre_pads`` (rank 1/2), the input zero-padded by them first."""
    p = depthwise_conv_params(spec, rank)
    dtype, fmt, kernel_size, strides, dilation = p.dtype, p.fmt, p.kernel_size, p.strides, p.dilation
    mode, channels, bias = p.mode, p.channels, p.bias
    kernel = np.ascontiguousarray(p.kernel)
    if pre_pads is not None and rank > 2:
        raise spec.unsupported("pads", pre_pads)
    act_value, act, after = layout_activation(spec, fmt)
    epilogue = in_place_epilogue(bias, act_value, act)
    tiles: dict[int, np.ndarray] = {}
    slabs = _OneSlabs(kernel, strides, dilation, mode, pre_pads, None, epilogue) if rank == 2 else None

    def run(inputs: Any) -> np.ndarray:
        x = channels_last_input(inputs, dtype, fmt, rank, channels)
        one = None if slabs is None else slabs.find(x)
        if one is not None:
            out = np.empty(one.out, dtype=np.float32)
            slabs.run(x, one, out)
            epilogue(out, None)
            return from_last(out, fmt)
        pads = window_pads(mode, x.shape[1:-1], kernel_size, strides, dilation, pre_pads)
        if rank <= 2:
            return from_last(_depthwise_2d(x, kernel, strides, dilation, pads, epilogue, tiles), fmt)
        return _finish(_depthwise_core(pad_spatial(x, pads), kernel, strides, dilation), bias, act, fmt)

    return then_activate(run, after)


def _make_separable(
    spec: KernelSpec, rank: int, pre_pads: Pads | None = None, pre_activation: str | None = None
) -> Kernel:
    """A separable conv kernel; with ``pre_pads`` (rank 2), the input zero-padded by them first; with
    ``pre_activation`` (``relu`` / ``relu6``, rank 1/2), that activation applied to the input first
    (on the depthwise conv's row slabs, in cache)."""
    p = separable_params(spec, rank)
    dtype, fmt, kernel_size, strides, dilation = p.dtype, p.fmt, p.kernel_size, p.strides, p.dilation
    mode, mult, channels, filters, bias = p.mode, p.mult, p.channels, p.filters, p.bias
    depthwise = np.ascontiguousarray(p.depthwise)
    pointwise = np.ascontiguousarray(p.pointwise)
    act_value, act, after = layout_activation(spec, fmt)
    epilogue = in_place_epilogue(bias, act_value, act)
    if (pre_pads is not None or pre_activation is not None) and (rank > 2 or fmt != "channels_last"):
        raise spec.unsupported("data_format", fmt)
    pre = None
    if pre_activation is not None:
        if pre_activation not in ("relu", "relu6"):
            raise spec.unsupported("activation", pre_activation)
        pre = rowwise.relu_ if pre_activation == "relu" else rowwise.relu6_
    tiles: dict[int, np.ndarray] = {}
    slabs = (
        _OneSlabs(depthwise, strides, dilation, mode, pre_pads, pre_activation, _no_epilogue)
        if rank == 2
        else None
    )

    def run(inputs: Any) -> np.ndarray:
        x = channels_last_input(inputs, dtype, fmt, rank, channels)
        one = None if slabs is None else slabs.find(x)
        if one is not None:
            # The depthwise stage into scratch, then the pointwise GEMM and the epilogue.
            mid = scratch(2, one.out, np.float32)
            slabs.run(x, one, mid)
            out = np.empty((*one.out[:3], filters), dtype=np.float32)
            flat = out.reshape(-1, filters)
            matmul(mid.reshape(-1, one.out[3]), pointwise, flat)
            epilogue(flat, None)
            return from_last(out, fmt)
        pads = window_pads(mode, x.shape[1:-1], kernel_size, strides, dilation, pre_pads)
        if rank <= 2:
            mid = _depthwise_2d(x, depthwise, strides, dilation, pads, _no_epilogue, tiles, pre)
            mid2 = mid[:, None] if rank == 1 else mid
            out = conv2d_gemm(mid2, pointwise, (1, 1), (1, 1), (1, 1), [(0, 0), (0, 0)], epilogue)
            return from_last(out[:, 0] if rank == 1 else out, fmt)
        mid = _depthwise_core(pad_spatial(x, pads), depthwise, strides, dilation)
        out = (mid.reshape(-1, channels * mult) @ pointwise).reshape(*mid.shape[:-1], filters)
        return _finish(out, bias, act, fmt)

    return then_activate(run, after)


@dataclass(frozen=True)
class _OneSlab:
    """The geometry of a 2-D depthwise conv small enough for one padded slab (one block of
    :func:`_depthwise_blocks`) for one input shape."""

    padded: tuple[int, int, int, int]  # (B, Hp, Wp, C)
    top: int
    left: int
    out: tuple[int, int, int, int]  # (B, oh, ow, C)
    work: float  # for spread_parts: a kernel this big is spread over threads, so blocked


class _OneSlabs:
    """A 2-D depthwise conv (alone or a separable conv's first stage) run in one padded slab when
    its input is small enough: what the blocked path computes for one block, without its per-call
    bookkeeping. The geometry is worked out once per input shape; the padded input (with a merged
    ReLU clamped on the way) is written in one compiled pass, then the depthwise loops run. At batch
    1, NASNetMobile's 160 separable convs spent more time in the bookkeeping than in their loops and
    GEMMs. Needs the ``jit`` extra, float32 and a depth multiplier of 1."""

    def __init__(
        self,
        kernel: np.ndarray,
        strides: tuple[int, ...],
        dilation: tuple[int, ...],
        mode: str,
        pre_pads: Pads | None,
        pre_activation: str | None,
        epilogue: Epilogue,
    ) -> None:
        clamp = bias_act.bounds(pre_activation)
        self.flat = kernel.reshape(*kernel.shape[:-2], -1)
        self.usable = kernel.shape[-1] == 1 and kernel.dtype == np.float32 and clamp is not None
        self.strides, self.dilation, self.mode, self.pre_pads = strides, dilation, mode, pre_pads
        self.clamp = clamp or (-np.inf, np.inf)
        self.epilogue = epilogue  # what runs on the depthwise output (its cost counts as the blocked path's)
        self.shapes: dict[tuple[int, ...], _OneSlab | None] = {}

    def find(self, x: np.ndarray) -> _OneSlab | None:
        """The one-slab geometry for ``x`` (channels-last), or None when the blocked path runs it: more
        than one block, spread over threads, not float32, or no compiled loops."""
        if not self.usable or x.dtype != np.float32 or not jit.available():
            return None
        if x.shape not in self.shapes:
            self.shapes[x.shape] = self._geometry(x.shape)
        one = self.shapes[x.shape]
        return one if one is not None and spread_parts(one.work) == 1 else None

    def _geometry(self, shape: tuple[int, ...]) -> _OneSlab | None:
        batch, height, width, channels = shape
        kh, kw = self.flat.shape[:2]
        pads = window_pads(self.mode, shape[1:3], (kh, kw), self.strides, self.dilation, self.pre_pads)
        (top, bottom), (left, right) = pads
        hp, wp = height + top + bottom, width + left + right
        oh, ow = out_sizes((hp, wp), (kh, kw), self.strides, self.dilation)
        if (
            oh < 1
            or ow < 1
            or batch * oh * ow >= _depthwise_block_units(channels, np.dtype(np.float32).itemsize)
        ):
            return None
        work = _depthwise_work(batch * oh * ow, channels, (kh, kw), self.epilogue)
        return _OneSlab((batch, hp, wp, channels), top, left, (batch, oh, ow, channels), work)

    def run(self, x: np.ndarray, one: _OneSlab, out: np.ndarray) -> None:
        """``out`` (C-ordered, ``one.out``) = the depthwise conv of ``x`` (no bias, no activation)."""
        padded = scratch(0, one.padded, np.float32)
        jit.pad_clamp(np.ascontiguousarray(x), padded, one.top, one.left, self.clamp)
        strides, dilation = self.strides, self.dilation
        jit.depthwise(padded, self.flat, out, (strides[0], strides[1]), (dilation[0], dilation[1]))


# --- the fast factories (``modelgraph/runner/fast/__init__.py`` lists what each replaces) ------------

conv1d = ranked_factory(_make_conv, 1, name="conv1d")
conv2d = ranked_factory(_make_conv, 2, name="conv2d")
conv3d = ranked_factory(_make_conv, 3, name="conv3d")
depthwise_conv1d = ranked_factory(_make_depthwise, 1, name="depthwise_conv1d")
depthwise_conv2d = ranked_factory(_make_depthwise, 2, name="depthwise_conv2d")
separable_conv1d = ranked_factory(_make_separable, 1, name="separable_conv1d")
separable_conv2d = ranked_factory(_make_separable, 2, name="separable_conv2d")
