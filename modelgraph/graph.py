"""The immutable model graph: TensorRef, Weight, Layer, Node and ModelGraph.

Keras's design in data: a *layer* (or a Keras 3 raw op) may be called several times; each call is a
*node*; every tensor is addressed by its ``keras_history`` triple ``(layer, node_index,
tensor_index)``. Depths and the topological order are computed once, when the graph is built
(``modelgraph.topology``), with Keras's own algorithm.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal

import numpy as np

from modelgraph.catalogue import key_of

LayerKind = Literal["input", "layer", "op", "model"]
# How a node's keyword arguments are flattened into its inputs (see call_tensor_refs).
KwargOrder = Literal["sorted", "call"]


@dataclass(frozen=True, slots=True, order=True)
class TensorRef:
    """Keras's keras_history triple: the ``tensor_index``-th output of call ``node_index`` of ``layer``."""

    layer: str
    node_index: int = 0
    tensor_index: int = 0

    def __str__(self) -> str:
        return f"{self.layer}[{self.node_index}][{self.tensor_index}]"

    @property
    def node_key(self) -> tuple[str, int]:
        """The (layer, node_index) pair naming the node that produces this tensor."""
        return (self.layer, self.node_index)


@dataclass(frozen=True)
class Weight:
    """One stored array, read lazily: ``read()`` touches the file, nothing else does."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    location: str
    reader: Callable[[], np.ndarray] = field(repr=False, compare=False)

    @property
    def size(self) -> int:
        """Number of elements."""
        n = 1
        for d in self.shape:
            n *= int(d)
        return n

    @property
    def nbytes(self) -> int:
        """Bytes the values take in memory (bfloat16 counts 2 bytes an element)."""
        itemsize = 2 if self.dtype == "bfloat16" else np.dtype(self.dtype).itemsize
        return self.size * itemsize

    def read(self) -> np.ndarray:
        """Load the values (bfloat16 arrives as float32)."""
        return self.reader()


@dataclass(frozen=True)
class Node:
    """One call of a layer: its call structure, flattened tensor inputs and depth.

    ``args`` and ``kwargs`` keep the exact call structure Keras recorded, with :class:`TensorRef`
    at tensor positions; ``inputs`` flattens them in the order the Keras that wrote the file does
    (args first, then kwargs: by sorted name for Keras 3 and tf.keras up to 2.18, in call order for
    tf_keras 2.19+; see :func:`call_tensor_refs`).
    """

    layer: str
    index: int
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    inputs: tuple[TensorRef, ...]
    depth: int | None = None

    @property
    def key(self) -> tuple[str, int]:
        return (self.layer, self.index)

    def __str__(self) -> str:
        return f"{self.layer}[{self.index}]"


@dataclass(frozen=True)
class Layer:
    """One layer (or Keras 3 raw op, or nested model) of a model config."""

    name: str
    class_name: str
    kind: LayerKind
    config: Mapping[str, Any]
    module: str | None = None
    registered_name: str | None = None
    build_config: Mapping[str, Any] | None = None
    weights: tuple[Weight, ...] = ()
    subgraph: ModelGraph | None = None
    node_count: int = 0
    depth: int | None = None
    json_path: str = ""
    key: str = field(init=False, compare=False)
    """The catalogue key (:func:`modelgraph.catalogue.key_of`), decided once when the layer is made
    (``dataclasses.replace`` makes a new layer, so a changed class gets its own key)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", key_of(self.class_name, self.kind, self.config))
        if self.subgraph is not None:
            # Like Keras's ``model.get_layer("inner").weights``: a nested model's weights are its
            # layers' weights, named by their path inside it (``inner_dense/kernel``).
            object.__setattr__(self, "weights", nested_weights(self.subgraph))

    @property
    def own_weights(self) -> tuple[Weight, ...]:
        """The weights stored for this layer itself: none for a nested model (its layers hold them)."""
        return () if self.subgraph is not None else self.weights

    def weight(self, name: str) -> Weight:
        """The weight with this canonical name; KeyError names the ones that exist."""
        for w in self.weights:
            if w.name == name:
                return w
        raise KeyError(f"layer '{self.name}' has no weight '{name}'; it has {[w.name for w in self.weights]}")

    @property
    def param_count(self) -> int:
        """Number of stored parameters, nested model weights included."""
        own = sum(w.size for w in self.own_weights)
        return own + (self.subgraph.param_count if self.subgraph is not None else 0)

    @property
    def trainable(self) -> bool:
        return bool(self.config.get("trainable", True))


def nested_weights(graph: ModelGraph) -> tuple[Weight, ...]:
    """Every weight of ``graph``'s layers (nested ones through their own lists), named
    ``layer/weight`` relative to ``graph``."""
    out: list[Weight] = []
    for lyr in graph.layers:
        out.extend(replace(w, name=f"{lyr.name}/{w.name}") for w in lyr.weights)
    return tuple(out)


