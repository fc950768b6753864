"""Parameters, MACs and activation memory, per layer and per model.

Conventions (documented so numbers can be compared with other tools):

* **Parameters** match Keras's ``count_params()`` and ``summary()``: stored weights when the file
  has them (every stored array counts, e.g. ``Normalization``'s ``count``), otherwise the shapes
  :func:`modelgraph.shapes.expected_weights` derives from the config and the inferred input shapes.
  A shared layer counts once. A nested model's row includes all its layers, and the model totals
  count nested layers (as Keras does).
* **Trainable vs non-trainable**: BatchNormalization ``moving_mean``/``moving_variance``,
  Normalization ``mean``/``variance``/``count`` and quantization scales are non-trainable; a layer
  with ``trainable: false`` (or inside a model, or wrapping a layer, with ``trainable: false``)
  has only non-trainable parameters.
* **MACs** (multiply-accumulates) are counted for one sample (batch dimension = 1) and only for
  contractions: Dense (N-D), EinsumDense, Conv/Conv-transpose (per output element: kernel volume x
  input channels / groups), depthwise and separable convolutions, recurrent layers (per time step:
  gates x units x (input features + units), times the steps; ConvLSTM likewise with convolutions),
  MultiHeadAttention (the four projections plus QK^T and attention x V), Attention/AdditiveAttention
  (scores and weighted sum), Dot, matmul/einsum ops. Element-wise work (activations, adds,
  BatchNormalization, pooling, resizing) counts **0** -- the convention of torchinfo's "mult-adds"
  for convs/linears and of onnx-tool's MACs for MatMul/Conv. FLOPs are about ``2 x MACs``.
  Shared layers are counted once per call; a nested model's MACs are its layers' MACs for each call.
* **Activations**: elements and bytes of every output tensor of every call, for one sample.
  ``None`` wherever a dimension (other than the batch) is unknown.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from modelgraph import catalogue
from modelgraph.catalogue.conv import (
    CONVOLUTIONS,
    DEPTHWISE_CONVOLUTIONS,
    SEPARABLE_CONVOLUTIONS,
    TRANSPOSED_CONVOLUTIONS,
)
from modelgraph.graph import Layer, ModelGraph
from modelgraph.shape_rules import (
    Shape,
    ShapeError,
    TensorSpec,
    Unknown,
    channels_first,
    flatten,
    inner_record,
    need,
    quantization_mode,
    variable_dtype,
)
from modelgraph.shape_rules.attention import mha_inputs
from modelgraph.shape_rules.core import einsum_dense_analysis
from modelgraph.shape_rules.recurrent import CONVLSTM_NAMES, RNN_NAMES, recurrence, rnn_cells
from modelgraph.shape_rules.spatial import conv_geometry
from modelgraph.shapes import ShapeResult, infer_shapes
from modelgraph.sharing import repeated_objects

__all__ = ["LayerStats", "ModelTotals", "layer_stats", "model_totals"]

_NON_TRAINABLE_NAMES = {"moving_mean", "moving_variance"}
_QUANT_SUFFIXES = ("_scale", "_zero", "_amax_history", "_scale_history")


@dataclass
class LayerStats:
    """Statistics of one layer (all its calls), nested layers included with their ``path``."""

    path: tuple[str, ...]
    class_name: str
    kind: str
    calls: int
    params: int | None
    trainable_params: int | None
    non_trainable_params: int | None
    params_source: str  # "stored" | "expected" | "none" (no weights) | "unknown"
    weight_bytes: int | None
    weight_bytes_by_dtype: dict[str, int] = field(default_factory=dict)
    macs: int | None = 0
    output_shapes: list[list[Shape | None]] = field(default_factory=list)
    output_elements: int | None = 0
    output_bytes: int | None = 0
    depth: int | None = None

    @property
    def name(self) -> str:
        return self.path[-1]

    @property
    def level(self) -> int:
        """0 for top-level layers, 1 inside a nested model, ..."""
        return len(self.path) - 1


@dataclass
class ModelTotals:
    """Whole-model totals (nested models included once; shared layers once for parameters)."""

    total_params: int
    trainable_params: int
    non_trainable_params: int
    weight_bytes: int
    weight_bytes_by_dtype: dict[str, int]
    total_macs: int
    activation_elements: int
    activation_bytes: int
    unknown_param_layers: list[str] = field(default_factory=list)
    unknown_mac_layers: list[str] = field(default_factory=list)
    unknown_activation_layers: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """True when no layer's parameters or MACs are unknown."""
        return not self.unknown_param_layers and not self.unknown_mac_layers


