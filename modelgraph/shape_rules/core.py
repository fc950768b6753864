"""Core layers: input, dense, einsum, identity-like, activations, embedding, normalization, merges."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from modelgraph.shape_rules._base import (
    Call,
    Shape,
    ShapeError,
    TensorSpec,
    Unknown,
    axis_index,
    broadcast,
    dadd,
    fmt,
    need,
    same_dim,
    shape_rule,
    weight_rule,
)

# ------------------------------------------------------------------------------------------------
# Identity-shaped layers


@shape_rule(
    "Activation", "ReLU", "LeakyReLU", "ELU", "Softmax", "ThresholdedReLU", "PReLU",
    "GaussianNoise",
    "GaussianDropout", "AlphaDropout", "ActivityRegularization", "Masking", "Identity",
    "UnitNormalization", "Rescaling", "Normalization", "BatchNormalization", "LayerNormalization",
    "LayerScale", "BatchNormalizationV1", "BatchNormalizationV2",
    "SyncBatchNormalization", "AutoContrast", "Solarization",
    "RandomFlip", "RandomRotation", "RandomTranslation", "RandomZoom", "RandomContrast",
    "RandomBrightness", "Equalization", "RandomGrayscale", "Dropout", "SpatialDropout1D",
    "SpatialDropout2D", "SpatialDropout3D",
)  # fmt: skip
def _identity(call: Call) -> Shape:
    return call.x()


@shape_rule("InputLayer")
def _input(call: Call) -> Shape | None:  # the driver handles inputs; this is for completeness
    return input_layer_shape(call.config)


def input_layer_shape(config: Mapping[str, Any]) -> Shape | None:
    """An InputLayer's full shape: ``batch_shape`` (K3), ``batch_input_shape`` (K1/2), or ``shape``."""
    for key in ("batch_shape", "batch_input_shape"):
        value = config.get(key)
        if isinstance(value, list | tuple):
            return _clean(value)
    value = config.get("shape", config.get("input_shape"))
    if isinstance(value, list | tuple):
        batch = config.get("batch_size")
        return (batch if isinstance(batch, int) else None, *_clean(value))
    return None


def _clean(value: Any) -> Shape:
    return tuple(d if isinstance(d, int) and not isinstance(d, bool) else None for d in value)


def _norm_axes(call: Call, shape: Shape, default: Any = -1) -> list[int]:
    axis = call.get("axis", default)
    axes = axis if isinstance(axis, list | tuple) else [axis]
    return [axis_index(a, len(shape), "axis") for a in axes]


@weight_rule("BatchNormalization", "BatchNormalizationV1", "BatchNormalizationV2", "SyncBatchNormalization")
def _bn_weights(config: Mapping[str, Any], ins: list[Shape | None]) -> dict[str, Shape]:
    shape = need(ins[0] if ins else None)
    axis = config.get("axis", -1)
    axes = axis if isinstance(axis, list | tuple) else [axis]
    idx = sorted(axis_index(a, len(shape)) for a in axes)
    if len(idx) == 1:
        param: Shape = (shape[idx[0]],)
    else:  # tf.keras broadcasts multi-axis parameters to the full rank
        param = tuple(shape[i] if i in idx else 1 for i in range(len(shape)))
    out: dict[str, Shape] = {}
    if _flag(config, "scale"):
        out["gamma"] = param
    if _flag(config, "center"):
        out["beta"] = param
    out["moving_mean"] = param
    out["moving_variance"] = param
    return out


@weight_rule("LayerNormalization")
def _ln_weights(config: Mapping[str, Any], ins: list[Shape | None]) -> dict[str, Shape]:
    shape = need(ins[0] if ins else None)
    axis = config.get("axis", -1)
    if isinstance(axis, list | tuple):
        param: Shape = tuple(shape[axis_index(a, len(shape))] for a in axis)
    else:
        param = (shape[axis_index(axis, len(shape))],)
    out: dict[str, Shape] = {}
    # Keras 3 LayerNormalization.build: gamma when scale or rms_scaling, beta when center and not
    # rms_scaling (rms_scaling=True, scale=False still stores gamma).
    if _flag(config, "scale") or _flag(config, "rms_scaling", False):
        out["gamma"] = param
    if _flag(config, "center") and not config.get("rms_scaling"):
        out["beta"] = param
    return out


