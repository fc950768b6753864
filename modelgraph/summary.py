"""The inspect report: Keras's ``summary()`` as data (layers, shapes, params, MACs, depths, wiring)."""

from __future__ import annotations

from typing import Any

from modelgraph._gc import gc_paused
from modelgraph._version import __version__
from modelgraph.graph import Layer, ModelGraph, TensorRef
from modelgraph.schemas.reports import InspectReport, LayerInfo, NodeInfo, TensorInfo, Totals
from modelgraph.shapes import ShapeResult, infer_shapes
from modelgraph.stats import layer_stats, model_totals


def summarize(graph: ModelGraph, expand_nested: bool = False) -> InspectReport:
    """Build the inspect report of a graph; nested models' layers are listed when ``expand_nested``."""
    with gc_paused():
        return _summarize(graph, expand_nested)


def _summarize(graph: ModelGraph, expand_nested: bool) -> InspectReport:
    shapes = infer_shapes(graph)
    rows = layer_stats(graph, shapes)
    totals = model_totals(graph, shapes, rows)
    owners = _owners(graph)
    layers = []
    for row in rows:
        if len(row.path) > 1 and not expand_nested:
            continue
        owner, layer = owners[row.path]
        first_call = row.output_shapes[0] if row.output_shapes else []
        layers.append(
            LayerInfo(
                name=layer.name,
                path=list(row.path),
                class_name=layer.class_name,
                kind=layer.kind,
                depth=layer.depth,
                params=row.params or 0,
                trainable_params=row.trainable_params or 0,
                non_trainable_params=row.non_trainable_params or 0,
                macs=row.macs,
                output_shapes=[_shape(s) for s in first_call],
                inbound=[str(ref) for node in owner.nodes_of(layer.name) for ref in node.inputs],
                nodes=layer.node_count,
            )
        )
    notes = [str(n) for n in graph.metadata.get("weight_notes") or []]
    if graph.metadata.get("weights_unavailable"):
        notes.append(str(graph.metadata["weights_unavailable"]))
    for problem in shapes.problems:
        if problem.severity == "error":
            notes.append(f"shape: layer '{problem.layer}' node {problem.node_index}: {problem.message}")
    if totals.unknown_param_layers:
        notes.append(f"parameters unknown for: {', '.join(totals.unknown_param_layers[:10])}")
    return InspectReport(
        tool_version=__version__,
        source=graph.source,
        format=graph.format,
        keras_version=graph.keras_version,
        name=graph.name,
        class_name=graph.class_name,
        has_weights=graph.has_weights,
        inputs=[_tensor(ref, shapes) for ref in graph.inputs],
        outputs=[_tensor(ref, shapes) for ref in graph.outputs],
        layers=layers,
        nodes=[
            NodeInfo(layer=n.layer, index=n.index, depth=n.depth, inputs=[str(r) for r in n.inputs])
            for n in graph.nodes
        ],
        totals=Totals(
            total_params=totals.total_params,
            trainable_params=totals.trainable_params,
            non_trainable_params=totals.non_trainable_params,
            weight_bytes=totals.weight_bytes,
            weight_bytes_by_dtype=dict(totals.weight_bytes_by_dtype),
            macs=totals.total_macs if not totals.unknown_mac_layers else None,
            layers=len(graph.layers),
            nodes=len(graph.nodes),
        ),
        notes=notes,
    )


def _owners(graph: ModelGraph) -> dict[tuple[str, ...], tuple[ModelGraph, Layer]]:
    """Each layer path with the graph that owns the layer (for its nodes)."""
    owners: dict[tuple[str, ...], tuple[ModelGraph, Layer]] = {}
    stack: list[tuple[ModelGraph, tuple[str, ...]]] = [(graph, ())]
    while stack:
        g, prefix = stack.pop()
        for layer in g.layers:
            path = (*prefix, layer.name)
            owners[path] = (g, layer)
            if layer.subgraph is not None:
                stack.append((layer.subgraph, path))
    return owners


def _shape(shape: Any) -> list[int | None] | None:
    return None if shape is None else [None if d is None else int(d) for d in shape]


def _tensor(ref: TensorRef, shapes: ShapeResult) -> TensorInfo:
    outs = shapes.outputs.get(ref.node_key) or []
    dtypes = shapes.dtypes.get(ref.node_key) or []
    shape = outs[ref.tensor_index] if ref.tensor_index < len(outs) else None
    dtype = dtypes[ref.tensor_index] if ref.tensor_index < len(dtypes) else None
    return TensorInfo(name=ref.layer, ref=str(ref), shape=_shape(shape), dtype=dtype)
