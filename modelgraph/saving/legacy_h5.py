"""A :class:`ModelGraph` -> a legacy full-model HDF5 (``model.save("m.h5")``) that both tf_keras 2 and
Keras 3 load.

The layer configs are the Keras 3 ones :mod:`modelgraph.saving.keras3_config` writes (already
upgraded), put back into the legacy envelope both loaders read: ``{"class_name", "config"}``
records, ``name`` and list-form ``inbound_nodes`` (``[layer, node, tensor, kwargs]``), dtypes as
policy names, and only the config keys tf_keras also has (:data:`_KERAS3_ONLY_KEYS` are dropped
when they hold their neutral value, refused otherwise). Where the two loaders read a record
differently the writer picks the form both read alike (docs/writing.md, "Legacy .h5"): a nested
Sequential loses its InputLayer (both then number its calls from 0), a multi-axis layer gets a
``module``, Keras 3 ops with an exact layer of both versions become that layer
(:mod:`modelgraph.saving.legacy_h5_ops`), bfloat16 weights are stored as their float32 values.

What one file cannot say to both loaders is refused before anything is written: other ops,
quantized layers, a nested Functional whose output feeds another layer, an RNN given
``initial_state``, MultiHeadAttention, and classes, activations and names tf_keras lacks.

Weights: ``model_weights/<layer>`` groups in ``model.layers`` order, ``weight_names`` in the order
both loaders assign them (a layer's trainable weights, then its non-trainable ones; for a nested
model, over all its layers), datasets at ``<layer>/<weight name>``.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from modelgraph import catalogue
from modelgraph.catalogue.keras3 import keras3_only
from modelgraph.catalogue.spec import K3, LegacyH5Rules
from modelgraph.errors import NotConvertibleError
from modelgraph.graph import Layer, ModelGraph, Weight, keras_version_tuple
from modelgraph.saving.keras3_config import ConfigWriter, Refusal, legal_name
from modelgraph.saving.keras3_weights import stored_array
from modelgraph.saving.legacy_h5_ops import op_as_layer
from modelgraph.saving.upgrades import UpgradeContext
from modelgraph.shapes import infer_shapes

# The dialect the file is written in (list-form nodes, +1 for nested models): tf.keras 2's.
LEGACY_KERAS_VERSION = "2.15.0"
# Keras 3 config keys tf_keras does not accept, with the values that mean "not used".
_KERAS3_ONLY_KEYS: dict[str, tuple[Any, ...]] = {
    "quantization_config": (None,),
    "input_axes": (None,),
    "output_axes": (None,),
    "lora_rank": (None,),
    "lora_alpha": (None,),
    "rms_scaling": (False,),  # LayerNormalization's RMS form: tf_keras has no such option
}


def legacy_h5_bytes(graph: ModelGraph, target: str = "the model", keep_unknown: bool = False) -> bytes:
    """The bytes of a legacy ``.h5`` for ``graph``, or :class:`NotConvertibleError` naming every layer."""
    import h5py

    writer = ConfigWriter(
        UpgradeContext(graph.keras_version), explicit_masks=False, keep_unknown=keep_unknown
    )
    modern = writer.model(graph, infer_shapes(graph))
    refusals = list(writer.refusals)
    config = _legacy_model(modern, graph, refusals, ())
    if refusals:
        raise NotConvertibleError(target, refusals)
    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as f:
        f.attrs["backend"] = "tensorflow"
        f.attrs["keras_version"] = LEGACY_KERAS_VERSION
        f.attrs["model_config"] = json.dumps(config)
        weights = f.create_group("model_weights")
        names = [legal_name(layer.name) for layer in _saved_layers(graph)]
        weights.attrs["backend"] = "tensorflow"
        weights.attrs["keras_version"] = LEGACY_KERAS_VERSION
        _set_names_attribute(weights, "layer_names", names)
        for layer in _saved_layers(graph):
            group = weights.create_group(legal_name(layer.name))
            entries = _layer_weights(layer)
            weight_names = [name for name, _, _ in entries]
            _set_names_attribute(group, "weight_names", weight_names)
            for name, weight, class_name in entries:
                group.create_dataset(name, data=_legacy_array(weight, class_name))
    return buffer.getvalue()


# An HDF5 object header holds at most this many bytes of attributes; Keras splits longer name lists
# into ``<name>0``, ``<name>1``, ... (``save_attributes_to_hdf5_group``) and both loaders join them.
HDF5_OBJECT_HEADER_LIMIT = 64512


def _set_names_attribute(group: Any, name: str, values: list[str]) -> None:
    data = np.array([v.encode() for v in values], dtype="S")
    if data.nbytes <= HDF5_OBJECT_HEADER_LIMIT:
        group.attrs[name] = data
        return
    if any(len(v.encode()) > HDF5_OBJECT_HEADER_LIMIT for v in values):
        raise NotConvertibleError(group.name, [Refusal(name, "", "a name longer than an HDF5 object header")])
    chunks = 2
    while any(part.nbytes > HDF5_OBJECT_HEADER_LIMIT for part in np.array_split(data, chunks)):
        chunks += 1
    for index, part in enumerate(np.array_split(data, chunks)):
        group.attrs[f"{name}{index}"] = part


def _saved_layers(graph: ModelGraph) -> list[Layer]:
    sequential = graph.class_name == "Sequential"
    return [
        layer
        for layer in graph.layers
        if not (sequential and layer.kind == "input") and (layer.depth is not None or layer.kind == "input")
    ]


# --- config -----------------------------------------------------------------------------------


def _legacy_model(
    record: Mapping[str, Any], graph: ModelGraph, refusals: list[Refusal], path: tuple[str, ...]
) -> dict[str, Any]:
    config = record["config"]
    if record["class_name"] == "Sequential":
        records = config["layers"]
        if path:  # nested: without its InputLayer, so both loaders number its calls from 0
            records = [r for r in records if not catalogue.is_model_input(r["class_name"])]
        layers = [_legacy_layer(r, graph, refusals, path, None) for r in records]
        return {"class_name": "Sequential", "config": {"name": config["name"], "layers": layers}}
    layers = []
    masked = _reached_by_masks(graph)
    for entry in config["layers"]:
        if (entry["module"] or "").startswith("keras.src.ops."):  # a custom class may have none
            layer = op_as_layer(entry) if _original_name(graph, entry["name"]) not in masked else _MASKED_OP
            if isinstance(layer, str):
                refusals.append(Refusal("/".join((*path, entry["name"])), entry["class_name"], layer))
                continue
            class_name, layer_config, node = layer
            entry = {
                "class_name": class_name,
                "config": layer_config,
                "name": entry["name"],
                "inbound_nodes": [node],
            }
        layers.append(_legacy_layer(entry, graph, refusals, path, entry))
    return {
        "class_name": "Functional",
        "config": {
            "name": config["name"],
            "trainable": True,
            "layers": layers,
            # Keras 3 counts a nested Functional's construction node here too: the same numbers.
            "input_layers": _wrap(config["input_layers"]),
            "output_layers": _wrap(config["output_layers"]),
        },
    }


def _legacy_layer(
    record: Mapping[str, Any],
    graph: ModelGraph,
    refusals: list[Refusal],
    path: tuple[str, ...],
    entry: Mapping[str, Any] | None,
) -> dict[str, Any]:
    name = record.get("name") or record["config"].get("name")
    where = "/".join((*path, str(name)))
    if not _TF_NAME.match(str(name)):
        refusals.append(
            Refusal(where, record["class_name"], "tf_keras only accepts ASCII names ([A-Za-z0-9_.>-])")
        )
    if record["class_name"] in ("Functional", "Sequential"):
        sub = (
            graph.layer(_original_name(graph, name)).subgraph
            if graph.has_layer(_original_name(graph, name))
            else None
        )
        if sub is None:
            refusals.append(Refusal(where, record["class_name"], "nested model not found"))
            return {}
        if record["class_name"] == "Functional" and _feeds_a_layer(graph, _original_name(graph, name)):
            refusals.append(Refusal(where, record["class_name"], _NESTED_FEEDS_A_LAYER))
        out = _legacy_model(record, sub, refusals, (*path, str(name)))
    else:
        rules = _rules(record["class_name"])
        if rules.refuse_from_keras2 is not None and keras_version_tuple(graph.keras_version)[0] < 3:
            refusals.append(Refusal(where, record["class_name"], rules.refuse_from_keras2))
        if rules.refuse is not None:
            refusals.append(Refusal(where, record["class_name"], rules.refuse))
        elif keras3_only(record["class_name"]):
            refusals.append(Refusal(where, record["class_name"], _KERAS3_ONLY))
        out = {
            "class_name": record["class_name"],
            "config": _legacy_config(record["config"], where, record["class_name"], refusals),
        }
    if isinstance(out.get("config", {}).get("axis"), list) and len(out["config"]["axis"]) != 1:
        # Keras 3's legacy reader drops a multi-element `axis` list unless the record has a module
        out = {"module": "keras.layers", **out, "registered_name": None}
    if entry is not None:
        out["name"] = entry["name"]
        try:
            out["inbound_nodes"] = [
                _legacy_node(n, graph, record["class_name"]) for n in entry["inbound_nodes"]
            ]
        except ValueError as exc:
            refusals.append(Refusal(where, record["class_name"], str(exc)))
    return out


def _original_name(graph: ModelGraph, name: str) -> str:
    for layer in graph.layers:
        if legal_name(layer.name) == name:
            return layer.name
    return name


def _legacy_config(
    config: Mapping[str, Any], where: str, class_name: str, refusals: list[Refusal]
) -> dict[str, Any]:
    def convert(value: Any, key: str = "") -> Any:
        if isinstance(value, Mapping):
            if value.get("class_name") == "DTypePolicy":
                return value["config"]["name"]
            wrapped = value.get("class_name")
            if key and isinstance(wrapped, str) and keras3_only(wrapped):  # a wrapped layer
                refusals.append(
                    Refusal(where, class_name, f"it wraps a {value['class_name']}: {_KERAS3_ONLY}")
                )
            if value.get("module") == "keras.dtype_policies":
                refusals.append(Refusal(where, class_name, "a quantized layer (tf_keras has none)"))
                return None
            out = {}
            for k, v in value.items():
                if k in _ACTIVATION_KEYS and isinstance(v, str) and v in _ACTIVATIONS_NOT_IN_BOTH:
                    refusals.append(Refusal(where, class_name, f"{k}={v!r}: {_ACTIVATIONS_NOT_IN_BOTH[v]}"))
                if k in _KERAS3_ONLY_KEYS:
                    if v not in _KERAS3_ONLY_KEYS[k]:
                        refusals.append(Refusal(where, class_name, f"{k}={v!r} has no tf_keras equivalent"))
                    continue
                out[k] = convert(v, k)
            return out
        if isinstance(value, list):
            return [convert(v) for v in value]
        return value

    out = convert(dict(config))
    for key, legacy in _rules(class_name).renamed_keys.items():
        if key in out:
            out[legacy] = out.pop(key)
    return out


def _rules(class_name: str) -> LegacyH5Rules:
    """The legacy .h5 rules of a class's catalogue entry (empty rules for a class without any)."""
    spec = catalogue.spec_for(class_name)
    return spec.legacy_h5 if spec is not None and spec.legacy_h5 is not None else _NO_RULES