@weight_rule("GroupNormalization")
def _gn_weights(config: Mapping[str, Any], ins: list[Shape | None]) -> dict[str, Shape]:
    shape = need(ins[0] if ins else None)
    param: Shape = (shape[axis_index(config.get("axis", -1), len(shape))],)
    out: dict[str, Shape] = {}
    if _flag(config, "scale"):
        out["gamma"] = param
    if _flag(config, "center"):
        out["beta"] = param
    return out


@shape_rule("GroupNormalization")
def _group_norm(call: Call) -> Shape:
    shape = call.x()
    groups = call.get("groups", 32)
    channels = shape[axis_index(call.get("axis", -1), len(shape))]
    if channels is not None and isinstance(groups, int) and groups > 0 and channels % groups:
        raise ShapeError(f"{channels} channels cannot be split into {groups} groups", "config")
    return shape


@weight_rule("Normalization")
def _normalization_weights(config: Mapping[str, Any], ins: list[Shape | None]) -> dict[str, Shape]:
    if config.get("mean") is not None:
        return {}
    shape = need(ins[0] if ins else None)
    axis = config.get("axis", -1)
    axes = [] if axis is None else axis if isinstance(axis, list | tuple) else [axis]
    keep = sorted(axis_index(a, len(shape)) for a in axes)
    param: Shape = tuple(shape[a] for a in keep)
    return {"mean": param, "variance": param, "count": ()}


@weight_rule("LayerScale")
def _layer_scale_weights(config: Mapping[str, Any], ins: list[Shape | None]) -> dict[str, Shape]:
    dim = config.get("projection_dim")
    if not isinstance(dim, int):
        dim = need(ins[0] if ins else None)[-1]
    return {"gamma": (dim,)}


@weight_rule("PReLU")
def _prelu_weights(config: Mapping[str, Any], ins: list[Shape | None]) -> dict[str, Shape]:
    shape = list(need(ins[0] if ins else None)[1:])
    shared = config.get("shared_axes") or []
    for a in shared if isinstance(shared, list | tuple) else [shared]:
        if isinstance(a, int) and 1 <= a <= len(shape):
            shape[a - 1] = 1
    return {"alpha": tuple(shape)}


def _flag(config: Mapping[str, Any], key: str, default: bool = True) -> bool:
    value = config.get(key, default)
    return bool(default if value is None else value)


# ------------------------------------------------------------------------------------------------
# Dense, EinsumDense, Embedding


@shape_rule("Dense")
def _dense(call: Call) -> Shape:
    shape = call.x()
    if len(shape) < 2:
        raise ShapeError(f"Dense needs an input of rank >= 2, got {fmt(shape)}", "rank")
    units = call.get("units", None, "output_dim")
    if not isinstance(units, int):
        raise ShapeError(f"Dense units {units!r} is not an integer", "config")
    return (*shape[:-1], units)


@weight_rule("Dense")
def _dense_weights(config: Mapping[str, Any], ins: list[Shape | None]) -> dict[str, Shape]:
    shape = need(ins[0] if ins else None)
    units = config.get("units", config.get("output_dim"))
    out: dict[str, Shape] = {"kernel": (shape[-1], units)}
    if _flag(config, "use_bias", True) and _flag(config, "bias", True):
        out["bias"] = (units,)
    return out


_EINSUM_PLAIN = re.compile(r"^([a-zA-Z]+),([a-zA-Z]+)->([a-zA-Z]+)$")
_EINSUM_LEFT = re.compile(r"^\.\.\.([a-zA-Z]+),([a-zA-Z]+)->\.\.\.([a-zA-Z]+)$")
_EINSUM_RIGHT = re.compile(r"^([a-zA-Z]{2,})\.\.\.,([a-zA-Z]+)->([a-zA-Z]{2,})\.\.\.$")