@dataclass(frozen=True)
class ModelGraph:
    """A model: layers in Keras's order, nodes in topological order, inputs, outputs, depths.

    ``layers`` is ordered like Keras's ``model.layers`` (depth descending, ties by first visit
    from the outputs); layers that no output reaches come last with ``depth=None``.
    ``nodes`` is a topological order (every node after the nodes it consumes).
    """

    name: str
    class_name: str
    layers: tuple[Layer, ...]
    nodes: tuple[Node, ...]
    inputs: tuple[TensorRef, ...]
    outputs: tuple[TensorRef, ...]
    input_structure: Any = None
    output_structure: Any = None
    format: str = "unknown"
    keras_version: str | None = None
    source: str = ""
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    _layer_index: Mapping[str, Layer] = field(default_factory=dict, repr=False, compare=False)
    _node_index: Mapping[tuple[str, int], Node] = field(default_factory=dict, repr=False, compare=False)
    _nodes_by_layer: Mapping[str, tuple[Node, ...]] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_layer_index", MappingProxyType({lyr.name: lyr for lyr in self.layers}))
        object.__setattr__(self, "_node_index", MappingProxyType({n.key: n for n in self.nodes}))
        by_layer: dict[str, list[Node]] = {}
        for node in self.nodes:
            by_layer.setdefault(node.layer, []).append(node)
        ordered = {name: tuple(sorted(ns, key=lambda n: n.index)) for name, ns in by_layer.items()}
        object.__setattr__(self, "_nodes_by_layer", MappingProxyType(ordered))

    # --- lookups ------------------------------------------------------------------------------
    def layer(self, name: str) -> Layer:
        """The layer with this name; KeyError says which names exist when few do."""
        try:
            return self._layer_index[name]
        except KeyError:
            names = list(self._layer_index)
            hint = f"; layers are {names}" if len(names) <= 20 else f"; the model has {len(names)} layers"
            raise KeyError(f"no layer '{name}'{hint}") from None

    def has_layer(self, name: str) -> bool:
        return name in self._layer_index

    def node(self, layer: str, index: int = 0) -> Node:
        """The node (layer, index)."""
        return self._node_index[(layer, index)]

    def nodes_of(self, layer: str) -> list[Node]:
        """All nodes of one layer, by index."""
        return list(self._nodes_by_layer.get(layer, ()))

    # --- derived views --------------------------------------------------------------------------
    @property
    def input_names(self) -> list[str]:
        return [ref.layer for ref in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [ref.layer for ref in self.outputs]

    @property
    def keras_major(self) -> int:
        """Major Keras version that wrote the file (1, 2 or 3; 2 when unknown and list-form)."""
        return keras_major(self.keras_version)

    def layers_by_depth(self) -> dict[int, list[str]]:
        """``{depth: [layer names]}`` like Keras's ``_operations_by_depth`` (reachable layers only)."""
        result: dict[int, list[str]] = {}
        for lyr in self.layers:
            if lyr.depth is not None:
                result.setdefault(lyr.depth, []).append(lyr.name)
        return result

    def nodes_by_depth(self) -> dict[int, list[Node]]:
        """``{depth: [nodes]}`` like Keras's ``_nodes_by_depth``."""
        result: dict[int, list[Node]] = {}
        for node in self.nodes:
            if node.depth is not None:
                result.setdefault(node.depth, []).append(node)
        return result

    def walk(self, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Layer]]:
        """Every layer with its path of enclosing model names, nested models expanded (pre-order)."""
        for lyr in self.layers:
            yield (*prefix, lyr.name), lyr
            if lyr.subgraph is not None:
                yield from lyr.subgraph.walk((*prefix, lyr.name))

    @property
    def param_count(self) -> int:
        """Stored parameters of every layer, nested ones included (shared weights counted once, also
        an object used at several nesting levels: :mod:`modelgraph.sharing`)."""
        from modelgraph.sharing import repeated_objects

        total = sum(lyr.param_count for lyr in self.layers)
        for path in repeated_objects(self):
            total -= self.layer_at(path).param_count
        return total

    def layer_at(self, path: tuple[str, ...]) -> Layer:
        """The layer at a path of nested model names (``("outer_model", "dense")``)."""
        graph: ModelGraph = self
        for name in path[:-1]:
            sub = graph.layer(name).subgraph
            if sub is None:
                raise KeyError(f"layer '{name}' is not a nested model")
            graph = sub
        return graph.layer(path[-1])

    @property
    def has_weights(self) -> bool:
        return any(lyr.weights for _, lyr in self.walk())


def keras_major(version: str | None) -> int:
    """Parse the major version from a ``keras_version`` string ("2.15.0", "3.15.1", "2.2.4-tf")."""
    if not version:
        return 2
    head = version.strip().split(".", 1)[0]
    return int(head) if head.isdigit() else 2


