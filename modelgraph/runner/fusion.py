"""Inference fusion: rewrite the graph the runner executes so that fewer passes go over memory.

A rewrite of the :class:`ModelGraph` the runner executes (the loaded graph is not changed), in five
passes:

1. ``Conv*/DepthwiseConv*/Dense (linear) -> BatchNormalization (inference) -> ReLU / Activation``
   becomes one kernel whose weights are ``kernel * s`` and ``(bias - mean) * s + beta`` with
   ``s = gamma / sqrt(moving_variance + epsilon)``, and whose fused activation is the ReLU. This is
   what Keras's own backends do at inference; it saves two full passes over each activation. Folded
   weights are computed in float64 and rounded once to float32, so results stay within float32
   tolerance of the unfused computation.
2. ``[1x1 expand ->] [pad ->] depthwise -> 1x1 project`` becomes one inverted-bottleneck step run
   band by band in cache (``kernels.fused``).
3. ``Add(a, b) [-> ReLU]`` merges into the linear Conv2D or inverted bottleneck producing ``a``: the
   sum and activation run in its epilogue (``modelgraph/ConvResidual``).
4. ``ZeroPadding2D -> Conv2D / DepthwiseConv2D / MaxPooling2D`` becomes one step that pads as it
   reads (``modelgraph/ZeroPadded``).
5. Any other ``Add -> ReLU`` becomes one chunked step (``modelgraph/AddActivation``).

A link is fused only when nothing else can observe the intermediate tensor: the producer and the
consumer each have one call, the intermediate feeds exactly that one consumer and is no model
output, the normalised axis is the last (channel) axis, every layer computes in float32, and no
call forces ``training=True`` or passes a mask. Callers that want intermediates run the unfused
graph.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType

import numpy as np

from modelgraph.graph import Layer, ModelGraph, Node, TensorRef, Weight, map_refs
from modelgraph.runner.activations import activation_name
from modelgraph.runner.fast.fused import ADD_ACTIVATION, CONV_RESIDUAL, INVERTED_BOTTLENECK, ZERO_PADDED
from modelgraph.runner.kernels._conv_utils import depthwise_weight_name

_PRODUCERS = frozenset({"Conv1D", "Conv2D", "Conv3D", "DepthwiseConv1D", "DepthwiseConv2D", "Dense"})
_DEPTHWISE = frozenset({"DepthwiseConv1D", "DepthwiseConv2D"})
_FUSABLE_ACTIVATIONS = frozenset({"relu", "relu6"})


def fuse(graph: ModelGraph) -> ModelGraph:
    """The graph with every fusable Conv/Dense -> BatchNormalization -> ReLU chain folded, every
    inverted bottleneck merged into one step, every residual sum merged into the conv or bottleneck
    feeding it, and every other Add -> ReLU merged (recursively, into nested models)."""
    merged = _merge_residual_sums(_merge_bottlenecks(_fold_batchnorms(graph)))
    return _merge_add_activations(_fold_zero_paddings(merged))


def _fold_batchnorms(graph: ModelGraph) -> ModelGraph:
    layers = {lyr.name: lyr for lyr in graph.layers}
    for name, layer in layers.items():
        if layer.subgraph is not None:
            layers[name] = replace(layer, subgraph=fuse(layer.subgraph))
    consumers = _consumers(graph)
    outputs = {ref.node_key for ref in graph.outputs}
    removed: dict[str, TensorRef] = {}  # fused-away layer -> the tensor that now stands for its output

    for node in graph.nodes:
        producer = layers.get(node.layer)
        if producer is None or not _can_produce(producer, node):
            continue
        current = producer
        tail = node.key
        follower = _single_consumer(graph, consumers, outputs, tail)
        if follower is not None and layers[follower.layer].class_name == "BatchNormalization":
            bn = layers[follower.layer]
            folded = _fold_batchnorm(current, bn, _rank(current))
            if folded is not None and _plain_call(follower):
                current = folded
                removed[bn.name] = TensorRef(producer.name, node.index, 0)
                tail = follower.key
                follower = _single_consumer(graph, consumers, outputs, tail)
        if follower is not None:
            name = _relu_name(layers[follower.layer]) if _plain_call(follower) else None
            if name is not None and activation_name(current.config.get("activation")) == "linear":
                config = dict(current.config)
                config["activation"] = name
                current = replace(current, config=MappingProxyType(config))
                removed[follower.layer] = TensorRef(producer.name, node.index, 0)
        if current is not producer:
            layers[producer.name] = current
    if not removed:
        return replace(graph, layers=tuple(layers[lyr.name] for lyr in graph.layers))
    return _drop(graph, layers, removed)


def _drop(
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


def _consumers(graph: ModelGraph) -> dict[tuple[str, int], list[Node]]:
    table: dict[tuple[str, int], list[Node]] = {}
    for node in graph.nodes:
        for ref in node.inputs:
            table.setdefault(ref.node_key, []).append(node)
    return table


def _single_consumer(
    graph: ModelGraph,
    consumers: Mapping[tuple[str, int], list[Node]],
    outputs: set[tuple[str, int]],
    key: tuple[str, int],
) -> Node | None:
    """The one node reading node ``key``'s output, when exactly one node reads it once and no model output is it."""
    readers = consumers.get(key, [])
    if key in outputs or len(readers) != 1:
        return None
    reader = readers[0]
    if len(reader.inputs) != 1 or graph.layer(reader.layer).node_count != 1:
        return None
    return reader