_NO_RULES = LegacyH5Rules()


# tf_keras's name-scope rule: a layer name it cannot use as a scope is refused.
_TF_NAME = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\\/>-]*$")
_KERAS3_ONLY = "a Keras 3 layer class that tf_keras 2 does not have"
_ACTIVATION_KEYS = frozenset({"activation", "recurrent_activation"})
_NO_SUCH_ACTIVATION = "tf_keras 2 has no such activation"
# Keras 3.15.1 activation names that tf_keras 2.21's ``activations.get`` cannot resolve, or
# resolves to another function.
_ACTIVATIONS_NOT_IN_BOTH = {
    **dict.fromkeys(
        (
            "celu",
            "glu",
            "hard_shrink",
            "hard_silu",
            "hard_swish",
            "hard_tanh",
            "log_sigmoid",
            "soft_shrink",
            "sparse_plus",
            "sparse_sigmoid",
            "sparsemax",
            "squareplus",
            "tanh_shrink",
            "threshold",
        ),
        _NO_SUCH_ACTIVATION,
    ),
    "hard_sigmoid": "Keras 3's is relu6(x + 3) / 6, tf_keras's clip(0.2 x + 0.5, 0, 1)",
}


def _legacy_node(node: Mapping[str, Any], graph: ModelGraph, class_name: str) -> list[Any]:
    """A Keras 3 node ``{"args", "kwargs"}`` -> tf.keras's list form (the first argument's tensors,
    every other argument folded into each tensor's kwargs)."""
    args = list(node.get("args") or [])
    raw_kwargs = dict(node.get("kwargs") or {})
    if _rules(class_name).no_initial_state and raw_kwargs.get("initial_state") is not None:
        raise ValueError(
            "an RNN given initial_state: Keras 3's .h5 loader does not resolve keyword tensors and its "
            "RNNs refuse tf.keras's folded call rnn([x, *states])"
        )
    kwargs = {k: _legacy_value(v, graph) for k, v in raw_kwargs.items()}
    if len(args) > 1:  # Keras 3 ops and MultiHeadAttention(q, v): refused before this
        raise ValueError(f"{class_name} called with {len(args)} positional arguments")

    def leaf(value: Any) -> Any:
        if isinstance(value, Mapping) and value.get("class_name") == "__keras_tensor__":
            return [*_ref_of(value, graph), kwargs]
        if isinstance(value, list):
            return [leaf(v) for v in value]
        return value

    structure = leaf(args[0] if args else None)
    if isinstance(structure, list) and structure and isinstance(structure[0], str):
        return [structure]
    return structure


