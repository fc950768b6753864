"""The inspect report: Keras's ``summary()`` as data (layers, shapes, params, MACs, depths, wiring)."""

from __future__ import annotations

from typing import Any

from modelgraph._gc import gc_paused
from modelgraph._version import __version__
from modelgraph.graph import Layer, ModelGraph, TensorRef
from modelgraph.schemas.reports import InspectReport, LayerInfo, NodeInfo, TensorInfo, Totals
from modelgraph.shapes import ShapeResult, infer_shapes
from modelgraph.stats import layer_stats, model_totals


def summarize(
    graph: ModelGraph,
    expand_nested: bool = False,
    *,
    depth: int | None = None,
    pattern: str | None = None,
    totals_only: bool = False,
) -> InspectReport:
    """Build the inspect report of a graph; nested models' layers are listed when ``expand_nested``.

    ``depth`` keeps the layers at most that many levels deep (1: the top-level layers; implies
    ``expand_nested`` above 1); ``pattern`` keeps the layers whose name, path or class matches it
    (:func:`matches`; nested layers included); ``totals_only`` keeps none. The totals always cover the
    whole model; ``shown_layers`` then says how many rows are listed.
    """
    with gc_paused():
        return _summarize(graph, expand_nested, depth, pattern, totals_only)


def matches(pattern: str, name: str, path: tuple[str, ...], class_name: str) -> bool:
    """Whether a layer matches an ``inspect --filter``: a glob (``*``, ``?``, ``[``) against its name,
    path or class, else a substring of any of them; case-insensitive either way."""
    import fnmatch

    needle = pattern.lower()
    fields = (name.lower(), "/".join(path).lower(), class_name.lower())
    if any(ch in pattern for ch in "*?["):
        return any(fnmatch.fnmatchcase(f, needle) for f in fields)
    return any(needle in f for f in fields)


def _summarize(
    graph: ModelGraph, expand_nested: bool, depth: int | None, pattern: str | None, totals_only: bool
) -> InspectReport:
    shapes = infer_shapes(graph)
    rows = layer_stats(graph, shapes)
    totals = model_totals(graph, shapes, rows)
    owners = _owners(graph)
    levels = depth if depth is not None else (None if expand_nested or pattern else 1)
    layers = []
    frozen: set[tuple[str, ...]] = set()
    for row in rows:
        owner, layer = owners[row.path]
        if not layer.trainable or row.path[:-1] in frozen:
            frozen.add(row.path)
        if totals_only or (levels is not None and len(row.path) > levels):
            continue
        if pattern and not matches(pattern, layer.name, row.path, layer.class_name):
            continue
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
                trainable=row.path not in frozen,
                dtype=_first_dtype(shapes, row.path),
                output_bytes=row.output_bytes,
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
            activation_bytes=None if totals.unknown_activation_layers else totals.activation_bytes,
            stored_bytes_by_dtype=_stored_bytes(graph, totals.weight_bytes_by_dtype),
        ),
        notes=notes,
        shown_layers=len(layers) if (totals_only or pattern or depth is not None) else None,
    )


def _first_dtype(shapes: ShapeResult, path: tuple[str, ...]) -> str | None:
    """The dtype of the first output of the first call of the layer at ``path`` (nested: first calls)."""
    result: ShapeResult | None = shapes
    for name in path[:-1]:
        result = result.nested.get((name, 0)) if result is not None else None
    if result is None:
        return None
    dtypes = result.dtypes.get((path[-1], 0)) or []
    return dtypes[0] if dtypes else None


def _stored_bytes(graph: ModelGraph, in_memory: dict[str, int]) -> dict[str, int] | None:
    """Bytes on disk by stored dtype when the loader recorded them and they differ from the weights'
    in-memory dtypes (TF.js quantized weights are stored as uint8/uint16/float16)."""
    stored = graph.metadata.get("stored_bytes_by_dtype")
    if not stored or dict(stored) == dict(in_memory):
        return None
    return {str(k): int(v) for k, v in sorted(stored.items())}


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