def _float32(layer: Layer) -> bool:
    dtype = layer.config.get("dtype", "float32")
    if isinstance(dtype, Mapping):
        inner = dtype.get("config")
        dtype = inner.get("name") if isinstance(inner, Mapping) else None
    return dtype in (None, "float32")


def _inert_kwargs(node: Node) -> bool:
    """No keyword argument that could change the call (only None values and ``training=False``)."""
    return all(v is None or (k == "training" and v is False) for k, v in node.kwargs.items())


def _plain_call(node: Node) -> bool:
    """A call with one positional tensor and no training/mask arguments that could change it."""
    return _inert_kwargs(node) and len(node.args) == 1 and isinstance(node.args[0], TensorRef)


def _single_call_float32(layer: Layer) -> bool:
    """A plain float32 layer (no nested model) called exactly once: its one output can be merged away."""
    return layer.kind == "layer" and layer.node_count == 1 and layer.subgraph is None and _float32(layer)


def _can_produce(layer: Layer, node: Node) -> bool:
    return (
        layer.class_name in _PRODUCERS
        and _single_call_float32(layer)
        and layer.config.get("data_format", "channels_last") == "channels_last"
        and activation_name(layer.config.get("activation")) == "linear"
        and {w.name for w in layer.weights} >= {"kernel"}
        and _plain_call(node)
    )


def _rank(layer: Layer) -> int | None:
    return None if not layer.weights else len(layer.weight("kernel").shape)


