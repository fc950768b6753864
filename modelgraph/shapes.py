"""Static shape inference: one rule per layer class, problems recorded, never raised.

``infer_shapes(graph)`` walks the nodes in topological order and applies the rule registered for
each node's class (see :mod:`modelgraph.shape_rules`):

* layers by class name (``@shape_rule("Dense")``), Keras 3 raw ops as ``"op:<Class>"`` (their names
  clash with layers: ``Add``, ``Reshape``...), tf.keras ``TFOpLambda``/``SlicingOpLambda`` as
  ``"tf:<function>"`` (``"tf:__operators__.add"``);
* the nodes are visited by the one graph walk (:mod:`modelgraph.graph_walk`): each call of a nested
  model is inferred with the shapes of that call and keeps its own result (``ShapeResult.nested``);
* the shapes Keras 3 writes into ``__keras_tensor__`` references are not used.

Shapes are tuples with ``None`` for unknown dims (the batch is ``None``); an unknown rank is
``None``. Inference never raises on a bad model: it records a :class:`ShapeProblem` and carries on
with unknown shapes downstream.

Problem kinds (``ShapeProblem.kind``): ``broadcast`` (merge/op inputs do not broadcast),
``concat``, ``dot``, ``matmul``, ``reshape`` (element counts differ), ``split``, ``rank``,
``shape`` (other dimension conflicts), ``weight_shape`` (stored weight vs the shape its input
needs), ``bad_dim`` (zero, negative or past-int64 dims), ``huge`` (severity ``warning``: a
tensor of over ``HUGE_ELEMENTS`` elements per sample, reported where it first appears),
``tensor_index`` (a reference past the producer's outputs), ``arity`` (wrong number of inputs),
``axis``, ``index``, ``config`` (unusable config values), ``input_shape`` (an input layer
without a shape, or a nested call that disagrees with the nested model's input), ``unknown_class``
(severity ``info``: no rule, outputs unknown), ``internal`` (a rule crashed: a bug in modelgraph,
reported rather than raised).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from modelgraph import catalogue
from modelgraph._gc import gc_paused
from modelgraph.catalogue.spec import LayerSpec
from modelgraph.graph import Layer, ModelGraph, Node, TensorRef, map_refs
from modelgraph.graph_walk import GraphWalker, Scope, Visit
from modelgraph.shape_rules import (
    Call,
    Shape,
    ShapeError,
    TensorSpec,
    Unknown,
    compute_dtype,
    expected_for,
    fmt,
    is_float,
    result_dtype,
    same_dim,
    shape_rule,
    weight_rule,
)
from modelgraph.shape_rules.core import input_layer_shape

__all__ = [
    "Shape",
    "ShapeProblem",
    "ShapeResult",
    "TensorSpec",
    "expected_weights",
    "infer_shapes",
    "shape_rule",
    "weight_rule",
]

NodeKey = tuple[str, int]

# The largest dimension a Keras tensor can have (TensorFlow and Keras 3 hold shapes as int64).
INT64_MAX = 2**63 - 1
# Elements per sample above which a tensor is reported as implausibly large (8 GiB as float32): no
# runtime can run it, and such a size is almost always a typo in a declared input shape.
HUGE_ELEMENTS = 2**31


def _is_int(d: Any) -> bool:
    return isinstance(d, int) and not isinstance(d, bool)


def _usable_dim(d: Any) -> bool:
    return _is_int(d) and 0 < d <= INT64_MAX


def _per_sample(shape: Shape | None) -> int:
    """Elements per sample of ``shape`` (dims after the batch axis; unknown dims count as 1, so
    this is a lower bound), 0 for an unknown shape."""
    if shape is None:
        return 0
    return math.prod(d for d in shape[1:] if isinstance(d, int) and d > 0)


@dataclass(frozen=True)
class ShapeProblem:
    """One finding of shape inference.

    ``path`` names the enclosing nested models (outermost first; empty for the top level);
    ``severity`` is ``"error"``, ``"warning"`` or ``"info"``.
    """

    layer: str
    node_index: int
    message: str
    kind: str
    severity: str = "error"
    path: tuple[str, ...] = ()

    def __str__(self) -> str:
        where = "/".join((*self.path, self.layer))
        return f"{where}[{self.node_index}]: {self.message} ({self.kind})"


@dataclass
class ShapeResult:
    """Shapes of every node of one graph.

    * ``outputs[(layer, node_index)]``: the node's output shapes in ``tensor_index`` order
      (``None`` = unknown rank);
    * ``dtypes[(layer, node_index)]``: likewise, dtypes (``None`` = unknown);
    * ``inputs[(layer, node_index)]``: shapes of ``node.inputs`` (flattened call tensors);
    * ``calls[(layer, node_index)]``: the call structure ``(args, kwargs)`` with every tensor
      replaced by a :class:`TensorSpec` (for rules/statistics that need argument roles);
    * ``expected[layer]``: the weight shapes Keras would create (first call with known shapes);
    * ``nested[(layer, node_index)]``: a :class:`ShapeResult` for each call of a nested model,
      inferred with that call's input shapes (``find()`` walks them by path);
    * ``problems``: every finding, nested ones included (with their ``path``), deduplicated.
    """

    outputs: dict[NodeKey, list[Shape | None]] = field(default_factory=dict)
    dtypes: dict[NodeKey, list[str | None]] = field(default_factory=dict)
    inputs: dict[NodeKey, list[Shape | None]] = field(default_factory=dict)
    calls: dict[NodeKey, tuple[tuple[Any, ...], Mapping[str, Any]]] = field(default_factory=dict)
    expected: dict[str, dict[str, Shape] | None] = field(default_factory=dict)
    nested: dict[NodeKey, ShapeResult] = field(default_factory=dict)
    problems: list[ShapeProblem] = field(default_factory=list)

    def shape(self, ref: TensorRef) -> Shape | None:
        """Shape of one tensor (None when unknown or out of range)."""
        outs = self.outputs.get(ref.node_key)
        if outs is None or not 0 <= ref.tensor_index < len(outs):
            return None
        return outs[ref.tensor_index]

    def dtype(self, ref: TensorRef) -> str | None:
        outs = self.dtypes.get(ref.node_key)
        if outs is None or not 0 <= ref.tensor_index < len(outs):
            return None
        return outs[ref.tensor_index]

    def find(
        self, path: Sequence[str], node_index: int = 0, calls: Sequence[int] = ()
    ) -> list[Shape | None] | None:
        """Outputs of ``path[-1]`` (node ``node_index``) inside nested models ``path[:-1]``.

        ``calls[i]`` picks which call of the i-th enclosing model (default: its first call).
        """
        result: ShapeResult | None = self
        for depth, name in enumerate(path[:-1]):
            call = calls[depth] if depth < len(calls) else 0
            result = result.nested.get((name, call)) if result is not None else None
        if result is None:
            return None
        return result.outputs.get((path[-1], node_index))

    def walk(
        self, prefix: tuple[str, ...] = ()
    ) -> Iterator[tuple[tuple[str, ...], NodeKey, list[Shape | None]]]:
        """``(path of enclosing model calls, node key, outputs)`` for every node, nested ones too."""
        for key, outs in self.outputs.items():
            yield prefix, key, outs
            sub = self.nested.get(key)
            if sub is not None:
                yield from sub.walk((*prefix, f"{key[0]}[{key[1]}]"))

    @property
    def errors(self) -> list[ShapeProblem]:
        return [p for p in self.problems if p.severity == "error"]


# ------------------------------------------------------------------------------------------------
# Public API


def _weightless_key(key: str) -> bool:
    return key.startswith(("op:", "tf:"))


def infer_shapes(graph: ModelGraph, input_shapes: Mapping[str, Shape] | None = None) -> ShapeResult:
    """Infer every node's output shapes.

    ``input_shapes`` overrides input layers by name with full shapes (batch included, e.g.
    ``{"image": (None, 224, 224, 3)}``); other inputs use their config (``batch_shape``,
    ``batch_input_shape`` or ``shape``).
    """
    overrides: dict[str, TensorSpec] = {}
    for name, shape in (input_shapes or {}).items():
        overrides[name] = TensorSpec(None if shape is None else tuple(shape), None)
    with gc_paused():  # thousands of acyclic specs per graph: the collector's passes only cost
        return _Inferrer(graph, overrides).run()


def expected_weights(
    layer: Layer,
    input_shapes: Shape | Sequence[Shape | None] | Mapping[str, Shape] | None = None,
) -> dict[str, Shape] | None:
    """The weights Keras would create for ``layer`` built on ``input_shapes``.

    ``input_shapes`` is the layer's input shape (batch included), a list of shapes for several
    inputs (MultiHeadAttention: ``[query, value]`` or ``[query, value, key]``), or a mapping
    ``{"query": ..., "value": ..., "key": ...}``. When None, the layer's ``build_config`` is used.
    Returns ``{canonical name: shape}`` (names from :mod:`modelgraph.weight_names`; ``None`` dims
    where an input dim is unknown), ``{}`` for layers without weights (ops, inputs, nested models:
    their weights belong to their own layers), and None for a class without a rule or when the
    needed input shape is unknown.
    """
    if layer.kind in ("input", "op", "model") or _weightless_key(layer.key):
        return {}
    shapes = _normalise_input_shapes(input_shapes)
    if shapes is None:
        shapes = _build_config_shapes(layer)
    try:
        return expected_for(layer.class_name, layer.config, shapes or [None])
    except (Unknown, ShapeError):
        return None
    except Exception:  # a malformed config (e.g. strings where ints belong) is not ours to raise
        return None


def _is_shape(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(
        d is None or (isinstance(d, int) and not isinstance(d, bool)) for d in value
    )


def _normalise_input_shapes(value: Any) -> list[Shape | None] | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        keys = [k for k in ("query", "value", "key") if k in value] if "query" in value else sorted(value)
        return [tuple(value[k]) if _is_shape(value[k]) else None for k in keys]
    if _is_shape(value):
        return [tuple(value)]
    if isinstance(value, list | tuple):
        return [tuple(v) if _is_shape(v) else None for v in value]
    return None


def _build_config_shapes(layer: Layer) -> list[Shape | None] | None:
    bc = layer.build_config
    if not bc:
        return None
    if "input_shape" in bc:
        raw = bc["input_shape"]
        if _is_shape(raw):
            return [tuple(raw)]
        if isinstance(raw, list | tuple):
            return [tuple(v) if _is_shape(v) else None for v in raw]
        if isinstance(raw, Mapping):
            return [tuple(v) if _is_shape(v) else None for _, v in sorted(raw.items())]
        return None
    shapes = bc.get("shapes_dict")
    if isinstance(shapes, Mapping):
        order = ["query_shape", "value_shape", "key_shape"]
        if any(k in shapes for k in order):
            return [tuple(shapes[k]) if _is_shape(shapes.get(k)) else None for k in order if k in shapes]
        return [tuple(v) if _is_shape(v) else None for _, v in sorted(shapes.items())]
    return None


# ------------------------------------------------------------------------------------------------
# The driver: a client of the one graph walk (modelgraph.graph_walk)


class _GraphShapes:
    """Shape inference of one graph: the top level, or one call of a nested model (its own
    :class:`ShapeResult`, problems copied to the enclosing calls' results as they are found)."""

    def __init__(
        self,
        graph: ModelGraph,
        overrides: Mapping[str, TensorSpec],
        path: tuple[str, ...],
        keras_major: int,
        parent: _GraphShapes | None = None,
    ) -> None:
        self.graph = graph
        self.overrides = overrides
        self.path = path
        self.keras_major = keras_major
        self.parent = parent
        self.result = ShapeResult()
        self.unknown_arity: set[NodeKey] = set()
        self._seen_problems: set[tuple[Any, ...]] = set()
        self._weights_checked: set[tuple[str, tuple[Any, ...]]] = set()

    # --- problems -------------------------------------------------------------------------------
    def problem(self, node: NodeKey, message: str, kind: str, severity: str = "error") -> None:
        self._add(ShapeProblem(node[0], node[1], message, kind, severity, self.path))

    def _add(self, p: ShapeProblem) -> None:
        ident = (p.path, p.layer, p.node_index if not p.path else 0, p.message, p.kind)
        if ident in self._seen_problems:
            return
        self._seen_problems.add(ident)
        self.result.problems.append(p)
        if self.parent is not None:
            self.parent._add(p)

    def failed(self, key: NodeKey, exc: Exception) -> None:
        """A rule (or this driver) crashed on one node: our bug, reported rather than raised."""
        self.problem(key, f"shape inference failed: {type(exc).__name__}: {exc}", "internal")
        self.set_outputs(key, [None], [None])
        self.unknown_arity.add(key)

    # --- values ---------------------------------------------------------------------------------
    def set_outputs(self, key: NodeKey, shapes: list[Shape | None], dtypes: list[str | None]) -> None:
        self.result.outputs[key] = shapes
        self.result.dtypes[key] = dtypes

    def bind(self, node: Node, env: dict[TensorRef, TensorSpec]) -> None:
        """Put the symbolic tensors of one node's outputs in the walk's environment."""
        key = node.key
        dtypes = self.result.dtypes.get(key) or []
        count = len(dtypes)
        for t, shape in enumerate(self.result.outputs.get(key, ())):
            env[TensorRef(node.layer, node.index, t)] = TensorSpec(shape, dtypes[t] if t < count else None)

    def _resolve(self, consumer: NodeKey, ref: TensorRef) -> TensorSpec:
        outs = self.result.outputs.get(ref.node_key)
        if outs is None:
            return TensorSpec(None, None)
        if not 0 <= ref.tensor_index < len(outs):
            if ref.node_key not in self.unknown_arity:
                self.problem(
                    consumer,
                    f"input {ref} is out of range: '{ref.layer}' node {ref.node_index} has {len(outs)} output(s)",
                    "tensor_index",
                )
            return TensorSpec(None, None)
        dtypes = self.result.dtypes.get(ref.node_key) or []
        dtype = dtypes[ref.tensor_index] if ref.tensor_index < len(dtypes) else None
        return TensorSpec(outs[ref.tensor_index], dtype)

    def call_specs(
        self, node: Node, env: Mapping[TensorRef, TensorSpec] | None = None
    ) -> tuple[Any, Mapping[str, Any], list[TensorSpec]]:
        """The node's call with every tensor replaced by its :class:`TensorSpec` (recorded in
        ``inputs`` and ``calls``): ``(args, kwargs, flattened inputs)``. A tensor is looked up in the
        walk's environment ``env``, else in this graph's result (which reports a reference past its
        producer's outputs)."""
        key = node.key

        def resolve(ref: TensorRef) -> TensorSpec:
            spec = env.get(ref) if env is not None else None
            return spec if spec is not None else self._resolve(key, ref)

        args = map_refs(node.args, resolve)
        kwargs = map_refs(dict(node.kwargs), resolve)
        inputs = [resolve(r) for r in node.inputs]
        self.result.inputs[key] = [t.shape for t in inputs]
        self.result.calls[key] = (args, kwargs)
        return args, kwargs, inputs

    # --- one layer or op ------------------------------------------------------------------------
    def infer_node(self, node: Node, layer: Layer, env: Mapping[TensorRef, TensorSpec]) -> None:
        """Apply the node's shape rule (a layer or op that is not a nested model)."""
        key = node.key
        args, kwargs, inputs = self.call_specs(node, env)
        call = Call(
            name=layer.name,
            class_name=layer.class_name,
            config=layer.config,
            args=args,
            kwargs=kwargs,
            inputs=inputs,
            keras_major=self.keras_major,
            weights={w.name: tuple(w.shape) for w in layer.weights},
        )
        rkey = layer.key
        spec = catalogue.spec_for(rkey, "shape")
        rule = spec.shape if spec is not None and callable(spec.shape) else None
        shapes: list[Shape | None]
        if rule is None:
            what = (
                "op" if layer.kind == "op" else "TF op function" if rkey.startswith("tf:") else "layer class"
            )
            self.problem(
                key,
                f"no shape rule for {what} '{rkey.split(':', 1)[-1]}': outputs unknown",
                "unknown_class",
                "info",
            )
            self.set_outputs(key, [None], [None])
            self.unknown_arity.add(key)
            self._expected(node, layer, call, spec)
            return
        try:
            raw = rule(call)
            shapes = list(raw) if isinstance(raw, list) else [raw]
        except Unknown:
            shapes = [None]
            self.unknown_arity.add(key)
        except ShapeError as exc:
            self.problem(key, str(exc), exc.kind)
            shapes = [None]
            self.unknown_arity.add(key)
        for message, kind, severity in call.notes:
            self.problem(key, message, kind, severity)
        shapes = [self._check_dims(key, s) for s in shapes]
        self._check_size(key, shapes, [t.shape for t in inputs])
        self.set_outputs(key, shapes, self._dtypes(layer, rkey, call, len(shapes)))
        self._expected(node, layer, call, spec)

    # --- inputs ---------------------------------------------------------------------------------
    def infer_input(self, node: Node, layer: Layer) -> None:
        """An input layer's shape: bound by a nested model's call, given by the caller, or declared."""
        key = node.key
        cfg = layer.config
        dtype = cfg.get("dtype", cfg.get("input_dtype"))
        dtype = dtype if isinstance(dtype, str) else compute_dtype(dtype)
        if layer.name in self.overrides:
            spec = self.overrides[layer.name]
            shape = spec.shape
            dtype = spec.dtype or dtype
        else:
            shape = input_layer_shape(cfg)
            if shape is None:
                self.problem(
                    key, f"input layer '{layer.name}' has no shape in its config", "input_shape", "warning"
                )
        if shape is not None:
            shape = self._check_dims(key, shape)
            self._check_size(key, [shape], [])
        self.set_outputs(key, [shape], [dtype])

    def _check_dims(self, key: NodeKey, shape: Shape | None) -> Shape | None:
        """``shape`` with its unusable dims (not an int, <= 0, or past int64, which no Keras tensor
        can have) made unknown, each such shape reported once as ``bad_dim``."""
        if shape is None:
            return None
        bad = [d for d in shape if d is not None and not _usable_dim(d)]
        if bad:
            if all(_is_int(d) and d > INT64_MAX for d in bad):
                what = "a dimension past the int64 range"
            elif all(_is_int(d) and d == 0 for d in bad):
                what = "a zero dimension"
            elif all(_is_int(d) and d < 0 for d in bad):
                what = "a non-positive dimension"
            else:
                what = "an invalid dimension"
            self.problem(key, f"output shape {fmt(shape)} has {what}", "bad_dim")
            return tuple(d if d is None or _usable_dim(d) else None for d in shape)
        return shape

    def _check_size(
        self, key: NodeKey, shapes: Sequence[Shape | None], inputs: Sequence[Shape | None]
    ) -> None:
        """Report (kind ``huge``, a warning) the first tensors along a path to hold more than
        ``HUGE_ELEMENTS`` elements per sample: outputs over it whose inputs are all under it."""
        if any(_per_sample(s) > HUGE_ELEMENTS for s in inputs):
            return
        for shape in shapes:
            count = _per_sample(shape)
            if count > HUGE_ELEMENTS:
                self.problem(
                    key,
                    f"output shape {fmt(shape)} holds {count:,} elements per sample "
                    f"(over {HUGE_ELEMENTS:,}: {HUGE_ELEMENTS * 4 // 2**30} GiB as float32)",
                    "huge",
                    "warning",
                )
                return

    # --- dtypes ---------------------------------------------------------------------------------
    def _dtypes(self, layer: Layer, rkey: str, call: Call, n: int) -> list[str | None]:
        if call.out_dtypes is not None:
            return (list(call.out_dtypes) * n)[:n] if len(call.out_dtypes) != n else list(call.out_dtypes)
        in_dtype = result_dtype(t.dtype for t in call.inputs)
        if layer.kind == "op" or _weightless_key(rkey):
            return [in_dtype] * n
        spec = catalogue.spec_for(rkey)
        passthrough = spec is not None and spec.dtype == "follows_input"
        if passthrough and in_dtype is not None and not is_float(in_dtype):
            return [in_dtype] * n
        return [compute_dtype(layer.config.get("dtype"))] * n

    # --- nested models --------------------------------------------------------------------------
    def nested_inputs(
        self, node: Node, layer: Layer, bindings: Sequence[tuple[TensorRef, TensorRef]]
    ) -> dict[str, TensorSpec]:
        """The symbolic inputs one call binds to a nested model (by input layer name), each checked
        against the nested model's declared input (a warning when they disagree)."""
        key = node.key
        sub = layer.subgraph
        assert sub is not None
        overrides: dict[str, TensorSpec] = {}
        for ref, given in bindings:
            spec = self._resolve(key, given)
            declared = input_layer_shape(sub.layer(ref.layer).config) if sub.has_layer(ref.layer) else None
            if (
                spec.shape is not None
                and declared is not None
                and (
                    len(spec.shape) != len(declared)
                    or not all(same_dim(a, b) for a, b in zip(spec.shape[1:], declared[1:], strict=True))
                )
            ):
                self.problem(
                    key,
                    f"nested model '{layer.name}' input '{ref.layer}' expects {fmt(declared)}, "
                    f"called with {fmt(spec.shape)}",
                    "input_shape",
                    "warning",
                )
            overrides[ref.layer] = spec if spec.shape is not None else TensorSpec(declared, spec.dtype)
        return overrides

    def nested_done(self, node: Node, layer: Layer, inner: _GraphShapes) -> None:
        """A nested model's call was inferred: its result kept, its outputs the call's outputs."""
        sub = layer.subgraph
        assert sub is not None
        self.result.nested[node.key] = inner.result
        shapes = [inner.result.shape(r) for r in sub.outputs]
        dtypes = [inner.result.dtype(r) for r in sub.outputs]
        self.set_outputs(node.key, shapes, dtypes)
        self.result.expected.setdefault(layer.name, {})

    # --- weights --------------------------------------------------------------------------------
    def _expected(self, node: Node, layer: Layer, call: Call, spec: LayerSpec | None) -> None:
        if layer.kind == "op" or _weightless_key(layer.key):
            self.result.expected.setdefault(layer.name, {})
            return
        ins = _weight_inputs(spec, call)
        sig = tuple(ins)
        if (layer.name, sig) in self._weights_checked:
            return
        self._weights_checked.add((layer.name, sig))
        try:
            expected = expected_for(layer.class_name, layer.config, ins or [None])
        except (Unknown, ShapeError, TypeError, ValueError, KeyError, IndexError):
            expected = None
        if expected is not None and (
            layer.name not in self.result.expected or self.result.expected[layer.name] is None
        ):
            self.result.expected[layer.name] = expected
        elif layer.name not in self.result.expected:
            self.result.expected[layer.name] = None
        if expected is None or not layer.weights or self.keras_major == 1:
            return
        stored = {w.name: tuple(w.shape) for w in layer.weights}
        for name, want in expected.items():
            have = stored.get(name)
            if have is None:
                continue
            if len(have) != len(want) or not all(same_dim(a, b) for a, b in zip(have, want, strict=True)):
                shown = ", ".join(fmt(s) for s in ins)
                self.problem(
                    node.key,
                    f"weight '{name}' has shape {fmt(have)} but {layer.class_name} called on {shown} needs {fmt(want)}",
                    "weight_shape",
                )


def _weight_inputs(spec: LayerSpec | None, call: Call) -> list[Shape | None]:
    """The input shapes a layer's weights are built from: its entry's ``weight_inputs`` (the
    MultiHeadAttention's query, value and key), else its positional tensors in order."""
    pick = spec.weight_inputs if spec is not None else None
    if callable(pick):
        try:
            return list(pick(call))
        except (Unknown, ShapeError):
            return [None]
    return [t.shape for t in call.arg_tensors()]


class _Inferrer(GraphWalker[TensorSpec]):
    """The graph walk's client for shape inference: the walk orders the nodes, inlines nested models
    and binds their inputs; each graph (the top, each nested call) keeps its own result. The walk's
    environment holds each tensor's :class:`TensorSpec`; a tensor it lacks (a reference past its
    producer's outputs, a producer of unknown arity) is looked up in the graph's result, which
    reports it. A nested call's inputs are checked where it is entered, from the caller's result."""

    def __init__(self, graph: ModelGraph, overrides: Mapping[str, TensorSpec]) -> None:
        keras_major = graph.keras_major if graph.keras_version else (3 if graph.format == "keras_zip" else 2)
        self.graph = graph
        self.top = _GraphShapes(graph, overrides, (), keras_major)
        self._stack: list[_GraphShapes] = [self.top]

    def run(self) -> ShapeResult:
        self.walk(self.graph, {})
        return self.top.result

    def input_node(self, visit: Visit, env: dict[TensorRef, TensorSpec], masks: Any) -> None:
        state = self._stack[-1]
        try:
            state.infer_input(visit.node, visit.layer)
        except Exception as exc:  # never raise on a model; a crash here is our bug
            state.failed(visit.node.key, exc)
        state.bind(visit.node, env)

    def run_node(self, visit: Visit, env: dict[TensorRef, TensorSpec], masks: Any) -> None:
        state = self._stack[-1]
        try:
            state.infer_node(visit.node, visit.layer, env)
        except Exception as exc:  # never raise on a model; a crash here is our bug
            state.failed(visit.node.key, exc)
        state.bind(visit.node, env)

    def missing_inputs(self, visit: Visit, missing: Sequence[TensorRef]) -> bool:
        return True  # inferred with those inputs unknown (a reference past a producer's outputs is reported)

    def bad_call(self, visit: Visit, reason: str) -> None:
        state, node, layer = self._stack[-1], visit.node, visit.layer
        try:
            state.call_specs(node)
            state.problem(node.key, f"nested model '{layer.name}' {reason}", "arity")
            outputs = len(layer.subgraph.outputs) if layer.subgraph is not None else 1
            state.set_outputs(node.key, [None] * outputs, [None] * outputs)
        except Exception as exc:  # never raise on a model; a crash here is our bug
            state.failed(node.key, exc)

    def enter_model(self, visit: Visit, inner: Scope) -> None:
        outer, node, layer = self._stack[-1], visit.node, visit.layer
        overrides: dict[str, TensorSpec] = {}
        try:
            outer.call_specs(node)
            overrides = outer.nested_inputs(node, layer, inner.bindings)
        except Exception as exc:  # never raise on a model; a crash here is our bug
            outer.failed(node.key, exc)
        path = (*outer.path, layer.name)
        self._stack.append(_GraphShapes(inner.graph, overrides, path, outer.keras_major, outer))

    def model_done(self, visit: Visit, outs: Sequence[tuple[int, TensorSpec]]) -> None:
        inner = self._stack.pop()
        outer = self._stack[-1]
        try:
            outer.nested_done(visit.node, visit.layer, inner)
        except Exception as exc:  # never raise on a model; a crash here is our bug
            outer.failed(visit.node.key, exc)
