"""Kernels for layer chains that :mod:`modelgraph.runner.fusion` merged into one plan step.

Inverted bottleneck (MobileNetV2's block, and any graph with the same chain; without the expansion
it is MobileNet's depthwise-separable pair)::

    [Conv2D 1x1 (expand)]  ->  [ZeroPadding2D]  ->  DepthwiseConv2D  ->  Conv2D 1x1 (project)

Unfused, the widest tensors of the model (the expanded activations, ``expansion`` times the block's
input channels) are written to memory, read back padded, written again by the depthwise conv and
read by the projection: at batch 8 that memory traffic, not arithmetic, is what the block costs. Here
the block is computed one band of output rows at a time: the band's expanded rows (with the
depthwise conv's halo) go straight into a padded scratch slab, the depthwise conv reads the slab, and
the projection reads the depthwise result while all three are still in cache. Only the block's
input and output touch main memory. Each stage does exactly the arithmetic its layer does (same
GEMMs per row, same tap order, same epilogues), so results equal the unfused plan's up to the
summation order inside BLAS.

Residual sums: ``Add(a, b) [-> relu]`` merged into the step producing ``a`` (an inverted bottleneck
with a ``residual`` config entry, or ``modelgraph/ConvResidual`` around a linear Conv2D) add ``b`` and
apply the activation in that step's last epilogue, block by block. Other ``Add -> relu`` pairs run as
``modelgraph/AddActivation``, chunk by chunk.

A fused layer's class name starts with ``FUSED_PREFIX`` (a ``/`` no Keras class name has; the runner
refuses files whose layers use it); its config holds the stages' own configs and its weights are the
stages' weights, prefixed with the stage (``expand/``, ``depthwise/``, ``project/``, ``conv/``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from modelgraph import catalogue
from modelgraph.layer_params import depthwise_weight_name, int_tuple, padding_mode
from modelgraph.runner.activations import Activation, get_activation
from modelgraph.runner.fast.blocks import row_blocks, scratch, slab, spread_parts, window_rows
from modelgraph.runner.fast.conv import (
    conv2d_with_residual,
    padded_conv2d,
    padded_depthwise_conv2d,
    prepared_separable_conv2d,
)
from modelgraph.runner.fast.depthwise import DEPTHWISE_WORK, depthwise_slab
from modelgraph.runner.fast.epilogue import (
    CopyingEpilogue,
    Epilogue,
    copying_epilogue,
    in_place_epilogue,
    with_residual,
)
from modelgraph.runner.fast.gemm_ir import matmul
from modelgraph.runner.fast.pooling import padded_avg_pool2d, padded_max_pool2d
from modelgraph.runner.fast.scaled import scaled_pointwise_conv2d
from modelgraph.runner.kernels.conv_utils import fused_activation, out_sizes, window_pads
from modelgraph.runner.kernels.merge import merge_inputs, same_rank, sum_inputs
from modelgraph.runner.parallel import for_each, thread_count, threads_for
from modelgraph.runner.registry import Kernel, KernelSpec, register

# Class names of merged steps start with this; no Keras class name contains a "/", and the runner
# refuses a file whose layers claim one.
FUSED_PREFIX = "modelgraph/"
INVERTED_BOTTLENECK = FUSED_PREFIX + "InvertedBottleneck"

# Bytes of the padded expansion slab per band: large enough that the depthwise halo (kh - 1 rows
# recomputed per band) stays a small overhead and the GEMMs stay long, small enough that the slab,
# the depthwise result and the projection's output stay in the (L2/L3) cache.
SLAB_BYTES = 1 << 20
# The same when the bands are spread over threads: there every band also pays for handing the GIL
# between the threads at each of its NumPy calls, so fewer, larger bands win (MobileNetV2 batch 8:
# 0.92-0.96x the time with 2 MiB; 4 MiB no better). Serial bands keep 1 MiB: 2 MiB gained about 2%
# at batch 1 for 3 MiB more scratch.
SPREAD_SLAB_BYTES = 1 << 21
# Fewest output rows per band (halo overhead at most (kh - 1) / MIN_BAND_ROWS).
MIN_BAND_ROWS = 8
# Fewest output rows per band when bands are thinned so that every thread gets one.
MIN_SHARED_BAND_ROWS = 4


def _stage_spec(spec: KernelSpec, stage: str) -> KernelSpec:
    config = spec.config.get(stage)
    if not isinstance(config, Mapping):
        raise spec.unsupported(stage, config)
    prefix = f"{stage}/"
    weights = {k[len(prefix) :]: v for k, v in spec.weights.items() if k.startswith(prefix)}
    return KernelSpec(
        name=f"{spec.name}/{stage}",
        class_name=spec.class_name,
        config=config,
        weights=weights,
        keras_version=spec.keras_version,
        compute_dtype=spec.compute_dtype,
    )


def _pointwise(spec: KernelSpec) -> tuple[np.ndarray, np.ndarray | None, tuple[Any, Activation | None]]:
    """A 1x1 stage's ``(C, F)`` kernel, bias and activation (its config value and function, None
    for linear), from which the caller makes the epilogue the stage needs."""
    kernel = np.asarray(spec.weight("kernel"), dtype=np.float32)
    if kernel.ndim != 4 or kernel.shape[:2] != (1, 1):
        raise spec.unsupported("kernel", list(kernel.shape))
    bias = np.asarray(spec.weight("bias"), dtype=np.float32) if "bias" in spec.weights else None
    return np.ascontiguousarray(kernel[0, 0]), bias, (spec.get("activation"), fused_activation(spec))


def _residual_activation(spec: KernelSpec, key: str) -> tuple[Any, Activation | None]:
    """The activation after a merged residual sum (config ``key``): its name and function (None: linear)."""
    name = spec.get(key)
    if name not in ("linear", "relu", "relu6"):
        raise spec.unsupported(key, name)
    return name, None if name == "linear" else get_activation(name)


@register(INVERTED_BOTTLENECK, fresh_output=True)
def inverted_bottleneck(spec: KernelSpec) -> Kernel:
    """Expand 1x1 -> optional zero padding -> depthwise -> project 1x1, one band of rows at a time."""
    expand: tuple[np.ndarray, CopyingEpilogue] | None = None
    if spec.config.get("expand") is not None:
        expand_kernel, expand_bias, expand_act = _pointwise(_stage_spec(spec, "expand"))
        # Its epilogue moves the expanded rows into the depthwise conv's padded slab.
        expand = (expand_kernel, copying_epilogue(expand_bias, *expand_act))
    project = _stage_spec(spec, "project")
    project_kernel, project_bias, project_act = _pointwise(project)
    project_epilogue = in_place_epilogue(project_bias, *project_act)
    # A residual sum merged into the block (fusion._merge_residual_sums): run(x, residual).
    residual_name, residual_act = None, None
    if spec.config.get("residual") is not None:
        if project_act[1] is not None:
            raise project.unsupported("activation", project.get("activation"))
        residual_name, residual_act = _residual_activation(spec, "residual")
    dw = _stage_spec(spec, "depthwise")
    dw_kernel = np.asarray(dw.weight(depthwise_weight_name(dw.weights)), dtype=np.float32)
    if dw_kernel.ndim != 4 or dw_kernel.shape[3] != 1:
        raise dw.unsupported("kernel", list(dw_kernel.shape))
    dw_kernel = np.ascontiguousarray(dw_kernel[..., 0])  # (kh, kw, width)
    dw_bias = np.asarray(dw.weight("bias"), dtype=np.float32) if "bias" in dw.weights else None
    dw_epilogue = in_place_epilogue(dw_bias, dw.get("activation"), fused_activation(dw))
    strides = int_tuple(dw, "strides", 2, 1)
    mode = padding_mode(dw, ("valid", "same"))
    pre_pads = [tuple(p) for p in spec.config.get("pads", ((0, 0), (0, 0)))]
    width = dw_kernel.shape[2]
    in_channels = width if expand is None else expand[0].shape[0]
    if project_kernel.shape[0] != width or (expand is not None and expand[0].shape[1] != width):
        raise ValueError(
            f"fused block '{spec.name}': expand {None if expand is None else expand[0].shape}, "
            f"depthwise {dw_kernel.shape}, project {project_kernel.shape} do not chain"
        )
    tiles: dict[int, np.ndarray] = {}  # the depthwise kernel tiled along a row (NumPy path only)

    def run(inputs: Any, residual: Any = None) -> np.ndarray:
        if (residual is None) != (residual_name is None):
            raise ValueError(f"fused block '{spec.name}' takes {1 if residual_name is None else 2} input(s)")
        x = np.ascontiguousarray(inputs, dtype=np.float32)
        if x.ndim != 4 or x.shape[3] != in_channels:
            raise ValueError(f"expected a rank-4 input with {in_channels} channels, got {x.shape}")
        pads = window_pads(mode, x.shape[1:3], dw_kernel.shape[:2], strides, (1, 1), pre=pre_pads)
        oh, ow = out_sizes(
            [n + a + b for n, (a, b) in zip(x.shape[1:3], pads, strict=True)],
            dw_kernel.shape[:2],
            strides,
            (1, 1),
        )

        def compute(project_epilogue: Epilogue) -> np.ndarray:
            return _bottleneck(
                x,
                expand,
                pads,
                (oh, ow),
                dw_kernel,
                tiles,
                strides,
                dw_epilogue,
                project_kernel,
                project_epilogue,
            )

        if residual is None:
            return compute(project_epilogue)
        shape = (x.shape[0], oh, ow, project_kernel.shape[1])
        return with_residual(compute, project_bias, residual_name, residual_act, residual, shape, np.float32)

    return run


def _bottleneck(
    x: np.ndarray,
    expand: tuple[np.ndarray, CopyingEpilogue] | None,
    pads: list[tuple[int, int]],
    out_size: tuple[int, int],
    dw_kernel: np.ndarray,
    dw_tiles: dict[int, np.ndarray],
    strides: tuple[int, ...],
    dw_epilogue: Epilogue,
    project: np.ndarray,
    project_epilogue: Epilogue,
) -> np.ndarray:
    batch, height, width_in, _ = x.shape
    channels = dw_kernel.shape[2]
    kh, kw = dw_kernel.shape[:2]
    (left, right) = pads[1]
    padded_w = width_in + left + right
    oh, ow = out_size
    out = np.empty((batch, oh, ow, project.shape[1]), dtype=np.float32)
    expand_depth = 0 if expand is None else expand[0].shape[0]
    work = (
        batch
        * (height * width_in * expand_depth + oh * ow * (kh * kw * DEPTHWISE_WORK + project.shape[1]))
        * channels
    )
    # Output rows per band: the slab holds (rows - 1) * stride + kh padded input rows.
    row_bytes = padded_w * channels * 4
    parts = spread_parts(work)
    slab_bytes = SPREAD_SLAB_BYTES if parts > 1 else SLAB_BYTES
    rows = max(MIN_BAND_ROWS, (slab_bytes // row_bytes - kh) // strides[0] + 1)
    # Too few bands to give every thread one: thinner bands (more halo rows recomputed, but every
    # core busy on the depthwise conv too, not only on the GEMMs).
    per_image = -(-thread_count() // batch)
    if per_image > 1 and -(-oh // rows) < per_image and threads_for(per_image * batch, work) > 1:
        rows = max(MIN_SHARED_BAND_ROWS, -(-oh // per_image))

    def band(n0: int, n1: int, h0: int, h1: int) -> None:
        """Output rows h0:h1 of images n0:n1: expand into the slab, depthwise, project."""
        r0, r1 = window_rows(h0, h1, kh, strides[0], 1)
        nb = n1 - n0

        def expand_rows(dst: np.ndarray, a: int, b: int) -> None:
            """Expanded rows a:b into ``dst`` (a padded slab's interior): the GEMM into scratch, the
            epilogue's activation writing them to ``dst``."""
            assert expand is not None
            kernel, epilogue = expand
            rows = scratch(1, (nb, b - a, width_in, channels), np.float32)
            matmul(x[n0:n1, a:b].reshape(-1, x.shape[3]), kernel, rows.reshape(-1, channels))
            epilogue(rows, dst)

        fill = None if expand is None else expand_rows
        padded = slab(x, n0, n1, r0, r1, pads, 0.0, 0, fill=fill, channels=channels)
        dst = scratch(2, (nb, h1 - h0, ow, channels), np.float32)
        depthwise_slab(padded, dw_kernel, dw_tiles, strides, (1, 1), dst)
        dw_epilogue(dst, None)
        block = out[n0:n1, h0:h1]
        matmul(dst.reshape(-1, channels), project, block.reshape(-1, project.shape[1]))
        project_epilogue(block, (slice(n0, n1), slice(h0, h1)))

    # Bands are independent (each writes its own output rows): spread them over the cores.
    for_each(lambda rows_: band(*rows_), row_blocks(batch, oh, ow, rows * ow, parts), work)
    return out


# --- residual sums with their activation -----------------------------------------------------------

ADD_ACTIVATION = FUSED_PREFIX + "AddActivation"

# Elements per chunk of the fused sum: the chunk of the output stays in cache between the additions
# and the activation, so the sum costs one pass over memory instead of two.
ADD_CHUNK = 1 << 16


@register(ADD_ACTIVATION)
def add_activation(spec: KernelSpec) -> Kernel:
    """``Add`` followed by ``relu`` / ``relu6``, chunk by chunk; the sum goes into the input named by
    ``overwrite`` when the fusion pass found it dies here (a fresh conv output nobody else reads)."""
    name = spec.get("activation")
    if name not in ("relu", "relu6"):
        raise spec.unsupported("activation", name)
    overwrite = spec.get("overwrite")
    if overwrite is not None and (not isinstance(overwrite, int) or isinstance(overwrite, bool)):
        raise spec.unsupported("overwrite", overwrite)
    activate = in_place_epilogue(None, name, get_activation(name))

    def run(*args: Any) -> np.ndarray:
        xs = merge_inputs(spec, args)
        if len(xs) < 2:
            raise ValueError(f"an Add needs at least two inputs; got {len(xs)}")
        shape, dtype = xs[0].shape, xs[0].dtype
        if any(x.shape != shape or x.dtype != dtype or not x.flags.c_contiguous for x in xs):
            total = sum_inputs(same_rank(xs))  # broadcasting like Add, into a new array
            activate(total, None)
            return total
        target = xs[overwrite] if overwrite is not None and 0 <= overwrite < len(xs) else np.empty_like(xs[0])
        flat = [x.reshape(-1) for x in xs]
        out = target.reshape(-1)
        for start in range(0, out.size, ADD_CHUNK):
            chunk = slice(start, start + ADD_CHUNK)
            dst = out[chunk]
            np.add(flat[0][chunk], flat[1][chunk], out=dst)
            for x in flat[2:]:
                np.add(dst, x[chunk], out=dst)
            activate(dst, None)
        return target

    return run


# --- a conv and the residual sum it feeds ----------------------------------------------------------

CONV_RESIDUAL = FUSED_PREFIX + "ConvResidual"


@register(CONV_RESIDUAL, fresh_output=True)
def conv_residual(spec: KernelSpec) -> Kernel:
    """Conv2D (linear) -> Add with a residual -> [relu / relu6], as ``run(x, residual)``: the sum and
    the activation run in the conv's epilogue on each output block while it is in cache, instead of
    as a pass of their own over the whole tensor (see :func:`conv.conv2d_with_residual`)."""
    return conv2d_with_residual(_stage_spec(spec, "conv"), *_residual_activation(spec, "activation"))


# --- explicit zero padding merged into the window op that reads it ---------------------------------

ZERO_PADDED = FUSED_PREFIX + "ZeroPadded"
# The window ops that read explicit zero padding themselves (their entries' ``padded_kernel``).
catalogue.provides("padded_kernel", "Conv2D")(padded_conv2d)
catalogue.provides("padded_kernel", "DepthwiseConv2D")(padded_depthwise_conv2d)
catalogue.provides("padded_kernel", "MaxPooling2D")(padded_max_pool2d)
catalogue.provides("padded_kernel", "AveragePooling2D")(padded_avg_pool2d)


def _valid_pads(pads: Any) -> bool:
    """Whether ``pads`` is ``[[top, bottom], [left, right]]`` of non-negative ints."""
    return (
        isinstance(pads, (list, tuple))
        and len(pads) == 2
        and all(
            isinstance(p, (list, tuple))
            and len(p) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in p)
            for p in pads
        )
    )