def _number(value: object) -> float | None:
    """A config value as a float when it is a plain int or float (not a bool), else None: the
    fusion passes only merge layers whose options they can read."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _fold_batchnorm(producer: Layer, bn: Layer, kernel_rank: int | None) -> Layer | None:
    """The producer with the BatchNormalization folded into its weights, or None when it cannot be."""
    if bn.node_count != 1 or not _float32(bn) or kernel_rank is None:
        return None
    axis = bn.config.get("axis", -1)
    if isinstance(axis, list | tuple):
        if len(axis) != 1:
            return None
        axis = axis[0]
    if not isinstance(axis, int) or axis not in (-1, _output_rank(producer)):
        return None
    names = {w.name for w in bn.weights}
    if not {"moving_mean", "moving_variance"} <= names:
        return None
    eps = _number(bn.config.get("epsilon", 1e-3))
    if eps is None:
        return None  # a malformed epsilon: left to the BatchNormalization kernel, which refuses it
    weights = {w.name: w for w in producer.weights}
    kernel_w = weights["kernel"]
    if not str(kernel_w.dtype).startswith(("float", "bfloat")):
        return None  # a quantized kernel: its own kernel refuses it, folding must not hide that
    out_channels = _out_channels(producer, kernel_w.shape)
    if bn.weight("moving_mean").shape != (out_channels,):
        return None

    def folded() -> tuple[np.ndarray, np.ndarray]:
        mean = bn.weight("moving_mean").read().astype(np.float64)
        var = bn.weight("moving_variance").read().astype(np.float64)
        gamma = bn.weight("gamma").read().astype(np.float64) if "gamma" in names else np.ones_like(mean)
        beta = bn.weight("beta").read().astype(np.float64) if "beta" in names else np.zeros_like(mean)
        scale = gamma / np.sqrt(var + eps)
        kernel = kernel_w.read().astype(np.float64)
        if producer.class_name in _DEPTHWISE:
            kernel = kernel * scale.reshape(kernel.shape[-2], kernel.shape[-1])
        else:
            kernel = kernel * scale
        bias = weights["bias"].read().astype(np.float64) if "bias" in weights else np.zeros_like(mean)
        return kernel.astype(np.float32), ((bias - mean) * scale + beta).astype(np.float32)

    cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def part(index: int) -> np.ndarray:
        if "value" not in cache:
            cache["value"] = folded()
        return cache["value"][index]

    location = f"{kernel_w.location} (BatchNormalization '{bn.name}' folded in)"
    new_weights = (
        Weight("kernel", kernel_w.shape, "float32", location, lambda: part(0)),
        Weight("bias", (out_channels,), "float32", location, lambda: part(1)),
    )
    config = dict(producer.config)
    config["use_bias"] = True
    if producer.class_name == "Dense":
        config.setdefault("units", out_channels)
    return replace(producer, config=MappingProxyType(config), weights=new_weights)


def _output_rank(producer: Layer) -> int:
    if producer.class_name == "Dense":
        return 1
    return {"1D": 2, "2D": 3, "3D": 4}[producer.class_name[-2:]]


def _out_channels(producer: Layer, kernel_shape: tuple[int, ...]) -> int:
    if producer.class_name in _DEPTHWISE:
        return int(kernel_shape[-2] * kernel_shape[-1])
    return int(kernel_shape[-1])


def _relu_name(layer: Layer) -> str | None:
    """``relu`` or ``relu6`` when the layer is exactly that activation (and float32), else None."""
    if not _float32(layer) or layer.node_count != 1:
        return None
    if layer.class_name == "Activation":
        name = activation_name(layer.config.get("activation"))
        return name if name in _FUSABLE_ACTIVATIONS else None
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
        return "relu6" if _number(max_value) == 6.0 else None
    return None


# --- inverted bottlenecks: 1x1 expand -> [ZeroPadding2D] -> depthwise -> 1x1 project ---------------


def _merge_bottlenecks(graph: ModelGraph) -> ModelGraph:
    """Merge every [1x1 expand ->] [pad ->] depthwise -> 1x1 project chain into one fused layer.

    The fused layer takes the projection's name, so every reference to the chain's output stays
    valid; its node reads the chain's input. See :mod:`modelgraph.runner.fast.fused`.
    """
    consumers = _consumers(graph)
    outputs = {ref.node_key for ref in graph.outputs}
    layers = {lyr.name: lyr for lyr in graph.layers}
    removed: set[str] = set()
    new_inputs: dict[str, Node] = {}  # project layer -> the chain's first node, whose input it now reads

    def follower(node: Node) -> Node | None:
        nxt = _single_consumer(graph, consumers, outputs, node.key)
        return nxt if nxt is not None and _plain_call(nxt) and nxt.layer not in removed else None

    def chain_from(node: Node) -> tuple[dict[str, Layer | None], list[Node], Layer] | None:
        """The stages of a chain starting at ``node``, its nodes up to the depthwise, the projection."""
        stages: dict[str, Layer | None] = {"expand": None, "pad": None, "depthwise": None}
        chain: list[Node] = []
        current: Node | None = node
        if _pointwise(layers[node.layer], node):
            stages["expand"] = layers[node.layer]
            chain.append(node)
            current = follower(node)
        elif not _plain_call(node):
            return None
        if current is not None and _zero_padding_2d(layers[current.layer]):
            stages["pad"] = layers[current.layer]
            chain.append(current)
            current = follower(current)
        if current is None or not _depthwise_3x3(layers[current.layer]):
            return None
        stages["depthwise"] = layers[current.layer]
        chain.append(current)
        project = follower(current)
        if project is None or not _pointwise(layers[project.layer], project):
            return None
        return stages, chain, layers[project.layer]

    for node in graph.nodes:
        if node.layer in removed:
            continue
        found = chain_from(node)
        if found is None:
            continue
        stages, chain, project = found
        depthwise, expand, pad = stages["depthwise"], stages["expand"], stages["pad"]
        assert depthwise is not None
        width = _depthwise_kernel(depthwise).shape[-2]
        if project.weight("kernel").shape[-2] != width or (
            expand is not None and expand.weight("kernel").shape[-1] != width
        ):
            continue
        pads = [[0, 0], [0, 0]] if pad is None else _pads_2d(pad.config.get("padding", 1))
        if pads is None:
            continue
        weights = tuple(
            replace(w, name=f"{stage}/{w.name}")
            for stage, layer in (("expand", expand), ("depthwise", depthwise), ("project", project))
            if layer is not None
            for w in layer.weights
        )
        config = {
            "expand": None if expand is None else expand.config,
            "pads": pads,
            "depthwise": depthwise.config,
            "project": project.config,
        }
        layers[project.name] = replace(
            project, class_name=INVERTED_BOTTLENECK, config=MappingProxyType(config), weights=weights
        )
        removed.update(n.layer for n in chain)
        new_inputs[project.name] = node
    if not removed:
        return graph
    return _drop(graph, layers, dict.fromkeys(removed), new_inputs)


def _conv_basics(layer: Layer) -> bool:
    return (
        _single_call_float32(layer)
        and layer.config.get("data_format", "channels_last") in (None, "channels_last")
        and _ints(layer.config.get("dilation_rate", 1)) in ((1,), (1, 1))
    )


def _pointwise(layer: Layer, node: Node) -> bool:
    """A plain 1x1, stride-1, ungrouped Conv2D."""
    names = {w.name for w in layer.weights}
    return (
        layer.class_name == "Conv2D"
        and _conv_basics(layer)
        and _plain_call(node)
        and _ints(layer.config.get("kernel_size")) in ((1,), (1, 1))
        and _ints(layer.config.get("strides", 1)) in ((1,), (1, 1))
        and layer.config.get("groups", 1) in (1, None)
        and "kernel" in names
        and names <= {"kernel", "bias"}
        and len(layer.weight("kernel").shape) == 4
    )


def _depthwise_3x3(layer: Layer) -> bool:
    """A DepthwiseConv2D with depth multiplier 1, no dilation, valid or same padding."""
    names = {w.name for w in layer.weights}
    return (
        layer.class_name == "DepthwiseConv2D"
        and _conv_basics(layer)
        and layer.config.get("depth_multiplier", 1) == 1
        and layer.config.get("padding", "valid") in ("valid", "same")
        and layer.config.get("groups", 1) in (1, None)
        and layer.config.get("filters") is None
        and _ints(layer.config.get("strides", 1)) is not None
        and len(names & {"kernel", "depthwise_kernel"}) == 1
        and names <= {"kernel", "depthwise_kernel", "bias"}
        and len(_depthwise_kernel(layer).shape) == 4
        and _depthwise_kernel(layer).shape[-1] == 1
    )


def _depthwise_kernel(layer: Layer) -> Weight:
    return layer.weight(depthwise_weight_name(w.name for w in layer.weights))


def _zero_padding_2d(layer: Layer) -> bool:
    return (
        layer.class_name == "ZeroPadding2D"
        and _single_call_float32(layer)
        and layer.config.get("data_format", "channels_last") in (None, "channels_last")
        and _pads_2d(layer.config.get("padding", 1)) is not None
    )


def _ints(value: object) -> tuple[int, ...] | None:
    """An int or a list of ints as a tuple (None for anything else)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, list | tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)
    return None


