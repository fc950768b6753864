"""Graph helpers the fusion passes share: who reads a tensor, which calls are plain, dropping merged layers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from modelgraph.graph import Layer, ModelGraph, Node, TensorRef, map_refs
from modelgraph.runner.activations import activation_name
from modelgraph.runner.fast.fused import CONV_RESIDUAL, INVERTED_BOTTLENECK, ZERO_PADDED

PRODUCERS = frozenset(
    {
        "Conv1D",
        "Conv2D",
        "Conv3D",
        "DepthwiseConv1D",
        "DepthwiseConv2D",
        "SeparableConv1D",
        "SeparableConv2D",
        "Dense",
    }
)


DEPTHWISE = frozenset({"DepthwiseConv1D", "DepthwiseConv2D"})


FUSABLE_ACTIVATIONS = frozenset({"relu", "relu6"})


def drop(
    graph: ModelGraph,
    layers: Mapping[str, Layer],
    removed: Mapping[str, TensorRef | None],
    calls: Mapping[str, Node] | None = None,
) -> ModelGraph:
    """``graph`` with ``layers`` (by name) in place of its own, without the ``removed`` layers and their
    nodes, every reference to a removed layer's output replaced by the tensor that stands for it (None:
    nothing outside the merged step reads it). A layer named in ``calls`` takes that node's call
    (args, kwargs, inputs): a merged step reads its chain's input."""

    def rewire(ref: TensorRef) -> TensorRef:
        if ref.node_index != 0 or ref.tensor_index != 0:
            return ref
        return removed.get(ref.layer) or ref

    nodes = []
    for node in graph.nodes:
        if node.layer in removed:
            continue
        source = (calls or {}).get(node.layer, node)
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
        readers = self.of_node.get(key, [])
        if key in self.outputs or len(readers) != 1:
            return None
        reader = readers[0]
        if len(reader.inputs) != 1 or self.graph.layer(reader.layer).node_count != 1:
            return None
        return reader

    def only(self, node: Node, ref: TensorRef) -> bool:
        """Whether ``node`` is the only node reading ``ref``'s node and no model output is it."""
        readers = [n.key for n in self.of_node.get(ref.node_key, [])]
        return ref.node_key not in self.outputs and readers == [node.key]


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
    """``relu`` or ``relu6`` when the layer is exactly that activation (and float32), else None; an
    ``Activation`` layer's name is accepted when it is in ``activations``."""
    if not is_float32(layer) or layer.node_count != 1:
        return None
    if layer.class_name == "Activation":
        name = activation_name(layer.config.get("activation"))
        return name if name in activations else None
    if layer.class_name == "ReLU":
        slope = layer.config.get("negative_slope", layer.config.get("alpha", 0.0)) or 0.0
        threshold = layer.config.get("threshold", 0.0) or 0.0
        max_value = layer.config.get("max_value")
        if slope != 0.0 or threshold != 0.0:
            return None
        if max_value is None:
            return "relu"
        # Only a plain 6 fuses; anything else (another number, a malformed value) is left to the
        # ReLU kernel, which runs or refuses it.
        return "relu6" if number(max_value) == 6.0 else None
    return None


def ints(value: object) -> tuple[int, ...] | None:
    """An int or a list of ints as a tuple (None for anything else)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, list | tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)
    return None


def pads_2d(value: object) -> list[list[int]] | None:
    """ZeroPadding2D's ``padding`` as ``[[top, bottom], [left, right]]`` (None if malformed)."""
    flat = ints(value)
    if flat is not None and len(flat) == 1 and flat[0] >= 0:
        return [[flat[0]] * 2, [flat[0]] * 2]
    if flat is not None and len(flat) == 2 and min(flat) >= 0:
        return [[flat[0]] * 2, [flat[1]] * 2]
    if isinstance(value, list | tuple) and len(value) == 2:
        pairs = [ints(v) for v in value]
        if all(p is not None and len(p) == 2 and min(p) >= 0 for p in pairs):
            return [list(p) for p in pairs]  # type: ignore[arg-type]
    return None


def zero_padding_2d_pads(layer: Layer) -> list[list[int]] | None:
    """The pads of a channels-last float32 ``ZeroPadding2D`` called once (see ``pads_2d``), else None."""
    if not (
        layer.class_name == "ZeroPadding2D"
        and single_call_float32(layer)
        and layer.config.get("data_format", "channels_last") in (None, "channels_last")
    ):
        return None
    return pads_2d(layer.config.get("padding", 1))


def plain_add(layer: Layer, node: Node) -> bool:
    return (
        layer.class_name == "Add"
        and single_call_float32(layer)
        and len(node.args) == 1
        and isinstance(node.args[0], list | tuple)
        and len(node.args[0]) >= 2
        and all(isinstance(a, TensorRef) for a in node.args[0])
        and inert_kwargs(node)
    )


# Kernels that always return a new array (never a view of an input): their output may be overwritten
# by its only reader.
FRESH_OUTPUTS = PRODUCERS | {INVERTED_BOTTLENECK, CONV_RESIDUAL, ZERO_PADDED}