@register(ZERO_PADDED, fresh_output=True)
def zero_padded(spec: KernelSpec) -> Kernel:
    """ZeroPadding2D -> Conv2D / DepthwiseConv2D / MaxPooling2D as one step: the window op pads its
    row slabs itself (or, for max pooling, skips the padding and floors the border windows at 0), so
    the padded copy of the whole tensor is never made. Config: ``pads``, the inner ``class_name`` and
    its ``layer`` config; weights: the inner layer's, prefixed ``layer/``. The inner class's catalogue
    entry gives the kernel (``padded_kernel``)."""
    class_name = spec.get("class_name")
    entry = catalogue.spec_for(class_name) if isinstance(class_name, str) else None
    padded = entry.padded_kernel if entry is not None else None
    if not callable(padded):
        raise spec.unsupported("class_name", class_name)
    pads = spec.get("pads")
    if not _valid_pads(pads):
        raise spec.unsupported("pads", pads)
    inner = _stage_spec(spec, "layer")
    inner = KernelSpec(
        name=spec.name,
        class_name=class_name,
        config=inner.config,
        weights=inner.weights,
        keras_version=spec.keras_version,
        compute_dtype=spec.compute_dtype,
    )
    return padded(inner, [(int(a), int(b)) for a, b in pads])


# --- a squeeze-and-excitation scale merged into the 1x1 conv that reads the product ----------------

