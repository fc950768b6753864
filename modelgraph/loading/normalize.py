"""Turn a saved model config (Keras 1, 2 or 3 dialect) into one :class:`ModelGraph`.

The three dialects differ in how a node is written and how node indices count:

* Keras 3 nodes are ``{"args": [...], "kwargs": {...}}`` with ``__keras_tensor__`` leaves whose
  ``keras_history`` is 0-based; only ``input_layers``/``output_layers`` references to a nested
  Functional are one-based (Keras 3 ``get_config`` keeps the construction node there).
* Keras 1/2 nodes are structures of ``[layer, node_index, tensor_index(, kwargs)]`` leaves; a nested
  model that owns a construction node (a Functional, or a Sequential with an input) is one-based in
  every reference.

A node's ``inputs`` flatten its keyword tensors the way the writing Keras rebuilds the node
(:func:`kwarg_order`): by sorted name in Keras 3 and tf.keras up to 2.18, in recorded (call) order
in tf_keras 2.19+.

Every reference is normalised to 0-based node indices, checked, and then mapped with Keras's own
algorithm (:mod:`modelgraph.topology`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Literal

import numpy as np
from pydantic import ValidationError

from modelgraph import catalogue
from modelgraph.errors import (
    ConfigError,
    CycleError,
    DanglingReferenceError,
    DisconnectedGraphError,
    DuplicateNameError,
    GraphError,
    IndexOutOfRangeError,
    LoadError,
    UnsupportedFormatError,
)
from modelgraph.graph import (
    KwargOrder,
    Layer,
    LayerKind,
    ModelGraph,
    Node,
    TensorRef,
    call_tensor_refs,
    flatten_structure,
    keras_major,
    keras_version_tuple,
    map_refs,
    tensor_refs,
)
from modelgraph.loading.keras1 import is_keras1, upgrade_envelope
from modelgraph.schemas.keras_config import FunctionalConfig, LayerRecord, SequentialConfig
from modelgraph.topology import Topology, find_cycles, map_graph

NodeDialect = Literal["dict", "list"]

# Where structural problems go: raised at once (strict, the default) or collected (validate).
_PROBLEMS: ContextVar[list[LoadError] | None] = ContextVar("modelgraph_graph_problems", default=None)


def _report(error: LoadError) -> None:
    """Raise ``error``, or record it and carry on when the caller collects every problem."""
    sink = _PROBLEMS.get()
    if sink is None:
        raise error
    sink.append(error)


MODEL_CLASSES = frozenset({"Functional", "Model", "Sequential", "Container"})
_MAX_CONSTANT_ELEMENTS = 1 << 22  # a __numpy__ constant larger than 4M elements is refused


@dataclass(frozen=True)
class LambdaMarker:
    """A ``__lambda__`` value: kept opaque, never decoded or executed."""

    where: str


@dataclass
class _RawNode:
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    path: str


@dataclass
class _RawLayer:
    name: str
    class_name: str
    kind: LayerKind
    record: LayerRecord
    path: str
    nodes: list[_RawNode]
    subgraph: ModelGraph | None = None


# ------------------------------------------------------------------------------------------------
# Entry point


def build_graph(
    envelope: Mapping[str, Any],
    *,
    keras_version: str | None = None,
    format: str = "unknown",
    source: str = "",
    metadata: Mapping[str, Any] | None = None,
    path: str = "$",
    problems: list[LoadError] | None = None,
) -> ModelGraph:
    """Build the graph of a model envelope ``{"class_name": ..., "config": ...}``.

    By default the first structural problem raises. With a ``problems`` list, every problem found
    (dangling or out-of-range references, duplicate names, cycles, disconnected inputs, bad nodes)
    is appended to it instead, and the best graph that can still be built is returned: broken
    references are dropped, and a graph with a cycle has no depths.
    """
    if problems is not None:
        token = _PROBLEMS.set(problems)
        try:
            return build_graph(
                envelope,
                keras_version=keras_version,
                format=format,
                source=source,
                metadata=metadata,
                path=path,
            )
        finally:
            _PROBLEMS.reset(token)
    if not isinstance(envelope, Mapping):
        raise ConfigError(f"expected a model object, found {type(envelope).__name__}", path)
    if is_keras1(keras_version):
        envelope = upgrade_envelope(envelope, keras_version)
    class_name = envelope.get("class_name")
    config = envelope.get("config")
    if not isinstance(class_name, str):
        raise ConfigError("the model object has no 'class_name'", path)
    graph = _build_model(class_name, config, envelope, keras_version, f"{path}.config")
    return replace(
        graph,
        format=format,
        keras_version=keras_version,
        source=source,
        metadata=MappingProxyType(dict(metadata or {})),
    )


def model_kind(class_name: str, config: Any) -> Literal["functional", "sequential"] | None:
    """Which model body a config is, or None when it holds no graph (a plain layer, a subclass)."""
    if isinstance(config, list):
        return "sequential" if class_name in ("Sequential", "Model") or config else None
    if not isinstance(config, Mapping):
        return None
    if "layers" in config and "input_layers" in config and "output_layers" in config:
        return "functional"
    if class_name == "Sequential" and "layers" in config:
        return "sequential"
    return None


def _build_model(
    class_name: str, config: Any, envelope: Mapping[str, Any], keras_version: str | None, path: str
) -> ModelGraph:
    kind = model_kind(class_name, config)
    if kind is None:
        if class_name in MODEL_CLASSES or (isinstance(config, Mapping) and "layers" not in config):
            raise UnsupportedFormatError(
                f"'{class_name}' is a subclassed model or a bare layer: its config has no layer graph "
                "(only Functional and Sequential models can be reconstructed without their code)"
            )
        raise ConfigError(f"'{class_name}' config has no 'layers'/'input_layers'/'output_layers'", path)
    if kind == "functional":
        return _build_functional(class_name, config, keras_version, path)
    return _build_sequential(class_name, config, envelope, keras_version, path)


# ------------------------------------------------------------------------------------------------
# Record parsing


def _parse(model: type, data: Any, path: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
        raise ConfigError(first["msg"], f"{path}{loc}") from None


# Keras 3 ops whose config holds a plain dtype name (a layer's dtype is a policy); no layer has these
# class names.
def _layer_kind(record: LayerRecord, dialect: NodeDialect) -> LayerKind:
    class_name = record.class_name
    if catalogue.is_model_input(class_name):
        return "input"
    module = record.module or ""
    if module.startswith(("keras.src.ops", "keras.ops")):
        return "op"
    config = record.config
    if model_kind(class_name, config) is not None:
        return "model"
    if (
        dialect == "dict"
        and not record.module
        and isinstance(config, Mapping)
        and "trainable" not in config
        and (config.get("dtype") is None or (_config_dtype(class_name) and isinstance(config["dtype"], str)))
    ):
        # Keras 3's legacy .h5 writer drops `module`: ops are told apart by their bare configs (a
        # Keras 3 layer always saves `trainable` and its dtype policy; an op such as ConvertToTensor
        # or Cast may save `dtype: null`).
        return "op"
    if isinstance(config, Mapping) and "trainable" not in config and _op_only(class_name):
        # ... and an op whose config has a `dtype` (Cast) only by its class being an op, not a layer.
        return "op"
    return "layer"


def _config_dtype(class_name: str) -> bool:
    """A Keras 3 op whose config carries a ``dtype`` (Cast, ZerosLike, ...: its catalogue entry says)."""
    spec = catalogue.spec_for(f"op:{class_name}")
    return spec is not None and spec.config_dtype


def _op_only(class_name: str) -> bool:
    return not catalogue.is_layer_class(class_name) and catalogue.spec_for(f"op:{class_name}") is not None


def _detect_dialect(records: Sequence[LayerRecord], keras_version: str | None) -> NodeDialect:
    for record in records:
        for node in record.inbound_nodes:
            if isinstance(node, Mapping) and set(node) <= {"args", "kwargs"}:
                return "dict"
            if isinstance(node, list):
                return "list"
    return "dict" if keras_major(keras_version) >= 3 else "list"


def kwarg_order(dialect: NodeDialect, keras_version: str | None) -> KwargOrder:
    """How the Keras that wrote a config orders a node's keyword tensors in the node's inputs.

    Keras 3 (dict nodes) rebuilds a node with ``tree.flatten((args, kwargs))``: keywords by sorted
    name. A Keras 2 config (list nodes) records every argument after the first as a keyword, in call
    order (positional ones first, named after the ``call`` signature); tf_keras 2.19+ keeps that order
    when it rebuilds the node (``tf.nest.flatten((call_args, call_kwargs.values()))``,
    keras-team/tf-keras@ea2cc87), while tf.keras up to 2.18 flattened the dict, sorting by name. An
    unknown (or malformed) version reads as the older, sorting behaviour.
    """
    if dialect != "list" or not isinstance(keras_version, str):
        return "sorted"
    return "call" if (2, 19, 0) <= keras_version_tuple(keras_version) < (3, 0, 0) else "sorted"


def _layer_config(record: LayerRecord) -> dict[str, Any]:
    return record.config if isinstance(record.config, dict) else {}


def _make_raw_layers(
    records: Sequence[LayerRecord], dialect: NodeDialect, keras_version: str | None, path: str
) -> dict[str, _RawLayer]:
    layers: dict[str, _RawLayer] = {}
    for i, record in enumerate(records):
        lpath = f"{path}.layers[{i}]"
        name = record.layer_name()
        if not name:
            raise ConfigError("layer has no name", lpath)
        if name in layers:
            _report(
                DuplicateNameError(
                    f"layer name '{name}' is used twice ({layers[name].path} and {lpath}); Keras requires unique names"
                )
            )
            continue
        kind = _layer_kind(record, dialect)
        subgraph = None
        if kind == "model":
            subgraph = _build_model(
                record.class_name, record.config, record.model_dump(), keras_version, f"{lpath}.config"
            )
        layers[name] = _RawLayer(name, record.class_name, kind, record, lpath, [], subgraph)
    return layers


# ------------------------------------------------------------------------------------------------
# Node parsing


def _is_list_leaf(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) in (3, 4)
        and isinstance(value[0], str)
        and isinstance(value[1], int)
        and not isinstance(value[1], bool)
    )


def _map_children(value: list[Any] | Mapping[str, Any], path: str, decode: Callable[[Any, str], Any]) -> Any:
    """A list or mapping of a config structure rebuilt with ``decode`` applied to each element and
    that element's path (``path[i]`` or ``path.key``)."""
    if isinstance(value, list):
        return [decode(v, f"{path}[{i}]") for i, v in enumerate(value)]
    return {k: decode(v, f"{path}.{k}") for k, v in value.items()}


