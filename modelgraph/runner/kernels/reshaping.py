"""Kernels: reshaping family (see modelgraph/runner/registry.py for the contract).

Resizing follows ``tf.image.resize`` (v2, ``antialias=False``): half-pixel centres computed in float32,
bilinear as two lerps (``top + (bottom - top) * dy``), nearest as ``floor((i + 0.5) * scale)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from modelgraph.layer_params import check_keys, data_format, int_tuple, pair_tuple
from modelgraph.runner.kernels.conv_utils import float_dtype, from_last, pad_spatial, to_last
from modelgraph.runner.kernels.resampling import METHODS, method_matrices, resize_separable
from modelgraph.runner.registry import Kernel, KernelSpec, register

_F32 = np.float32


@register("Flatten")
def flatten(spec: KernelSpec) -> Kernel:
    check_keys(spec, ("data_format",))
    fmt = data_format(spec)

    def run(inputs: Any) -> np.ndarray:
        x = np.asarray(inputs)
        if fmt == "channels_first" and x.ndim > 2:
            x = np.moveaxis(x, 1, -1)
        return x.reshape(x.shape[0], -1)

    return run


@register("Reshape")
def reshape(spec: KernelSpec) -> Kernel:
    check_keys(spec, ("target_shape",))
    target = spec.get("target_shape")
    if not isinstance(target, (list, tuple)) or not all(
        isinstance(v, int) and not isinstance(v, bool) and (v > 0 or v == -1) for v in target
    ):
        raise spec.unsupported("target_shape", target)
    if sum(v == -1 for v in target) > 1:
        raise spec.unsupported("target_shape", target)
    target = tuple(target)

    def run(inputs: Any) -> np.ndarray:
        x = np.asarray(inputs)
        return x.reshape((x.shape[0], *target))

    return run


@register("Permute")
def permute(spec: KernelSpec) -> Kernel:
    check_keys(spec, ("dims",))
    dims = spec.get("dims")
    if not isinstance(dims, (list, tuple)) or sorted(dims) != list(range(1, len(dims) + 1)):
        raise spec.unsupported("dims", dims)
    axes = (0, *(int(d) for d in dims))

    def run(inputs: Any) -> np.ndarray:
        return np.transpose(np.asarray(inputs), axes)

    return run


@register("RepeatVector")
def repeat_vector(spec: KernelSpec) -> Kernel:
    check_keys(spec, ("n",))
    n = spec.get("n")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise spec.unsupported("n", n)

    def run(inputs: Any) -> np.ndarray:
        x = np.asarray(inputs)
        if x.ndim != 2:
            raise ValueError(f"expected a rank-2 input, got shape {x.shape}")
        return np.repeat(x[:, None, :], n, axis=1)

    return run


def _channels_last_kernel(fmt: str, rank: int, fn: Callable[[np.ndarray], np.ndarray]) -> Kernel:
    """A kernel applying ``fn`` to its rank ``rank + 2`` input viewed channels-last, returning the
    result in the layer's ``data_format``."""

    def run(inputs: Any) -> np.ndarray:
        x = to_last(np.asarray(inputs), fmt)
        if x.ndim != rank + 2:
            raise ValueError(f"expected a rank-{rank + 2} input, got shape {x.shape}")
        return from_last(fn(x), fmt)

    return run


def _non_negative_pairs(spec: KernelSpec, key: str, rank: int, default: int) -> list[tuple[int, int]]:
    """``(before, after)`` per spatial axis from ``key`` (see ``pair_tuple``); negative values refused."""
    pairs = pair_tuple(spec, key, rank, default)
    if any(v < 0 for p in pairs for v in p):
        raise spec.unsupported(key, spec.get(key))
    return pairs


def _make_zero_padding(spec: KernelSpec, rank: int) -> Kernel:
    check_keys(spec, ("padding", "data_format"))
    fmt = data_format(spec)
    pads = _non_negative_pairs(spec, "padding", rank, 1)
    return _channels_last_kernel(fmt, rank, lambda x: pad_spatial(x, pads))


def _make_cropping(spec: KernelSpec, rank: int) -> Kernel:
    check_keys(spec, ("cropping", "data_format"))
    fmt = data_format(spec)
    crops = _non_negative_pairs(spec, "cropping", rank, 1 if rank == 1 else 0)

    def crop(x: np.ndarray) -> np.ndarray:
        sizes = x.shape[1:-1]
        if any(b + a >= n for (b, a), n in zip(crops, sizes, strict=True)):
            raise ValueError(f"cropping {crops} leaves nothing of spatial shape {sizes}")
        return x[(slice(None), *(slice(b, n - a) for (b, a), n in zip(crops, sizes, strict=True)))]

    return _channels_last_kernel(fmt, rank, crop)


