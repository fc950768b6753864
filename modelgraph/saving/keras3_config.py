"""A :class:`ModelGraph` -> the ``config.json`` object Keras 3 writes (``serialize_keras_object``).

Every layer record gets Keras 3's envelope (``module``, ``class_name``, ``config``,
``registered_name``, ``build_config``); inside a Functional it also gets ``name`` and
``inbound_nodes``, each node ``{"args": [...], "kwargs": {...}}`` with ``__keras_tensor__`` leaves
whose ``keras_history`` is 0-based. ``input_layers``/``output_layers`` count a nested Functional's
construction node (+1), as Keras 3's ``Functional.get_config`` does; a nested Sequential does not.

Layer configs from older Keras are upgraded by :mod:`modelgraph.saving.upgrades`; tf.keras
``TFOpLambda`` layers become op nodes (:mod:`modelgraph.saving.tf_ops`). Whatever cannot be
written faithfully is collected in :attr:`ConfigWriter.refusals` (every layer, nested ones
included) so the caller can refuse the model before writing anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from modelgraph.catalogue.keras3 import OP_MODULES
from modelgraph.graph import Layer, ModelGraph, TensorRef, flatten_structure, map_structure
from modelgraph.saving.hard_sigmoid_inputs import plan_scaled_inputs
from modelgraph.saving.masks import WritePlan, plan_masks
from modelgraph.saving.tf_ops import convert_tf_op
from modelgraph.saving.time_major import is_time_major, plan_time_major
from modelgraph.saving.upgrades import (
    NotConvertible,
    UpgradeContext,
    dtype_policy,
    keras3_rules,
    upgrade_call,
    upgrade_layer,
)
from modelgraph.shapes import ShapeResult
from modelgraph.topology import map_graph

FUNCTIONAL_MODULE = "keras.src.models.functional"
_MODEL_CLASSES = frozenset({"Functional", "Model", "Container"})


@dataclass(frozen=True)
class Refusal:
    """One layer that cannot be written: where it is, its class and why."""

    path: str
    class_name: str
    reason: str

    def __str__(self) -> str:
        return f"'{self.path}' ({self.class_name}): {self.reason}"


@dataclass
class WrittenLayer:
    """What the weights writer needs to know about a layer as it was written."""

    class_name: str
    config: dict[str, Any]


@dataclass
class ConfigWriter:
    """Serialises one graph (and its nested models) in Keras 3's form, collecting refusals."""

    ctx: UpgradeContext
    refusals: list[Refusal] = field(default_factory=list)
    # (path of layer names) -> the class and config the layer was written with
    written: dict[tuple[str, ...], WrittenLayer] = field(default_factory=dict)
    _added_kwargs: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    _replaced_inputs: dict[tuple[str, int], dict[TensorRef, TensorRef]] = field(default_factory=dict)
    _redirect: dict[TensorRef, TensorRef] = field(default_factory=dict)
    _written_shapes: dict[TensorRef, tuple[Any, ...] | None] = field(default_factory=dict)
    _added_calls: dict[str, list[tuple[tuple[str, int], tuple[Any, ...], dict[str, Any]]]] = field(
        default_factory=dict
    )
    _added_specs: dict[str, tuple[tuple[Any, ...] | None, str]] = field(default_factory=dict)
    # Keras 1/2 implicit masks become explicit op nodes (a .keras file); a legacy .h5 keeps them implicit.
    explicit_masks: bool = True
    # (path of a model) -> its layers in the order Keras 3 lists them, when added op nodes changed it
    orders: dict[tuple[str, ...], list[str]] = field(default_factory=dict)
    # Write classes the catalogue does not know as they are (``convert --keep-unknown``).
    keep_unknown: bool = False

    # --- models -------------------------------------------------------------------------------
    def model(
        self, graph: ModelGraph, shapes: ShapeResult | None, path: tuple[str, ...] = ()
    ) -> dict[str, Any]:
        """The envelope of a model (top level or nested), without ``name``/``inbound_nodes``."""
        if graph.class_name == "Sequential":
            return self._sequential(graph, shapes, path)
        if graph.class_name not in _MODEL_CLASSES:
            self._refuse(
                path or (graph.name,), graph.class_name, "a model subclass that Keras 3 cannot rebuild"
            )
        self._check_names(graph, path)
        plan = plan_masks(graph, shapes) if self.ctx.major < 3 else WritePlan()
        if self.ctx.major < 3 and self.explicit_masks:
            plan_time_major(graph, shapes, plan)
        if self.ctx.major < 3 and self.ctx.rescale_hard_sigmoid and self.explicit_masks:
            plan_scaled_inputs(graph, shapes, plan)
        for layer_name, class_name, reason in plan.refusals:
            self._refuse((*path, layer_name), class_name, reason)
        if not self.explicit_masks:
            for layer_name, class_name, reason in dict.fromkeys(plan.explicit_only):
                self._refuse((*path, layer_name), class_name, reason)
            plan = WritePlan()
        self._added_specs = {op.name: (op.shape, op.dtype) for op in plan.ops}
        self._added_kwargs = plan.kwargs
        self._replaced_inputs = plan.inputs
        self._redirect = plan.outputs
        self._written_shapes = plan.shapes
        self._added_calls = plan.calls
        layers = [self._functional_entry(layer, graph, shapes, path) for layer in graph.layers]
        layers = self._with_added_ops(layers, plan, graph, shapes, path)
        if plan.ops:
            layers = self._keras3_order(layers, graph, path)
        config = {
            "name": legal_name(graph.name),
            "trainable": True,
            "layers": [entry for entry in layers if entry is not None],
            "input_layers": _structure(graph.input_structure, graph, plus_one=True),
            "output_layers": _structure(self._redirected(graph.output_structure), graph, plus_one=True),
        }
        return {
            "module": FUNCTIONAL_MODULE,
            "class_name": "Functional",
            "config": config,
            "registered_name": "Functional",
            "build_config": {"input_shape": None},
        }

    def _with_added_ops(
        self,
        entries: list[dict[str, Any] | None],
        plan: WritePlan,
        graph: ModelGraph,
        shapes: ShapeResult | None,
        path: tuple[str, ...],
    ) -> list[dict[str, Any] | None]:
        """Insert each op node computing a mask right after the entry it follows (by default the last
        entry it reads from)."""
        out = list(entries)
        for op in plan.ops:
            names = [e.get("name") if e is not None else None for e in out]
            if op.after is None:
                producers = [
                    legal_name(r.layer)
                    for r in flatten_structure(op.args, _is_ref)
                    if isinstance(r, TensorRef)
                ]
                at = max((names.index(p) for p in producers if p in names), default=len(out) - 1) + 1
            else:
                after = legal_name(op.after)
                at = names.index(after) + 1 if after in names else len(out)
            entry = {
                "module": OP_MODULES[op.class_name],
                "class_name": op.class_name,
                "config": {"name": op.name, **op.config},
                "registered_name": op.class_name,
                "name": op.name,
                "inbound_nodes": [{"args": [self._encode(a, shapes) for a in op.args], "kwargs": {}}],
            }
            out.insert(at, entry)
        return out

    def _keras3_order(
        self, entries: list[dict[str, Any] | None], graph: ModelGraph, path: tuple[str, ...]
    ) -> list[dict[str, Any] | None]:
        """The entries in the order Keras 3's ``map_graph`` lists the rebuilt model's operations
        (depth descending, ties by first visit): added op nodes change the depths, and Keras 3
        saves the weights of same-class layers in that order (``dense``, ``dense_1``)."""
        by_name = {e["name"]: e for e in entries if e is not None}
        parents: dict[tuple[str, int], list[tuple[str, int]]] = {}
        for name, entry in by_name.items():
            for i, node in enumerate(entry.get("inbound_nodes") or []):
                parents[(name, i)] = _history_keys([node.get("args"), node.get("kwargs")])
        refs = flatten_structure(self._redirected(graph.output_structure), _is_ref)
        outputs = [(legal_name(r.layer), r.node_index) for r in refs if isinstance(r, TensorRef)]
        inputs = [(legal_name(r.layer), r.node_index) for r in graph.inputs]
        topo = map_graph(outputs, lambda key: parents.get(key, []), inputs)
        original = {legal_name(layer.name): layer.name for layer in graph.layers}
        self.orders[path] = [original[n] for n in topo.layer_order if n in original]
        ordered = [by_name[n] for n in topo.layer_order if n in by_name]
        return ordered + [e for e in entries if e is not None and e["name"] not in topo.layer_depths]

    def _redirected(self, structure: Any) -> Any:
        return map_structure(structure, lambda r: self._redirect.get(r, r), _is_ref)

    def _encode(self, value: Any, shapes: ShapeResult | None) -> Any:
        if isinstance(value, list | tuple):
            return [self._encode(v, shapes) for v in value]
        if not isinstance(value, TensorRef):
            return value
        if value.layer in self._added_specs:
            return _added_tensor(value, *self._added_specs[value.layer])
        if value in self._written_shapes:
            return _added_tensor(
                value, self._written_shapes[value], (shapes and shapes.dtype(value)) or "float32"
            )
        return _keras_tensor(value, shapes)

    def _sequential(
        self, graph: ModelGraph, shapes: ShapeResult | None, path: tuple[str, ...]
    ) -> dict[str, Any]:
        self._check_names(graph, path)
        records = []
        input_shape = None
        for layer in graph.layers:
            record = self._layer_record(layer, graph, shapes, path)
            if record is None:
                continue
            if layer.kind == "input":
                input_shape = record["config"].get("batch_shape")
            records.append(record)
        config: dict[str, Any] = {
            "name": legal_name(graph.name),
            "trainable": True,
            "dtype": dtype_policy("float32"),
            "layers": records,
        }
        if input_shape is not None:
            config["build_input_shape"] = input_shape
        return {
            "module": "keras",
            "class_name": "Sequential",
            "config": config,
            "registered_name": None,
            "build_config": {"input_shape": input_shape},
        }

    # --- layers ---------------------------------------------------------------------------------
    def _functional_entry(
        self, layer: Layer, graph: ModelGraph, shapes: ShapeResult | None, path: tuple[str, ...]
    ) -> dict[str, Any] | None:
        if layer.depth is None and layer.kind != "input":
            return None  # Keras 3 drops layers that no output reaches
        if layer.key.startswith("tf:"):  # a TFOpLambda/SlicingOpLambda (the catalogue's key_of)
            return self._tf_op_entry(layer, graph, shapes, path)
        record = self._layer_record(layer, graph, shapes, path)
        if record is None:
            return None
        record["name"] = legal_name(layer.name)
        nodes = []
        if layer.kind != "input":
            for node in graph.nodes_of(layer.name):
                args, kwargs = node.args, dict(node.kwargs)
                if self.ctx.major < 3:
                    args, kwargs = upgrade_call(layer.class_name, args, kwargs)
                replaced = self._replaced_inputs.get(node.key)
                if replaced:
                    args, kwargs = map_structure((args, kwargs), lambda r, m=replaced: m.get(r, r), _is_ref)
                kwargs.update(self._added_kwargs.get(node.key, {}))
                nodes.append(self._node(args, kwargs, shapes, graph, path, layer))
            for source, args, kwargs in self._added_calls.get(layer.name, []):
                replaced = self._replaced_inputs.get(source, {})
                args, kwargs = map_structure((args, kwargs), lambda r, m=replaced: m.get(r, r), _is_ref)
                nodes.append(self._node(args, kwargs, shapes, graph, path, layer))
        record["inbound_nodes"] = nodes
        return record

    def _layer_record(
        self, layer: Layer, graph: ModelGraph, shapes: ShapeResult | None, path: tuple[str, ...]
    ) -> dict[str, Any] | None:
        where = (*path, layer.name)
        if layer.kind == "model" and layer.subgraph is not None:
            nested_shapes = shapes.nested.get((layer.name, 0)) if shapes is not None else None
            record = self.model(layer.subgraph, nested_shapes, where)
            if layer.subgraph.class_name == "Sequential":
                return record
            record["build_config"] = {"input_shape": None}
            return record
        if layer.kind == "op":
            return self._op_record(layer, where)
        refusal = keras3_rules(layer.class_name).refuse
        if refusal is not None:
            self._refuse(where, layer.class_name, refusal)
            return None
        custom = None if _is_public(layer) else custom_record(layer, self.keep_unknown)
        if custom is not None:
            self.written[where] = WrittenLayer(custom["class_name"], custom["config"])
            return self._with_build_config(custom, layer, graph, shapes)
        if not _is_public(layer) and self._keeps_keras3_record(layer):
            record = {
                "module": layer.module,
                "class_name": layer.class_name,
                "config": dict(layer.config),
                "registered_name": layer.registered_name,
            }
            self.written[where] = WrittenLayer(layer.class_name, record["config"])
            return self._with_build_config(record, layer, graph, shapes)
        source_config: Mapping[str, Any] = layer.config
        if self.ctx.major < 3 and self.explicit_masks and is_time_major(layer.class_name, source_config):
            # written with Transpose op nodes around it (time_major.py)
            source_config = {k: v for k, v in source_config.items() if k != "time_major"}
        try:
            extra_axes = _check_input_rank(layer, graph, shapes)
            class_name, config = upgrade_layer(layer.class_name, source_config, self.ctx)
            config = _fold_extra_axes(config, extra_axes)
        except NotConvertible as exc:
            self._refuse(where, layer.class_name, str(exc))
            return None
        config = _keep_name(config, layer.name)
        self.written[where] = WrittenLayer(class_name, config)
        record = {
            "module": "keras.layers",
            "class_name": class_name,
            "config": config,
            "registered_name": None,
        }
        if layer.kind == "input":
            return record
        return self._with_build_config(record, layer, graph, shapes)

    def _keeps_keras3_record(self, layer: Layer) -> bool:
        """A Keras 3 file's own non-public Keras class (``LayerScale`` of the applications) is kept."""
        module = layer.module or ""
        return (
            self.ctx.major >= 3
            and module.startswith("keras.src.")
            and layer.registered_name == layer.class_name
        )

    def _with_build_config(
        self, record: dict[str, Any], layer: Layer, graph: ModelGraph, shapes: ShapeResult | None
    ) -> dict[str, Any]:
        build = _build_config(layer, graph, shapes) if self.ctx.major >= 3 else None
        if build is not None:
            record["build_config"] = build
        return record

    def _op_record(self, layer: Layer, where: tuple[str, ...]) -> dict[str, Any] | None:
        module = layer.module or OP_MODULES.get(layer.class_name)
        if module is None or not module.startswith("keras.src.ops."):
            self._refuse(where, layer.class_name, "not a Keras 3 operation")
            return None
        return {
            "module": module,
            "class_name": layer.class_name,
            "config": dict(layer.config),
            "registered_name": layer.class_name,
        }

    def _tf_op_entry(
        self, layer: Layer, graph: ModelGraph, shapes: ShapeResult | None, path: tuple[str, ...]
    ) -> dict[str, Any] | None:
        where = (*path, layer.name)
        function = str(layer.config.get("function", ""))
        nodes = []
        op_class = None
        op_config: dict[str, Any] = {}
        try:
            for node in graph.nodes_of(layer.name):
                call = convert_tf_op(function, node.args, dict(node.kwargs))
                if op_class is not None and (call.class_name, call.config) != (
                    op_class,
                    op_config,
                ):  # pragma: no cover
                    raise NotConvertible("a shared TF op layer called with different arguments")
                op_class, op_config = call.class_name, call.config
                nodes.append(self._node(tuple(call.args), {}, shapes, graph, path, layer))
        except NotConvertible as exc:
            self._refuse(where, layer.class_name, str(exc))
            return None
        if op_class is None:
            return None
        return {
            "module": OP_MODULES[op_class],
            "class_name": op_class,
            "config": {"name": legal_name(layer.name), **op_config},
            "registered_name": op_class,
            "name": legal_name(layer.name),
            "inbound_nodes": nodes,
        }

    # --- nodes ----------------------------------------------------------------------------------
    def _node(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        shapes: ShapeResult | None,
        graph: ModelGraph,
        path: tuple[str, ...],
        layer: Layer,
    ) -> dict[str, Any]:
        def encode(value: Any) -> Any:
            if isinstance(value, TensorRef):
                return self._encode(value, shapes)
            if isinstance(value, slice):
                return {
                    "class_name": "__slice__",
                    "config": {"start": value.start, "stop": value.stop, "step": value.step},
                }
            if value is Ellipsis:
                return {"class_name": "__ellipsis__", "config": {}}
            if isinstance(value, np.ndarray):
                return {
                    "class_name": "__numpy__",
                    "config": {"value": value.tolist(), "dtype": str(value.dtype)},
                }
            if isinstance(value, np.generic):
                return value.item()
            if isinstance(value, list | tuple):
                return [encode(v) for v in value]
            if isinstance(value, Mapping):
                return {str(k): encode(v) for k, v in value.items()}
            if value is not None and not isinstance(value, str | int | float | bool):
                self._refuse(
                    (*path, layer.name), layer.class_name, f"call argument {value!r} cannot be written"
                )
                return None
            return value

        return {"args": encode(list(args)), "kwargs": encode(kwargs)}

    def _check_names(self, graph: ModelGraph, path: tuple[str, ...]) -> None:
        seen: dict[str, str] = {}
        for layer in graph.layers:
            new = legal_name(layer.name)
            if new in seen and seen[new] != layer.name:
                self._refuse(
                    (*path, layer.name),
                    layer.class_name,
                    f"its Keras 3 name '{new}' is taken by '{seen[new]}'",
                )
            seen[new] = layer.name

    def _refuse(self, where: tuple[str, ...], class_name: str, reason: str) -> None:
        self.refusals.append(Refusal("/".join(where), class_name, reason))


