"""Shared helpers for the conv, pooling and reshaping kernels: config parsing, TF padding, windows.

Everything here works on channels-last arrays ``(batch, *spatial, channels)``; kernels move
channels-first inputs to channels-last on entry and back on exit.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from modelgraph.runner import rowwise
from modelgraph.runner.activations import Activation, activation_name, get_activation
from modelgraph.runner.parallel import for_each, thread_count, threads_for
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


def check_keys(spec: KernelSpec, used: Iterable[str]) -> None:
    """Refuse any config key this kernel neither implements nor knows to be inert."""
    known = INERT_KEYS.union(used)
    for key, value in spec.config.items():
        if key not in known:
            raise spec.unsupported(key, value)


def depthwise_weight_name(names: Iterable[str]) -> str:
    """The name a depthwise conv's kernel has among ``names``: ``kernel`` (Keras 3, and the canonical
    name the loader gives Keras 2's), else ``depthwise_kernel``."""
    return "kernel" if "kernel" in set(names) else "depthwise_kernel"


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
        raise spec.unsupported(key, value)
    if isinstance(value, (int, np.integer)):
        return (int(value),) * n
    if (
        isinstance(value, (list, tuple))
        and len(value) == n
        and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value)
    ):
        return tuple(int(v) for v in value)
    raise spec.unsupported(key, value)


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
    raise spec.unsupported(key, value)


def data_format(spec: KernelSpec) -> str:
    value = spec.get("data_format")
    if value is None:
        return "channels_last"
    if value in ("channels_last", "channels_first"):
        return value
    raise spec.unsupported("data_format", value)


def padding_mode(spec: KernelSpec, allowed: Sequence[str], default: str = "valid") -> str:
    value = spec.get("padding", default)
    mode = value.lower() if isinstance(value, str) else value
    if mode not in allowed:
        raise spec.unsupported("padding", value)
    return mode


def fused_activation(spec: KernelSpec) -> Activation | None:
    """The fused ``activation`` (None for linear, so callers can skip it)."""
    value = spec.get("activation")
    act = get_activation(value, spec.keras_version, spec.class_name)
    return None if activation_name(value) == "linear" else act


# Activations that normalise or split along the last axis: they do not commute with a change of layout.
AXIS_ACTIVATIONS = frozenset({"softmax", "log_softmax", "sparsemax", "glu"})


def layout_activation(spec: KernelSpec, fmt: str) -> tuple[Any, Activation | None, Activation | None]:
    """``(value, act, after)``: the activation a conv kernel fuses into its channels-last compute
    (its config value and function, None for linear) and the one it applies to its output after moving
    it back to ``fmt`` (None: nothing left). Keras applies a conv's activation to the output as laid out,
    so a ``channels_first`` conv's ``softmax`` normalises the last, spatial axis: an activation of
    ``AXIS_ACTIVATIONS`` in ``channels_first`` runs after the move; element-wise ones fuse."""
    value = spec.get("activation")
    act = fused_activation(spec)
    if fmt == "channels_first" and activation_name(value) in AXIS_ACTIVATIONS:
        return "linear", None, act
    return value, act, None


def then_activate(run: Callable[..., np.ndarray], after: Activation | None) -> Callable[..., np.ndarray]:
    """``run`` followed by ``after`` (``run`` itself when ``after`` is None)."""
    if after is None:
        return run

    def activated(*args: Any) -> np.ndarray:
        return after(run(*args))

    return activated


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


def strided_view(base: np.ndarray, shape: Sequence[int], strides: Sequence[int]) -> np.ndarray:
    """A read-only view of ``base``'s memory from its first element, with ``shape`` and byte
    ``strides`` (windows, patches). Over a C-contiguous ``base`` the ndarray constructor makes it:
    it refuses a view reaching past ``base`` (``as_strided`` would read whatever lies there) and
    costs about a fifth of ``as_strided``'s set-up (0.7 vs 3.2 us, paid per block). Other bases,
    e.g. a band of rows of several images, go through ``as_strided``."""
    if base.flags.c_contiguous:
        view = np.ndarray(tuple(shape), base.dtype, buffer=base, strides=tuple(strides))
        view.flags.writeable = False
        return view
    return np.lib.stride_tricks.as_strided(base, tuple(shape), tuple(strides), writeable=False)