def einsum_dense_analysis(config: Mapping[str, Any], shape: Shape) -> tuple[Shape, Shape, Shape | None]:
    """``(output shape, kernel shape, bias shape or None)`` of an EinsumDense on ``shape``."""
    equation = str(config.get("equation", "")).replace(" ", "")
    left: bool | None = None
    m = _EINSUM_PLAIN.match(equation)
    if m is None:
        m, left = _EINSUM_LEFT.match(equation), True
    if m is None:
        m, left = _EINSUM_RIGHT.match(equation), False
    if m is None:
        raise ShapeError(f"EinsumDense equation {equation!r} is not understood", "config")
    in_spec, w_spec, out_spec = m.groups()
    raw_out = config.get("output_shape")
    out_dims: list[Any] = [raw_out] if isinstance(raw_out, int) or raw_out is None else list(raw_out)
    elided = len(shape) - len(in_spec)
    if left is None and elided != 0:
        raise ShapeError(f"EinsumDense '{equation}' expects rank {len(in_spec)}, got {fmt(shape)}", "rank")
    if elided < 0:
        raise ShapeError(f"EinsumDense '{equation}' expects rank >= {len(in_spec)}, got {fmt(shape)}", "rank")
    full: list[Any] = [shape[0], *out_dims]
    if left and elided > 0:
        for i in range(1, elided):
            full.insert(i, shape[i])
    elif left is False and elided > 0:
        full.extend(shape[len(shape) - elided :])
    if left:
        in_map = {c: i + elided for i, c in enumerate(in_spec)}
        out_map = {c: len(full) - len(out_spec) + i for i, c in enumerate(out_spec)}
    else:
        in_map = {c: i for i, c in enumerate(in_spec)}
        out_map = {c: i for i, c in enumerate(out_spec)}
    if len(full) != (len(out_spec) + (elided if elided > 0 else 0)):
        raise ShapeError(
            f"EinsumDense output_shape {raw_out!r} does not fit equation '{equation}' (batch excluded)",
            "config",
        )
    for c in in_spec:  # dims shared by input and output must agree; unknown output dims come from the input
        if c in out_map:
            od, idim = full[out_map[c]], shape[in_map[c]]
            if od is not None and idim is not None and od != idim:
                raise ShapeError(
                    f"EinsumDense output_shape says {od} for '{c}' but the input has {idim}", "config"
                )
            if od is None:
                full[out_map[c]] = idim
    kernel: list[Any] = []
    for c in w_spec:
        if c in in_map:
            kernel.append(shape[in_map[c]])
        elif c in out_map:
            kernel.append(full[out_map[c]])
        else:
            raise ShapeError(f"EinsumDense kernel index '{c}' appears in neither input nor output", "config")
    bias_axes = config.get("bias_axes")
    bias: Shape | None = None
    if bias_axes:
        for c in bias_axes:
            if c not in out_spec:
                raise ShapeError(f"EinsumDense bias axis '{c}' is not an output index", "config")
        first = min(out_spec.find(c) for c in bias_axes)
        bias = tuple(full[out_map[c]] if c in bias_axes else 1 for c in out_spec[first:])
        if left is False and elided > 0:
            bias = bias + (1,) * elided
    return tuple(full), tuple(kernel), bias


@shape_rule("EinsumDense")
def _einsum_dense(call: Call) -> Shape:
    return einsum_dense_analysis(call.config, call.x())[0]


@weight_rule("EinsumDense")
def _einsum_dense_weights(config: Mapping[str, Any], ins: list[Shape | None]) -> dict[str, Shape]:
    _, kernel, bias = einsum_dense_analysis(config, need(ins[0] if ins else None))
    out: dict[str, Shape] = {"kernel": kernel}
    if bias is not None:
        out["bias"] = bias
    return out


@shape_rule("Embedding")
def _embedding(call: Call) -> Shape:
    shape = call.x()
    dim = call.get("output_dim")
    if not isinstance(dim, int):
        raise ShapeError(f"Embedding output_dim {dim!r} is not an integer", "config")
    length = call.get("input_length")
    if isinstance(length, int) and len(shape) == 2 and not same_dim(shape[1], length):
        raise ShapeError(f"Embedding input_length is {length} but the input is {fmt(shape)}", "shape")
    return (*shape, dim)


@weight_rule("Embedding")
def _embedding_weights(config: Mapping[str, Any], ins: list[Shape | None]) -> dict[str, Shape]:
    return {"embeddings": (config.get("input_dim"), config.get("output_dim"))}


@shape_rule("CategoryEncoding")
def _category_encoding(call: Call) -> Shape:
    shape = call.x()
    tokens = call.get("num_tokens")
    if len(shape) >= 2 and shape[-1] == 1:
        shape = shape[:-1]
    return (*shape, tokens)