# --- helpers ----------------------------------------------------------------------------------


def _is_public(layer: Layer) -> bool:
    from modelgraph.catalogue.keras3 import KERAS3_LAYERS
    from modelgraph.saving.upgrades import keras3_class_name

    name = keras3_class_name(layer.class_name)
    return name in KERAS3_LAYERS and (
        layer.module in (None, "keras.layers") or not layer.module.startswith("keras.src.")
    )


def custom_record(layer: Layer, keep_unknown: bool) -> dict[str, Any] | None:
    """The Keras 3 record of a custom class: one a plugin describes (its ``keras3`` writing), or with
    ``keep_unknown`` one the catalogue does not know, written as the file had it (class, module and
    registered name kept, config as it is; Keras loads it with the user's ``custom_objects``)."""
    from modelgraph import catalogue

    if layer.kind != "layer":
        return None
    spec = catalogue.spec_for(layer.key)
    writing = spec.keras3 if spec is not None else None
    if writing is None and not (keep_unknown and (spec is None or spec.plugin)):
        return None
    class_name = layer.class_name.rsplit(">", 1)[-1]  # Keras 3's legacy .h5 writes "pkg>Class"
    registered = layer.registered_name or (layer.class_name if ">" in layer.class_name else None)
    config = dict(layer.config)
    module = layer.module
    if writing is not None:
        module = writing.module or module
        registered = writing.registered_name or registered
        if writing.upgrade is not None:
            config = dict(writing.upgrade(config))
    config["name"] = legal_name(layer.name)
    return {
        "module": module,
        "class_name": class_name,
        "config": config,
        "registered_name": registered or class_name,
    }


