"""Convolutions, pooling, and reshaping/padding/cropping/resampling layers."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from modelgraph.catalogue.conv import (
    CONVOLUTIONS,
    DEPTHWISE_CONVOLUTIONS,
    SEPARABLE_CONVOLUTIONS,
    TRANSPOSED_CONVOLUTIONS,
    check_groups,
)
from modelgraph.shape_rules._base import (
    Call,
    Dim,
    Shape,
    ShapeError,
    as_tuple,
    channels_first,
    conv_length,
    deconv_length,
    dmul,
    fmt,
    join_spatial,
    need,
    need_rank,
    pairs,
    prod,
    shape_rule,
    split_spatial,
    weight_rule,
)

# ------------------------------------------------------------------------------------------------
# Convolution geometry


def spatial_rank(class_name: str) -> int:
    m = re.search(r"([123])D", class_name)
    return int(m.group(1)) if m else 2


def conv_geometry(config: Mapping[str, Any], n: int, who: str) -> dict[str, Any]:
    """kernel/strides/dilation/padding of a conv config, with Keras 1 key names understood."""
    kernel = config.get("kernel_size")
    if kernel is None:
        if n == 1:
            kernel = config.get("filter_length")
        elif n == 2 and config.get("nb_row") is not None:
            kernel = [config.get("nb_row"), config.get("nb_col")]
        elif n == 3 and config.get("kernel_dim1") is not None:
            kernel = [config.get(f"kernel_dim{i}") for i in (1, 2, 3)]
    strides = config.get("strides", config.get("subsample", config.get("subsample_length", 1)))
    dilation = config.get("dilation_rate", config.get("atrous_rate", 1))
    padding = config.get("padding", config.get("border_mode", "valid"))
    out_pad = config.get("output_padding")
    return {
        "kernel": as_tuple(kernel, n, f"{who} kernel_size"),
        "strides": as_tuple(strides if strides is not None else 1, n, f"{who} strides"),
        "dilation": as_tuple(dilation if dilation is not None else 1, n, f"{who} dilation_rate"),
        "padding": str(padding).lower(),
        "output_padding": None if out_pad is None else as_tuple(out_pad, n, f"{who} output_padding"),
    }


def _filters(config: Mapping[str, Any], who: str) -> int:
    filters = config.get("filters", config.get("nb_filter"))
    if not isinstance(filters, int) or isinstance(filters, bool):
        raise ShapeError(f"{who} filters {filters!r} is not an integer", "config")
    return filters


class _SpatialInput(NamedTuple):
    """The input of a conv, pooling, padding or resampling layer, split around its spatial axes."""

    rank: int  # how many spatial axes (1, 2 or 3, from the class name)
    batch: Dim
    spatial: list[Dim]
    channels: Dim
    first: bool  # channels_first

    def join(self, spatial: Sequence[Dim], channels: Dim) -> Shape:
        """The output shape with these spatial dims and channels, in the input's data format."""
        return join_spatial(self.batch, spatial, channels, self.first)


def _spatial_input(call: Call) -> _SpatialInput:
    n = spatial_rank(call.class_name)
    shape = need_rank(call.x(), n + 2, call.class_name)
    first = channels_first(call.config)
    return _SpatialInput(n, *split_spatial(shape, n, first), first)


def _weight_input(config: Mapping[str, Any], ins: list[Shape | None], who: str) -> tuple[dict[str, Any], Dim]:
    """A conv weight rule's view of its layer: the config's geometry and the input's channels."""
    shape = need(ins[0] if ins else None)
    n = len(shape) - 2
    _, _, channels = split_spatial(shape, n, channels_first(config))
    return conv_geometry(config, n, who), channels


def _conv_lengths(spatial: Any, g: Mapping[str, Any]) -> list[Any]:
    """The output length of each spatial axis of a conv with geometry ``g`` (see ``conv_geometry``)."""
    return [
        conv_length(d, k, s, r, g["padding"])
        for d, k, s, r in zip(spatial, g["kernel"], g["strides"], g["dilation"], strict=True)
    ]


@shape_rule(*CONVOLUTIONS)
def _conv(call: Call) -> Shape:
    x = _spatial_input(call)
    g = conv_geometry(call.config, x.rank, call.class_name)
    filters = _filters(call.config, call.class_name)
    if g["padding"] == "causal" and x.rank != 1:
        raise ShapeError("padding 'causal' is only valid for 1D convolutions", "config")
    try:
        check_groups(call.config.get("groups"), x.channels, filters)
    except (TypeError, ValueError) as exc:
        raise ShapeError(str(exc), "config") from None
    return x.join(_conv_lengths(x.spatial, g), filters)