def keras_version_tuple(version: str | None) -> tuple[int, int, int]:
    """``"2.15.0"`` -> ``(2, 15, 0)``; unknown parts are 0; a missing version reads as Keras 2."""
    if not version:
        return (2, 0, 0)
    parts: list[int] = []
    for piece in version.strip().split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit()) if piece else ""
        if not digits:
            break
        parts.append(int(digits[:6]))
    while len(parts) < 3:
        parts.append(0)
    return (parts[0], parts[1], parts[2])


# --- call structures and shapes -------------------------------------------------------------------


def map_structure(value: Any, fn: Callable[[Any], Any], is_leaf: Callable[[Any], bool]) -> Any:
    """Rebuild a call structure (lists, tuples, mappings as dicts) with ``fn`` applied to its leaves."""
    if is_leaf(value):
        return fn(value)
    if isinstance(value, list):
        return [map_structure(v, fn, is_leaf) for v in value]
    if isinstance(value, tuple):
        return tuple(map_structure(v, fn, is_leaf) for v in value)
    if isinstance(value, Mapping):
        return {k: map_structure(v, fn, is_leaf) for k, v in value.items()}
    return value


def _is_ref(value: Any) -> bool:
    return isinstance(value, TensorRef)


def map_refs(value: Any, fn: Callable[[TensorRef], Any]) -> Any:
    """Replace every :class:`TensorRef` in a call structure by ``fn(ref)``."""
    return map_structure(value, fn, _is_ref)


def tensor_refs(value: Any) -> list[TensorRef]:
    """Every :class:`TensorRef` in a call structure, in Keras's flatten order."""
    return [v for v in flatten_structure(value) if isinstance(v, TensorRef)]


def bind_model_inputs(model: ModelGraph, args: Sequence[Any], leaf: type) -> list[tuple[TensorRef, Any]]:
    """Pair a nested model's input tensors with the values one call of it passes (``leaf`` values:
    tensor refs for the runner, symbolic tensors for shape inference).

    A call that passes one mapping to a model whose inputs are a mapping binds them by key, as Keras
    does; any other call binds the flattened values in order. ValueError (a sentence fragment that
    follows the call's name) when the call passes no value for an input or a different count.
    """
    arg = args[0] if len(args) == 1 else list(args)
    if isinstance(arg, Mapping) and isinstance(model.input_structure, Mapping):
        pairs = []
        for key, ref in model.input_structure.items():
            if not isinstance(arg.get(key), leaf):
                raise ValueError(f"gives no tensor for input '{key}'")
            pairs.append((ref, arg[key]))
        return pairs
    flat = [v for v in flatten_structure(list(args)) if isinstance(v, leaf)]
    if len(flat) != len(model.inputs):
        raise ValueError(f"passes {len(flat)} tensor(s) to a model with {len(model.inputs)} input(s)")
    return list(zip(model.inputs, flat, strict=True))


def call_tensor_refs(
    args: Any, kwargs: Mapping[str, Any], kwarg_order: KwargOrder = "sorted"
) -> list[TensorRef]:
    """The tensors a call receives, in the order its Keras flattens them into the node's inputs.

    Positional arguments come first. ``"sorted"`` then takes the keyword arguments by sorted name,
    as Keras 3 (``tree.flatten((args, kwargs))``) and tf.keras up to 2.18 (``tf.nest.flatten``) do;
    ``"call"`` keeps them in the order they were passed (the order a Keras 2 config records them),
    as tf_keras 2.19+ does (``Node`` flattens ``(call_args, call_kwargs.values())``,
    keras-team/tf-keras@ea2cc87). Mappings nested inside an argument are taken by sorted key either way.
    """
    if kwarg_order == "call":
        return tensor_refs((args, list(kwargs.values())))
    return tensor_refs((args, kwargs))


def flatten_structure(value: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    """Flatten like Keras's ``tree.flatten``: lists/tuples in order, mapping values by sorted key.

    Iterative, so arbitrarily deep structures are safe; ``is_leaf`` keeps tuple-like leaves whole.
    """
    out: list[Any] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if is_leaf is not None and is_leaf(item):
            out.append(item)
        elif isinstance(item, list | tuple):
            stack.extend(reversed(item))
        elif isinstance(item, Mapping):
            stack.extend(item[k] for k in sorted(item, key=str, reverse=True))
        else:
            out.append(item)
    return out


def format_shape(shape: Any, unknown: str = "?") -> str:
    """``(None, 8)`` as Keras prints it (``(8,)`` for one dimension); ``unknown`` for an unknown rank."""
    if shape is None:
        return unknown
    dims = ", ".join("None" if d is None else str(d) for d in shape)
    return f"({dims},)" if len(shape) == 1 else f"({dims})"