def legal_name(name: str) -> str:
    """A layer name Keras 3 accepts: it refuses ``/`` (tf.keras MobileNetV3 names ``Conv/BatchNorm``)."""
    return name.replace("/", "_")


def _keep_name(config: dict[str, Any], name: str) -> dict[str, Any]:
    if "name" in config:
        config["name"] = legal_name(name)
    return config


def _keras_tensor(ref: TensorRef, shapes: ShapeResult | None) -> dict[str, Any]:
    shape = shapes.shape(ref) if shapes is not None else None
    dtype = shapes.dtype(ref) if shapes is not None else None
    return {
        "class_name": "__keras_tensor__",
        "config": {
            # Keras replaces a tensor with history by the producing layer's output and drops this
            # shape, but refuses None: an unknown shape (after a kept unknown class) is written [].
            "shape": [] if shape is None else list(shape),
            "dtype": dtype or "float32",
            "keras_history": [legal_name(ref.layer), ref.node_index, ref.tensor_index],
        },
    }


def _added_tensor(ref: TensorRef, shape: tuple[Any, ...] | None, dtype: str = "bool") -> dict[str, Any]:
    """A tensor whose shape and dtype the writer knows itself: an added op's output (a boolean mask, an
    unmasked copy, a transpose) or a time-major layer's batch-major output."""
    return {
        "class_name": "__keras_tensor__",
        "config": {
            "shape": None if shape is None else list(shape),
            "dtype": dtype,
            "keras_history": [legal_name(ref.layer), ref.node_index, ref.tensor_index],
        },
    }