def _decode_value(value: Any, path: str) -> Any:
    """Decode Keras 3 special leaves (tensor refs, slices, numpy constants) in a call structure."""
    if isinstance(value, list):
        return _map_children(value, path, _decode_value)
    if not isinstance(value, Mapping):
        return value
    marker = value.get("class_name")
    inner = value.get("config")
    if marker == "__keras_tensor__":
        history = inner.get("keras_history") if isinstance(inner, Mapping) else None
        if not (isinstance(history, list) and len(history) == 3 and isinstance(history[0], str)):
            raise ConfigError("__keras_tensor__ without a [layer, node, tensor] keras_history", path)
        return _tensor_ref(history, path)
    if marker == "__slice__" and isinstance(inner, Mapping):
        return slice(inner.get("start"), inner.get("stop"), inner.get("step"))
    if marker == "__ellipsis__":
        return Ellipsis
    if marker in ("__numpy__", "__tensor__") and isinstance(inner, Mapping):
        return _decode_array(inner, path)
    if marker == "__lambda__":
        return LambdaMarker(path)
    return _map_children(value, path, _decode_value)


def _tensor_ref(triple: list[Any], path: str) -> TensorRef:
    """A ``[layer, node_index, tensor_index]`` reference; ConfigError unless both indices are
    non-negative integers (a negative one would silently index from the end)."""
    layer, node_index, tensor_index = triple
    for index in (node_index, tensor_index):
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ConfigError(f"reference {list(triple)!r}: indices must be non-negative integers", path)
    return TensorRef(layer, node_index, tensor_index)