@weight_rule(*CONVOLUTIONS)
def _conv_weights(config: Mapping[str, Any], ins: list[Shape | None]) -> dict[str, Shape]:
    g, channels = _weight_input(config, ins, "conv")
    filters = _filters(config, "conv")
    groups = check_groups(config.get("groups"), channels, filters)
    kernel = (*g["kernel"], None if channels is None else channels // groups, filters)
    # Keras 1 writes ``bias``, Keras 2 and 3 ``use_bias``.
    return _with_bias({"kernel": kernel}, config, filters, _flag(config, "bias"))


@shape_rule(*TRANSPOSED_CONVOLUTIONS)
def _conv_transpose(call: Call) -> Shape:
    x = _spatial_input(call)
    g = conv_geometry(call.config, x.rank, call.class_name)
    filters = _filters(call.config, call.class_name)
    ops = g["output_padding"] or (None,) * x.rank
    for p, s in zip(ops, g["strides"], strict=True):
        if p is not None and p >= s:
            raise ShapeError(f"output_padding {g['output_padding']} must be smaller than strides", "config")
    out = [
        deconv_length(d, k, s, r, g["padding"], p)
        for d, k, s, r, p in zip(x.spatial, g["kernel"], g["strides"], g["dilation"], ops, strict=True)
    ]
    return x.join(out, filters)


@weight_rule(*TRANSPOSED_CONVOLUTIONS)
def _conv_transpose_weights(config: Mapping[str, Any], ins: list[Shape | None]) -> dict[str, Shape]:
    g, channels = _weight_input(config, ins, "conv transpose")
    filters = _filters(config, "conv transpose")
    return _with_bias({"kernel": (*g["kernel"], filters, channels)}, config, filters)


@shape_rule(*DEPTHWISE_CONVOLUTIONS)
def _depthwise(call: Call) -> Shape:
    x = _spatial_input(call)
    g = conv_geometry(call.config, x.rank, call.class_name)
    return x.join(_conv_lengths(x.spatial, g), dmul(x.channels, call.get("depth_multiplier", 1)))


@weight_rule(*DEPTHWISE_CONVOLUTIONS)
def _depthwise_weights(config: Mapping[str, Any], ins: list[Shape | None]) -> dict[str, Shape]:
    g, channels = _weight_input(config, ins, "depthwise conv")
    dm = config.get("depth_multiplier", 1)
    return _with_bias({"kernel": (*g["kernel"], channels, dm)}, config, dmul(channels, dm))


@shape_rule(*SEPARABLE_CONVOLUTIONS)
def _separable(call: Call) -> Shape:
    x = _spatial_input(call)
    g = conv_geometry(call.config, x.rank, call.class_name)
    return x.join(_conv_lengths(x.spatial, g), _filters(call.config, call.class_name))


@weight_rule(*SEPARABLE_CONVOLUTIONS)
def _separable_weights(config: Mapping[str, Any], ins: list[Shape | None]) -> dict[str, Shape]:
    g, channels = _weight_input(config, ins, "separable conv")
    dm = config.get("depth_multiplier", 1)
    filters = _filters(config, "separable conv")
    kernels: dict[str, Shape] = {
        "depthwise_kernel": (*g["kernel"], channels, dm),
        "pointwise_kernel": (*(1,) * len(g["kernel"]), dmul(channels, dm), filters),
    }
    return _with_bias(kernels, config, filters)


def _flag(config: Mapping[str, Any], key: str, default: bool = True) -> bool:
    value = config.get(key, default)
    return bool(default if value is None else value)


def _with_bias(
    kernels: dict[str, Shape], config: Mapping[str, Any], size: Dim, also: bool = True
) -> dict[str, Shape]:
    """``kernels`` and, when the config's ``use_bias`` (and ``also``) holds, a ``bias`` of ``size``."""
    if _flag(config, "use_bias") and also:
        return {**kernels, "bias": (size,)}
    return kernels


# ------------------------------------------------------------------------------------------------
# Pooling

POOL_CLASSES = tuple(
    f"{kind}{n}D" for kind in ("MaxPooling", "AveragePooling", "MaxPool", "AvgPool") for n in (1, 2, 3)
)
GLOBAL_POOL_CLASSES = tuple(
    f"Global{kind}{n}D" for kind in ("MaxPooling", "AveragePooling", "MaxPool", "AvgPool") for n in (1, 2, 3)
)


@shape_rule(*POOL_CLASSES)
def _pool(call: Call) -> Shape:
    x = _spatial_input(call)
    size = call.get("pool_size", 2, "pool_length")
    pool = as_tuple(size, x.rank, "pool_size")
    strides_raw = call.get("strides", None, "stride")
    strides = pool if strides_raw is None else as_tuple(strides_raw, x.rank, "strides")
    padding = str(call.get("padding", "valid", "border_mode")).lower()
    out = [conv_length(d, k, s, 1, padding) for d, k, s in zip(x.spatial, pool, strides, strict=True)]
    return x.join(out, x.channels)


@shape_rule(*GLOBAL_POOL_CLASSES)
def _global_pool(call: Call) -> Shape:
    x = _spatial_input(call)
    if call.get("keepdims", False):
        return x.join([1] * x.rank, x.channels)
    return (x.batch, x.channels)


# ------------------------------------------------------------------------------------------------
# Reshaping


@shape_rule("Flatten")
def _flatten(call: Call) -> Shape:
    shape = call.x()
    if len(shape) < 1:
        raise ShapeError("Flatten needs a batch dimension", "rank")
    if len(shape) == 1:
        return (shape[0], 1)
    return (shape[0], prod(shape[1:]))


def reshape_to(shape: Shape, target: list[Any], who: str, with_batch: bool) -> Shape:
    """Resolve a target shape with at most one -1 against ``shape``; ``with_batch`` = target includes it."""
    dims: list[Dim] = [None if d is None else int(d) for d in target]
    if sum(1 for d in dims if d == -1) > 1:
        raise ShapeError(f"{who} target {target} has more than one -1", "reshape")
    for d in dims:
        if d is not None and d < -1:
            raise ShapeError(f"{who} target {target} has a negative dimension", "reshape")
    source = list(shape) if with_batch else list(shape[1:])
    total = prod(source)
    if with_batch and total is None:
        return tuple(None if d == -1 else d for d in dims)
    if -1 in dims:
        known = prod(d for d in dims if d != -1)
        if total is not None and known is not None:
            if known == 0 or total % known:
                raise ShapeError(
                    f"{who} cannot reshape {fmt(shape)} ({total} elements"
                    f"{'' if with_batch else ' per sample'}) to {target}",
                    "reshape",
                )
            dims[dims.index(-1)] = total // known
        else:
            dims[dims.index(-1)] = None
    else:
        want = prod(dims)
        if total is not None and want is not None and total != want:
            raise ShapeError(
                f"{who} cannot reshape {fmt(shape)} ({total} elements"
                f"{'' if with_batch else ' per sample'}) to {target} ({want} elements)",
                "reshape",
            )
    return tuple(dims) if with_batch else (shape[0], *dims)


@shape_rule("Reshape")
def _reshape(call: Call) -> Shape:
    shape = call.x()
    target = call.get("target_shape", None, "dims")
    if not isinstance(target, list | tuple):
        raise ShapeError(f"Reshape target_shape {target!r} is not a list", "config")
    return reshape_to(shape, list(target), "Reshape", with_batch=False)


@shape_rule("Permute")
def _permute(call: Call) -> Shape:
    shape = call.x()
    dims = call.get("dims")
    if not isinstance(dims, list | tuple) or sorted(dims) != list(range(1, len(shape))):
        raise ShapeError(
            f"Permute dims {dims!r} are not a permutation of 1..{len(shape) - 1} for input {fmt(shape)}",
            "config",
        )
    return (shape[0], *(shape[d] for d in dims))


@shape_rule("RepeatVector")
def _repeat_vector(call: Call) -> Shape:
    shape = need_rank(call.x(), 2, "RepeatVector")
    return (shape[0], call.get("n"), shape[1])


def _pad_crop(call: Call, key: str, sign: int, default: Any) -> Shape:
    x = _spatial_input(call)
    spec = pairs(call.get(key, default), x.rank, f"{call.class_name} {key}")
    out: list[Dim] = []
    for d, (a, b) in zip(x.spatial, spec, strict=True):
        out.append(None if d is None else d + sign * (a + b))
    return x.join(out, x.channels)


@shape_rule("ZeroPadding1D", "ZeroPadding2D", "ZeroPadding3D")
def _zero_padding(call: Call) -> Shape:
    return _pad_crop(call, "padding", +1, 1)


@shape_rule("Cropping1D", "Cropping2D", "Cropping3D")
def _cropping(call: Call) -> Shape:
    return _pad_crop(call, "cropping", -1, 0)


@shape_rule("UpSampling1D", "UpSampling2D", "UpSampling3D")
def _upsampling(call: Call) -> Shape:
    x = _spatial_input(call)
    size = as_tuple(call.get("size", 2, "length"), x.rank, f"{call.class_name} size")
    return x.join([dmul(d, s) for d, s in zip(x.spatial, size, strict=True)], x.channels)


@shape_rule("Resizing", "CenterCrop", "RandomCrop")
def _resizing(call: Call) -> Shape:
    shape = call.x()
    if len(shape) not in (3, 4):
        raise ShapeError(f"{call.class_name} expects (batch,) H, W, C images, got {fmt(shape)}", "rank")
    h, w = call.get("height"), call.get("width")
    first = channels_first(call.config)
    if len(shape) == 3:  # one unbatched image
        return (shape[0], h, w) if first else (h, w, shape[2])
    return (shape[0], shape[1], h, w) if first else (shape[0], h, w, shape[3])