def _structure(value: Any, graph: ModelGraph, plus_one: bool) -> Any:
    """``input_layers``/``output_layers``: triples, +1 on a nested Functional's node index."""
    if isinstance(value, TensorRef):
        node = value.node_index
        if plus_one and graph.has_layer(value.layer):
            producer = graph.layer(value.layer)
            if (
                producer.kind == "model"
                and producer.subgraph is not None
                and producer.subgraph.class_name != "Sequential"
            ):
                node += 1
        return [legal_name(value.layer), node, value.tensor_index]
    if isinstance(value, list | tuple):
        return [_structure(v, graph, plus_one) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _structure(v, graph, plus_one) for k, v in value.items()}
    return value


def _check_input_rank(layer: Layer, graph: ModelGraph, shapes: ShapeResult | None) -> int:
    """How many extra leading axes tf.keras folded into the batch of a ``TimeDistributed`` layer's
    inner Conv1D-family layer (0 for any other layer); a bare layer called on a higher rank than
    Keras 3 builds it for is refused."""
    if shapes is None:
        return 0
    inner, extra = layer.class_name, 0
    if keras3_rules(inner).per_step:
        record = layer.config.get("layer")
        inner = record.get("class_name") if isinstance(record, Mapping) else None
        extra = 1
    # tf.keras applied some layers to inputs of higher rank than they are defined for (the extra
    # leading axes treated as batch axes); Keras 3 builds them only for their entry's exact rank.
    rank = keras3_rules(inner).exact_input_rank if isinstance(inner, str) else None
    if rank is None:
        return 0
    folded = set()
    for node in graph.nodes_of(layer.name):
        shape = shapes.shape(node.inputs[0]) if node.inputs else None
        if shape is not None:
            folded.add(max(0, len(shape) - rank - extra))
    if not folded or folded == {0}:
        return 0
    if extra == 0:
        raise NotConvertible(
            f"{inner} applied to a rank-{max(folded) + rank} input: tf.keras treated the extra leading "
            f"axes as batch axes, Keras 3's {inner} accepts only rank {rank}"
        )
    if len(folded) > 1:
        raise NotConvertible(f"a TimeDistributed({inner}) called on inputs of different ranks")
    return folded.pop()


