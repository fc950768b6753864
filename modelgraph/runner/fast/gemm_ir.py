"""Matrix products with few columns (``a @ b``, ``b`` at most :data:`MAX_COLUMNS` wide) and dense 2-D
convs with that few filters, as LLVM IR loops compiled per column count
(:mod:`modelgraph.runner.fast.ir`): the convolutions' GEMMs when BLAS would run them on one thread
anyway (:func:`matmul`), and convs without an im2col copy (:func:`conv_rows`, see
:func:`_tile` for how a conv's kernel rows are read in place; :data:`MIN_CONV_ROW` for when).

The 1x1 convolutions of NASNet-like and mobile models multiply many pixels by narrow kernels: 44,
88 or 176 output channels, 11 or 22 in the stems. OpenBLAS packs both operands and computes in
blocks tuned for wide matrices; with 44 columns it ran at 150-170 GFLOP/s on one core of an AVX-512
machine whose peak is about 240, with 11 at 41-47. Here a tile is ``rows`` rows of the result times
up to four vectors of columns (the last one masked), all of it in registers while ``k`` runs over
the whole depth: each step loads the tile's row of ``b`` once and broadcasts one value of ``a`` per
row, so every load serves four to sixteen fused multiply-adds. Measured on one core against
``np.matmul`` (GFLOP/s): 6272x264 @ 264x44 172 -> 243, 1568x88 @ 88x88 209 -> 242, 392x176 @ 176x176
234 -> 257, 25088x22 @ 22x22 112 -> 172, 25088x11 @ 11x11 47 -> 136; 256 columns gained only 4%,
so wider products stay with BLAS. ``b`` must fit in the core's L2 cache with room to spare
(:data:`MAX_B_BYTES`): the loops do not block the depth.

Products by packed weights (:func:`packed_source`, entry ``packed``; the weights and the threads:
:mod:`modelgraph.runner.fast.packed`) use the same tiles over blocks of the depth, any column count.

The sums run over ``k`` in order from zero with one rounding per fused multiply-add: within float32
rounding of BLAS, not bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from modelgraph.runner import parallel
from modelgraph.runner.fast import jit
from modelgraph.runner.fast.ir import (
    Function,
    Target,
    callers,
    compiled,
    declarations,
    host_target,
    lane_mask,
)

# Products with more columns than this go to BLAS.
MAX_COLUMNS = 192
# ... and so do those whose ``b`` is larger than this (it is read once per tile of rows).
MAX_B_BYTES = 1 << 20

# Dense 2-D convs run by the IR conv loops need output rows at least this wide (a 14-pixel row ran
# at 0.84x im2col + GEMM's speed, 28 at 1.0x, 56 at 1.4x, 112 at 1.7x for 3 input channels).
MIN_CONV_ROW = 28

# Vectors of columns one tile holds, at most.
_MAX_VECTORS = {16: 4, 8: 3, 4: 3}


def _registers(target: Target) -> int:
    return 32 if target.lanes == 16 else 16


def _rows(target: Target, vectors: int) -> int:
    """Rows of a tile ``vectors`` wide: as many as the vector registers hold (accumulators, the row of
    ``b``, one broadcast value and two spare), at most 16."""
    return max(1, min(16, (_registers(target) - 3 - vectors) // vectors))


def _blocks(target: Target, columns: int) -> list[tuple[int, list[int]]]:
    """The column blocks of a product ``columns`` wide: ``(first column, lanes used per vector)``."""
    lanes = target.lanes
    widths = [lanes] * (columns // lanes) + ([columns % lanes] if columns % lanes else [])
    most = _MAX_VECTORS[lanes]
    return [(i * lanes, widths[i : i + most]) for i in range(0, len(widths), most)]


def _tile_name(rows: int, widths: list[int]) -> str:
    return f"tile_{rows}_{'_'.join(map(str, widths))}"


def _tile(target: Target, rows: int, widths: list[int]) -> str:
    """``rows`` rows of the result times ``len(widths)`` vectors of columns, over the whole depth:
    ``kh`` parts of ``K`` values each, part ``i`` reading ``a`` from ``i * %arow`` on (its rows
    ``%lda`` apart) and ``b`` from ``i * %brow`` on. A product is one part. In a dense 2-D conv the
    rows are output pixels and part ``i`` is kernel row ``i``, whose taps are ``kw * C`` contiguous
    values of an input row: the rows are the column stride times ``C`` apart, so neighbouring
    pixels' windows overlap and no im2col copy is made."""
    lanes, vec = target.lanes, target.vector
    f = Function(target)
    f.lines.append(
        f"define internal void @{_tile_name(rows, widths)}(ptr noalias %a, ptr noalias %b, ptr noalias %c, "
        "i64 %K, i64 %lda, i64 %ldb, i64 %ldc, i64 %kh, i64 %arow, i64 %brow, i1 %acc) alwaysinline nounwind {"
    )
    f.label("entry")
    masks = [lane_mask(lanes, used) for used in widths]

    def step(a_base: str, b_base: str, k: str, sums: list[str]) -> list[str]:
        row_of_b = f.pointer(b_base, f.let(f"mul i64 {k}, %ldb"))
        weights = [f.load_vector(row_of_b, v * lanes, mask) for v, mask in enumerate(masks)]
        new = list(sums)
        for r in range(rows):
            row_start = f.let(f"mul i64 %lda, {r}")
            offset = f.let(f"add i64 {row_start}, {k}")
            at = f.pointer(a_base, offset)
            value = f.let(f"load float, ptr {at}, align 4")
            one = f.let(f"insertelement {vec} poison, float {value}, i64 0")
            every = f.let(f"shufflevector {vec} {one}, {vec} poison, <{lanes} x i32> zeroinitializer")
            for v in range(len(widths)):
                i = r * len(widths) + v
                new[i] = f.fma(every, weights[v], new[i])
        return new

    def depth(a_base: str, b_base: str, sums: list[str]) -> list[str]:
        return f.loop(0, "%K", 1, lambda k, s: step(a_base, b_base, k, s), [(vec, v) for v in sums])[1]

    def part(i: str, sums: list[str]) -> list[str]:
        a_base = f.pointer("%a", f.let(f"mul i64 {i}, %arow"))
        b_base = f.pointer("%b", f.let(f"mul i64 {i}, %brow"))
        return depth(a_base, b_base, sums)

    _, sums = f.loop(0, "%kh", 1, part, [(vec, "zeroinitializer")] * (rows * len(widths)))
    for r in range(rows):
        row_of_c = f.pointer("%c", f.let(f"mul i64 %ldc, {r}"))
        for v, mask in enumerate(masks):
            total = sums[r * len(widths) + v]
            # %acc: add the sums to what ``c`` holds (a later block of the depth); else overwrite it.
            # (The first block's load reads whatever is there and the select drops it.)
            held = f.let(f"fadd {vec} {total}, {f.load_vector(row_of_c, v * lanes, mask)}")
            f.store_vector(f.let(f"select i1 %acc, {vec} {held}, {vec} {total}"), row_of_c, v * lanes, mask)
    f.emit("ret void")
    f.lines.append("}")
    return "\n".join(f.lines)