SCALED_CONV = FUSED_PREFIX + "ScaledConv"


@register(SCALED_CONV)
def scaled_conv(spec: KernelSpec) -> Kernel:
    """``Multiply([a, s]) -> Conv2D 1x1`` as ``run(a, s)``: with ``s`` of one value per image and
    channel, the scale goes into the conv's kernel rows and the product is never made (see
    :mod:`modelgraph.runner.fast.scaled`)."""
    return scaled_pointwise_conv2d(_stage_spec(spec, "conv"))


# --- a ReLU and zero padding merged into the SeparableConv2D reading them ---------------------------

PREPARED_SEPARABLE = FUSED_PREFIX + "PreparedSeparable"


@register(PREPARED_SEPARABLE)
def prepared_separable(spec: KernelSpec) -> Kernel:
    """``[ReLU ->] [ZeroPadding2D ->] SeparableConv2D`` (NASNet's branches) as one step: the
    activation and the padding are applied to the depthwise conv's row slabs (see
    :func:`conv.prepared_separable_conv2d`). Config: ``activation`` (``relu``, ``relu6`` or None),
    ``pads`` (None: none) and the conv's ``layer`` config; weights: the conv's, prefixed ``layer/``."""
    activation = spec.get("activation")
    if activation not in (None, "relu", "relu6"):
        raise spec.unsupported("activation", activation)
    pads = spec.get("pads")
    if pads is not None and not _valid_pads(pads):
        raise spec.unsupported("pads", pads)
    inner = _stage_spec(spec, "layer")
    return prepared_separable_conv2d(
        inner, None if pads is None else [(int(a), int(b)) for a, b in pads], activation
    )
