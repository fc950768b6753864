"""The Numba functions that check the arrays of a call and run the IR loops of
:mod:`modelgraph.runner.fast.depthwise_ir` and :mod:`modelgraph.runner.fast.gemm_ir` at their
address: the loops read no bounds themselves. Called through ctypes, the depthwise loops cost 7 us a
call before any work (three array pointers and 19 converted arguments; NASNetMobile makes 335 calls
a run, 15% of its batch-1 time); a compiled function's dispatch costs about 0.3 us.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic


@intrinsic
def _call_at(typingctx: Any, address: Any, src: Any, kernel: Any, dst: Any, sizes: Any) -> Any:
    """Call ``void(ptr, ptr, ptr, i64 sizes...)`` at ``address`` (the entry points of the IR
    modules: three arrays, then their sizes and strides in the order each module lists)."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        pointer, count = cgutils.voidptr_t, len(signature.args[-1])
        function_type = ir.FunctionType(ir.VoidType(), [pointer] * 3 + [ir.IntType(64)] * count)
        function = builder.inttoptr(args[0], function_type.as_pointer())
        arrays = [builder.inttoptr(value, pointer) for value in args[1:4]]
        builder.call(function, arrays + [builder.extract_value(args[4], i) for i in range(count)])
        return context.get_dummy_value()

    if not (isinstance(sizes, types.UniTuple) and sizes.dtype == types.intp):
        return None
    return types.void(types.intp, types.uintp, types.uintp, types.uintp, sizes), codegen


@numba.njit(nogil=True, cache=True)
def depthwise(address: int, src: Any, kernel: Any, dst: Any, sh: int, sw: int, dh: int, dw: int) -> None:
    """Check that ``src`` (``(nb, rows, Wp, C)``), ``kernel`` (``(kh, kw, C)``) and ``dst`` (``(nb, hb,
    ow, C)``) fit together for these strides and dilation (ValueError if not: the loops read no
    bounds), then run the loops at ``address``. The caller checks the dtypes (float32)."""
    nb, hb, ow, channels = dst.shape
    kh, kw = kernel.shape[0], kernel.shape[1]
    if kernel.shape[2] != channels or src.shape[0] != nb or src.shape[3] != channels:
        raise ValueError("depthwise: the input, kernel and output channels or batches differ")
    if sh < 1 or sw < 1 or dh < 1 or dw < 1 or kh < 1 or kw < 1:
        raise ValueError("depthwise: strides, dilation and kernel sizes must be positive")
    if nb == 0 or hb == 0 or ow == 0 or channels == 0:
        return
    if src.shape[1] < (hb - 1) * sh + (kh - 1) * dh + 1 or src.shape[2] < (ow - 1) * sw + (kw - 1) * dw + 1:
        raise ValueError("depthwise: the input slab is smaller than the output needs")
    # (an axis of one is never stepped along: NumPy leaves its stride arbitrary)
    if channels > 1 and (src.strides[3] != 4 or dst.strides[3] != 4):
        raise ValueError("depthwise: the IR loops need unit channel strides")
    for i in range(3):
        if src.shape[i] > 1 and (src.strides[i] < 0 or src.strides[i] % 4):
            raise ValueError("depthwise: strides must be non-negative multiples of a float")
        if dst.shape[i] > 1 and (dst.strides[i] < 0 or dst.strides[i] % 4):
            raise ValueError("depthwise: strides must be non-negative multiples of a float")
    packed = np.ascontiguousarray(kernel)
    sizes = (  # depthwise_ir.ENTRY_SIZES
        nb, hb, ow, channels,
        src.strides[0] // 4, src.strides[1] // 4, src.strides[2] // 4,
        dst.strides[0] // 4, dst.strides[1] // 4, dst.strides[2] // 4,
        kh, kw, sh, sw, dh, dw,
    )  # fmt: skip
    _call_at(address, src.ctypes.data, packed.ctypes.data, dst.ctypes.data, sizes)