def _decode_array(inner: Mapping[str, Any], path: str) -> np.ndarray:
    data = inner.get("value")
    dtype = inner.get("dtype") or "float32"
    try:
        array = np.asarray(data, dtype=np.dtype(str(dtype)))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"bad constant array: {exc}", path) from None
    if array.dtype == object or array.size > _MAX_CONSTANT_ELEMENTS:
        raise ConfigError("constant array is not a plain numeric array of bounded size", path)
    return array


def _decode_list_leaf(leaf: list[Any], path: str) -> Any:
    if leaf[0] == "_CONSTANT_VALUE":
        return leaf[2]
    return _tensor_ref(leaf[:3], path)


def _decode_list_structure(data: Any, path: str) -> tuple[Any, dict[str, Any] | None]:
    """Keras 1/2 first-argument structure -> (structure with TensorRefs, kwargs of its leaves)."""
    found_kwargs: dict[str, Any] | None = None

    def walk(value: Any, p: str) -> Any:
        nonlocal found_kwargs
        if _is_list_leaf(value):
            if len(value) == 4 and found_kwargs is None:
                if not isinstance(value[3], Mapping):
                    raise ConfigError("node kwargs are not an object", p)
                found_kwargs = dict(value[3])
            return _decode_list_leaf(value, p)
        if isinstance(value, list | Mapping):
            return _map_children(value, p, walk)
        raise ConfigError(f"unexpected value {value!r} in a Keras 2 node", p)

    return walk(data, path), found_kwargs


