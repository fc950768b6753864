"""``extract(graph, outputs, inputs)``: the sub-model between named tensors, like Polygraphy's
``surgeon extract`` for Keras.

Names are ``layer`` (its first call's first output) or ``layer[node][tensor]``. The sub-model
holds every call needed to compute the outputs from the inputs: where the graph is cut at an
``--inputs`` tensor a new ``InputLayer`` takes its place (shape and dtype from shape inference;
it takes the layer's name when that layer is not itself kept); model inputs the outputs still
need stay inputs. A shared layer keeps only the calls the sub-model uses, renumbered in order
(as Keras compacts them). Nested models are kept whole: a name inside one (``inner/dense``) is
a usage error naming the nested model to cut at instead. Weights are carried unchanged.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from modelgraph.errors import UsageError
from modelgraph.graph import Layer, ModelGraph, Node, TensorRef, map_refs
from modelgraph.shapes import infer_shapes
from modelgraph.topology import map_graph

_REF = re.compile(r"^(?P<layer>.+?)\[(?P<node>\d+)\]\[(?P<tensor>\d+)\]$")


def parse_ref(graph: ModelGraph, text: str) -> TensorRef:
    """``layer`` or ``layer[node][tensor]`` -> a tensor of ``graph``; a usage error says what exists."""
    match = _REF.match(text)
    name = match.group("layer") if match else text
    node = int(match.group("node")) if match else 0
    tensor = int(match.group("tensor")) if match else 0
    if not graph.has_layer(name):
        head = name.split("/", 1)[0]
        if "/" in name and graph.has_layer(head) and graph.layer(head).subgraph is not None:
            raise UsageError(
                f"'{text}' is inside nested model '{head}'; nested models are kept whole: name '{head}' instead"
            )
        names = [lyr.name for lyr in graph.layers]
        close = difflib.get_close_matches(name, names, n=3)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise UsageError(f"unknown layer '{name}'{hint}")
    calls = graph.nodes_of(name)
    if not 0 <= node < len(calls):
        raise UsageError(f"layer '{name}' has {len(calls)} call(s); there is no call [{node}]")
    return TensorRef(name, node, tensor)


def extract(graph: ModelGraph, outputs: list[str], inputs: list[str] | None = None) -> ModelGraph:
    """The sub-model of ``graph`` computing ``outputs`` from ``inputs`` (names as in :func:`parse_ref`)."""
    if not outputs:
        raise UsageError("extract needs at least one output")
    out_refs = [parse_ref(graph, text) for text in outputs]
    cut_refs = [parse_ref(graph, text) for text in inputs or []]
    for ref, text in zip(out_refs, outputs, strict=True):
        if ref in cut_refs:
            raise UsageError(f"'{text}' is both an input and an output")
    shapes = infer_shapes(graph)
    kept = _needed_nodes(graph, out_refs, set(cut_refs))
    cut_names = _cut_names(graph, cut_refs, {key[0] for key in kept})
    used_cuts = {ref for key in kept for ref in graph.node(*key).inputs if ref in cut_names}
    unused = [text for ref, text in zip(cut_refs, inputs or [], strict=True) if ref not in used_cuts]
    if unused:
        raise UsageError(f"input(s) {unused} do not feed the outputs {outputs}")

    renumber: dict[tuple[str, int], int] = {}
    per_layer: dict[str, list[int]] = {}
    for layer_name, index in sorted(kept):
        per_layer.setdefault(layer_name, []).append(index)
    for layer_name, indices in per_layer.items():
        for new, old in enumerate(indices):
            renumber[(layer_name, old)] = new

    def move(ref: TensorRef) -> TensorRef:
        if ref in cut_names:
            return TensorRef(cut_names[ref], 0, 0)
        return TensorRef(ref.layer, renumber[ref.node_key], ref.tensor_index)

    new_nodes: dict[tuple[str, int], Node] = {}
    for key in kept:
        node = graph.node(*key)
        new_key = (node.layer, renumber[key])
        new_nodes[new_key] = Node(
            node.layer,
            new_key[1],
            tuple(map_refs(list(node.args), move)),
            MappingProxyType(map_refs(dict(node.kwargs), move)),
            tuple(move(r) for r in node.inputs),
        )
    input_layers: dict[str, Layer] = {}
    for ref, name in cut_names.items():
        if ref not in used_cuts:
            continue
        input_layers[name] = _input_layer(graph, name, shapes.shape(ref), shapes.dtype(ref))
        new_nodes[(name, 0)] = Node(name, 0, (), MappingProxyType({}), ())
    original_inputs = [r for r in graph.inputs if r.node_key in kept]
    sub_inputs = [*(TensorRef(n, 0, 0) for n in input_layers), *original_inputs]
    sub_outputs = [move(r) for r in out_refs]

    parents = {key: [r.node_key for r in node.inputs] for key, node in new_nodes.items()}
    topo = map_graph([r.node_key for r in sub_outputs], parents.__getitem__, [r.node_key for r in sub_inputs])
    layers: list[Layer] = []
    for name in topo.layer_order:
        base = input_layers[name] if name in input_layers else graph.layer(name)
        count = len(per_layer.get(name, [0]))
        layers.append(replace(base, depth=topo.layer_depths[name], node_count=count))
    nodes = [replace(new_nodes[key], depth=topo.node_depths[key]) for key in topo.node_order]
    return ModelGraph(
        name=graph.name,
        class_name="Functional",
        layers=tuple(layers),
        nodes=tuple(nodes),
        inputs=tuple(sub_inputs),
        outputs=tuple(sub_outputs),
        input_structure=list(sub_inputs),
        output_structure=list(sub_outputs),
        format=graph.format,
        keras_version=graph.keras_version,
        source=graph.source,
    )


def _cut_names(graph: ModelGraph, cuts: list[TensorRef], kept_layers: set[str]) -> dict[TensorRef, str]:
    """A name for the InputLayer replacing each cut tensor: the producing layer's own name when the
    sub-model does not keep that layer, else ``layer_N_T`` (made unique)."""
    taken = {lyr.name for lyr in graph.layers}
    names: dict[TensorRef, str] = {}
    for ref in cuts:
        own = ref.layer not in kept_layers and ref.layer not in names.values()
        name = ref.layer if own else f"{ref.layer}_{ref.node_index}_{ref.tensor_index}"
        if not own:
            base, n = name, 1
            while name in taken:
                name, n = f"{base}_{n}", n + 1
        taken.add(name)
        names[ref] = name
    return names


def _needed_nodes(graph: ModelGraph, outputs: list[TensorRef], cuts: set[TensorRef]) -> set[tuple[str, int]]:
    kept: set[tuple[str, int]] = set()
    stack = [r.node_key for r in outputs]
    while stack:
        key = stack.pop()
        if key in kept:
            continue
        kept.add(key)
        for ref in graph.node(*key).inputs:
            if ref not in cuts:
                stack.append(ref.node_key)
    return kept


def _input_layer(graph: ModelGraph, name: str, shape: Any, dtype: str | None) -> Layer:
    if shape is None:
        raise UsageError(f"the shape of the tensor cut at '{name}' is unknown; cut elsewhere")
    key = "batch_shape" if graph.keras_major >= 3 else "batch_input_shape"
    config = {key: list(shape), "dtype": dtype or "float32", "sparse": False, "ragged": False, "name": name}
    return Layer(
        name=name, class_name="InputLayer", kind="input", config=MappingProxyType(config), node_count=1
    )
