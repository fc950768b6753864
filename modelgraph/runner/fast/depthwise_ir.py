"""Depthwise convolution loops written as LLVM IR with explicit vectors and compiled with llvmlite
(installed with Numba by the ``jit`` extra), used by :func:`modelgraph.runner.fast.jit.depthwise`.

A depthwise conv does 9-49 multiply-adds per output value and nothing is shared across channels, so
its speed is set by how many loads each multiply-add needs. Loops written for Numba leave that to
LLVM's loop vectorizer, which only vectorizes an innermost loop: the best such loops (a stretch of an
output row as the accumulator, the kernel tiled along it) load the accumulator, one input value and
one tiled weight per product, and reached 30-42 GFLOP/s on one core of an AVX-512 machine.

Here the vectors are in the IR: a *tile* is ``pixels`` neighbouring output pixels (8 with AVX-512,
4 with narrower vectors) times one vector of channels (16 floats with AVX-512, 8 with AVX, else 4),
its accumulators held in registers across every tap. For each kernel row, each tap's weight vector is
loaded once and used for every pixel of the tile, and the input vectors of neighbouring taps and
pixels overlap: with the column stride fixed in the code (1 or 2, no column dilation), the offsets
are constants and LLVM loads each input vector once per kernel row (``pixels + kw - 1`` loads for
``pixels * kw`` fused multiply-adds at stride 1). The last channel block is read and written under a
mask, and a row whose width is not a multiple of the tile ends with one tile overlapping the one
before (rewriting a few pixels with the same values).

Measured on one core of the AVX-512 machine against the Numba row loops (GFLOP/s): 5x5 with 44
channels 36 -> 98-119, 3x3 with 88 channels 37-42 -> 58-79, 7x7 with 11 channels 30 -> 117-125,
stride-2 5x5 and 7x7 with 32 channels 19-20 -> 45-47.

Each product is fused into its sum (``llvm.fma``: one rounding per tap), taps added row by row and
column by column from zero: within float32 rounding of every other path, not bit for bit.

Kernels are compiled per (kernel width, column stride) on first use (150-230 ms each on the AVX-512
machine; NASNetMobile needs six) and their machine code is cached on disk
(:mod:`modelgraph.runner.fast.object_cache`, about 2 ms to load), keyed by the IR, the CPU and
llvmlite's version.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from modelgraph.runner.fast.ir import Function, Target, callers, compiled, declarations, host_target

# Kernel widths unrolled in the IR; wider kernels run a loop over their columns (no shared loads).
MAX_UNROLLED_WIDTH = 11

# Column strides given their own code (constant input offsets); others are read at run time.
CONSTANT_STRIDES = (1, 2)

# The entry point's arguments: three pointers, then the sizes and the strides (in floats) it runs on.
ENTRY_POINTERS = ("src", "ker", "dst")
ENTRY_SIZES = (
    *("nb", "hb", "ow", "C"),  # the output's shape
    *("src_n", "src_h", "src_w", "dst_n", "dst_h", "dst_w"),  # strides
    *("kh", "kw", "sh", "sw", "dh", "dw"),  # the kernel's size, strides and dilation
)


def _tile(target: Target, kw: int | None, pixels: int, masked: bool, stride: int | None) -> str:
    """One tile: ``pixels`` output pixels times one vector of channels, every tap of the kernel.

    Arguments: the input at the tile's first pixel, first kernel row and first channel; the kernel
    at its first tap and channel; the output at the tile's first pixel and channel; the kernel's
    height and width; the input's distance between kernel rows, taps and output pixels; the
    channel count (the kernel's distance between taps); the output's distance between pixels; the
    lane mask."""
    vec, lanes = target.vector, target.lanes
    mask = "%mask" if masked else None
    f = Function(target)
    f.lines.append(
        f"define internal void @{_tile_name(kw, pixels, masked)}(ptr noalias %src, ptr noalias %ker, "
        "ptr noalias %dst, i64 %kh, i64 %kw, i64 %row, i64 %tap, i64 %px, i64 %C, i64 %out_px, "
        f"<{lanes} x i1> %mask) alwaysinline nounwind {{"
    )
    f.label("entry")

    def taps(kx: str | int, sums: list[str], src_row: str, ker_row: str) -> list[str]:
        weight = f.load_vector(ker_row, f.let(f"mul i64 %C, {kx}"), mask)
        new = []
        for p in range(pixels):
            if stride is not None and isinstance(kx, int):
                # constant offsets: LLVM loads each input vector once across taps and pixels
                offset = f.let(f"mul i64 %tap, {p * stride + kx}")
            else:
                offset = f.let(f"add i64 {f.let(f'mul i64 %px, {p}')}, {f.let(f'mul i64 %tap, {kx}')}")
            new.append(f.fma(f.load_vector(src_row, offset, mask), weight, sums[p]))
        return new

    def kernel_row(ky: str, sums: list[str]) -> list[str]:
        src_row = f.let(f"getelementptr inbounds float, ptr %src, i64 {f.let(f'mul i64 {ky}, %row')}")
        taps_before = f.let(f"mul i64 {ky}, %kw")
        ker_row = f.let(f"getelementptr inbounds float, ptr %ker, i64 {f.let(f'mul i64 {taps_before}, %C')}")
        if kw is not None:
            for kx in range(kw):
                sums = taps(kx, sums, src_row, ker_row)
            return sums
        return f.loop(0, "%kw", 1, lambda kx, s: taps(kx, s, src_row, ker_row), [(vec, v) for v in sums])[1]

    _, sums = f.loop(0, "%kh", 1, kernel_row, [(vec, "zeroinitializer")] * pixels)
    for p in range(pixels):
        f.store_vector(sums[p], "%dst", f.let(f"mul i64 %out_px, {p}"), mask)
    f.emit("ret void")
    f.lines.append("}")
    return "\n".join(f.lines)


def _tile_name(kw: int | None, pixels: int, masked: bool) -> str:
    return f"tile_{kw or 'any'}_{pixels}{'_masked' if masked else ''}"


def _tile_sizes(target: Target) -> tuple[int, ...]:
    """Tile widths, largest first: a row takes the largest that fits."""
    return tuple(sorted({target.pixels, max(1, target.pixels // 2), 1}, reverse=True))


def _entry(target: Target, kw: int | None) -> str:
    """The whole conv: batches, output rows, tiles along the row, channel blocks."""
    lanes = target.lanes
    f = Function(target)
    params = ", ".join([*(f"ptr noalias %{a}" for a in ENTRY_POINTERS), *(f"i64 %{a}" for a in ENTRY_SIZES)])
    f.lines.append(f"define void @depthwise({params}) nounwind {{")
    f.label("entry")
    row = f.let("mul i64 %dh, %src_h")
    tap = f.let("mul i64 %dw, %src_w")
    px = f.let("mul i64 %sw, %src_w")
    out_row = f.let("mul i64 %sh, %src_h")
    rest = f.let(f"urem i64 %C, {lanes}")
    whole = f.let(f"sub i64 %C, {rest}")
    splat = f.let(f"insertelement <{lanes} x i64> poison, i64 {rest}, i64 0")
    rests = f.let(
        f"shufflevector <{lanes} x i64> {splat}, <{lanes} x i64> poison, <{lanes} x i32> zeroinitializer"
    )
    lane_ids = ", ".join(f"i64 {i}" for i in range(lanes))
    mask = f.let(f"icmp ult <{lanes} x i64> <{lane_ids}>, {rests}")
    all_lanes = "<" + ", ".join("i1 true" for _ in range(lanes)) + ">"
    has_rest = f.let(f"icmp ne i64 {rest}, 0")

    def tile_call(pixels: int, masked: bool, src_at: str, dst_at: str, channel: str) -> None:
        src = f.let(f"getelementptr inbounds float, ptr %src, i64 {f.let(f'add i64 {src_at}, {channel}')}")
        dst = f.let(f"getelementptr inbounds float, ptr %dst, i64 {f.let(f'add i64 {dst_at}, {channel}')}")
        ker = f.let(f"getelementptr inbounds float, ptr %ker, i64 {channel}")
        lane_mask = f"<{lanes} x i1> {mask if masked else all_lanes}"
        f.emit(
            f"call void @{_tile_name(kw, pixels, masked)}(ptr {src}, ptr {ker}, ptr {dst}, i64 %kh, i64 %kw, "
            f"i64 {row}, i64 {tap}, i64 {px}, i64 %C, i64 %dst_w, {lane_mask})"
        )

    def channels(pixels: int, src_at: str, dst_at: str) -> None:
        f.loop(0, whole, lanes, lambda c, _: tile_call(pixels, False, src_at, dst_at, c))
        f.branch(has_rest, lambda: tile_call(pixels, True, src_at, dst_at, whole), lambda: None)

    def tiles_at(pixels: int, x: str, src_row: str, dst_row: str) -> None:
        src_at = f.let(f"add i64 {src_row}, {f.let(f'mul i64 {x}, {px}')}")
        dst_at = f.let(f"add i64 {dst_row}, {f.let(f'mul i64 {x}, %dst_w')}")
        channels(pixels, src_at, dst_at)

    def output_row(n_src: str, n_dst: str) -> Callable[[str, list[str]], None]:
        def body(y: str, _: list[str]) -> None:
            src_row = f.let(f"add i64 {n_src}, {f.let(f'mul i64 {y}, {out_row}')}")
            dst_row = f.let(f"add i64 {n_dst}, {f.let(f'mul i64 {y}, %dst_h')}")
            f.tiles("%ow", _tile_sizes(target), lambda pixels, x: tiles_at(pixels, x, src_row, dst_row))

        return body

    def batch(n: str, _: list[str]) -> None:
        f.loop(0, "%hb", 1, output_row(f.let(f"mul i64 {n}, %src_n"), f.let(f"mul i64 {n}, %dst_n")))

    f.loop(0, "%nb", 1, batch)
    f.emit("ret void")
    f.lines.append("}")
    return "\n".join(f.lines)


def module_source(target: Target, kw: int | None, stride: int | None) -> str:
    """The LLVM IR module for kernels ``kw`` wide (None: any width) at column stride ``stride``
    without column dilation (None: any stride and dilation, read at run time)."""
    parts = declarations(target)
    for pixels in _tile_sizes(target):
        for masked in (False, True):
            parts.append(_tile(target, kw, pixels, masked, stride))
    parts.append(_entry(target, kw))
    return "\n\n".join(parts) + "\n"


def depthwise(
    src: np.ndarray,
    kernel: np.ndarray,
    dst: np.ndarray,
    strides: tuple[int, int],
    dilation: tuple[int, int],
    target: Target | None = None,
) -> None:
    """``dst`` (``(nb, hb, ow, C)``) = the depthwise conv of the padded slab ``src`` (``(nb, rows, Wp,
    C)``), kernel ``(kh, kw, C)``, all float32 with unit channel strides. Raises ValueError when the
    arrays do not fit together (the loops check no bounds themselves)."""
    if not (src.dtype == kernel.dtype == dst.dtype == np.float32):
        raise ValueError("the IR depthwise loops take float32 arrays")
    if src.ndim != 4 or kernel.ndim != 3 or dst.ndim != 4:
        raise ValueError(
            f"depthwise shapes do not agree: src {src.shape}, kernel {kernel.shape}, dst {dst.shape}"
        )
    kw = kernel.shape[1]
    unrolled = kw if kw <= MAX_UNROLLED_WIDTH else None
    stride = strides[1] if dilation[1] == 1 and strides[1] in CONSTANT_STRIDES else None
    target = target or host_target()
    address = compiled(
        ("depthwise", target, unrolled, stride),
        target,
        lambda: module_source(target, unrolled, stride),
        "depthwise",
    )
    callers().depthwise(address, src, kernel, dst, strides[0], strides[1], dilation[0], dilation[1])