@numba.njit(nogil=True, cache=True)
def gemm(address: int, a: Any, b: Any, out: Any, max_b_bytes: int) -> bool:
    """``out`` = ``a @ b`` (2-D float32) by the loops at ``address``, compiled for ``b``'s column
    count, when the layouts fit: ``b`` at most ``max_b_bytes``, the rows of ``a``, ``b`` and ``out``
    unit-stride and apart, the shapes matching. Returns whether it ran (False: use BLAS).
    The caller checks the dtypes."""
    m, k = a.shape
    n = b.shape[1]
    if b.shape[0] != k or out.shape[0] != m or out.shape[1] != n or k * n * 4 > max_b_bytes:
        return False
    if (k > 1 and a.strides[1] != 4) or (n > 1 and (out.strides[1] != 4 or b.strides[1] != 4)):
        return False
    if m > 1 and (a.strides[0] < 4 * k or a.strides[0] % 4 or out.strides[0] < 4 * n or out.strides[0] % 4):
        return False
    if k > 1 and (b.strides[0] < 4 * n or b.strides[0] % 4):
        return False
    if m == 0 or n == 0:
        return True
    lda = a.strides[0] // 4 if m > 1 else k
    ldb = b.strides[0] // 4 if k > 1 else n
    ldc = out.strides[0] // 4 if m > 1 else n
    # one image, one output row of m pixels lda apart, one kernel row of k taps (gemm_ir.ENTRY_SIZES)
    sizes = (1, 1, m, 1, k, 0, 0, 0, lda, 0, ldb, 0, 0, ldc)
    _call_at(address, a.ctypes.data, b.ctypes.data, out.ctypes.data, sizes)
    return True


@numba.njit(nogil=True, cache=True)
def conv(address: int, src: Any, weights: Any, dst: Any, sh: int, sw: int, dh: int) -> None:
    """``dst`` (``(nb, hb, ow, F)``) = the dense 2-D conv of the padded slab ``src`` (``(nb, rows, Wp,
    C)``) by ``weights`` (``(kh, kw * C, F)``, C-ordered), strides ``(sh, sw)``, row dilation ``dh``,
    no column dilation, by the loops at ``address`` (compiled for ``F``). ValueError if the arrays do
    not fit. The caller checks the dtypes."""
    nb, hb, ow, filters = dst.shape
    kh, depth = weights.shape[0], weights.shape[1]
    channels = src.shape[3]
    if weights.shape[2] != filters or src.shape[0] != nb or channels == 0 or depth % channels:
        raise ValueError("conv: the input, weights and output do not fit")
    kw = depth // channels
    if sh < 1 or sw < 1 or dh < 1 or kh < 1 or kw < 1:
        raise ValueError("conv: strides, dilation and kernel sizes must be positive")
    if nb == 0 or hb == 0 or ow == 0 or filters == 0:
        return
    if src.shape[1] < (hb - 1) * sh + (kh - 1) * dh + 1 or src.shape[2] < (ow - 1) * sw + kw:
        raise ValueError("conv: the input slab is smaller than the output needs")
    if (channels > 1 and src.strides[3] != 4) or (src.shape[2] > 1 and src.strides[2] != 4 * channels):
        raise ValueError("conv: the IR loops need each input row's pixels and channels contiguous")
    if filters > 1 and dst.strides[3] != 4:
        raise ValueError("conv: the IR loops need unit output channel strides")
    for i in range(3):
        if src.shape[i] > 1 and (src.strides[i] < 0 or src.strides[i] % 4):
            raise ValueError("conv: strides must be non-negative multiples of a float")
        if dst.shape[i] > 1 and (dst.strides[i] < 4 * filters or dst.strides[i] % 4):
            raise ValueError("conv: output pixels, rows and images must not overlap")
    packed = np.ascontiguousarray(weights)
    sizes = (
        nb, hb, ow, kh, depth,
        src.strides[0] // 4, sh * (src.strides[1] // 4), dh * (src.strides[1] // 4), sw * channels,
        depth * filters, filters, dst.strides[0] // 4, dst.strides[1] // 4, dst.strides[2] // 4,
    )  # fmt: skip
    _call_at(address, src.ctypes.data, packed.ctypes.data, dst.ctypes.data, sizes)  # gemm_ir.ENTRY_SIZES