# ------------------------------------------------------------------------------------------------
# Merges


def _merge_inputs(call: Call, minimum: int = 2) -> list[TensorSpec]:
    tensors = call.arg_tensors()
    if len(tensors) < minimum:
        raise ShapeError(f"{call.class_name} needs at least {minimum} inputs, got {len(tensors)}", "arity")
    return tensors


@shape_rule("Add", "Multiply", "Average", "Maximum", "Minimum")
def _merge(call: Call) -> Shape:
    return _broadcast_merge(call, _merge_inputs(call))


@shape_rule("Subtract")
def _subtract(call: Call) -> Shape:
    tensors = _merge_inputs(call)
    if len(tensors) != 2:
        raise ShapeError(f"Subtract needs exactly 2 inputs, got {len(tensors)}", "arity")
    return _broadcast_merge(call, tensors)


def _broadcast_merge(call: Call, tensors: list[TensorSpec]) -> Shape:
    shapes = [need(t) for t in tensors]
    out = shapes[0]
    for s in shapes[1:]:
        out = broadcast(out, s, f"{call.class_name} inputs")
    return out


@shape_rule("Concatenate")
def _concatenate(call: Call) -> Shape:
    shapes = [need(t) for t in _merge_inputs(call, 1)]
    return concat_shapes(shapes, call.get("axis", -1), "Concatenate")


def concat_shapes(shapes: list[Shape], axis: Any, who: str) -> Shape:
    rank = len(shapes[0])
    for s in shapes[1:]:
        if len(s) != rank:
            raise ShapeError(
                f"{who} inputs have different ranks: {', '.join(fmt(x) for x in shapes)}", "concat"
            )
    a = axis_index(axis, rank)
    out = list(shapes[0])
    for s in shapes[1:]:
        for i in range(rank):
            if i == a:
                continue
            if not same_dim(out[i], s[i]):
                raise ShapeError(
                    f"{who} inputs must match except on axis {axis}: {', '.join(fmt(x) for x in shapes)}",
                    "concat",
                )
            out[i] = out[i] if out[i] is not None else s[i]
    out[a] = dadd(*(s[a] for s in shapes))
    return tuple(out)


@shape_rule("Dot")
def _dot(call: Call) -> Shape:
    tensors = _merge_inputs(call)
    if len(tensors) != 2:
        raise ShapeError(f"Dot needs exactly 2 inputs, got {len(tensors)}", "arity")
    a, b = need(tensors[0]), need(tensors[1])
    axes = call.get("axes", -1, "dot_axes")
    pair = list(axes) if isinstance(axes, list | tuple) else [axes, axes]
    if len(pair) != 2:
        raise ShapeError(f"Dot axes {axes!r} must be one integer or two", "config")
    ia, ib = axis_index(pair[0], len(a)), axis_index(pair[1], len(b))
    if not same_dim(a[ia], b[ib]):
        raise ShapeError(f"Dot axes {axes!r} pair dims {a[ia]} and {b[ib]} ({fmt(a)} . {fmt(b)})", "dot")
    out = list(a[:ia] + a[ia + 1 :]) + list((b[:ib] + b[ib + 1 :])[1:])
    if len(out) == 1:
        out.append(1)
    return tuple(out)


@shape_rule("CustomScaleLayer")
def _custom_scale(call: Call) -> Shape:
    tensors = _merge_inputs(call)
    return broadcast(need(tensors[0]), need(tensors[1]), "CustomScaleLayer inputs")


@shape_rule("Merge")
def _keras1_merge(call: Call) -> Shape:
    mode = call.get("mode", "sum")
    tensors = _merge_inputs(call)
    shapes = [need(t) for t in tensors]
    if mode == "concat":
        return concat_shapes(shapes, call.get("concat_axis", -1), "Merge(concat)")
    if mode in ("sum", "mul", "ave", "max"):
        out = shapes[0]
        for s in shapes[1:]:
            if len(s) != len(out) or not all(same_dim(x, y) for x, y in zip(out, s, strict=True)):
                raise ShapeError(
                    f"Merge({mode}) inputs differ: {', '.join(fmt(x) for x in shapes)}", "broadcast"
                )
        return out
    raise Unknown()