# ------------------------------------------------------------------------------------------------
# Public API


def layer_stats(graph: ModelGraph, shapes: ShapeResult | None = None) -> list[LayerStats]:
    """One row per layer in ``graph.layers`` order; a nested model's row is followed by its layers."""
    shapes = shapes if shapes is not None else infer_shapes(graph)
    rows: list[LayerStats] = []
    _rows(graph, [shapes], (), False, rows)
    return rows


def model_totals(
    graph: ModelGraph, shapes: ShapeResult | None = None, stats: Sequence[LayerStats] | None = None
) -> ModelTotals:
    """Totals over the top-level rows of :func:`layer_stats` (which include nested models)."""
    rows = list(stats) if stats is not None else layer_stats(graph, shapes)
    top = [r for r in rows if r.level == 0]
    leaves = [r for r in rows if r.kind != "model"]
    # An object used at several nesting levels has a row at each place; its weights count once.
    repeated = repeated_objects(graph)
    again = [r for r in rows if tuple(r.path) in repeated]
    by_dtype: dict[str, int] = {}
    for r in top:
        for k, v in r.weight_bytes_by_dtype.items():
            by_dtype[k] = by_dtype.get(k, 0) + v
    for r in again:
        for k, v in r.weight_bytes_by_dtype.items():
            by_dtype[k] = by_dtype.get(k, 0) - v
    leaf_unknown_params = ["/".join(r.path) for r in rows if r.params is None and r.kind != "model"]
    leaf_unknown_macs = ["/".join(r.path) for r in rows if r.macs is None and r.kind != "model"]
    return ModelTotals(
        total_params=sum(r.params or 0 for r in top) - sum(r.params or 0 for r in again),
        trainable_params=sum(r.trainable_params or 0 for r in top)
        - sum(r.trainable_params or 0 for r in again),
        non_trainable_params=sum(r.non_trainable_params or 0 for r in top)
        - sum(r.non_trainable_params or 0 for r in again),
        weight_bytes=sum(by_dtype.values()),
        weight_bytes_by_dtype=by_dtype,
        total_macs=sum(r.macs or 0 for r in top),
        activation_elements=sum(r.output_elements or 0 for r in leaves),
        activation_bytes=sum(r.output_bytes or 0 for r in leaves),
        unknown_param_layers=leaf_unknown_params,
        unknown_mac_layers=leaf_unknown_macs,
        unknown_activation_layers=["/".join(r.path) for r in leaves if r.output_bytes is None],
    )


# ------------------------------------------------------------------------------------------------
# Rows