def _legacy_value(value: Any, graph: ModelGraph) -> Any:
    if isinstance(value, Mapping) and value.get("class_name") == "__keras_tensor__":
        return _ref_of(value, graph)
    if isinstance(value, list):
        return [_legacy_value(v, graph) for v in value]
    return value


def _ref_of(tensor: Mapping[str, Any], graph: ModelGraph) -> list[Any]:
    name, node, index = tensor["config"]["keras_history"]
    original = _original_name(graph, name)
    if graph.has_layer(original) and _owns_construction_node(graph.layer(original)):
        node += 1
    return [name, node, index]


# tf_keras numbers the calls of a nested Functional from 1 (its construction is node 0); Keras 3's
# .h5 loader has no construction node and takes a layer's list-form node index as it is (only
# ``input_layers``/``output_layers`` are shifted back by one), so no index names the same call to
# both: a layer fed by a nested Functional is refused; model outputs taken from it are fine.
_NESTED_FEEDS_A_LAYER = (
    "a nested Functional whose output feeds another layer: no .h5 node index names its call for both "
    "loaders (tf_keras counts the model's construction as node 0, Keras 3's .h5 loader does not)"
)


# Keras 3 ops drop an implicit mask; a layer (merge layers, even Rescaling in Keras 3) carries it on.
_MASKED_OP = (
    "tf_keras has no op nodes, and a layer in its place would carry on the implicit mask that reaches it"
)