def _make_upsampling(spec: KernelSpec, rank: int) -> Kernel:
    check_keys(spec, ("size", "data_format", "interpolation") if rank == 2 else ("size", "data_format"))
    fmt = data_format(spec)
    size = int_tuple(spec, "size", rank, 2)
    if any(s < 1 for s in size):
        raise spec.unsupported("size", spec.get("size"))
    interpolation = spec.get("interpolation", "nearest") if rank == 2 else "nearest"
    if interpolation not in METHODS:
        raise spec.unsupported("interpolation", interpolation)
    dtype = float_dtype(spec)

    def upsample(x: np.ndarray) -> np.ndarray:
        if interpolation != "nearest":
            # Keras resizes to the multiplied size with tf.image.resize (no antialiasing).
            x = np.asarray(x, dtype=dtype)
            return resize_image(x, x.shape[1] * size[0], x.shape[2] * size[1], interpolation)
        for axis, s in enumerate(size, start=1):
            if s != 1:
                x = np.repeat(x, s, axis=axis)
        return x

    return _channels_last_kernel(fmt, rank, upsample)


def _axis_factory(make, rank: int):
    def factory(spec: KernelSpec) -> Kernel:
        return make(spec, rank)

    factory.__name__ = f"{make.__name__.lstrip('_')}{rank}d"
    return factory


for _rank in (1, 2, 3):
    register(f"ZeroPadding{_rank}D")(_axis_factory(_make_zero_padding, _rank))
    register(f"Cropping{_rank}D")(_axis_factory(_make_cropping, _rank))
    register(f"UpSampling{_rank}D")(_axis_factory(_make_upsampling, _rank))


# --- image resizing --------------------------------------------------------------------------


def half_pixel(in_size: int, out_size: int) -> np.ndarray:
    scale = _F32(in_size) / _F32(out_size)
    return (np.arange(out_size, dtype=_F32) + _F32(0.5)) * scale