def _decode_list_kwargs(kwargs: Mapping[str, Any], path: str) -> dict[str, Any]:
    def walk(value: Any, p: str) -> Any:
        if isinstance(value, list) and len(value) == 3 and isinstance(value[0], str) and _is_list_leaf(value):
            return _decode_list_leaf(value, p)
        if isinstance(value, Mapping) and value.get("class_name") == "__lambda__":
            return LambdaMarker(p)
        if isinstance(value, list | Mapping):
            return _map_children(value, p, walk)
        return value

    return {k: walk(v, f"{path}.{k}") for k, v in kwargs.items()}


def _parse_node(raw: Any, layer: _RawLayer, dialect: NodeDialect, path: str) -> _RawNode:
    if dialect == "dict":
        if not (isinstance(raw, Mapping) and set(raw) <= {"args", "kwargs"}):
            raise ConfigError("a Keras 3 node must be {'args': [...], 'kwargs': {...}}", path)
        args = raw.get("args", [])
        kwargs = raw.get("kwargs", {})
        if not isinstance(args, list) or not isinstance(kwargs, Mapping):
            raise ConfigError("node 'args' must be a list and 'kwargs' an object", path)
        decoded_args = tuple(_decode_value(a, f"{path}.args[{i}]") for i, a in enumerate(args))
        decoded_kwargs = {k: _decode_value(v, f"{path}.kwargs.{k}") for k, v in kwargs.items()}
        return _RawNode(decoded_args, decoded_kwargs, path)
    if isinstance(raw, Mapping) and set(raw) <= {"args", "kwargs"} and raw:
        raise ConfigError("a Keras 3 node inside a Keras 2 config", path)
    structure, kwargs = _decode_list_structure(raw, path)
    first: Any = structure
    preserve = layer.class_name in catalogue.OP_LAMBDA_CLASSES
    if not preserve and isinstance(structure, list) and len(flatten_structure(structure)) == 1:
        first = flatten_structure(structure)[0]
        if not isinstance(first, TensorRef):
            first = structure
    return _RawNode((first,), _decode_list_kwargs(kwargs or {}, f"{path}[kwargs]"), path)