def _rows(
    graph: ModelGraph,
    results: list[ShapeResult],
    prefix: tuple[str, ...],
    frozen: bool,
    out: list[LayerStats],
) -> tuple[int | None, int | None, int | None, dict[str, int], int | None, int | None, int | None]:
    """Append rows for ``graph``; return its (params, trainable, non-trainable, bytes by dtype, MACs,
    output elements, output bytes) summed over ``results`` (one per call of the graph)."""
    totals: list[Any] = [0, 0, 0, {}, 0, 0, 0]
    for layer in graph.layers:
        node_indices = [n.index for n in graph.nodes_of(layer.name)]
        layer_frozen = frozen or not layer.trainable
        path = (*prefix, layer.name)
        row_at = len(out)  # a nested model's row goes before its layers' rows
        if layer.kind == "model" and layer.subgraph is not None:
            sub_results: list[ShapeResult] = []
            for r in results:
                for i in node_indices:
                    sub = r.nested.get((layer.name, i))
                    if sub is not None:
                        sub_results.append(sub)
            if not sub_results:
                sub_results_for_params = [infer_shapes(layer.subgraph)]
                macs_known = False
            else:
                sub_results_for_params = sub_results
                macs_known = True
            p, t, nt, by_dtype, macs, _, _ = _rows(
                layer.subgraph, sub_results_for_params, path, layer_frozen, out
            )
            if not macs_known:
                macs = None
            source = "nested"
        else:
            source, p, t, nt, by_dtype, macs = _own_counts(layer, results, node_indices, layer_frozen)
        # A nested model's activation numbers are its own outputs' (per call of the whole model),
        # not the sums of its layers'.
        elems, nbytes = _activations(results, layer.name, node_indices)
        row = LayerStats(
            path=path,
            class_name=layer.class_name,
            kind=layer.kind,
            calls=len(node_indices) * max(len(results), 1),
            params=p,
            trainable_params=t,
            non_trainable_params=nt,
            params_source=source,
            weight_bytes=None if p is None else sum(by_dtype.values()),
            weight_bytes_by_dtype=by_dtype,
            macs=macs,
            output_shapes=[r.outputs.get((layer.name, i), [None]) for r in results for i in node_indices],
            output_elements=elems,
            output_bytes=nbytes,
            depth=layer.depth,
        )
        out.insert(row_at, row)
        totals[0] = _add(totals[0], p)
        totals[1] = _add(totals[1], t)
        totals[2] = _add(totals[2], nt)
        for k, v in by_dtype.items():
            totals[3][k] = totals[3].get(k, 0) + v
        totals[4] = _add(totals[4], macs)
        totals[5] = _add(totals[5], elems)
        totals[6] = _add(totals[6], nbytes)
    return tuple(totals)  # type: ignore[return-value]