def _call_tile(
    f: Function,
    rows: int,
    widths: list[int],
    pointers: tuple[str, str, str],
    sizes: tuple[str, ...],
    acc: str = "false",
) -> None:
    """Call the tile of ``rows`` x ``widths`` on pointers ``(a, b, c)`` with its sizes ``(K, lda, ldb,
    ldc, kh, arow, brow)``, adding to ``c`` when ``acc`` (an ``i1``) is true."""
    args = ", ".join([*(f"ptr {p}" for p in pointers), *(f"i64 {v}" for v in sizes), f"i1 {acc}"])
    f.emit(f"call void @{_tile_name(rows, widths)}({args})")


# The entry point's arguments after its three pointers (src, weights, dst), in floats: the output
# block's shape, the kernel's height and its row length (kw * C), the input's step between images,
# output rows, kernel rows and output pixels, the weights' step between kernel rows and between taps
# (the column count), the output's step between images, rows and pixels. A product a @ b is a conv
# of one image, one output row of M pixels and one kernel row of K taps, its pixels lda apart.
ENTRY_SIZES = (
    *("nb", "hb", "ow", "kh", "K"),
    *("src_n", "row_step", "arow", "src_px"),
    *("brow", "ldb", "dst_n", "dst_h", "dst_px"),
)


