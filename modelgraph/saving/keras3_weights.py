"""A :class:`ModelGraph`'s weights -> ``model.weights.h5`` in Keras 3's layout.

Keras 3's saver walks ``model.layers`` (InputLayers included for a Functional, excluded for a
Sequential, raw ops never), names each layer ``snake_case(class)`` plus a per-class counter within
its list (``dense``, ``dense_1``), stores the layer's own variables at ``<path>/vars/<i>`` and its
sub-layers' under their attribute names (``cell/vars``, ``forward_layer/cell/vars``,
``query_dense/vars``), and recurses into nested models under ``<path>/layers``. Since Keras 3.6
every visited ``vars`` group carries a ``name`` attribute (the layer's name). The layout per class
is :func:`modelgraph.weight_names.keras3_groups`, the same table the reader uses.

The bytes are deterministic: groups and datasets are created in one fixed order, without
timestamps (h5py's default), contiguous and uncompressed like Keras's own files.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np

from modelgraph import catalogue
from modelgraph.graph import Layer, ModelGraph, Weight
from modelgraph.saving.hard_sigmoid import weight_scales
from modelgraph.saving.keras3_config import WrittenLayer
from modelgraph.saving.upgrades import NotConvertible
from modelgraph.weight_names import keras3_groups, snake_case


@dataclass(frozen=True)
class WeightsEntry:
    """One layer's place in the tree and the arrays stored under it (``(relative path, array)``)."""

    layer_path: tuple[str, ...]
    tree_path: str
    name: str
    arrays: tuple[tuple[str, Weight], ...]
    class_name: str = ""


def layer_tree(
    graph: ModelGraph,
    written: dict[tuple[str, ...], WrittenLayer],
    prefix: tuple[str, ...] = (),
    tree: str = "layers",
    orders: dict[tuple[str, ...], list[str]] | None = None,
    keras_major: int | None = None,
) -> Iterator[WeightsEntry]:
    """Every saved layer of ``graph`` in Keras 3's visiting order, with the arrays it stores.

    ``orders`` gives a model's layer order where the config writer changed it (added op nodes);
    ``keras_major`` is the file's, which nested graphs do not record.
    """
    major = graph.keras_major if keras_major is None else keras_major
    counters: dict[str, int] = {}
    sequential = graph.class_name == "Sequential"
    order = (orders or {}).get(prefix)
    layers = graph.layers if order is None else [graph.layer(name) for name in order]
    for layer in layers:
        if layer.kind == "op" or layer.key.startswith("tf:"):  # ops and TFOpLambda have no variables
            continue
        if sequential and layer.kind == "input":
            continue
        if layer.depth is None and not sequential and layer.kind != "input":
            continue
        path = (*prefix, layer.name)
        shown = written.get(path)
        class_name = shown.class_name if shown is not None else _model_class(layer)
        base = snake_case(class_name)
        n = counters.get(base, 0)
        counters[base] = n + 1
        tree_path = f"{tree}/{base}" + (f"_{n}" if n else "")
        if layer.subgraph is not None:
            yield WeightsEntry(path, tree_path, layer.name, ())
            yield from layer_tree(layer.subgraph, written, path, f"{tree_path}/layers", orders, major)
            continue
        config = shown.config if shown is not None else dict(layer.config)
        arrays = _arrays(layer, class_name, config, path)
        if major < 3:
            arrays = _rescaled_hard_sigmoid(arrays, class_name, config)
        yield WeightsEntry(path, tree_path, layer.name, tuple(arrays), class_name)


def _rescaled_hard_sigmoid(
    arrays: list[tuple[str, Weight]], class_name: str, config: dict
) -> list[tuple[str, Weight]]:
    """The arrays of a Keras 1/2 layer whose ``hard_sigmoid`` the config writer kept by rescaling
    (:mod:`modelgraph.saving.hard_sigmoid`); a wrapper's inner layer's weights likewise."""
    spec = catalogue.spec_for(class_name)
    inner = config.get(spec.wrapped_keys[0]) if spec is not None and spec.wrapped_keys else None
    if isinstance(inner, dict):
        scales = weight_scales(inner.get("class_name", ""), inner.get("config") or {})
    else:
        scales = weight_scales(class_name, config)
    if not scales:
        return arrays
    out = []
    for rel, weight in arrays:
        transform = scales.get(weight.name.split("/")[-1])
        if transform is not None:
            weight = replace(weight, reader=lambda w=weight, f=transform: f(w.read()))
        out.append((rel, weight))
    return out


def _model_class(layer: Layer) -> str:
    if layer.subgraph is not None and layer.subgraph.class_name != "Sequential":
        return "Functional"
    return layer.class_name


def _arrays(layer: Layer, class_name: str, config: dict, path: tuple[str, ...]) -> list[tuple[str, Weight]]:
    groups = keras3_groups(class_name, config)
    where = "/".join(path)
    if groups is None:  # a class without a known layout keeps its stored order
        return [(f"vars/{i}", w) for i, w in enumerate(layer.weights)]
    by_name = {w.name: w for w in layer.weights}
    out: list[tuple[str, Weight]] = []
    expected: list[str] = []
    for rel, names in groups:
        for i, name in enumerate(names):
            expected.append(name)
            weight = by_name.get(name)
            if weight is None:
                raise NotConvertible(f"layer '{where}' has no weight '{name}' (it has {sorted(by_name)})")
            out.append((f"{rel}/{i}", weight))
    extra = sorted(set(by_name) - set(expected))
    if extra:
        raise NotConvertible(
            f"layer '{where}' has weights {extra} that Keras 3's {class_name} does not store"
        )
    return out


def stored_array(weight: Weight, class_name: str = "") -> tuple[np.ndarray, str | None]:
    """The array as Keras 3 stores it and its ``dtype`` attribute (bfloat16 is raw 2-byte ``|V2``)."""
    values = np.asarray(weight.read())
    spec = catalogue.spec_for(class_name) if class_name else None
    reshape = spec.keras3_weight_upgrades.get(weight.name) if spec is not None else None
    if reshape is not None:
        values = np.asarray(reshape(values))
    if weight.dtype == "bfloat16":
        bits = (np.array(values, dtype=np.float32, order="C").view(np.uint32) >> 16).astype(np.uint16)
        return bits.view("V2"), "bfloat16"
    return np.array(values, order="C"), None  # not ascontiguousarray: it turns a scalar into shape (1,)


def write_weights_h5(
    graph: ModelGraph,
    entries: Sequence[WeightsEntry],
    optimizer: tuple[str, Sequence[np.ndarray]] | None = None,
) -> bytes:
    """The bytes of ``model.weights.h5`` for ``graph``: its saved layers (``entries``, from
    :func:`layer_tree` over what the config writer wrote) and, when given, the optimizer's
    variables (its name and the arrays in Keras 3's order)."""
    import h5py

    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as f:
        f.create_group("layers")
        for entry in entries:
            group = f.require_group(f"{entry.tree_path}/vars")
            group.attrs["name"] = entry.name
            for rel, weight in entry.arrays:
                data, dtype_attr = stored_array(weight, entry.class_name)
                dataset = f.create_dataset(f"{entry.tree_path}/{rel}", data=data)
                if dtype_attr is not None:
                    dataset.attrs["dtype"] = dtype_attr
        if optimizer is not None:
            name, arrays = optimizer
            group = f.require_group("optimizer/vars")
            group.attrs["name"] = name
            for i, values in enumerate(arrays):
                f.create_dataset(f"optimizer/vars/{i}", data=np.array(values, order="C"))
        root = f.require_group("vars")
        root.attrs["name"] = graph.name
    return buffer.getvalue()