# ------------------------------------------------------------------------------------------------
# Reference normalisation


def _leading_node(layer: _RawLayer) -> bool:
    """Does a nested model own a construction node that Keras 1/2 counts in references?"""
    if layer.kind != "model" or layer.subgraph is None:
        return False
    if layer.class_name != "Sequential":
        return True
    return bool(layer.subgraph.metadata.get("sequential_has_input", False))


def _normalise(
    ref: TensorRef, layers: Mapping[str, _RawLayer], dialect: NodeDialect, io: bool, where: str
) -> TensorRef | None:
    producer = layers.get(ref.layer)
    if producer is None:
        known = sorted(layers)
        hint = f"; layers are {known}" if len(known) <= 12 else f"; the model has {len(known)} layers"
        _report(DanglingReferenceError(f"{where} refers to unknown layer '{ref.layer}' ({ref}){hint}"))
        return None
    offset = 0
    if dialect == "list" and _leading_node(producer):
        offset = 1
    elif dialect == "dict" and io and producer.kind == "model" and producer.class_name != "Sequential":
        offset = 1
    if producer.kind == "input":
        # Input layers have exactly one node; Keras maps every reference to it to node 0.
        normalised = TensorRef(ref.layer, 0, ref.tensor_index)
        if ref.node_index - offset != 0:
            _report(
                IndexOutOfRangeError(
                    f"{where} refers to {ref}, but input layer '{ref.layer}' has only node 0"
                )
            )
            return None
        return normalised
    node_index = ref.node_index - offset
    count = len(producer.nodes)
    if not 0 <= node_index < count:
        return _out_of_range(
            f"{where} refers to {ref}, but layer '{ref.layer}' has {count} node(s)"
            + (
                f" (index is {'1-based' if offset else '0-based'} in this dialect)"
                if producer.kind == "model"
                else ""
            )
        )
    if ref.tensor_index < 0:
        return _out_of_range(f"{where} refers to {ref}: negative tensor index")
    if producer.subgraph is not None and ref.tensor_index >= len(producer.subgraph.outputs):
        return _out_of_range(
            f"{where} refers to {ref}, but nested model '{ref.layer}' has "
            f"{len(producer.subgraph.outputs)} output(s)"
        )
    return TensorRef(ref.layer, node_index, ref.tensor_index)


def _out_of_range(message: str) -> None:
    _report(IndexOutOfRangeError(message))
    return None


def _io_structure(raw: Any, path: str) -> Any:
    """``input_layers``/``output_layers``: a bare triple, a list of triples, a dict, or nesting."""
    if _is_list_leaf(raw) and len(raw) == 3:
        return _tensor_ref(raw, path)
    if isinstance(raw, list | Mapping):
        return _map_children(raw, path, _io_structure)
    raise ConfigError(f"expected [layer, node_index, tensor_index] references, found {raw!r}", path)


# ------------------------------------------------------------------------------------------------
# Functional


