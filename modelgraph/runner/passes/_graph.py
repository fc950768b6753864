"""Graph helpers the fusion passes share: who reads a tensor, which calls are plain, one pass's edits."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from modelgraph import catalogue
from modelgraph.catalogue import Fusion
from modelgraph.graph import Layer, ModelGraph, Node, TensorRef, map_refs
from modelgraph.layer_params import plain_ints
from modelgraph.runner.activations import activation_name
from modelgraph.runner.fast import fused  # noqa: F401 - registers the merged steps fresh_output asks about
from modelgraph.runner.registry import returns_fresh_array

FUSABLE_ACTIVATIONS = frozenset({"relu", "relu6"})

_NO_FUSION = Fusion()


def fusion(layer: Layer) -> Fusion:
    """What the fusion passes may merge ``layer`` with: its catalogue entry's ``fusion`` (nothing for
    a class the catalogue does not know, a Keras 3 op, a nested model or a merged step)."""
    spec = catalogue.spec_for(layer.key)
    return spec.fusion if spec is not None and spec.fusion is not None else _NO_FUSION


def producer_axis(layer: Layer) -> int | None:
    """The channel axis of a layer linear in its kernel and bias that can absorb a following
    BatchNormalization and activation (counted with the batch axis), else None."""
    return fusion(layer).channel_axis


@dataclass(frozen=True)
class Readers:
    """Who reads each node's outputs in a graph, and which nodes' outputs are the model's outputs:
    what every pass asks before merging a node's output away."""

    graph: ModelGraph
    of_node: Mapping[tuple[str, int], list[Node]]
    outputs: frozenset[tuple[str, int]]

    @classmethod
    def of(cls, graph: ModelGraph) -> Readers:
        table: dict[tuple[str, int], list[Node]] = {}
        for node in graph.nodes:
            for ref in node.inputs:
                table.setdefault(ref.node_key, []).append(node)
        return cls(graph, table, frozenset(ref.node_key for ref in graph.outputs))

    def single(self, key: tuple[str, int]) -> Node | None:
        """The one node reading node ``key``'s output, when exactly one node reads it once and no
        model output is it."""
        readers = self.every(key)
        return readers[0] if readers is not None and len(readers) == 1 else None

    def every(self, key: tuple[str, int]) -> list[Node] | None:
        """The nodes reading node ``key``'s output, when each reads it as its only input and its
        layer is called once, and no model output is it; None otherwise."""
        readers = self.of_node.get(key, [])
        if key in self.outputs or not readers:
            return None
        for reader in readers:
            if len(reader.inputs) != 1 or self.graph.layer(reader.layer).node_count != 1:
                return None
        return readers

    def only(self, node: Node, ref: TensorRef) -> bool:
        """Whether ``node`` is the only node reading ``ref``'s node and no model output is it."""
        readers = [n.key for n in self.of_node.get(ref.node_key, [])]
        return ref.node_key not in self.outputs and readers == [node.key]


class Rewrite:
    """One pass's edits to a graph: the layers it replaces (a merged step under one of its layers'
    names), the layers it removes and the tensor standing for each removed output; ``result()``
    applies them. What every pass shares, so a pass says only what it matches and what it merges."""

    def __init__(self, graph: ModelGraph) -> None:
        self.graph = graph
        self.readers = Readers.of(graph)
        self._layers = {lyr.name: lyr for lyr in graph.layers}
        self._producers = {node.layer: node for node in graph.nodes}
        self._removed: dict[str, TensorRef | None] = {}
        self._calls: dict[str, Node] = {}
        self._edited = False

    @classmethod
    def of(cls, graph: ModelGraph) -> Rewrite:
        """A rewrite of ``graph`` with no edits yet."""
        return cls(graph)

    def layer(self, name: str) -> Layer:
        """The layer named ``name`` as the rewrite has it so far (a merged step once replaced)."""
        return self._layers[name]

    def producer(self, name: str) -> Node | None:
        """The node calling layer ``name`` (its last call when there are several), None for none."""
        return self._producers.get(name)

    def removed(self, name: str) -> bool:
        """Whether an earlier merge of this pass removed layer ``name``."""
        return name in self._removed

    def reader(self, node: Node) -> Node | None:
        """The one node reading ``node``'s output, as its only input and plainly (:func:`plain_call`),
        when nothing else reads it, its layer is called once and it is no model output: the link a
        merge may take away."""
        followers = self.all_readers(node)
        return followers[0] if followers is not None and len(followers) == 1 else None

    def all_readers(self, node: Node) -> list[Node] | None:
        """Every node reading ``node``'s output, when each reads it as its only input and plainly,
        its layer is called once and no model output is it (None otherwise): the links a merge into
        every reader may take away."""
        followers = self.readers.every(node.key)
        if followers is None or not all(plain_call(f) for f in followers):
            return None
        return followers

    def replace_layer(self, layer: Layer, call: Node | None = None) -> None:
        """Put ``layer`` in place of the layer of its name; ``call``: the node whose call (args,
        kwargs, inputs) its node takes from now on (a merged step reads its chain's input)."""
        self._layers[layer.name] = layer
        self._edited = True
        if call is not None:
            self._calls[layer.name] = call

    def remove(self, name: str, stands_for: TensorRef | None = None) -> None:
        """Drop layer ``name`` and its node; every reference to its output then reads ``stands_for``
        (None: nothing outside the merged step reads it)."""
        self._removed[name] = stands_for
        self._edited = True

    def result(self) -> ModelGraph:
        """The graph with the edits applied (``graph`` itself when there were none)."""
        if not self._edited:
            return self.graph
        return _drop(self.graph, self._layers, self._removed, self._calls)