@numba.njit(nogil=True, cache=True)
def _packed_sizes(a: Any, panels: Any, out: Any) -> Any:
    """The packed entry's sizes (gemm_ir.PACKED_SIZES) for ``out = a @ panels``, the panels to do
    left at all of them; ValueError if the arrays do not fit (the loops read no bounds)."""
    m, k = a.shape
    count, depth, width = panels.shape
    n = out.shape[1]
    if depth != k or out.shape[0] != m or -(-n // width) != count:
        raise ValueError("packed: the rows, depth or columns of a, the panels and out do not fit")
    if not panels.flags.c_contiguous:
        raise ValueError("packed: the panels must be C-ordered")
    if (k > 1 and a.strides[1] != 4) or (n > 1 and out.strides[1] != 4):
        raise ValueError("packed: the rows of a and out must be unit-stride")
    if m > 1 and (a.strides[0] < 4 * k or a.strides[0] % 4 or out.strides[0] < 4 * n or out.strides[0] % 4):
        raise ValueError("packed: the rows of a and out must be apart")
    lda = a.strides[0] // 4 if m > 1 else k
    ldc = out.strides[0] // 4 if m > 1 else n
    return (m, k, lda, ldc, 0, count, n // width)


@numba.njit(nogil=True, cache=True)
def packed(address: int, a: Any, panels: Any, out: Any) -> None:
    """``out`` = ``a @`` the weights packed as ``panels`` (``(P, K, width)``, C-ordered, see
    :func:`modelgraph.runner.fast.gemm_ir.packed_source`) by the loops at ``address`` (compiled for
    the last panel's column count), on this thread. ValueError if the arrays do not fit. The caller
    checks the dtypes."""
    sizes = _packed_sizes(a, panels, out)
    if a.shape[0] == 0 or panels.shape[0] == 0:
        return
    if a.shape[1] == 0:
        out[:] = 0.0
        return
    _call_at(address, a.ctypes.data, panels.ctypes.data, out.ctypes.data, sizes)


@numba.njit(nogil=True, parallel=True, cache=True)
def packed_shares(address: int, a: Any, panels: Any, out: Any, bounds: Any, by_rows: bool) -> None:
    """:func:`packed` in shares run on Numba's threads (``numba.set_num_threads`` of them): share
    ``s`` does rows (``by_rows``) or panels ``bounds[s]`` to ``bounds[s + 1]``."""
    m, k, lda, ldc, _, count, full = _packed_sizes(a, panels, out)
    if m == 0 or count == 0 or k == 0:
        packed(address, a, panels, out)
        return
    limit = m if by_rows else count
    for s in range(len(bounds) - 1):
        if not 0 <= bounds[s] <= bounds[s + 1] <= limit:
            raise ValueError("packed: the shares' bounds are out of range")
    for s in numba.prange(len(bounds) - 1):
        lo, hi = bounds[s], bounds[s + 1]
        if by_rows:
            sizes = (hi - lo, k, lda, ldc, 0, count, full)
            _call_at(
                address,
                a.ctypes.data + lo * lda * 4,
                panels.ctypes.data,
                out.ctypes.data + lo * ldc * 4,
                sizes,
            )
        else:
            sizes = (m, k, lda, ldc, lo, hi, full)
            _call_at(address, a.ctypes.data, panels.ctypes.data, out.ctypes.data, sizes)


@numba.njit(nogil=True, parallel=True, cache=True)
def _two_shares(n: int) -> int:
    total = 0
    for i in numba.prange(n):
        total += i
    return total


def threading_layer() -> str:
    """The threading layer Numba runs parallel loops on (``omp``, ``tbb`` or ``workqueue``), started by
    a parallel call on two shares if none ran yet."""
    _two_shares(2)
    return numba.threading_layer()
