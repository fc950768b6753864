"""Kernels: normalization family (see modelgraph/runner/registry.py for the contract).

BatchNormalization is folded at plan time into one scale and one shift per channel (computed in
float64, stored in float32). Layer/Group normalization compute their statistics in at least float32,
like Keras (``result_type(x.dtype, "float32")``), and return the input's dtype.
"""

from __future__ import annotations

import numpy as np

from modelgraph.errors import UnsupportedConfigError
from modelgraph.runner.kernels.core import (
    as_float,
    at_least_float32,
    axes_list,
    broadcast_param,
    check_keys,
    flag,
    l2_normalize,
    number,
    positive_axes,
    require,
)
from modelgraph.runner.registry import Kernel, KernelSpec, register


@register("BatchNormalization")
def batch_normalization(spec: KernelSpec) -> Kernel:
    check_keys(
        spec,
        {
            "axis",
            "epsilon",
            "center",
            "scale",
            # training-only: they change how statistics are gathered, not inference
            "momentum",
            "synchronized",
            "renorm",
            "renorm_clipping",
            "renorm_momentum",
            "fused",
            "virtual_batch_size",
            "adjustment",
        },
    )
    axes = axes_list(spec, "axis", -1)
    epsilon = number(spec, "epsilon", 1e-3)
    center = flag(spec, "center", True)
    scale = flag(spec, "scale", True)
    require(spec, "virtual_batch_size", spec.get("virtual_batch_size") is None)
    require(spec, "adjustment", spec.get("adjustment") is None)
    mean = spec.weight("moving_mean").astype(np.float64)
    var = spec.weight("moving_variance").astype(np.float64)
    inv = 1.0 / np.sqrt(var + epsilon)
    if scale:
        inv = inv * spec.weight("gamma").astype(np.float64)
    shift = -mean * inv
    if center:
        shift = shift + spec.weight("beta").astype(np.float64)
    mul32, add32 = inv.astype(np.float32), shift.astype(np.float32)
    cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def run(x: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        # ``mask`` only matters for training-time moments; inference ignores it (as Keras does).
        x = as_float(x)
        params = cache.get(x.ndim)
        if params is None:
            pos = positive_axes(axes, x.ndim, spec)
            params = cache[x.ndim] = (
                broadcast_param(mul32, pos, x.ndim),
                broadcast_param(add32, pos, x.ndim),
            )
        y = x * params[0] + params[1]
        return y.astype(x.dtype, copy=False) if x.dtype.itemsize < 4 else y

    return run


@register("LayerNormalization")
def layer_normalization(spec: KernelSpec) -> Kernel:
    check_keys(spec, {"axis", "epsilon", "center", "scale", "rms_scaling"})
    axes = axes_list(spec, "axis", -1)
    epsilon = number(spec, "epsilon", 1e-3)
    center = flag(spec, "center", True)
    scale = flag(spec, "scale", True)
    rms_scaling = flag(spec, "rms_scaling", False)
    # Keras 3 creates gamma when ``scale or rms_scaling`` and beta only when ``center and not
    # rms_scaling`` (keras/src/layers/normalization/layer_normalization.py::build).
    gamma = spec.weight("gamma").astype(np.float32) if scale or rms_scaling else None
    beta = spec.weight("beta").astype(np.float32) if center and not rms_scaling else None

    def run(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        work = at_least_float32(x)
        pos = sorted(positive_axes(axes, work.ndim, spec))
        red = tuple(pos)
        mean = np.mean(work, axis=red, keepdims=True)
        var = np.mean(np.square(work - mean), axis=red, keepdims=True)
        inv = 1 / np.sqrt(var + work.dtype.type(epsilon))
        if rms_scaling:
            # Keras 3: x * rsqrt(variance + eps) * gamma -- the variance, not the mean square.
            y = work * inv
            if gamma is not None:
                y = y * broadcast_param(gamma, pos, work.ndim)
        else:
            if gamma is not None:
                inv = inv * broadcast_param(gamma, pos, work.ndim)
            res = -mean * inv
            if beta is not None:
                res = res + broadcast_param(beta, pos, work.ndim)
            y = work * inv + res
        return y.astype(x.dtype, copy=False) if x.dtype.kind == "f" else y

    return run


@register("GroupNormalization")
def group_normalization(spec: KernelSpec) -> Kernel:
    check_keys(spec, {"groups", "axis", "epsilon", "center", "scale"})
    groups = spec.get("groups", 32)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups == 0 or groups < -1:
        raise UnsupportedConfigError(spec.class_name, "groups", groups, spec.name)
    axis = spec.get("axis", -1)
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise UnsupportedConfigError(spec.class_name, "axis", axis, spec.name)
    epsilon = number(spec, "epsilon", 1e-3)
    center = flag(spec, "center", True)
    scale = flag(spec, "scale", True)
    gamma = spec.weight("gamma").astype(np.float32) if scale else None
    beta = spec.weight("beta").astype(np.float32) if center else None

    def run(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        work = at_least_float32(x)
        ax = positive_axes([axis], work.ndim, spec)[0]
        channels = work.shape[ax]
        g = channels if groups == -1 else groups
        if channels % g:
            raise ValueError(f"GroupNormalization '{spec.name}': {channels} channels, {g} groups")
        shape = list(work.shape)
        shape[ax : ax + 1] = [g, channels // g]
        grouped = work.reshape(shape)
        red = tuple(i for i in range(1, grouped.ndim) if i != ax)
        mean = np.mean(grouped, axis=red, keepdims=True)
        var = np.mean(np.square(grouped - mean), axis=red, keepdims=True)
        inv = 1 / np.sqrt(var + work.dtype.type(epsilon))
        pshape = [1] * grouped.ndim
        pshape[ax : ax + 2] = [g, channels // g]
        if gamma is not None:
            inv = inv * gamma.reshape(pshape)
        res = -mean * inv
        if beta is not None:
            res = res + beta.reshape(pshape)
        y = (grouped * inv + res).reshape(work.shape)
        return y.astype(x.dtype, copy=False) if x.dtype.kind == "f" else y

    return run


@register("UnitNormalization")
def unit_normalization(spec: KernelSpec) -> Kernel:
    check_keys(spec, {"axis"})
    axes = axes_list(spec, "axis", -1)
    keras3 = spec.keras_version[0] >= 3

    def run(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        work = at_least_float32(x)
        red = tuple(positive_axes(axes, work.ndim, spec))
        # Keras 3 calls keras.ops.normalize with epsilon=1e-12.
        y = l2_normalize(work, red, keras3, keras3_cap=1e12)
        return y.astype(x.dtype, copy=False) if x.dtype.kind == "f" else y

    return run