def _pads_2d(value: object) -> list[list[int]] | None:
    """ZeroPadding2D's ``padding`` as ``[[top, bottom], [left, right]]`` (None if malformed)."""
    flat = _ints(value)
    if flat is not None and len(flat) == 1 and flat[0] >= 0:
        return [[flat[0]] * 2, [flat[0]] * 2]
    if flat is not None and len(flat) == 2 and min(flat) >= 0:
        return [[flat[0]] * 2, [flat[1]] * 2]
    if isinstance(value, list | tuple) and len(value) == 2:
        pairs = [_ints(v) for v in value]
        if all(p is not None and len(p) == 2 and min(p) >= 0 for p in pairs):
            return [list(p) for p in pairs]  # type: ignore[arg-type]
    return None


# --- Add -> ReLU ------------------------------------------------------------------------------------

# Kernels that always return a new array (never a view of an input): their output may be overwritten
# by its only reader.
_FRESH_OUTPUTS = _PRODUCERS | {INVERTED_BOTTLENECK, CONV_RESIDUAL, ZERO_PADDED}


def _merge_residual_sums(graph: ModelGraph) -> ModelGraph:
    """Merge ``Add(a, b)`` [-> ReLU / relu6] into the step producing ``a`` when that is a linear
    channels-last Conv2D or an inverted bottleneck whose output nothing else reads: the sum (and the
    activation) then run in its epilogue, block by block (see ``fused.conv_residual``).

    The merged step takes the Add's name and place in the graph (after both of its inputs, whatever
    the node order), reads the producer's input and ``b``, and carries the producer's weights."""
    consumers = _consumers(graph)
    outputs = {ref.node_key for ref in graph.outputs}
    layers = {lyr.name: lyr for lyr in graph.layers}
    producers = {node.layer: node for node in graph.nodes}
    removed: dict[str, TensorRef | None] = {}
    calls: dict[str, Node] = {}
    for node in graph.nodes:
        add = layers[node.layer]
        if not _plain_add(add, node) or len(node.args[0]) != 2:
            continue
        refs = list(node.args[0])
        for i, ref in enumerate(refs):
            producer, source = layers.get(ref.layer), producers.get(ref.layer)
            other = refs[1 - i]
            if producer is None or source is None or other == ref or ref.layer in removed:
                continue
            if not _residual_producer(producer, source) or ref.node_key in outputs:
                continue
            if [n.key for n in consumers.get(ref.node_key, [])] != [node.key]:
                continue
            follower = _single_consumer(graph, consumers, outputs, node.key)
            relu = _relu_name(layers[follower.layer]) if follower and _plain_call(follower) else None
            merged = _merged_residual(producer, relu or "linear")
            inputs = (source.args[0], other)
            layers[add.name] = replace(
                add, class_name=merged.class_name, config=merged.config, weights=merged.weights
            )
            calls[add.name] = replace(node, args=inputs, kwargs=MappingProxyType({}), inputs=inputs)
            removed[producer.name] = None
            if relu is not None and follower is not None:
                removed[follower.layer] = TensorRef(add.name, node.index, 0)
            break
    if not removed:
        return graph
    return _drop(graph, layers, removed, calls)