def lerp_axis(in_size: int, out_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    src = half_pixel(in_size, out_size) - _F32(0.5)
    floor = np.floor(src)
    lower = np.maximum(floor, 0).astype(np.intp)
    upper = np.minimum(np.ceil(src), in_size - 1).astype(np.intp)
    return lower, upper, (src - floor).astype(_F32)


def resize_bilinear(x: np.ndarray, height: int, width: int) -> np.ndarray:
    """``tf.image.resize(method="bilinear", antialias=False)`` of a channels-last ``(B, H, W, C)`` array."""
    y0, y1, dy = lerp_axis(x.shape[1], height)
    x0, x1, dx = lerp_axis(x.shape[2], width)
    dt = x.dtype.type
    dx = dx.astype(x.dtype)[:, None]
    dy = dy.astype(x.dtype)[:, None, None]
    top_rows, bottom_rows = x[:, y0], x[:, y1]
    top = top_rows[:, :, x0] + (top_rows[:, :, x1] - top_rows[:, :, x0]) * dx
    bottom = bottom_rows[:, :, x0] + (bottom_rows[:, :, x1] - bottom_rows[:, :, x0]) * dx
    out = top + (bottom - top) * dy
    return out.astype(dt, copy=False)


def resize_image(x: np.ndarray, height: int, width: int, method: str, antialias: bool = False) -> np.ndarray:
    """``tf.image.resize(x, (height, width), method, antialias)`` of a channels-last ``(B, H, W, C)``
    float array, ``method`` one of :data:`resampling.METHODS`."""
    matrices = method_matrices(method, antialias)
    if matrices is None:
        return (resize_nearest if method == "nearest" else resize_bilinear)(x, height, width)
    return resize_separable(x, matrices(x.shape[1], height), matrices(x.shape[2], width))


def resize_nearest(x: np.ndarray, height: int, width: int) -> np.ndarray:
    """``tf.image.resize(method="nearest")`` (half-pixel centres) of a ``(B, H, W, C)`` array."""
    rows = np.minimum(np.floor(half_pixel(x.shape[1], height)), x.shape[1] - 1).astype(np.intp)
    cols = np.minimum(np.floor(half_pixel(x.shape[2], width)), x.shape[2] - 1).astype(np.intp)
    return x[:, rows][:, :, cols]


def _batched_last(x: np.ndarray, fmt: str) -> tuple[np.ndarray, bool]:
    """A ``(B, H, W, C)`` view of a rank-3 or rank-4 image array in either data format."""
    if x.ndim not in (3, 4):
        raise ValueError(f"expected a rank-3 or rank-4 image input, got shape {x.shape}")
    single = x.ndim == 3
    if single:
        x = x[None]
    return to_last(x, fmt), single


def _unbatched(x: np.ndarray, fmt: str, single: bool) -> np.ndarray:
    x = from_last(x, fmt)
    return x[0] if single else x


def crop_box(height: int, width: int, target_h: int, target_w: int, ftype: type = float) -> tuple[int, ...]:
    """The centred crop to the target aspect ratio: ``ftype=np.float32`` for Resizing (TF math),
    Python floats for CenterCrop's ``smart_resize`` on static shapes."""
    crop_h = int(ftype(width * target_h) / ftype(target_w))
    crop_h = max(min(height, crop_h), 1)
    crop_w = int(ftype(height * target_w) / ftype(target_h))
    crop_w = max(min(width, crop_w), 1)
    return int(ftype(height - crop_h) / ftype(2)), int(ftype(width - crop_w) / ftype(2)), crop_h, crop_w


def _to_input_dtype(out: np.ndarray, like: np.ndarray) -> np.ndarray:
    if like.dtype.kind in "iu":
        info = np.iinfo(like.dtype)
        return np.clip(np.round(out), info.min, info.max).astype(like.dtype)
    return out


@dataclass(frozen=True)
class ResizingOptions:
    """A Resizing layer's checked options (the runner's kernel and the ONNX mapping read them here)."""

    fmt: str
    height: int
    width: int
    interpolation: str
    antialias: bool
    crop: bool
    pad: bool
    fill_value: float


def resizing_options(spec: KernelSpec) -> ResizingOptions:
    """The checked :class:`ResizingOptions` of a Resizing layer."""
    check_keys(spec, ("height", "width", "interpolation", "crop_to_aspect_ratio", "pad_to_aspect_ratio",
                      "fill_mode", "fill_value", "antialias", "data_format", "bounding_box_format"))  # fmt: skip
    fmt = data_format(spec)
    height, width = spec.get("height"), spec.get("width")
    for key, value in (("height", height), ("width", width)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise spec.unsupported(key, value)
    interpolation = spec.get("interpolation", "bilinear")
    if interpolation not in METHODS:
        raise spec.unsupported("interpolation", interpolation)
    antialias = spec.get("antialias", False)
    if not isinstance(antialias, bool):
        raise spec.unsupported("antialias", antialias)
    crop = bool(spec.get("crop_to_aspect_ratio", False))
    pad = bool(spec.get("pad_to_aspect_ratio", False))
    if crop and pad:
        raise spec.unsupported("pad_to_aspect_ratio", True)
    if spec.get("fill_mode", "constant") != "constant":
        raise spec.unsupported("fill_mode", spec.get("fill_mode"))
    fill_value = spec.get("fill_value", 0.0)
    if not isinstance(fill_value, (int, float)):
        raise spec.unsupported("fill_value", fill_value)
    return ResizingOptions(fmt, height, width, interpolation, antialias, crop, pad, fill_value)


def aspect_pad(h: int, w: int, height: int, width: int) -> tuple[int, int]:
    """``(top, left)``: the padding ``pad_to_aspect_ratio`` puts on *both* sides of each axis of an
    ``h x w`` image for a ``height x width`` target (Keras pads (padded - size) / 2 on both sides, so
    an odd difference loses one row)."""
    ph = max(h, int(_F32(w * height) / _F32(width)))
    pw = max(w, int(_F32(h * width) / _F32(height)))
    return int(_F32(ph - h) / _F32(2)), int(_F32(pw - w) / _F32(2))


@register("Resizing")
def resizing(spec: KernelSpec) -> Kernel:
    o = resizing_options(spec)
    fmt, height, width, interpolation, antialias = o.fmt, o.height, o.width, o.interpolation, o.antialias
    crop, pad, fill_value = o.crop, o.pad, o.fill_value
    dtype = float_dtype(spec)

    def run(inputs: Any) -> np.ndarray:
        raw = np.asarray(inputs)
        x, single = _batched_last(raw, fmt)
        x = x.astype(dtype, copy=False)
        h, w = x.shape[1:3]
        if crop:
            top, left, ch, cw = crop_box(h, w, height, width, _F32)
            x = x[:, top : top + ch, left : left + cw]
        elif pad:
            top, left = aspect_pad(h, w, height, width)
            x = pad_spatial(x, [(top, top), (left, left)], fill_value)
        out = resize_image(x, height, width, interpolation, antialias)
        return _unbatched(_to_input_dtype(out, raw), fmt, single)

    return run


@register("CenterCrop")
def center_crop(spec: KernelSpec) -> Kernel:
    check_keys(spec, ("height", "width", "data_format", "bounding_box_format"))
    fmt = data_format(spec)
    height, width = spec.get("height"), spec.get("width")
    for key, value in (("height", height), ("width", width)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise spec.unsupported(key, value)
    dtype = float_dtype(spec)

    def run(inputs: Any) -> np.ndarray:
        x, single = _batched_last(np.asarray(inputs, dtype=dtype), fmt)
        h, w = x.shape[1:3]
        if h >= height and w >= width:
            top, left = (h - height) // 2, (w - width) // 2
            return _unbatched(x[:, top : top + height, left : left + width], fmt, single)
        # Smaller than the target: Keras falls back to smart_resize (aspect crop + bilinear).
        top, left, ch, cw = crop_box(h, w, height, width)
        out = resize_bilinear(x[:, top : top + ch, left : left + cw], height, width)
        return _unbatched(out, fmt, single)

    return run