def _add(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def _activations(
    results: list[ShapeResult], name: str, node_indices: list[int]
) -> tuple[int | None, int | None]:
    elems: int | None = 0
    nbytes: int | None = 0
    for r in results:
        for i in node_indices:
            shapes = r.outputs.get((name, i), [None])
            dtypes = r.dtypes.get((name, i), [None] * len(shapes))
            for s, d in zip(shapes, dtypes, strict=False):
                n = _per_sample(s)
                elems = _add(elems, n)
                nbytes = _add(nbytes, None if n is None else n * _itemsize(d))
    return elems, nbytes


def _per_sample(shape: Shape | None) -> int | None:
    if shape is None:
        return None
    n = 1
    for i, d in enumerate(shape):
        if i == 0 and d is None:
            continue
        if d is None:
            return None
        n *= d
    return n


def _itemsize(dtype: str | None) -> int:
    if dtype is None:
        return 4
    if dtype == "bfloat16":
        return 2
    try:
        return int(np.dtype(dtype).itemsize)
    except TypeError:
        return 4


def _own_counts(
    layer: Layer, results: list[ShapeResult], node_indices: list[int], frozen: bool
) -> tuple[str, int | None, int | None, int | None, dict[str, int], int | None]:
    """A layer's (params source, params, trainable, non-trainable, bytes by dtype, MACs over its calls)."""
    expected: dict[str, Shape] | None = None
    for r in results:
        if r.expected.get(layer.name) is not None:
            expected = r.expected[layer.name]
            break
    if expected is None and layer.kind != "op":
        from modelgraph.shapes import expected_weights

        if not results or layer.name not in results[0].expected:
            expected = expected_weights(layer)
    entries: list[tuple[str, int | None, str]] = []
    if layer.weights:
        source = "stored"
        entries = [(w.name, w.size, w.dtype) for w in layer.weights]
    elif layer.kind in ("op", "input") or layer.key.startswith(("op:", "tf:")):
        source = "none"
    elif expected is None:
        source = "unknown"
    else:
        source = "expected" if expected else "none"
        vdtype = variable_dtype(layer.config.get("dtype"))
        spec = catalogue.spec_for(layer.key)
        fixed = spec.weight_dtypes if spec is not None else {}
        for name, shape in expected.items():
            size = None if any(d is None for d in shape) else math.prod(shape)
            dtype = fixed.get(name, vdtype)
            if quantization_mode(layer.config) in ("int8", "int4") and name in ("kernel", "embeddings"):
                dtype = "int8"
            entries.append((name, size, dtype))
    frozen = frozen or _wrapped_frozen(layer)
    params: int | None = 0
    trainable: int | None = 0
    non_trainable: int | None = 0
    by_dtype: dict[str, int] = {}
    if source == "unknown":
        params = trainable = non_trainable = None
    for name, size, dtype in entries:
        params = _add(params, size)
        if frozen or _non_trainable_weight(layer, name):
            non_trainable = _add(non_trainable, size)
        else:
            trainable = _add(trainable, size)
        if size is not None:
            by_dtype[dtype] = by_dtype.get(dtype, 0) + size * _itemsize(dtype)
    macs: int | None = 0
    for r in results:
        for i in node_indices:
            macs = _add(macs, node_macs(layer, r, i))
    return source, params, trainable, non_trainable, by_dtype, macs


def _wrapped_frozen(layer: Layer) -> bool:
    for key in ("layer", "backward_layer"):
        inner = inner_record(layer.config, key)
        if inner is not None and inner[1].get("trainable") is False:
            return True
    return False


def _non_trainable_weight(layer: Layer, name: str) -> bool:
    last = name.rsplit("/", 1)[-1]
    if last in _NON_TRAINABLE_NAMES:
        return True
    spec = catalogue.spec_for(layer.key)
    if spec is not None and last in spec.non_trainable_weights:
        return True
    if _quantized(layer):
        return last != "bias" and not last.endswith("bias")
    return last.endswith(_QUANT_SUFFIXES)


def _quantized(layer: Layer) -> bool:
    dtype = layer.config.get("dtype")
    if isinstance(dtype, Mapping):
        cls = str(dtype.get("class_name", ""))
        return "Quantized" in cls or cls.endswith(("Int4DTypePolicy", "GPTQDTypePolicy", "AWQDTypePolicy"))
    return False


# ------------------------------------------------------------------------------------------------
# MACs

MacRule = Callable[[Layer, list[TensorSpec], list[Shape | None], Any], int]


def mac_rule(*names: str) -> Callable[[MacRule], MacRule]:
    """Attach a MAC counter ``(layer, input specs, output shapes, call) -> MACs per sample`` to the
    catalogue entries of these keys."""
    return catalogue.provides("macs", *names)


def _mac_rule(key: str) -> MacRule | None:
    spec = catalogue.spec_for(key, "macs")
    return spec.macs if spec is not None and callable(spec.macs) else None


def node_macs(layer: Layer, result: ShapeResult, node_index: int) -> int | None:
    """MACs of one call (one sample); 0 for element-wise layers; None when shapes are unknown."""
    key = (layer.name, node_index)
    outs = result.outputs.get(key)
    if outs is None:
        return None
    rule = _mac_rule(layer.key)
    if rule is None:
        return None
    args, kwargs = result.calls.get(key, ((), {}))
    specs = [v for v in flatten(args) if isinstance(v, TensorSpec)]
    try:
        return int(rule(layer, specs, outs, (args, kwargs)))
    except (Unknown, ShapeError, TypeError, ValueError, IndexError, KeyError, ArithmeticError):
        return None


def _ps(shape: Shape | None) -> int:
    n = _per_sample(shape)
    if n is None:
        raise Unknown()
    return n


def _dim(d: Any) -> int:
    if d is None:
        raise Unknown()
    return int(d)


@mac_rule("Dense")
def _dense_macs(layer: Layer, ins: list[TensorSpec], outs: list[Shape | None], call: Any) -> int:
    return _ps(outs[0]) * _dim(ins[0].shape[-1] if ins[0].shape else None)


@mac_rule("EinsumDense")
def _einsum_dense_macs(layer: Layer, ins: list[TensorSpec], outs: list[Shape | None], call: Any) -> int:
    shape = need(ins[0])
    _, kernel, _ = einsum_dense_analysis(layer.config, shape)
    equation = str(layer.config.get("equation", "")).replace(" ", "").replace("...", "")
    w_spec, out_spec = equation.split(",")[1].split("->")
    contracted = 1
    for c, d in zip(w_spec, kernel, strict=False):
        if c not in out_spec:
            contracted *= _dim(d)
    return _ps(outs[0]) * contracted


def _channels(shape: Shape, config: Mapping[str, Any]) -> int:
    return _dim(shape[1] if channels_first(config) else shape[-1])


def _conv_window(layer: Layer, ins: list[TensorSpec]) -> tuple[Shape, int]:
    """A conv layer's input shape and how many positions its kernel window covers."""
    shape = need(ins[0])
    g = conv_geometry(layer.config, len(shape) - 2, layer.class_name)
    return shape, math.prod(g["kernel"])


@mac_rule(*CONVOLUTIONS)
def _conv_macs(layer: Layer, ins: list[TensorSpec], outs: list[Shape | None], call: Any) -> int:
    shape, window = _conv_window(layer, ins)
    groups = layer.config.get("groups", 1) or 1
    return _ps(outs[0]) * window * (_channels(shape, layer.config) // groups)


@mac_rule(*TRANSPOSED_CONVOLUTIONS)
def _conv_transpose_macs(layer: Layer, ins: list[TensorSpec], outs: list[Shape | None], call: Any) -> int:
    shape, window = _conv_window(layer, ins)
    return _ps(shape) * window * int(layer.config.get("filters", 0))


@mac_rule(*DEPTHWISE_CONVOLUTIONS)
def _depthwise_macs(layer: Layer, ins: list[TensorSpec], outs: list[Shape | None], call: Any) -> int:
    _, window = _conv_window(layer, ins)
    return _ps(outs[0]) * window


@mac_rule(*SEPARABLE_CONVOLUTIONS)
def _separable_macs(layer: Layer, ins: list[TensorSpec], outs: list[Shape | None], call: Any) -> int:
    out = need(outs[0])
    shape, window = _conv_window(layer, ins)
    first = channels_first(layer.config)
    spatial = _ps((None, *(out[2:] if first else out[1:-1])))
    mid = _channels(shape, layer.config) * int(layer.config.get("depth_multiplier", 1) or 1)
    filters = _dim(out[1] if first else out[-1])
    return spatial * mid * window + spatial * mid * filters


def _rnn_step_macs(class_name: str, config: Mapping[str, Any], features: int) -> int:
    units = int(config.get("units", config.get("output_dim", 0)))
    step = recurrence(class_name)
    if step is None:
        raise Unknown()
    return step.gates * units * (features + units)


@mac_rule(*RNN_NAMES)
def _rnn_macs(layer: Layer, ins: list[TensorSpec], outs: list[Shape | None], call: Any) -> int:
    shape = need(ins[0])
    return _dim(shape[1]) * _rnn_step_macs(layer.class_name, layer.config, _dim(shape[-1]))


@mac_rule("RNN")
def _generic_rnn_macs(layer: Layer, ins: list[TensorSpec], outs: list[Shape | None], call: Any) -> int:
    """``RNN(cell)``: each cell's step like the matching layer's, the next cell fed the previous
    cell's units."""
    shape = need(ins[0])
    features, total = _dim(shape[-1]), 0
    for layer_class, config, _ in rnn_cells(layer.config):
        total += _rnn_step_macs(layer_class, config, features)
        features = int(config.get("units", 0))
    return _dim(shape[1]) * total


def _convlstm_macs(class_name: str, config: Mapping[str, Any], shape: Shape, out: Shape) -> int:
    n = len(shape) - 3
    g = conv_geometry(config, n, class_name)
    first = channels_first(config)
    filters = int(config["filters"])
    frame = out[2:] if config.get("return_sequences") else out[1:]
    spatial = _ps((None, *(frame[1:] if first else frame[:-1])))
    channels = _dim(shape[2] if first else shape[-1])
    k = math.prod(g["kernel"])
    return _dim(shape[1]) * spatial * k * 4 * filters * (channels + filters)


@mac_rule(*CONVLSTM_NAMES)
def _convlstm_mac_rule(layer: Layer, ins: list[TensorSpec], outs: list[Shape | None], call: Any) -> int:
    if ins[0].shape is None or outs[0] is None:
        raise Unknown()
    return _convlstm_macs(layer.class_name, layer.config, ins[0].shape, outs[0])


@mac_rule("Bidirectional")
def _bidirectional_macs(layer: Layer, ins: list[TensorSpec], outs: list[Shape | None], call: Any) -> int:
    shape = need(ins[0])
    total = 0
    fwd = inner_record(layer.config, "layer")
    bwd = inner_record(layer.config, "backward_layer") or fwd
    for rec in (fwd, bwd):
        if rec is None or recurrence(rec[0]) is None:
            raise Unknown()
        total += _dim(shape[1]) * _rnn_step_macs(rec[0], rec[1], _dim(shape[-1]))
    return total


@mac_rule("TimeDistributed")
def _time_distributed_macs(layer: Layer, ins: list[TensorSpec], outs: list[Shape | None], call: Any) -> int:
    shape, out = ins[0].shape, outs[0]
    inner = inner_record(layer.config, "layer")
    if shape is None or out is None or inner is None:
        raise Unknown()
    rule = _mac_rule(inner[0])
    if rule is None:
        return 0
    fake = Layer(name=layer.name, class_name=inner[0], kind="layer", config=inner[1])
    per_step = rule(fake, [TensorSpec((shape[0], *shape[2:]), ins[0].dtype)], [(out[0], *out[2:])], ((), {}))
    return per_step * _dim(shape[1])


@mac_rule("MultiHeadAttention")
def _mha_macs(layer: Layer, ins: list[TensorSpec], outs: list[Shape | None], call: Any) -> int:
    from modelgraph.shape_rules import Call

    args, kwargs = call
    c = Call(layer.name, layer.class_name, layer.config, tuple(args), kwargs, ins)
    q, v, k = mha_inputs(c)
    cfg = layer.config
    heads = int(cfg["num_heads"])
    kd = int(cfg["key_dim"])
    vd = int(cfg.get("value_dim") or kd)
    out = need(outs[0])
    tq, tk, tv = _ps((None, *q[1:-1])), _ps((None, *k[1:-1])), _ps((None, *v[1:-1]))
    dout = _ps((None, *out[len(q) - 1 :]))
    proj = tq * _dim(q[-1]) * heads * kd + tk * _dim(k[-1]) * heads * kd + tv * _dim(v[-1]) * heads * vd
    proj += tq * heads * vd * dout
    attend = heads * tq * tk * kd + heads * tq * tk * vd
    return proj + attend


@mac_rule("Attention", "AdditiveAttention")
def _attention_macs(layer: Layer, ins: list[TensorSpec], outs: list[Shape | None], call: Any) -> int:
    q, v = ins[0].shape, ins[1].shape
    if q is None or v is None:
        raise Unknown()
    tq, tv = _ps((None, *q[1:-1])), _dim(v[-2])
    return tq * tv * _dim(q[-1]) + tq * tv * _dim(v[-1])


@mac_rule("Dot")
def _dot_macs(layer: Layer, ins: list[TensorSpec], outs: list[Shape | None], call: Any) -> int:
    a = need(ins[0])
    axes = layer.config.get("axes", -1)
    ax = axes[0] if isinstance(axes, list | tuple) else axes
    return _ps(outs[0]) * _dim(a[int(ax)])


@mac_rule("op:Matmul", "op:Dot", "tf:linalg.matmul", "tf:matmul", "tf:__operators__.matmul")
def _matmul_macs(layer: Layer, ins: list[TensorSpec], outs: list[Shape | None], call: Any) -> int:
    args, kwargs = call
    a = need(ins[0] if ins else None)
    inner = a[-2] if (kwargs.get("transpose_a") or kwargs.get("adjoint_a")) else a[-1]
    out = need(outs[0])
    return _ps(out if len(out) > 1 else (None, *out)) * _dim(inner)


@mac_rule("op:Einsum")
def _einsum_macs(layer: Layer, ins: list[TensorSpec], outs: list[Shape | None], call: Any) -> int:
    subscripts = str(layer.config.get("subscripts", "")).replace(" ", "")
    lhs = subscripts.split("->")[0].split(",")
    sizes: dict[str, int] = {}
    for spec, t in zip(lhs, ins, strict=False):
        if t.shape is None:
            raise Unknown()
        for i, (c, d) in enumerate(zip(spec, t.shape, strict=False)):
            if d is None and i == 0:
                d = 1
            sizes[c] = max(sizes.get(c, 1), _dim(d))
    total = 1
    for v in sizes.values():
        total *= v
    return total if len(lhs) > 1 else 0