def _residual_producer(layer: Layer, node: Node) -> bool:
    """A step whose epilogue can take a residual sum: a linear channels-last float32 Conv2D (groups
    1) or an inverted bottleneck without one yet, called once, plainly."""
    if not (_single_call_float32(layer) and _plain_call(node)):
        return False
    if layer.class_name == INVERTED_BOTTLENECK:
        return layer.config.get("residual") is None
    return (
        layer.class_name == "Conv2D"
        and layer.config.get("data_format", "channels_last") in (None, "channels_last")
        and activation_name(layer.config.get("activation")) == "linear"
        and (layer.config.get("groups") or 1) == 1
        and {w.name for w in layer.weights} >= {"kernel"}
    )


def _merged_residual(producer: Layer, activation: str) -> Layer:
    """The producer as a step that also adds a residual and applies ``activation``."""
    if producer.class_name == INVERTED_BOTTLENECK:
        config = {**producer.config, "residual": activation}
        return replace(producer, config=MappingProxyType(config))
    weights = tuple(replace(w, name=f"conv/{w.name}") for w in producer.weights)
    config = {"conv": producer.config, "activation": activation}
    return replace(producer, class_name=CONV_RESIDUAL, config=MappingProxyType(config), weights=weights)


def _fold_zero_paddings(graph: ModelGraph) -> ModelGraph:
    """Merge ``ZeroPadding2D`` into the one Conv2D (groups 1), DepthwiseConv2D or valid MaxPooling2D
    (pads narrower than its pool) reading it: that op pads as it reads (``fused.zero_padded``), and
    the padded copy of the tensor is never made. The merged step keeps the op's name and place."""
    consumers = _consumers(graph)
    outputs = {ref.node_key for ref in graph.outputs}
    layers = {lyr.name: lyr for lyr in graph.layers}
    removed: dict[str, TensorRef | None] = {}
    calls: dict[str, Node] = {}
    for node in graph.nodes:
        pad = layers[node.layer]
        if not (_zero_padding_2d(pad) and _plain_call(node)):
            continue
        pads = _pads_2d(pad.config.get("padding", 1))
        reader = _single_consumer(graph, consumers, outputs, node.key)
        if pads is None or reader is None or not _plain_call(reader):
            continue
        op = layers[reader.layer]
        if not (_single_call_float32(op) and _pads_into(op, pads)):
            continue
        config = {"pads": pads, "class_name": op.class_name, "layer": op.config}
        weights = tuple(replace(w, name=f"layer/{w.name}") for w in op.weights)
        layers[op.name] = replace(
            op, class_name=ZERO_PADDED, config=MappingProxyType(config), weights=weights
        )
        calls[op.name] = replace(reader, args=node.args, inputs=node.inputs)
        removed[pad.name] = None
    if not removed:
        return graph
    return _drop(graph, layers, removed, calls)