def effective_strides(x: np.ndarray) -> tuple[int, ...]:
    """``x``'s byte strides, with the stride a C-ordered array would have on every axis of length 1:
    NumPy leaves those arbitrary (an array moved from channels_first with one channel is C-contiguous
    with a last-axis stride of a whole image), and they are never stepped along."""
    if 1 not in x.shape:
        return x.strides
    canonical = x.itemsize
    strides = list(x.strides)
    for axis in range(x.ndim - 1, -1, -1):
        if x.shape[axis] == 1:
            strides[axis] = canonical
        canonical = strides[axis] * x.shape[axis] if x.shape[axis] != 1 else canonical
    return tuple(strides)


def row_patches(
    x: np.ndarray, out: Sequence[int], kernel: Sequence[int], strides: Sequence[int], dilation: Sequence[int]
) -> np.ndarray:
    """The im2col patches of a padded channels-last ``x`` as one read-only strided view
    ``(B, *out, *kernel[:-1], kernel[-1] * C)`` (no dilation along the last axis): its last two axes
    are contiguous (any strides before them), so each leading tap of an output position is one run
    of ``kernel[-1] * C`` values, and one copy of the view is the whole im2col matrix. (A copy per
    leading tap took 1.3-1.7x as long: more calls, each writing a strided destination.)"""
    rank = len(kernel)
    if dilation[-1] != 1:
        raise ValueError("row_patches needs no dilation along the last axis")
    st = effective_strides(x)
    if st[-1] != x.itemsize or st[-2] != x.shape[-1] * x.itemsize:
        # Rows that are not contiguous (a transposed or sliced array): a C-ordered copy.
        x = np.array(x, order="C")
        st = effective_strides(x)
    return strided_view(
        x,
        (x.shape[0], *out, *kernel[:-1], kernel[-1] * x.shape[-1]),
        (
            st[0],
            *(st[i + 1] * strides[i] for i in range(rank)),
            *(st[i + 1] * dilation[i] for i in range(rank - 1)),
            st[-1],
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
    n = batch * math.prod(out)
    ktot = math.prod(kernel)
    if groups == 1 and dilation[-1] == 1:
        view = row_patches(np.ascontiguousarray(x), out, kernel, strides, dilation)
        return np.ascontiguousarray(view).reshape(n, ktot * channels)
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
    per_image = math.prod(out) * channels
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


# --- the blocked 2-D paths: per-thread scratch, padded row slabs, fused epilogues -------------------

_LOCAL = threading.local()


def _blas_threads() -> int:
    """The thread count OpenBLAS / OpenMP will use, from the usual variables (else every CPU)."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(var, "").split(",")[0].strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return os.cpu_count() or 1


# Bytes of an im2col block (rows x kernel-taps*channels) and of an element-wise block: big enough for
# long BLAS / ufunc calls, small enough to stay in the L2 cache while it is filled and consumed.
# A multi-threaded BLAS wakes and joins its threads on every call, so it gets fewer, larger blocks.
# Measured with 2 OpenBLAS threads on an idle 2-core machine (3x3 convs at batch 8, 56x56x64 to
# 7x7x512): 4 MiB blocks ran at 128-176 GFLOP/s (65-88% of sgemm peak), 1 MiB at 88-148 and
# 16 MiB at 68-171; on a heavily loaded machine larger blocks did better still.
GEMM_BLOCK_BYTES = 1 << 20 if _blas_threads() == 1 else 1 << 22
# A block spread to a thread of its own runs on single-threaded BLAS: it gets the one-thread size.
SPREAD_BLOCK_BYTES = 1 << 20
GEMM_MIN_ROWS = 512
EW_BLOCK_BYTES = 1 << 18
DW_BLOCK_BYTES = 1 << 19
# What a depthwise multiply-add counts in a kernel's ``work`` (for_each's spreading threshold, which
# is in GEMM multiply-adds): its einsum over strided windows runs at about 7 G/s on one core, a
# GEMM's at 50-100 G/s. Counted as one, MobileNetV2's 14x14 bottlenecks at batch 8 ran their bands
# on one thread (1.3 of 2 cores busy); batch 1's largest bottleneck still stays under the threshold.
DEPTHWISE_WORK = 8


def serial_block_bytes(output_bytes: int) -> int:
    """Scratch bytes per block for a kernel whose blocks run in turn (each GEMM on all of BLAS's
    threads): ``GEMM_BLOCK_BYTES``, but no more than its output (at least ``SPREAD_BLOCK_BYTES``), so
    what a small call keeps for the next ones stays in proportion to its activations."""
    return min(GEMM_BLOCK_BYTES, max(SPREAD_BLOCK_BYTES, output_bytes))


def scratch(slot: int, shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """A reusable per-thread buffer of ``shape`` (uninitialised, C-ordered).

    Every kernel running on one thread shares the same few slots (a kernel uses distinct slots for
    buffers alive at the same time and never returns one), so the memory held is the largest block
    any layer asked for, not a copy per layer. :func:`scratch_bytes` reports it.
    """
    arenas: dict[int, np.ndarray] | None = getattr(_LOCAL, "arenas", None)
    if arenas is None:
        arenas = _LOCAL.arenas = {}
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    buf = arenas.get(slot)
    if buf is None or buf.nbytes < nbytes:
        buf = arenas[slot] = np.empty(max(nbytes, 64), dtype=np.uint8)
    return buf[:nbytes].view(dtype).reshape(tuple(shape))


def scratch_bytes() -> int:
    """Bytes held by this thread's scratch buffers."""
    return sum(b.nbytes for b in getattr(_LOCAL, "arenas", {}).values())


def row_blocks(
    batch: int, rows: int, per_row: int, target: int, parts: int = 1
) -> list[tuple[int, int, int, int]]:
    """Split ``batch`` images of ``rows`` output rows (``per_row`` units each) into blocks of about
    ``target`` units: ``(n0, n1, r0, r1)``, whole images together when an image is smaller.

    ``parts`` > 1: the blocks are spread over that many threads (:func:`spread_parts`). Their count
    is then a multiple of ``parts`` where the rows and images allow it, and their sizes differ by at
    most one row or image, so no thread waits while another runs an odd last block (MobileNetV2 at
    batch 8 split its 14x14 layers into blocks of 3, 3 and 2 images: 1.3-1.6 of 2 cores busy)."""
    per_image = rows * per_row
    if per_image >= target:
        step = max(1, target // per_row)
        if parts <= 1:
            return [(b, b + 1, r0, min(rows, r0 + step)) for b in range(batch) for r0 in range(0, rows, step)]
        bands = -(-rows // step)
        while (batch * bands) % parts and bands < rows:
            bands += 1
        return [(b, b + 1, r0, r1) for b in range(batch) for r0, r1 in _even(rows, bands)]
    images = max(1, target // per_image)
    if parts <= 1:
        return [(b0, min(batch, b0 + images), 0, rows) for b0 in range(0, batch, images)]
    count = -(-batch // images)  # blocks of `images` images
    count = min(batch, -(-count // parts) * parts)
    return [(n0, n1, 0, rows) for n0, n1 in _even(batch, count)]


def _even(total: int, count: int) -> list[tuple[int, int]]:
    """``count`` consecutive ranges covering ``range(total)``, their lengths differing by at most 1."""
    return [(i * total // count, (i + 1) * total // count) for i in range(count)]


def spread_parts(work: float) -> int:
    """The threads :func:`for_each` spreads the blocks of a kernel doing ``work`` over (1: serial),
    to pass to :func:`row_blocks` as ``parts``."""
    return threads_for(thread_count(), work)


def slab(
    x: np.ndarray,
    n0: int,
    n1: int,
    r0: int,
    r1: int,
    pads: Pads,
    value: float,
    slot: int,
    fill: Callable[[np.ndarray, int, int], None] | None = None,
    channels: int | None = None,
) -> np.ndarray:
    """Rows ``r0:r1`` (padded coordinates) of images ``n0:n1`` of a ``(B, H, W, C)`` array padded by
    ``pads`` with ``value``: a view when there is no padding, else a scratch copy.

    ``fill(dst, a, b)``, when given, writes unpadded rows ``a:b`` of the band's images into ``dst``
    (the slab's interior, or the whole slab when there is no padding) in place of copying
    ``x[n0:n1, a:b]``: a stage computed on the fly, e.g. an expansion GEMM, with ``channels``
    channels; ``x`` then only gives the height and width."""
    (top, bottom), (left, right) = pads
    height, width = x.shape[1:3]
    channels = x.shape[3] if channels is None else channels
    if not (top or bottom or left or right):
        if fill is None:
            return x[n0:n1, r0:r1]
        whole = scratch(slot, (n1 - n0, r1 - r0, width, channels), x.dtype)
        fill(whole, r0, r1)
        return whole
    buf = scratch(slot, (n1 - n0, r1 - r0, width + left + right, channels), x.dtype)
    a, b = max(r0 - top, 0), min(r1 - top, height)
    if b <= a:
        buf.fill(value)
        return buf
    above, below = a + top - r0, b + top - r0
    if above:
        buf[:, :above] = value
    if below < r1 - r0:
        buf[:, below:] = value
    if left:
        buf[:, above:below, :left] = value
    if right:
        buf[:, above:below, left + width :] = value
    interior = buf[:, above:below, left : left + width]
    if fill is None:
        interior[...] = x[n0:n1, a:b]
    else:
        fill(interior, a, b)
    return buf


def window_rows(r0: int, r1: int, kernel: int, stride: int, dilation: int) -> tuple[int, int]:
    """The padded input rows output rows ``r0:r1`` read."""
    return r0 * stride, (r1 - 1) * stride + (kernel - 1) * dilation + 1


# Where an output block lies in its kernel's output: slices of the leading axes (batch, rows), or
# None where no caller needs it (epilogues without a residual ignore it).
Region = tuple[slice, ...]
Epilogue = Callable[[np.ndarray, Region | None], None]
# ``epilogue(src, dst)``: the epilogue's result written to ``dst`` (see copying_epilogue).
CopyingEpilogue = Callable[[np.ndarray, np.ndarray], None]


def _activate(name: str, act: Activation, src: np.ndarray, dst: np.ndarray) -> None:
    """``dst = act(src)`` (``dst`` may be ``src``): relu / relu6 as one ``clip`` without temporaries."""
    if name == "relu":
        rowwise.relu_(src, out=dst)
    elif name == "relu6":
        rowwise.relu6_(src, out=dst)
    else:
        dst[...] = act(src)


def in_place_epilogue(
    bias: np.ndarray | None, act_value: Any, act: Activation | None, residual: np.ndarray | None = None
) -> Epilogue:
    """``epilogue(block, region)``: bias add, then ``residual[region]`` added (a residual sum merged
    into the conv that feeds it; ``residual`` has the output's shape and ``block`` holds the same
    elements in the same order, e.g. flattened to GEMM rows), then the activation, all in place on
    the output block (relu / relu6 without temporaries)."""
    name = activation_name(act_value)
    bias_run = None if bias is None else rowwise.repeat_row(bias)

    def epilogue(block: np.ndarray, region: Region | None) -> None:
        if bias_run is not None:
            rowwise.apply(np.add, block, bias_run)
        if residual is not None:
            if region is None:
                raise ValueError("a residual epilogue needs the block's region")
            np.add(block, residual[region].reshape(block.shape), out=block)
        if act is not None:
            _activate(name, act, block, block)

    return epilogue


def copying_epilogue(bias: np.ndarray | None, act_value: Any, act: Activation | None) -> CopyingEpilogue:
    """``epilogue(src, dst)``: ``dst = act(src + bias)``, where ``dst`` (``src``'s shape) may be a
    strided view, e.g. a padded slab's interior, and ``src`` is C-ordered scratch (overwritten). The
    bias is added in place in ``src`` (contiguous, the fast loop) and the activation (relu / relu6:
    one ``clip``; else a copy) writes its result to ``dst``, so the move costs no pass of its own."""
    name = activation_name(act_value)
    bias_run = None if bias is None else rowwise.repeat_row(bias)

    def epilogue(src: np.ndarray, dst: np.ndarray) -> None:
        if bias_run is not None:
            rowwise.apply(np.add, src, bias_run)
        if act is None:
            dst[...] = src
        else:
            _activate(name, act, src, dst)

    return epilogue


def with_residual(
    compute: Callable[[Epilogue], np.ndarray],
    bias: np.ndarray | None,
    act_value: Any,
    act: Activation | None,
    residual: Any,
    out_shape: Sequence[int] | None,
    dtype: np.dtype,
) -> np.ndarray:
    """``act(compute(...) + residual)`` for a kernel ``compute(epilogue)`` whose last stage adds
    ``bias`` and is otherwise linear: a merged residual sum. When the residual has the output's shape
    (``out_shape``; None: unknown) and dtype, the sum and activation run in the epilogue, block by
    block; otherwise it is added afterwards, broadcasting as Keras's Add would."""
    shortcut = np.asarray(residual)
    if out_shape is not None and shortcut.dtype == dtype and shortcut.shape == tuple(out_shape):
        return compute(in_place_epilogue(bias, act_value, act, residual=np.ascontiguousarray(shortcut)))
    total = compute(in_place_epilogue(bias, "linear", None)) + shortcut
    return total if act is None else act(total)


def _out_2d(
    x: np.ndarray, pads: Pads, kernel: Sequence[int], strides: Sequence[int], dilation: Sequence[int]
):
    padded = [n + b + a for n, (b, a) in zip(x.shape[1:3], pads, strict=True)]
    return out_sizes(padded, kernel, strides, dilation)


def conv2d_gemm(
    x: np.ndarray,
    weights: np.ndarray,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilation: Sequence[int],
    pads: Pads,
    epilogue: Epilogue,
) -> np.ndarray:
    """A dense 2-D conv of a C-ordered ``(B, H, W, C)`` array, ``weights`` ``(kh*kw*C, F)``.

    Output rows are done a block at a time: the block's padded input rows are copied to a scratch slab,
    its im2col patches (columns ordered kh, kw, c) to a scratch block of about ``GEMM_BLOCK_BYTES``,
    one GEMM writes the block of the output, and ``epilogue`` (bias, activation) runs on it while it
    is still in cache. A 1x1 stride-1 unpadded conv skips the copies.
    """
    batch, channels = x.shape[0], x.shape[3]
    kh, kw = kernel
    oh, ow = _out_2d(x, pads, kernel, strides, dilation)
    depth = kh * kw * channels
    filters = weights.shape[1]
    out = np.empty((batch, oh, ow, filters), dtype=x.dtype)
    flat_out = out.reshape(-1, filters)
    pointwise = kh == kw == 1 and tuple(strides) == (1, 1) and not any(b or a for b, a in pads)
    per_pixel = max(depth, filters)
    target = max(GEMM_MIN_ROWS, serial_block_bytes(out.nbytes) // (per_pixel * x.itemsize))

    def block_of(rows: tuple[int, int, int, int]) -> None:
        n0, n1, h0, h1 = rows
        m0, m1 = (n0 * oh + h0) * ow, ((n1 - 1) * oh + h1) * ow
        block = flat_out[m0:m1]
        region = (slice(n0, n1), slice(h0, h1))
        if pointwise:
            np.matmul(x[n0:n1, h0:h1].reshape(-1, channels), weights, out=block)
            epilogue(block, region)
            return
        r0, r1 = window_rows(h0, h1, kh, strides[0], dilation[0])
        src = slab(x, n0, n1, r0, r1, pads, 0.0, 0)
        nb, hb = n1 - n0, h1 - h0
        if dilation[1] == 1:
            # The kw taps of one output pixel are kw*C contiguous values of a row: one copy.
            cols = scratch(1, (nb, hb, ow, kh, kw * channels), x.dtype)
            cols[...] = row_patches(src, (hb, ow), kernel, strides, dilation)
        else:
            cols = scratch(1, (nb, hb, ow, kh * kw, channels), x.dtype)
            for i, (ti, tj) in enumerate(itertools.product(range(kh), range(kw))):
                a, b = ti * dilation[0], tj * dilation[1]
                cols[:, :, :, i] = src[
                    :,
                    a : a + (hb - 1) * strides[0] + 1 : strides[0],
                    b : b + (ow - 1) * strides[1] + 1 : strides[1],
                ]
        np.matmul(cols.reshape(m1 - m0, depth), weights, out=block)
        epilogue(block, region)

    # Blocks are independent (each writes its own output rows): when the conv is big enough and every
    # thread can get at least GEMM_MIN_ROWS rows, they are spread over the cores (im2col copies and
    # epilogues too, not only the GEMMs), cut into a multiple of the thread count of equal blocks no
    # bigger than the target. Otherwise they run in turn, each GEMM on all of BLAS's threads.
    work = batch * oh * ow * depth * filters
    rows = batch * oh * ow
    threads = spread_parts(work)
    if threads > 1 and rows >= threads * GEMM_MIN_ROWS:
        share = max(GEMM_MIN_ROWS, SPREAD_BLOCK_BYTES // (per_pixel * x.itemsize))
        count = threads * -(-rows // (threads * share))
        for_each(block_of, row_blocks(batch, oh, ow, -(-rows // count), threads))
    else:
        for block in row_blocks(batch, oh, ow, target):
            block_of(block)
    return out


# Strided depthwise layers narrower than this split the slab into column phases (long einsum inner
# loops over whole rows, at the price of copying the slab); wider ones run the einsum over the
# channels directly. Measured at batch 8 (3x3, stride 2): 16 and 96 channels ran 1.2-1.8x faster
# with phases, 144 broke even, 192 and 576 ran 1.3-1.8x slower.
PHASES_BELOW_CHANNELS = 144


def depthwise_tiled(kernel: np.ndarray, out_width: int) -> np.ndarray:
    """A ``(kh, kw, width)`` depthwise kernel repeated along an output row: ``(kh, kw, out_width*width)``,
    for :func:`depthwise_slab` with unit column stride."""
    kh, kw, width = kernel.shape
    tiled = np.broadcast_to(kernel[:, :, None, :], (kh, kw, out_width, width))
    return np.ascontiguousarray(tiled).reshape(kh, kw, out_width * width)


def depthwise_slab(
    src: np.ndarray,
    kernel: np.ndarray,
    tiled: np.ndarray | None,
    strides: Sequence[int],
    dilation: Sequence[int],
    dst: np.ndarray,
) -> None:
    """``dst`` (``(nb, hb, ow, width)``) = the depthwise conv of a padded slab ``src`` (``(nb, rows, Wp,
    width)``, rows starting at the first input row of ``dst``'s first output row), kernel ``(kh, kw,
    width)``.

    With ``tiled`` (from :func:`depthwise_tiled`) and no column dilation, each tap's window of one
    output row is one contiguous run of ``ow * width`` values (for a column stride s > 1, after the
    slab's columns are split into s phases, tap j reading phase j % s), so one einsum per phase runs
    its inner loop over whole rows whatever the channel count. Otherwise (and for strided layers of
    at least ``PHASES_BELOW_CHANNELS`` channels) one einsum over a strided (pixels, taps, channels)
    view runs it over the channels, which is slow for narrow layers.
    """
    nb, hb, ow, width = dst.shape
    kh, kw = kernel.shape[:2]
    sh, sw = strides
    if tiled is None or dilation[1] != 1 or (sw > 1 and width >= PHASES_BELOW_CHANNELS):
        s_n, s_h, s_w, s_c = effective_strides(src)
        view = strided_view(
            src,
            (nb, hb, ow, kh, kw, width),
            (s_n, s_h * sh, s_w * sw, s_h * dilation[0], s_w * dilation[1], s_c),
        )
        np.einsum("nhwijc,ijc->nhwc", view, kernel, out=dst)
        return
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


def window2d(
    x: np.ndarray,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilation: Sequence[int],
    pads: Pads,
    pad_value: float,
    first: Callable[[np.ndarray, np.ndarray, int], None],
    step: Callable[[np.ndarray, np.ndarray, np.ndarray, int], None],
    finish: Callable[[np.ndarray, int, int], None] | None = None,
    repeat: int = 1,
) -> np.ndarray:
    """Reduce over the kernel taps of a padded ``(B, H, W, C)`` array, one output block at a time.

    Per block the padded input rows go to a scratch slab (channels repeated ``repeat`` times, for
    depth multipliers), ``first(dst, src, tap)`` initialises the output block from the first tap's
    strided window, ``step(dst, src, tmp, tap)`` folds in each further tap (``tmp``: a scratch block of
    ``dst``'s shape), and ``finish(dst, h0, h1)`` runs while the block is in cache.
    """
    batch, channels = x.shape[0], x.shape[3] * repeat
    kh, kw = kernel
    oh, ow = _out_2d(x, pads, kernel, strides, dilation)
    out = np.empty((batch, oh, ow, channels), dtype=x.dtype)
    target = max(1, EW_BLOCK_BYTES // (channels * x.itemsize))
    all_taps = [(i * kw + j, i * dilation[0], j * dilation[1]) for i in range(kh) for j in range(kw)]
    sh, sw = strides
    for n0, n1, h0, h1 in row_blocks(batch, oh, ow, target):
        r0, r1 = window_rows(h0, h1, kh, sh, dilation[0])
        src = slab(x, n0, n1, r0, r1, pads, pad_value, 0)
        if repeat > 1:
            src = np.repeat(src, repeat, axis=-1)
        dst = out[n0:n1, h0:h1]
        hb = h1 - h0
        tmp = scratch(1, dst.shape, x.dtype)
        for t, a, b in all_taps:
            window = src[:, a : a + (hb - 1) * sh + 1 : sh, b : b + (ow - 1) * sw + 1 : sw]
            if t == 0:
                first(dst, window, t)
            else:
                step(dst, window, tmp, t)
        if finish is not None:
            finish(dst, h0, h1)
    return out


def to_last(x: np.ndarray, fmt: str) -> np.ndarray:
    return np.moveaxis(x, 1, -1) if fmt == "channels_first" else x


def from_last(x: np.ndarray, fmt: str) -> np.ndarray:
    return np.moveaxis(x, -1, 1) if fmt == "channels_first" else x