def _build_functional(class_name: str, config: Any, keras_version: str | None, path: str) -> ModelGraph:
    body: FunctionalConfig = _parse(FunctionalConfig, config, path)
    dialect = _detect_dialect(body.layers, keras_version)
    layers = _make_raw_layers(body.layers, dialect, keras_version, path)

    for layer in layers.values():
        if layer.kind == "input":
            layer.nodes.append(_RawNode((), {}, layer.path))
            continue
        for j, raw in enumerate(layer.record.inbound_nodes):
            node_path = f"{layer.path}.inbound_nodes[{j}]"
            try:
                layer.nodes.append(_parse_node(raw, layer, dialect, node_path))
            except ConfigError as exc:
                _report(exc)
                layer.nodes.append(_RawNode((), {}, node_path))  # keeps later node indices right

    for layer in layers.values():
        for j, node in enumerate(layer.nodes):
            where = f"layer '{layer.name}' node {j}"

            def fix(ref: TensorRef, where: str = where) -> TensorRef | None:
                return _normalise(ref, layers, dialect, False, where)

            node.args = map_refs(node.args, fix)
            node.kwargs = map_refs(node.kwargs, fix)

    def fix_io(kind: str) -> Any:
        raw = body.input_layers if kind == "input" else body.output_layers
        structure = _io_structure(raw, f"{path}.{kind}_layers")
        return map_refs(structure, lambda r: _normalise(r, layers, dialect, True, f"model {kind} {r}"))

    input_structure = fix_io("input")
    output_structure = fix_io("output")
    inputs = tuple(tensor_refs(input_structure))
    outputs = tuple(tensor_refs(output_structure))
    for ref in inputs:
        if layers[ref.layer].kind != "input":
            _report(
                GraphError(
                    f"model input {ref} is not an InputLayer ('{ref.layer}' is {layers[ref.layer].class_name})"
                )
            )
    inputs = tuple(ref for ref in inputs if layers[ref.layer].kind == "input")
    if not outputs:
        _report(GraphError("the model has no outputs"))
    return _assemble(
        class_name,
        body.name or "model",
        layers,
        inputs,
        outputs,
        input_structure,
        output_structure,
        {},
        kwarg_order(dialect, keras_version),
    )


def _assemble(
    class_name: str,
    name: str,
    layers: Mapping[str, _RawLayer],
    inputs: tuple[TensorRef, ...],
    outputs: tuple[TensorRef, ...],
    input_structure: Any,
    output_structure: Any,
    metadata: Mapping[str, Any],
    order: KwargOrder = "sorted",
) -> ModelGraph:
    node_inputs: dict[tuple[str, int], tuple[TensorRef, ...]] = {}
    for layer in layers.values():
        for j, node in enumerate(layer.nodes):
            node_inputs[(layer.name, j)] = tuple(call_tensor_refs(node.args, node.kwargs, order))

    parents_cache: dict[tuple[str, int], list[tuple[str, int]]] = {
        key: [r.node_key for r in refs] for key, refs in node_inputs.items()
    }
    input_nodes = [r.node_key for r in inputs]
    try:
        topo = map_graph([r.node_key for r in outputs], parents_cache.__getitem__, input_nodes)
    except CycleError as exc:
        _report(exc)  # only reached when collecting: report every cycle, then go on without depths
        for cycle in find_cycles(parents_cache):
            if exc.args and all(f"{n[0]}[{n[1]}]" not in str(exc) for n in cycle):
                _report(
                    CycleError("nodes " + " -> ".join(f"{n[0]}[{n[1]}]" for n in cycle) + " form a cycle")
                )
        topo = Topology((), {}, {}, (), {})

    model_inputs = {r.layer for r in inputs}
    for key in topo.node_order:
        layer = layers[key[0]]
        if layer.kind == "input" and key[0] not in model_inputs:
            _report(
                DisconnectedGraphError(
                    f"graph disconnected: the outputs depend on input layer '{key[0]}', which is not a model "
                    f"input (model inputs are {sorted(model_inputs)})"
                )
            )

    nodes: list[Node] = []
    for key in topo.node_order:
        raw = layers[key[0]].nodes[key[1]]
        nodes.append(
            Node(
                key[0],
                key[1],
                tuple(raw.args),
                MappingProxyType(raw.kwargs),
                node_inputs[key],
                topo.node_depths[key],
            )
        )
    reached = {n.key for n in nodes}
    for ref in inputs:  # inputs no output uses: in the graph at depth 0, as in Keras
        if ref.node_key not in reached:
            nodes.insert(0, Node(ref.layer, 0, (), MappingProxyType({}), (), 0))
            reached.add(ref.node_key)
    for layer in layers.values():  # nodes no output reaches keep depth None, after the rest
        for j, raw in enumerate(layer.nodes):
            if (layer.name, j) not in reached:
                nodes.append(
                    Node(
                        layer.name,
                        j,
                        tuple(raw.args),
                        MappingProxyType(raw.kwargs),
                        node_inputs[(layer.name, j)],
                    )
                )

    ordered_names = list(topo.layer_order) + [n for n in layers if n not in topo.layer_depths]
    built_layers = []
    for lname in ordered_names:
        raw_layer = layers[lname]
        record = raw_layer.record
        built_layers.append(
            Layer(
                name=lname,
                class_name=raw_layer.class_name,
                kind=raw_layer.kind,
                config=MappingProxyType(_layer_config(record)),
                module=record.module,
                registered_name=record.registered_name,
                build_config=MappingProxyType(record.build_config) if record.build_config else None,
                subgraph=raw_layer.subgraph,
                node_count=len(raw_layer.nodes),
                depth=topo.layer_depths.get(lname),
                json_path=raw_layer.path,
            )
        )
    return ModelGraph(
        name=name,
        class_name=class_name,
        layers=tuple(built_layers),
        nodes=tuple(nodes),
        inputs=inputs,
        outputs=outputs,
        input_structure=input_structure,
        output_structure=output_structure,
        metadata=MappingProxyType(dict(metadata)),
    )