def _pads_into(layer: Layer, pads: list[list[int]]) -> bool:
    """Whether ``layer`` can take explicit zero padding ``pads`` into its own reading of the input."""
    if layer.config.get("data_format", "channels_last") not in (None, "channels_last"):
        return False
    if layer.class_name == "Conv2D":
        return (layer.config.get("groups") or 1) == 1
    if layer.class_name == "DepthwiseConv2D":
        return True
    if layer.class_name == "MaxPooling2D":
        pool = _ints(layer.config.get("pool_size", 2))
        if pool is None or layer.config.get("padding", "valid") != "valid":
            return False
        pool = pool * 2 if len(pool) == 1 else pool
        return len(pool) == 2 and all(max(p) < k for p, k in zip(pads, pool, strict=True))
    return False


def _merge_add_activations(graph: ModelGraph) -> ModelGraph:
    """Merge ``Add`` -> ``ReLU``/``relu6`` into one step that sums and activates chunk by chunk, in
    place into an input that is a fresh conv/dense output read by nothing else."""
    consumers = _consumers(graph)
    outputs = {ref.node_key for ref in graph.outputs}
    layers = {lyr.name: lyr for lyr in graph.layers}
    removed: dict[str, TensorRef] = {}
    for node in graph.nodes:
        add = layers[node.layer]
        if not _plain_add(add, node):
            continue
        follower = _single_consumer(graph, consumers, outputs, node.key)
        if follower is None or not _plain_call(follower):
            continue
        name = _relu_name(layers[follower.layer])
        if name is None:
            continue
        config = {
            "activation": name,
            "overwrite": _dying_fresh_input(graph, consumers, outputs, node, layers),
        }
        layers[add.name] = replace(add, class_name=ADD_ACTIVATION, config=MappingProxyType(config))
        removed[follower.layer] = TensorRef(add.name, node.index, 0)
    if not removed:
        return graph
    return _drop(graph, layers, removed)


def _plain_add(layer: Layer, node: Node) -> bool:
    return (
        layer.class_name == "Add"
        and _single_call_float32(layer)
        and len(node.args) == 1
        and isinstance(node.args[0], list | tuple)
        and len(node.args[0]) >= 2
        and all(isinstance(a, TensorRef) for a in node.args[0])
        and _inert_kwargs(node)
    )


def _dying_fresh_input(
    graph: ModelGraph,
    consumers: Mapping[tuple[str, int], list[Node]],
    outputs: set[tuple[str, int]],
    node: Node,
    layers: Mapping[str, Layer],
) -> int | None:
    """The index of an input the sum may overwrite: a float32 conv/dense output, read only by this
    node (once), no model output. None when there is none."""
    refs = list(node.args[0])
    for i, ref in enumerate(refs):
        producer = layers.get(ref.layer)
        if producer is None or producer.class_name not in _FRESH_OUTPUTS or producer.node_count != 1:
            continue
        if ref.node_key in outputs or sum(r == ref for r in refs) != 1:
            continue
        if [n.key for n in consumers.get(ref.node_key, [])] != [node.key]:
            continue
        if producer.config.get("data_format", "channels_last") not in (None, "channels_last"):
            continue
        if _float32(producer):
            return i
    return None