def _reached_by_masks(graph: ModelGraph) -> set[str]:
    """The layers downstream of an implicit mask source (``Embedding(mask_zero=True)``, ``Masking``,
    a nested model holding one): every layer a mask may reach, whether or not it is carried there."""
    reached: set[str] = set()
    for node in graph.nodes:  # topological order
        if _makes_a_mask(graph.layer(node.layer)) or any(ref.layer in reached for ref in node.inputs):
            reached.add(node.layer)
    return reached


def _makes_a_mask(layer: Layer) -> bool:
    if layer.subgraph is not None:
        return any(_makes_a_mask(inner) for _, inner in layer.subgraph.walk())
    spec = catalogue.spec_for(layer.key)
    behaviour = spec.masks.get(K3) if spec is not None else None
    produce = behaviour.produce if behaviour is not None else None
    return produce == "masking" or (produce == "embedding" and bool(layer.config.get("mask_zero")))


def _feeds_a_layer(graph: ModelGraph, layer_name: str) -> bool:
    """Whether any node of ``graph`` takes an output of ``layer_name`` as input."""
    return any(ref.layer == layer_name for node in graph.nodes for ref in node.inputs)


def _owns_construction_node(layer: Layer) -> bool:
    """tf_keras counts a nested Functional's (or input-led Sequential's) construction call as node 0,
    Keras 3 does not. A nested Sequential is written without its InputLayer: then neither does."""
    return layer.subgraph is not None and layer.subgraph.class_name != "Sequential"


def _wrap(value: Any) -> Any:
    if isinstance(value, list) and len(value) == 3 and isinstance(value[0], str):
        return [value]
    return value


# --- weights ----------------------------------------------------------------------------------


def _layer_weights(layer: Layer) -> list[tuple[str, Weight, str]]:
    """``(stored name, weight, class)`` in the order both loaders assign: trainable, then not."""
    if layer.subgraph is not None:
        trainable: list[tuple[str, Weight, str]] = []
        frozen: list[tuple[str, Weight, str]] = []
        for _, inner in layer.subgraph.walk():
            if inner.subgraph is not None:
                continue
            for name, weight, cls in _own(inner):
                (trainable if _trainable(inner, weight) else frozen).append((name, weight, cls))
        return trainable + frozen
    own = _own(layer)
    return [e for e in own if _trainable(layer, e[1])] + [e for e in own if not _trainable(layer, e[1])]


def _legacy_array(weight: Weight, class_name: str) -> np.ndarray:
    """A weight as the ``.h5`` stores it: bfloat16 values as the float32 numbers they are (exact;
    both loaders cast a value to the variable's dtype when they assign it)."""
    data, dtype_attr = stored_array(weight, class_name)
    if dtype_attr == "bfloat16":
        return (data.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return data


def _own(layer: Layer) -> list[tuple[str, Weight, str]]:
    prefix = legal_name(layer.name)
    return [(f"{prefix}/{w.name}:0", w, layer.class_name) for w in layer.weights]


def _trainable(layer: Layer, weight: Weight) -> bool:
    if not layer.trainable:
        return False
    spec = catalogue.spec_for(layer.key)
    return spec is None or weight.name.split("/")[-1] not in spec.non_trainable_weights