# ------------------------------------------------------------------------------------------------
# Sequential

_SHAPE_KEYS = ("batch_shape", "batch_input_shape")


def _build_sequential(
    class_name: str, config: Any, envelope: Mapping[str, Any], keras_version: str | None, path: str
) -> ModelGraph:
    if isinstance(config, list):  # Keras 1 / Keras <= 2.2.2: a bare list of layers
        body = _parse(SequentialConfig, {"layers": config}, path)
    else:
        body = _parse(SequentialConfig, config, path)
    records = list(body.layers)
    layers = _make_raw_layers(records, "list", keras_version, path)
    ordered = [layers[r.layer_name() or ""] for r in records]

    has_input = bool(ordered) and ordered[0].kind == "input"
    if has_input:
        input_layer = ordered[0]
        body_layers = ordered[1:]
    else:
        first_config = _layer_config(records[0]) if records else {}
        shape = next((first_config[k] for k in _SHAPE_KEYS if first_config.get(k) is not None), None)
        if shape is None and first_config.get("input_shape") is not None:
            shape = [None, *first_config["input_shape"]]
        if shape is None:
            shape = body.build_input_shape
        first_name = ordered[0].name if ordered else body.name or "sequential"
        input_name = f"{first_name}_input"
        while input_name in layers:
            input_name += "_"
        synth_config = {
            "name": input_name,
            "batch_shape": shape,
            "dtype": first_config.get("dtype", first_config.get("input_dtype", "float32")),
        }
        if isinstance(synth_config["dtype"], Mapping):
            synth_config["dtype"] = "float32"
        synth = LayerRecord.model_validate(
            {"class_name": "InputLayer", "config": synth_config, "name": input_name}
        )
        input_layer = _RawLayer(input_name, "InputLayer", "input", synth, f"{path}.(implicit input)", [])
        body_layers = ordered
        layers = {input_name: input_layer, **layers}
    if not body_layers:
        raise GraphError("the Sequential model has no layers")
    input_layer.nodes.append(_RawNode((), {}, input_layer.path))
    previous = TensorRef(input_layer.name, 0, 0)
    for layer in body_layers:
        if layer.kind == "input":
            raise GraphError(f"Sequential model has an InputLayer '{layer.name}' after its first layer")
        layer.nodes.append(_RawNode((previous,), {}, layer.path))
        previous = TensorRef(layer.name, 0, 0)
    first_shape_known = has_input or any(
        _layer_config(records[0]).get(k) is not None for k in (*_SHAPE_KEYS, "input_shape")
    )
    metadata = {"sequential_has_input": bool(has_input or first_shape_known or isinstance(config, list))}
    inputs = (TensorRef(input_layer.name, 0, 0),)
    outputs = (previous,)
    return _assemble(
        class_name, body.name or "sequential", layers, inputs, outputs, list(inputs), list(outputs), metadata
    )
