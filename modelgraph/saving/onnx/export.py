"""The graph walk: a :class:`ModelGraph` -> an ONNX ``ModelProto``.

The walk is the one the runner's plan and shape inference use (:mod:`modelgraph.graph_walk`): nodes in
topological order, nested models inlined (their inputs bound to the caller's tensors, their implicit
masks with them); each node goes through
the ONNX mapping of its layer key's catalogue entry (``registry.py``), with the layer's dtype policy applied
around it (half precision: inputs, weights and outputs rounded to the compute dtype; Keras 3 int8 /
int4 layers: weights dequantized, see ``mappings/quantized.py``). tf.keras's implicit masks are
carried beside the tensors (``masks.py``). Weights of a shared layer are emitted once (the emitter
deduplicates initializers by content).

Every layer that cannot be mapped is collected; the export is refused naming all of them before
anything is written. The model then goes through the optimisation passes (``passes.py``) and
``onnx.checker.check_model(full_check=True)``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from modelgraph import catalogue
from modelgraph._version import __version__
from modelgraph.errors import (
    ModelGraphError,
    RunError,
    UnsupportedConfigError,
    UnsupportedError,
    UsageError,
    WeightsError,
    config_only_model,
)
from modelgraph.graph import Layer, ModelGraph, TensorRef, keras_version_tuple, map_refs
from modelgraph.graph_walk import (
    GraphWalker,
    Scope,
    Visit,
    call_kwargs,
    float32_variables,
    has_dtype_policy,
    output_keys,
)
from modelgraph.runner import dtypes as dt
from modelgraph.runner import masks as runner_masks
from modelgraph.runner.fusion import fuse
from modelgraph.runner.passes.fold_batchnorm import fold_batchnorms
from modelgraph.runner.registry import KernelSpec
from modelgraph.runner.weights import LazyWeights
from modelgraph.saving.onnx import masks as mk
from modelgraph.saving.onnx._onnx import helper, onnx_dtype, require_onnx
from modelgraph.saving.onnx.emitter import Emitter, Value
from modelgraph.saving.onnx.passes import optimise
from modelgraph.saving.onnx.registry import MapContext, get_mapping
from modelgraph.shapes import ShapeResult, infer_shapes

DEFAULT_OPSET = 17
MIN_OPSET = 17
MAX_OPSET = 21
_HALF_ROUND = {"float16": "float16", "bfloat16": "bfloat16"}


class UnmappedLayerError(UnsupportedError):
    """A layer key with no ONNX mapping (with the catalogue's reason when it gives one)."""

    def __init__(self, key: str) -> None:
        self.key = key
        spec = catalogue.spec_for(key, "onnx")
        why = f": {spec.onnx}" if spec is not None and isinstance(spec.onnx, str) else ""
        super().__init__(f"no ONNX mapping for layer class '{key}'{why}")


class ExportCheckError(UnsupportedError):
    """The exported model does not pass ``onnx.checker`` (a config whose shapes do not add up)."""


class ExportRefusedError(UnsupportedError):
    """Layers the exporter cannot map; ``problems`` names every one."""

    def __init__(self, problems: list[tuple[str, str, str]]) -> None:
        self.problems = problems
        listed = "; ".join(f"{path} ({cls}): {why}" for path, cls, why in problems)
        super().__init__(f"cannot export to ONNX: {len(problems)} layer(s) cannot be mapped: {listed}")


@dataclass
class ExportResult:
    """What an export produced: the model, its input and output names, the dequantized layers."""

    model: Any
    input_names: list[str]
    output_names: list[str]
    dequantized: list[str] = field(default_factory=list)


def _batch_dim(batch: int | str | None) -> int | str:
    """The batch dimension of every input and output: fixed, or the symbol ``batch``."""
    return batch if isinstance(batch, int) else "batch"


class _Walk(GraphWalker[Value]):
    """One export: the graph walk's client that maps each node, its problems and the pieces of the
    ONNX graph. Values are ONNX values; shape inference's results are looked up by node path."""

    def __init__(
        self, graph: ModelGraph, batch: int | str | None, opset: int, names: list[str] | None = None
    ) -> None:
        self.graph = graph
        self.batch = batch
        self.keras_version = keras_version_tuple(graph.keras_version)
        self.keras_major = graph.keras_major
        self.output_keys = output_keys(graph.outputs) if names is None else names
        self.e = Emitter(reserved=set(graph.input_names) | set(self.output_keys), opset=opset)
        self.problems: list[tuple[str, str, str]] = []
        self._problem_keys: set[tuple[str, str]] = set()  # (path, message) of each problem, once
        self.dequantized: list[str] = []
        self._weights: dict[tuple[int, str], LazyWeights] = {}
        self.inputs: list[Any] = []
        self.outputs: list[Any] = []
        self.value_info: dict[str, Any] = {}
        self.missing_weights = False
        # Shape inference's results of each (nested) graph being walked, by scope prefix.
        self._shapes: dict[str, ShapeResult | None] = {}

    def problem(self, path: str, class_name: str, error: BaseException | str) -> None:
        why = str(error)
        if (path, why) in self._problem_keys:  # a set, as the runner keeps: thousands of problems stay linear
            return
        self._problem_keys.add((path, why))
        self.problems.append((path, class_name, why))

    # --- top level -------------------------------------------------------------------------------

    def run(self) -> None:
        g = self.graph
        overrides = None
        env: dict[TensorRef, Value] = {}
        masks: dict[TensorRef, Value] = {}
        specs = []
        for ref in g.inputs:
            layer = g.layer(ref.layer)
            shape = layer.config.get("batch_shape", layer.config.get("batch_input_shape"))
            dtype = dt.input_dtype(layer.config)
            if dtype == "bfloat16":
                dtype = "float32"
            if not isinstance(shape, (list, tuple)):
                raise UnsupportedConfigError(layer.class_name, "batch_shape", shape, ref.layer)
            dims: list[int | str] = [_batch_dim(self.batch)]
            for i, d in enumerate(shape[1:], start=1):
                dims.append(int(d) if isinstance(d, int) else f"{ref.layer}_dim{i}")
            specs.append((ref, dims, dtype))
        if isinstance(self.batch, int):
            overrides = {
                ref.layer: (self.batch, *[d if isinstance(d, int) else None for d in dims[1:]])
                for ref, dims, _ in specs
            }
        shapes = infer_shapes(g, overrides)
        for ref, dims, dtype in specs:
            self.inputs.append(helper.make_tensor_value_info(ref.layer, onnx_dtype(dtype), dims))
            env[ref] = Value(ref.layer, len(dims), None, dtype)
        self._shapes[""] = shapes
        self.walk(g, env, masks)
        if self.problems:
            raise ExportRefusedError(self.problems)
        for key, ref in zip(self.output_keys, g.outputs, strict=True):
            value = env.get(ref)
            if value is None or value is _REFUSED:
                raise RunError(f"model output {ref} is not computed by any node")
            self.e.scope = ""
            src = self.e.logical(value)
            if src != key:  # a model input returned as it is stays one value: ONNX names are SSA
                self.e.nodes.append(
                    helper.make_node("Identity", [src], [key], name=self.e.unique(f"{key}/output"))
                )
            shape = shapes.shape(ref)
            if shape is None and value.rank is not None:
                shape = (None,) * value.rank
            if shape is None:
                raise UnsupportedConfigError("Model", "output rank", "unknown", key)
            dims = [
                _batch_dim(self.batch) if i == 0 else (d if d is not None else f"{key}_dim{i}")
                for i, d in enumerate(shape)
            ]
            self.outputs.append(helper.make_tensor_value_info(key, onnx_dtype(value.dtype), dims))

    # --- nodes -----------------------------------------------------------------------------------

    def _scope_shapes(self, visit: Visit) -> ShapeResult | None:
        """Shape inference's result for the graph ``visit`` is in (nested results by call)."""
        return self._shapes.get(visit.scope.prefix)

    def run_node(self, visit: Visit, env: dict[TensorRef, Value], masks: dict[TensorRef, Any] | None) -> None:
        layer, node = visit.layer, visit.node
        assert masks is not None
        if any(env[r] is _REFUSED for r in node.inputs):
            # Downstream of a refused layer: only look for a missing mapping, so that every
            # unmappable layer is named, not just the first on each path.
            if get_mapping(layer.key) is None:
                self.problem(visit.path, layer.class_name, UnmappedLayerError(layer.key))
            self._refuse_outputs(visit, env)
        elif not self._node(visit, env, masks):
            self._refuse_outputs(visit, env)

    def bad_call(self, visit: Visit, reason: str) -> None:
        self.problem(visit.path, visit.layer.class_name, f"node {visit.node} {reason}")

    def enter_model(self, visit: Visit, inner: Scope) -> None:
        # A nested model's call: its shapes are the nested result inferred for that call.
        outer = self._shapes.get(visit.scope.prefix)
        self._shapes[inner.prefix] = outer.nested.get(visit.node.key) if outer is not None else None

    @staticmethod
    def _refuse_outputs(visit: Visit, env: dict[TensorRef, Value]) -> None:
        for t in visit.scope.referenced_outputs(visit.node):
            env[TensorRef(visit.layer.name, visit.node.index, t)] = _REFUSED

    def _spec(self, graph: ModelGraph, layer: Layer, path: str, policy: dt.Policy) -> KernelSpec:
        cache_key = (id(graph), layer.name)
        weights = self._weights.get(cache_key)
        if weights is None:
            transform = None
            if policy.is_half and not float32_variables(layer.key):
                half = policy.compute_dtype

                def transform(a: np.ndarray, half: str = half) -> np.ndarray:
                    return (
                        np.asarray(dt.weight_to_compute(a, half), dtype=np.float32)
                        if a.dtype.kind == "f"
                        else a
                    )

            weights = LazyWeights(layer.weights, transform)
            self._weights[cache_key] = weights
        return KernelSpec(
            name=path,
            class_name=layer.class_name,
            config=layer.config,
            weights=weights,
            keras_version=self.keras_version,
            compute_dtype=policy.compute_dtype,
        )

    def _node(self, visit: Visit, env: dict[TensorRef, Value], masks: dict[TensorRef, Value]) -> bool:
        """Map one node; False (and the problem recorded) when it cannot be mapped."""
        path, layer = visit.path, visit.layer
        try:
            self._map_node(visit, env, masks)
            return True
        except ModelGraphError as exc:
            self.missing_weights |= isinstance(exc, WeightsError)
            self.problem(path, layer.class_name, exc)
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            self.problem(path, layer.class_name, f"{type(exc).__name__}: {exc}")
        self.e.scope = ""
        return False

    def _map_node(self, visit: Visit, env: dict[TensorRef, Value], masks: dict[TensorRef, Value]) -> None:
        graph, layer, node, path, key = visit.graph, visit.layer, visit.node, visit.path, visit.layer.key
        shapes = self._scope_shapes(visit)
        policy = dt.FLOAT32
        if has_dtype_policy(layer):
            policy = dt.resolve_policy(layer.config.get("dtype"), layer.class_name, path)
        mapping = None
        if policy.quantization is not None:
            from modelgraph.saving.onnx.mappings.quantized import quantized_mapping

            mapping = quantized_mapping(key, policy.quantization)
            if mapping is None:
                raise UnsupportedConfigError(
                    layer.class_name, "dtype", f"{policy.quantization} quantized", path
                )
            self.dequantized.append(path)
        else:
            mapping = get_mapping(key)
        if mapping is None:
            raise UnmappedLayerError(key)
        if visit.refuses_training():
            raise UnsupportedConfigError(layer.class_name, "training", True, path)
        kwargs = call_kwargs(node)
        rule = (
            runner_masks.rule_for_node(
                layer.class_name, layer.config, self.keras_major, node.args, kwargs, node.inputs,
                keras2=mk.rule_for, producer=mk.k3_producer,
            )
            if layer.kind == "layer"
            else None
        )  # fmt: skip
        args = tuple(map_refs(a, lambda r: env[r]) for a in node.args)
        kwargs = {k: map_refs(v, lambda r: env[r]) for k, v in kwargs.items()}
        in_shapes = list(shapes.inputs.get(node.key, [])) if shapes is not None else []
        out_shapes = list(shapes.outputs.get(node.key, [])) if shapes is not None else []
        out_dtypes = list(shapes.dtypes.get(node.key, [])) if shapes is not None else []
        spec = self._spec(graph, layer, path, policy)
        ctx = MapContext(spec=spec, e=self.e, in_shapes=in_shapes, out_shapes=out_shapes)
        self.e.scope = path + "/"
        half = policy.compute_dtype if policy.is_half else None
        if half is not None:
            args = _map_values(args, lambda v: self._round(v, half))
            kwargs = _map_values(kwargs, lambda v: self._round(v, half))
        flat_in = [env[r] for r in node.inputs]
        hidden = visit.hidden_masks(self.keras_major)
        in_masks = [None if r in hidden else masks.get(r) for r in node.inputs]
        explicit = "mask" in kwargs and self.keras_major < 3  # Keras 3's rule leaves a given mask alone
        if (
            rule is not None
            and rule.consume is not None
            and not explicit
            and any(m is not None for m in in_masks)
        ):
            kwargs = {**kwargs, **rule.consume(in_masks)}
        result = mapping(ctx, *args, **kwargs)
        outs = list(result) if isinstance(result, (tuple, list)) else [result]
        values: list[Value] = []
        for t, out in enumerate(outs):
            shape = out_shapes[t] if t < len(out_shapes) else None
            dtype = out_dtypes[t] if t < len(out_dtypes) and out_dtypes[t] else "float32"
            if dtype in ("float16", "bfloat16", "float64"):
                dtype = "float32"
            if isinstance(out, Value):
                value = (
                    out
                    if out.rank is not None or shape is None
                    else Value(out.name, len(shape), out.perm, out.dtype)
                )
            else:
                value = Value(out, None if shape is None else len(shape), None, dtype)
            if half is not None and value.dtype == "float32":
                value = self._round(value, half)
            values.append(value)
        for t, value in enumerate(values):
            env[TensorRef(layer.name, node.index, t)] = value
            self._value_info(value, out_shapes[t] if t < len(out_shapes) else None)
        if (
            rule is not None
            and rule.produce is not None
            and (any(m is not None for m in in_masks) or rule.source)
        ):
            produced = rule.produce(self.e, in_masks, flat_in, values)
            for t, m in enumerate(produced):
                if m is not None:
                    masks[TensorRef(layer.name, node.index, t)] = m
        self.e.scope = ""

    def _value_info(self, value: Value, shape: Any) -> None:
        """Record a layer output's static shape (in its stored layout) for viewers and checkers."""
        if not value.name or value.name in self.value_info or shape is None or value.rank != len(shape):
            return
        dims = list(shape) if value.is_logical else [shape[a] for a in value.perm]  # type: ignore[union-attr]
        named = [d if isinstance(d, int) else None for d in dims]
        if value.is_logical or value.perm[0] == 0:  # type: ignore[index]
            named = ["batch" if i == (0 if value.is_logical else value.perm.index(0)) and d is None else d  # type: ignore[union-attr]
                     for i, d in enumerate(named)]  # fmt: skip
        if isinstance(self.batch, int):
            named = [self.batch if d == "batch" else d for d in named]
        self.value_info[value.name] = helper.make_tensor_value_info(
            value.name, onnx_dtype(value.dtype), named
        )

    def _round(self, value: Value, half: str) -> Value:
        """The tensor rounded to a half-precision dtype and back (a layer computing in float16)."""
        if value.dtype != "float32":
            return value
        down = self.e.op("Cast", [value.name], "round", to=onnx_dtype(_HALF_ROUND[half]))
        up = self.e.op("Cast", [down], "round", to=onnx_dtype("float32"))
        return Value(up, value.rank, value.perm, value.dtype)


# Stands for an output of a layer that could not be mapped (the export is refused in the end).
_REFUSED = Value("", None)


def _map_values(structure: Any, fn: Any) -> Any:
    from modelgraph.graph import map_structure

    return map_structure(structure, fn, lambda v: isinstance(v, Value))


def to_onnx(
    graph: ModelGraph,
    *,
    opset: int = DEFAULT_OPSET,
    batch: int | str | None = None,
    check: bool = True,
) -> ExportResult:
    """Build the ONNX model of ``graph`` in memory (see :func:`export_onnx`)."""
    onnx = require_onnx()
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise UsageError(f"--opset {opset} is not supported; choose {MIN_OPSET} to {MAX_OPSET}")
    if batch is not None and batch != "dynamic" and (not isinstance(batch, int) or batch < 1):
        raise UsageError(f"batch must be a positive integer or 'dynamic', got {batch!r}")
    # BatchNormalization (and a ReLU after it) folded into the conv or Dense before it, as the runner's
    # plan does (in float64, rounded once): a leaner graph for runtimes that do not fold it themselves.
    # The outputs keep the names of the model's own output layers (a folded BatchNormalization's, not
    # the convolution's it was folded into), as the NumPy runner names them.
    walk = _Walk(
        fuse(graph, (fold_batchnorms,)),
        None if batch == "dynamic" else batch,
        opset,
        output_keys(graph.outputs),
    )
    try:
        walk.run()
    except ExportRefusedError:
        if walk.missing_weights and not graph.has_weights:
            raise config_only_model(graph.source or graph.name) from None
        raise
    lean = optimise(walk.e.nodes, set(walk.output_keys), walk.e.initializers)
    produced = {o for n in lean.nodes for o in n.output} - set(walk.output_keys) - lean.reshaped
    value_info = [v for name, v in walk.value_info.items() if name in produced]
    onnx_graph = helper.make_graph(
        lean.nodes, graph.name or "model", walk.inputs, walk.outputs, lean.initializers, value_info=value_info
    )
    doc = f"Exported by modelgraph {__version__} from a Keras {graph.keras_version or '?'} {graph.format} model."
    if walk.dequantized:
        doc += f" Quantized layers dequantized at export (float32 weights): {', '.join(walk.dequantized)}."
    model = helper.make_model(
        onnx_graph,
        opset_imports=[helper.make_opsetid("", opset)],
        producer_name="modelgraph",
        producer_version=__version__,
        doc_string=doc,
    )
    model.ir_version = 8 if opset <= 18 else 9
    props = {
        "keras_version": str(graph.keras_version or ""),
        "source_format": str(graph.format),
        "layout": "inputs and outputs in Keras's layout (channels_last stays NHWC)",
    }
    if walk.dequantized:
        props["dequantized_layers"] = ",".join(walk.dequantized)
    helper.set_model_props(model, props)
    if check:
        try:
            onnx.checker.check_model(model, full_check=True)
        except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ExportCheckError(f"the exported model fails onnx.checker (full check): {first}") from exc
    return ExportResult(model, list(graph.input_names), list(walk.output_keys), walk.dequantized)


def export_onnx(
    graph: ModelGraph,
    path: str | Path,
    *,
    opset: int = DEFAULT_OPSET,
    batch: int | str | None = None,
) -> ExportResult:
    """Export ``graph`` to an ONNX file at ``path``.

    ``batch``: an int fixes the batch dimension of every input and output; None or ``"dynamic"``
    leaves it symbolic (``batch``). Layers that cannot be mapped are all named in one
    :class:`ExportRefusedError` before anything is written, and a model whose input files carry an
    error-severity security finding is refused whole (:mod:`modelgraph.saving.security_gate`); ``path``
    must end in ``.onnx`` (:class:`UsageError`). The file is written to a temporary name and renamed,
    and the same model gives the same bytes.
    """
    from modelgraph.saving.security_gate import refuse_unsafe_input

    target = Path(path)
    if target.suffix.lower() != ".onnx":
        raise UsageError(f"output '{target}' must end in .onnx (got '{target.suffix or 'no suffix'}')")
    refuse_unsafe_input(graph, target)
    result = to_onnx(graph, opset=opset, batch=batch)
    data = result.model.SerializeToString(deterministic=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return result


def layer_model(
    key: str,
    spec: KernelSpec,
    args: Any,
    kwargs: Mapping[str, Any] | None = None,
    *,
    out_shapes: list[tuple[int, ...]] | None = None,
    opset: int = DEFAULT_OPSET,
) -> Any:
    """A one-node ONNX model of one layer call (for checking a mapping against its kernel's goldens).

    ``args``/``kwargs`` are the call structure with NumPy arrays at tensor positions: each array
    becomes a model input ``in_<i>`` of its exact shape and dtype; the outputs are ``out_<i>``.
    """
    require_onnx()
    mapping = get_mapping(key)
    if mapping is None:
        raise UnmappedLayerError(key)
    e = Emitter(opset=opset)
    inputs: list[Any] = []
    in_shapes: list[tuple[int, ...]] = []

    def to_value(a: np.ndarray) -> Value:
        name = f"in_{len(inputs)}"
        dtype = str(a.dtype)
        inputs.append(helper.make_tensor_value_info(name, onnx_dtype(dtype), list(a.shape)))
        in_shapes.append(tuple(a.shape))
        return Value(name, a.ndim, None, dtype)

    is_array = lambda v: isinstance(v, np.ndarray) and v.ndim > 0  # noqa: E731
    args_v = _map_structure(args, to_value, is_array)
    kwargs_v = _map_structure(dict(kwargs or {}), to_value, is_array)
    ctx = MapContext(spec=spec, e=e, in_shapes=in_shapes, out_shapes=list(out_shapes or []))
    result = mapping(ctx, *args_v, **kwargs_v)
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    outputs = []
    for i, out in enumerate(outs):
        value = out if isinstance(out, Value) else Value(out)
        name = f"out_{i}"
        e.nodes.append(helper.make_node("Identity", [e.logical(value)], [name]))
        shape = (
            list(out_shapes[i])
            if out_shapes and i < len(out_shapes)
            else [f"out_{i}_d{k}" for k in range(value.rank or 0)]
        )
        outputs.append(helper.make_tensor_value_info(name, onnx_dtype(value.dtype), shape))
    lean = optimise(e.nodes, {o.name for o in outputs}, e.initializers)
    graph = helper.make_graph(lean.nodes, key, inputs, outputs, lean.initializers)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="modelgraph"
    )
    model.ir_version = 8 if opset <= 18 else 9
    return model


def _map_structure(structure: Any, fn: Any, is_leaf: Any) -> Any:
    from modelgraph.graph import map_structure

    return map_structure(structure, fn, is_leaf)