def share_calls(graph: ModelGraph, signature: Callable[[Layer, Node], Hashable | None]) -> ModelGraph:
    """``graph`` with one call kept per computation: among plain calls (:func:`plain_call`, none a
    model output) whose ``signature(layer, node)`` is the same (None: not shareable), the first in
    graph order stays and the others' readers read its output. ``signature`` must name the input
    tensor and everything that decides the output, and only layers called once may have one."""
    rewrite = Rewrite.of(graph)
    kept: dict[Hashable, str] = {}
    for node in graph.nodes:
        if not plain_call(node) or node.key in rewrite.readers.outputs:
            continue
        key = signature(rewrite.layer(node.layer), node)
        if key is None:
            continue
        first = kept.setdefault(key, node.layer)
        if first != node.layer:
            rewrite.remove(node.layer, TensorRef(first, 0, 0))
    return rewrite.result()


def _drop(
    graph: ModelGraph,
    layers: Mapping[str, Layer],
    removed: Mapping[str, TensorRef | None],
    calls: Mapping[str, Node],
) -> ModelGraph:
    """``graph`` with ``layers`` (by name) in place of its own, without the ``removed`` layers and their
    nodes, every reference to a removed layer's output replaced by the tensor that stands for it. A
    layer named in ``calls`` takes that node's call (args, kwargs, inputs)."""

    def rewire(ref: TensorRef) -> TensorRef:
        if ref.node_index != 0 or ref.tensor_index != 0:
            return ref
        return removed.get(ref.layer) or ref

    nodes = []
    for node in graph.nodes:
        if node.layer in removed:
            continue
        source = calls.get(node.layer, node)
        args = map_refs(source.args, rewire)
        kwargs = map_refs(dict(source.kwargs), rewire)
        inputs = tuple(rewire(r) for r in source.inputs)
        nodes.append(replace(node, args=tuple(args), kwargs=MappingProxyType(kwargs), inputs=inputs))
    return replace(
        graph,
        layers=tuple(layers[lyr.name] for lyr in graph.layers if lyr.name not in removed),
        nodes=tuple(nodes),
        inputs=tuple(rewire(r) for r in graph.inputs),
        outputs=tuple(rewire(r) for r in graph.outputs),
        input_structure=map_refs(graph.input_structure, rewire),
        output_structure=map_refs(graph.output_structure, rewire),
    )


def is_float32(layer: Layer) -> bool:
    dtype = layer.config.get("dtype", "float32")
    if isinstance(dtype, Mapping):
        inner = dtype.get("config")
        dtype = inner.get("name") if isinstance(inner, Mapping) else None
    return dtype in (None, "float32")


def inert_kwargs(node: Node) -> bool:
    """No keyword argument that could change the call (only None values and ``training=False``)."""
    return all(v is None or (k == "training" and v is False) for k, v in node.kwargs.items())


def plain_call(node: Node) -> bool:
    """A call with one positional tensor and no training/mask arguments that could change it."""
    return inert_kwargs(node) and len(node.args) == 1 and isinstance(node.args[0], TensorRef)


def single_call_float32(layer: Layer) -> bool:
    """A plain float32 layer (no nested model) called exactly once: its one output can be merged away."""
    return layer.kind == "layer" and layer.node_count == 1 and layer.subgraph is None and is_float32(layer)


def number(value: object) -> float | None:
    """A config value as a float when it is a plain int or float (not a bool), else None: the
    fusion passes only merge layers whose options they can read."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def relu_name(layer: Layer, activations: frozenset[str] = FUSABLE_ACTIVATIONS) -> str | None:
    """The activation in ``activations`` (``relu`` or ``relu6`` by default) that the layer is exactly
    (float32, called once; its entry's ``fusion.activation``: an ``Activation`` layer, a plain
    ``ReLU``), else None."""
    if not is_float32(layer) or layer.node_count != 1:
        return None
    amounts_to = fusion(layer).activation
    value = amounts_to(layer.config) if amounts_to is not None else None
    name = activation_name(value) if value is not None else None
    return name if name in activations else None


#: An int or a list of ints as a tuple (None for anything else): how the passes read sizes.
ints = plain_ints


def zero_pads(layer: Layer) -> list[list[int]] | None:
    """The explicit pads ``[[top, bottom], [left, right]]`` of a channels-last float32 layer called
    once whose entry's ``fusion.zero_padding`` reads them (ZeroPadding2D), else None."""
    pads_of = fusion(layer).zero_padding
    if not (
        pads_of is not None
        and single_call_float32(layer)
        and layer.config.get("data_format", "channels_last") in (None, "channels_last")
    ):
        return None
    return pads_of(layer.config)


def plain_add(layer: Layer, node: Node) -> bool:
    """A float32 layer summing two or more tensors (its entry's ``fusion.sums``: Add), called once
    with one list of tensors and nothing else."""
    return (
        fusion(layer).sums
        and single_call_float32(layer)
        and len(node.args) == 1
        and isinstance(node.args[0], list | tuple)
        and len(node.args[0]) >= 2
        and all(isinstance(a, TensorRef) for a in node.args[0])
        and inert_kwargs(node)
    )


def fresh_output(layer: Layer) -> bool:
    """Whether the layer's kernel always returns a new array (never a view of an input), so its
    output may be overwritten by its only reader: a producer (``fusion.channel_axis``) or a merged
    conv step."""
    return producer_axis(layer) is not None or returns_fresh_array(layer.class_name)