def _fold_extra_axes(config: dict[str, Any], extra_axes: int) -> dict[str, Any]:
    """``TimeDistributed(inner)`` over a rank-``3 + 1 + extra_axes`` input: tf.keras folded every
    leading axis into the inner layer's batch; Keras 3's TimeDistributed maps over one axis, so the
    inner layer is wrapped in one more ``TimeDistributed`` per extra axis (same numbers, the inner
    weights one ``layer/`` deeper)."""
    for i in range(extra_axes):
        inner = config["layer"]
        config = {
            **config,
            "layer": {
                "module": "keras.layers",
                "class_name": "TimeDistributed",
                "config": {
                    "name": f"{config['name']}_axis_{i + 2}",
                    "trainable": config.get("trainable", True),
                    "dtype": config.get("dtype"),
                    "layer": inner,
                },
                "registered_name": None,
            },
        }
    return config


def _build_config(layer: Layer, graph: ModelGraph, shapes: ShapeResult | None) -> dict[str, Any] | None:
    """The ``build_config`` a Keras 3 file recorded for this layer; None for older files.

    Keras 3 builds a layer from its ``build_config`` before calling it; a layer without one is
    built by its first call while the model is rebuilt, which is what Keras 3's own legacy loader
    does for Keras 2 layers. So only a record Keras 3 itself wrote is carried.
    """
    if layer.build_config is not None:
        return dict(layer.build_config)
    return None


def _is_ref(value: Any) -> bool:
    return isinstance(value, TensorRef)


def _history_keys(value: Any) -> list[tuple[str, int]]:
    """The producer node of every ``__keras_tensor__`` in a written call, in Keras's flattening order
    (lists in order, mappings by sorted key)."""
    if isinstance(value, Mapping):
        if value.get("class_name") == "__keras_tensor__":
            history = value["config"]["keras_history"]
            return [(history[0], history[1])]
        return [k for key in sorted(value) for k in _history_keys(value[key])]
    if isinstance(value, list | tuple):
        return [k for v in value for k in _history_keys(v)]
    return []