def _entry(target: Target, columns: int) -> str:
    """A dense 2-D conv without column dilation (or a product): every image and output row, every
    column block, tiles of output pixels along the row (the last one overlapping the one before, or
    pixel by pixel when the row is narrower than a tile)."""
    f = Function(target)
    params = ", ".join(
        ["ptr noalias %src", "ptr noalias %w", "ptr noalias %dst", *(f"i64 %{s}" for s in ENTRY_SIZES)]
    )
    f.lines.append(f"define void @conv({params}) nounwind {{")
    f.label("entry")

    def tile_at(rows: int, widths: list[int], first_column: int, src_row: str, dst_row: str, x: str) -> None:
        src_at = f.let(f"add i64 {src_row}, {f.let(f'mul i64 {x}, %src_px')}")
        a = f.pointer("%src", src_at)
        out_at = f.let(f"add i64 {dst_row}, {f.let(f'mul i64 {x}, %dst_px')}")
        c = f.pointer("%dst", f.let(f"add i64 {out_at}, {first_column}"))
        b = f.pointer("%w", first_column)
        _call_tile(f, rows, widths, (a, b, c), ("%K", "%src_px", "%ldb", "%dst_px", "%kh", "%arow", "%brow"))

    def output_row(src_row: str, dst_row: str) -> None:
        for first_column, widths in _blocks(target, columns):
            sizes = (_rows(target, len(widths)), 1)
            f.tiles(
                "%ow",
                sizes,
                lambda rows, x, w=widths, c=first_column: tile_at(rows, w, c, src_row, dst_row, x),
            )

    def image(n: str, _: list[str]) -> None:
        src_image = f.let(f"mul i64 {n}, %src_n")
        dst_image = f.let(f"mul i64 {n}, %dst_n")

        def row(y: str, _: list[str]) -> None:
            src_row = f.let(f"add i64 {src_image}, {f.let(f'mul i64 {y}, %row_step')}")
            dst_row = f.let(f"add i64 {dst_image}, {f.let(f'mul i64 {y}, %dst_h')}")
            output_row(src_row, dst_row)

        f.loop(0, "%hb", 1, row)

    f.loop(0, "%nb", 1, image)
    f.emit("ret void")
    f.lines.append("}")
    return "\n".join(f.lines)


def module_source(target: Target, columns: int) -> str:
    """The LLVM IR module running dense 2-D convs with ``columns`` filters, and products by a ``b``
    ``columns`` wide (entry ``conv``)."""
    parts = declarations(target)
    shapes = {
        (rows, tuple(widths))
        for _, widths in _blocks(target, columns)
        for rows in (_rows(target, len(widths)), 1)
    }
    parts += [_tile(target, rows, list(widths)) for rows, widths in sorted(shapes)]
    parts.append(_entry(target, columns))
    return "\n\n".join(parts) + "\n"


# --- products by packed weights ------------------------------------------------------------------

# A packed weight matrix is stored as panels of PANEL columns, each ``(K, PANEL)`` C-ordered (the last
# panel's unused columns zero), so a tile reads its row of weights from consecutive memory; the depth
# is taken in blocks of DEPTH_BLOCK (a block of a panel, 64 KB with 64 columns, stays in L2 while
# every tile of rows reads it) and the rows in blocks of ROW_BLOCK (their block of ``a`` stays in L2
# while every panel reads it).
DEPTH_BLOCK = 256
ROW_BLOCK = 192

# The packed entry point's arguments after its three pointers (a, panels, c): the rows and depth of
# ``a``, its step between rows and the result's, the panels to do (first <= j < last) and how many
# panels are full (a last narrower panel follows them).
PACKED_SIZES = ("M", "K", "lda", "ldc", "first", "last", "full")


def panel_width(target: Target) -> int:
    """Columns of one panel of packed weights: a widest tile's."""
    return target.lanes * _MAX_VECTORS[target.lanes]


