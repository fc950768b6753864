"""Fusion pass: merge inverted bottlenecks into one step.

Matches ``[1x1 Conv2D expand ->] [ZeroPadding2D ->] DepthwiseConv2D (depth multiplier 1, no dilation)
-> 1x1 Conv2D project``, channels-last float32, each link read by nothing else (the stages' classes by
their catalogue entries' ``fusion.bottleneck`` and ``fusion.zero_padding``). Produces one
``modelgraph/InvertedBottleneck`` layer (``fast/fused.py``) named after the projection, reading the
chain's input, with the stages' weights as ``expand/...``, ``depthwise/...``, ``project/...``: it runs
band by band in cache.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from modelgraph.graph import Layer, ModelGraph, Node, Weight
from modelgraph.layer_params import depthwise_weight_name
from modelgraph.runner.fast.fused import INVERTED_BOTTLENECK
from modelgraph.runner.passes._graph import (
    Rewrite,
    fusion,
    ints,
    plain_call,
    single_call_float32,
    zero_pads,
)


def merge_bottlenecks(graph: ModelGraph) -> ModelGraph:
    """Merge every [1x1 expand ->] [pad ->] depthwise -> 1x1 project chain into one fused layer.

    The fused layer takes the projection's name, so every reference to the chain's output stays
    valid; its node reads the chain's input. See :mod:`modelgraph.runner.fast.fused`.
    """
    rewrite = Rewrite.of(graph)

    def follower(node: Node) -> Node | None:
        nxt = rewrite.reader(node)
        return nxt if nxt is not None and not rewrite.removed(nxt.layer) else None

    def chain_from(node: Node) -> tuple[dict[str, Layer | None], list[Node], Layer] | None:
        """The stages of a chain starting at ``node``, its nodes up to the depthwise, the projection."""
        stages: dict[str, Layer | None] = {"expand": None, "pad": None, "depthwise": None}
        chain: list[Node] = []
        current: Node | None = node
        if _pointwise(rewrite.layer(node.layer), node):
            stages["expand"] = rewrite.layer(node.layer)
            chain.append(node)
            current = follower(node)
        elif not plain_call(node):
            return None
        if current is not None and zero_pads(rewrite.layer(current.layer)) is not None:
            stages["pad"] = rewrite.layer(current.layer)
            chain.append(current)
            current = follower(current)
        if current is None or not _depthwise_3x3(rewrite.layer(current.layer)):
            return None
        stages["depthwise"] = rewrite.layer(current.layer)
        chain.append(current)
        project = follower(current)
        if project is None or not _pointwise(rewrite.layer(project.layer), project):
            return None
        return stages, chain, rewrite.layer(project.layer)

    for node in graph.nodes:
        if rewrite.removed(node.layer):
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
        pads = [[0, 0], [0, 0]] if pad is None else zero_pads(pad)
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
        merged = replace(
            project, class_name=INVERTED_BOTTLENECK, config=MappingProxyType(config), weights=weights
        )
        rewrite.replace_layer(merged, call=node)
        for stage in chain:
            rewrite.remove(stage.layer)
    return rewrite.result()


def _conv_basics(layer: Layer) -> bool:
    return (
        single_call_float32(layer)
        and layer.config.get("data_format", "channels_last") in (None, "channels_last")
        and ints(layer.config.get("dilation_rate", 1)) in ((1,), (1, 1))
    )


def _pointwise(layer: Layer, node: Node) -> bool:
    """A plain 1x1, stride-1, ungrouped Conv2D (a class whose entry's ``fusion.bottleneck`` is
    ``"pointwise"``)."""
    names = {w.name for w in layer.weights}
    return (
        fusion(layer).bottleneck == "pointwise"
        and _conv_basics(layer)
        and plain_call(node)
        and ints(layer.config.get("kernel_size")) in ((1,), (1, 1))
        and ints(layer.config.get("strides", 1)) in ((1,), (1, 1))
        and layer.config.get("groups", 1) in (1, None)
        and "kernel" in names
        and names <= {"kernel", "bias"}
        and len(layer.weight("kernel").shape) == 4
    )


def _depthwise_3x3(layer: Layer) -> bool:
    """A DepthwiseConv2D (``fusion.bottleneck`` ``"depthwise"``) with depth multiplier 1, no
    dilation, valid or same padding."""
    names = {w.name for w in layer.weights}
    return (
        fusion(layer).bottleneck == "depthwise"
        and _conv_basics(layer)
        and layer.config.get("depth_multiplier", 1) == 1
        and layer.config.get("padding", "valid") in ("valid", "same")
        and layer.config.get("groups", 1) in (1, None)
        and layer.config.get("filters") is None
        and ints(layer.config.get("strides", 1)) is not None
        and len(names & {"kernel", "depthwise_kernel"}) == 1
        and names <= {"kernel", "depthwise_kernel", "bias"}
        and len(_depthwise_kernel(layer).shape) == 4
        and _depthwise_kernel(layer).shape[-1] == 1
    )


def _depthwise_kernel(layer: Layer) -> Weight:
    return layer.weight(depthwise_weight_name(w.name for w in layer.weights))