def _widths(target: Target, columns: int) -> list[int]:
    lanes = target.lanes
    return [lanes] * (columns // lanes) + ([columns % lanes] if columns % lanes else [])


def _packed_entry(target: Target, rest: int) -> str:
    """``c[:, panels first..last]`` = ``a @ panels``: depth blocks, row blocks, panels, then tiles of
    rows over one block of the depth (the first depth block writes ``c``, later ones add to it)."""
    f = Function(target)
    width = panel_width(target)
    params = ", ".join(
        ["ptr noalias %a", "ptr noalias %bp", "ptr noalias %c", *(f"i64 %{s}" for s in PACKED_SIZES)]
    )
    f.lines.append(f"define void @packed({params}) nounwind {{")
    f.label("entry")
    panel_floats = f.let(f"mul i64 %K, {width}")

    def panel(j: str, widths: list[int], k0: str, kc: str, acc: str, m0: str, mc: str) -> None:
        b_at = f.let(f"add i64 {f.let(f'mul i64 {j}, {panel_floats}')}, {f.let(f'mul i64 {k0}, {width}')}")
        b = f.pointer("%bp", b_at)
        c_at = f.let(f"add i64 {f.let(f'mul i64 {m0}, %ldc')}, {f.let(f'mul i64 {j}, {width}')}")
        a_at = f.let(f"add i64 {f.let(f'mul i64 {m0}, %lda')}, {k0}")

        def tile_at(rows: int, x: str) -> None:
            a_x = f.let(f"add i64 {a_at}, {f.let(f'mul i64 {x}, %lda')}")
            c_x = f.let(f"add i64 {c_at}, {f.let(f'mul i64 {x}, %ldc')}")
            a = f.pointer("%a", a_x)
            c = f.pointer("%c", c_x)
            _call_tile(f, rows, widths, (a, b, c), (kc, "%lda", str(width), "%ldc", "1", "0", "0"), acc)

        f.exact_tiles(mc, _rows(target, len(widths)), tile_at)

    def rows_block(k0: str, kc: str, acc: str, m0: str, mc: str) -> None:
        stop = f.let(f"select i1 {f.let('icmp slt i64 %last, %full')}, i64 %last, i64 %full")
        full = _widths(target, width)
        f.loop("%first", stop, 1, lambda j, _: panel(j, full, k0, kc, acc, m0, mc))
        if rest:
            f.branch(
                f.let("icmp sgt i64 %last, %full"),
                lambda: panel("%full", _widths(target, rest), k0, kc, acc, m0, mc),
                lambda: None,
            )

    def blocks(count: str, size: int, body: Callable[[str, str], None]) -> None:
        """``body(start, length)`` over blocks of ``size`` covering ``0 .. count - 1``."""
        end, _ = f.loop(0, count, size, lambda i, _: body(i, str(size)))
        rest_length = f.let(f"sub i64 {count}, {end}")
        f.branch(f.let(f"icmp sgt i64 {rest_length}, 0"), lambda: body(end, rest_length), lambda: None)

    def depth_block(k0: str, kc: str) -> None:
        acc = f.let(f"icmp sgt i64 {k0}, 0")
        blocks("%M", ROW_BLOCK, lambda m0, mc: rows_block(k0, kc, acc, m0, mc))

    blocks("%K", DEPTH_BLOCK, depth_block)
    f.emit("ret void")
    f.lines.append("}")
    return "\n".join(f.lines)


def packed_source(target: Target, rest: int) -> str:
    """The LLVM IR module of products by packed weights whose last panel is ``rest`` columns wide (0:
    every panel full), entry ``packed``."""
    shapes = {
        (rows, tuple(_widths(target, panel_width(target))))
        for rows in range(1, 1 + _rows(target, _MAX_VECTORS[target.lanes]))
    }
    if rest:
        widths = tuple(_widths(target, rest))
        shapes |= {(rows, widths) for rows in range(1, 1 + _rows(target, len(widths)))}
    parts = declarations(target) + [_tile(target, rows, list(widths)) for rows, widths in sorted(shapes)]
    parts.append(_packed_entry(target, rest))
    return "\n\n".join(parts) + "\n"


def packed_address(target: Target, rest: int) -> int:
    """The compiled ``packed`` entry for a last panel ``rest`` columns wide."""
    return compiled(("packed", target, rest), target, lambda: packed_source(target, rest), "packed")


def product(a: np.ndarray, b: np.ndarray, out: np.ndarray, target: Target | None = None) -> None:
    """``out`` = ``a @ b`` by the IR loops: 2-D float32, the rows of ``a``, ``b`` and ``out`` unit-stride
    and apart. ValueError for anything else."""
    if not (a.dtype == b.dtype == out.dtype == np.float32) or a.ndim != 2 or b.ndim != 2 or out.ndim != 2:
        raise ValueError("the IR gemm loops take 2-D float32 arrays")
    if not callers().gemm(_address(target or host_target(), b.shape[1]), a, b, out, 1 << 62):
        raise ValueError(f"the IR gemm loops cannot take these arrays: {a.shape} @ {b.shape} -> {out.shape}")


_F32 = np.dtype(np.float32)
_host_addresses: dict[int, int] = {}


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """``np.matmul(a, b, out=out)`` for the convolutions' 2-D float32 GEMMs: by the IR loops when
    ``b`` is narrow and small, the layouts fit (:func:`product`), and BLAS would run on one thread
    anyway (the call runs in a block share or a step beside others, or the run has one thread); else
    by BLAS. About 1 us of checks a call (NASNetMobile makes about 300 a run). ``b`` may also be
    packed weights (:class:`modelgraph.runner.fast.packed.PackedWeights`): their own product."""
    if type(b) is not np.ndarray:
        b.product(a, out)
        return
    if (
        b.ndim == 2
        and b.shape[1] <= MAX_COLUMNS
        and a.dtype is _F32
        and b.dtype is _F32
        and out.dtype is _F32
        and a.ndim == 2
        and out.ndim == 2
        and parallel.blas_single_threaded()
        and jit.available()
    ):
        columns = b.shape[1]
        address = _host_addresses.get(columns) or _host_address(columns)
        if callers().gemm(address, a, b, out, MAX_B_BYTES):
            return
    np.matmul(a, b, out=out)


def _host_address(columns: int) -> int:
    address = _host_addresses[columns] = _address(host_target(), columns)
    return address


def _address(target: Target, columns: int) -> int:
    return compiled(("gemm", target, columns), target, lambda: module_source(target, columns), "conv")


def conv_applies(
    dtype: np.dtype, filters: int, weights_bytes: int, out_width: int, column_dilation: int
) -> bool:
    """Whether :func:`conv_rows` runs a dense 2-D conv (with the ``jit`` extra): float32, at most
    :data:`MAX_COLUMNS` filters, weights within :data:`MAX_B_BYTES`, no column dilation, output rows
    at least :data:`MIN_CONV_ROW` wide."""
    return (
        dtype == np.float32
        and filters <= MAX_COLUMNS
        and weights_bytes <= MAX_B_BYTES
        and out_width >= MIN_CONV_ROW
        and column_dilation == 1
        and jit.available()
    )


def conv_rows(
    src: np.ndarray,
    weights: np.ndarray,
    dst: np.ndarray,
    strides: tuple[int, int],
    row_dilation: int,
    target: Target | None = None,
) -> None:
    """``dst`` (``(nb, hb, ow, F)``) = the dense 2-D conv of the padded slab ``src`` (``(nb, rows, Wp,
    C)``) by ``weights`` (``(kh, kw * C, F)``, C-ordered), no column dilation, by the IR loops (``F``
    at most :data:`MAX_COLUMNS`). ValueError if the arrays do not fit together."""
    if not (src.dtype == weights.dtype == dst.dtype == np.float32) or src.ndim != 4 or dst.ndim != 4:
        raise ValueError("the IR conv loops take float32 (batch, rows, columns, channels) arrays")
    if weights.ndim != 3 or not weights.flags.c_contiguous or weights.shape[2] > MAX_COLUMNS:
        raise ValueError(f"the IR conv loops take C-ordered (kh, kw * C, F<={MAX_COLUMNS}) weights")
    address = _address(target or host_target(), weights.shape[2])
    callers().conv(address, src, weights, dst, strides[0], strides[1], row_dilation)
