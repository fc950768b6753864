"""Layer alignment for :mod:`modelgraph.diff`, and the config normalisation it compares with.

Auto-generated names (``dense_3``, ``add_17``, ``input_layer_2``) depend on the session that built
the model (docs/formats.md, "Auto-generated names"), so two files of the same architecture can name the same layer
differently, and the same name can sit in different places. The alignment therefore trusts
*user-given* names and *structure*, and auto-generated names only as a late tie-breaker.

Algorithm, one nesting level at a time (nested models that pair up are aligned recursively):

1. **name**: a name present in both models pairs when the classes agree and at least one side's
   name is not auto-generated.
2. **position**: model inputs still unpaired pair by their position in the model's inputs.
3. A fixpoint of two propagations, first *strict* (the normalised configs, name excluded, must be
   equal), then *loose* (same class suffices):

   * **input** (forward, in topological order): an unpaired layer of A pairs with the unpaired
     layer of B of the same class whose first call reads exactly the counterparts of its own first
     call's inputs (same node and tensor indices). Several candidates: equal config first, then
     equal name, then B's order.
   * **consumer / output** (backward, reverse topological order): an unpaired layer of A that feeds
     input *k* of a paired layer's call (or model output *k*) pairs with the layer of B feeding
     the same slot of the counterpart, when that one is unpaired and of the same class. This pairs
     layers whose own inputs changed (a rewired skip connection).

4. **name** again for auto-generated names still unpaired (same name, same class), then
   **config**: leftover layers of one class with equal normalised configs pair in order; then the
   fixpoint is resumed. Whatever is left is removed (A only) or added (B only).

Everything is linear or near-linear in the number of layers apart from candidate lists, which are
indexed by (class, first-call input signature).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from modelgraph import catalogue
from modelgraph.catalogue.spec import ConfigSpec
from modelgraph.graph import Layer, ModelGraph, TensorRef, keras_version_tuple

Version = tuple[int, int, int] | None

# --- config normalisation ---------------------------------------------------------------------

#: Envelope and bookkeeping keys that carry no model semantics (dropped at every level).
ENVELOPE_KEYS = frozenset(
    {"module", "registered_name", "build_config", "shared_object_id", "__passive_serialization__"}
)
#: Keys of a layer's own config dropped before comparing (the name is compared by the alignment).
LAYER_DROP_KEYS = frozenset({"name", "compile_config"})
#: Keys of a nested model's config that are compared through its sub-graph instead.
MODEL_GRAPH_KEYS = frozenset({"layers", "input_layers", "output_layers", "build_input_shape"})
#: Keras 1/2 spellings -> Keras 3 spellings of top-level config keys.
KEY_ALIASES = {"batch_input_shape": "batch_shape", "input_dtype": "dtype"}
#: Keras 2 activation names -> Keras 3 canonical names.
ACTIVATION_ALIASES = {"swish": "silu", "hard_swish": "hard_silu"}
ACTIVATION_KEYS = frozenset({"activation", "recurrent_activation"})
#: Class names that mean the same model class.
CLASS_ALIASES = {"Model": "Functional"}
POLICY_CLASSES = frozenset({"DTypePolicy", "Policy", "FloatDTypePolicy"})


#: Defaults of every Keras layer (the base ``Layer``): a key left out means this value.
BASE_LAYER_DEFAULTS: dict[str, Any] = {"trainable": True, "dtype": "float32"}


@dataclass(frozen=True)
class ConfigContext:
    """What :func:`normalize_config` may know besides the config itself.

    ``input_rank``: the rank of the layer's (first) input, from shape inference, for axis keys;
    ``keras_version``: the version that wrote the file; ``strict``: compare the raw config (only the
    layer's own name left out).
    """

    input_rank: int | None = None
    keras_version: str | None = None
    strict: bool = False


DefaultsProvider = Callable[[str, "str | None"], "Mapping[str, Any] | None"]
"""``(class name, Keras version) -> {key: default}`` of that class's constructor, or None if unknown."""


def catalogue_defaults(class_name: str, keras_version: str | None = None) -> Mapping[str, Any] | None:
    """The Keras 3 defaults the class's catalogue entry states (its ``ConfigSpec.defaults``); the
    config was upgraded to Keras 3 first, so they hold whatever version wrote the file."""
    spec = catalogue.spec_for(class_name)
    return spec.config.defaults if spec is not None and isinstance(spec.config, ConfigSpec) else None


_defaults_provider: DefaultsProvider = catalogue_defaults


def set_defaults_provider(provider: DefaultsProvider | None) -> None:
    """Replace where per-class defaults come from (None: the catalogue, :func:`catalogue_defaults`).

    A key that one side leaves out and the other sets to Keras's default for that class and version
    compares equal; :data:`BASE_LAYER_DEFAULTS` always apply."""
    global _defaults_provider
    _defaults_provider = provider or catalogue_defaults


def canonical_class(class_name: str) -> str:
    return CLASS_ALIASES.get(class_name, class_name)


def _norm_value(value: Any, keras_version: str | None = None) -> Any:
    if isinstance(value, Mapping):
        cls = value.get("class_name")
        inner = value.get("config")
        if (
            isinstance(cls, str)
            and cls in POLICY_CLASSES
            and isinstance(inner, Mapping)
            and set(inner) <= {"name"}
        ):
            return inner.get("name")  # "float32" and a DTypePolicy dict are the same dtype
        out = {}
        for k, v in sorted(value.items(), key=lambda kv: str(kv[0])):
            if k in ENVELOPE_KEYS:
                continue
            if k == "config" and isinstance(cls, str) and isinstance(v, Mapping):
                # a nested layer (Bidirectional's ``layer``, an RNN ``cell``): its name is auto-made
                out["config"] = _norm_layer_config(cls, v, nested=True, keras_version=keras_version)
            else:
                out[str(k)] = _norm_value(v, keras_version)
        return out
    if isinstance(value, list | tuple):
        return [_norm_value(v, keras_version) for v in value]
    if isinstance(value, float) and not isinstance(value, bool):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        # float32 round trip: tf.keras writes l2(0.01) as 0.009999999776482582
        return _f32(value)
    return value


def _f32(x: float) -> float:
    import numpy as np

    y = float(np.float32(x))
    return x if math.isinf(y) else y


def _as_keras3(class_name: str, config: Mapping[str, Any], keras_version: Version) -> Mapping[str, Any]:
    """The config as Keras 3 reads it, by the class's catalogue entry's upgrade, then its settings
    equal in effect written one way (its ``equivalent`` hook); its defaults are applied by
    :func:`_norm_layer_config`, through the defaults provider."""
    spec = catalogue.spec_for(class_name)
    if spec is None or not isinstance(spec.config, ConfigSpec):
        return config
    if spec.config.upgrade is not None:
        config = spec.config.upgrade(config, keras_version)
    if spec.config.equivalent is not None:
        config = spec.config.equivalent(config, keras_version)
    return config


def _norm_layer_config(
    class_name: str,
    config: Mapping[str, Any],
    *,
    nested: bool = False,
    skip: frozenset[str] = frozenset(),
    keras_version: str | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    version = keras_version_tuple(keras_version) if keras_version else None
    for key, value in _as_keras3(class_name, config, version).items():
        if key in skip or key in ENVELOPE_KEYS or (key in LAYER_DROP_KEYS and (not nested or key == "name")):
            continue
        key = KEY_ALIASES.get(key, key)
        if key == "batch_shape" and not catalogue.is_model_input(class_name):
            continue  # Keras 2 repeats the model input shape on the first layer; the InputLayer has it
        v = _norm_value(value, keras_version)
        if key in ACTIVATION_KEYS and isinstance(v, str):
            v = ACTIVATION_ALIASES.get(v, v)
        out[key] = v
    defaults: dict[str, Any] = dict(BASE_LAYER_DEFAULTS)
    defaults.update(_defaults_provider(class_name, keras_version) or {})
    for key, default in defaults.items():
        if key in out and _same(out[key], _norm_value(default)):
            del out[key]
    return dict(sorted(out.items()))


def normalize_config(layer: Layer, context: ConfigContext | None = None) -> dict[str, Any]:
    """The layer's config in one spelling, for comparing across formats and Keras versions.

    This is the one step that makes equivalent configs equal; everything that compares configs goes
    through it. It reads the config as Keras 3 would, by the class's catalogue entry (its
    ``ConfigSpec`` upgrade: Keras 1 key names, Keras-2-only keys such as RNN ``implementation``,
    MultiHeadAttention ``query_shape``..., DepthwiseConv ``groups: 1``, normalisation ``axis: [3]``
    as ``3``, BatchNormalization's ``renorm_*`` when renorm is off); drops the name (also of nested
    layers such as Bidirectional's ``layer``), envelope keys (``module``, ``registered_name``,
    ``build_config``, ``shared_object_id``), a non-InputLayer's ``batch_input_shape`` and, for nested
    models, the layer lists (compared as a sub-graph); sorts keys; reads a DTypePolicy dict as its
    name; rounds floats through float32; renames ``batch_input_shape`` -> ``batch_shape``; maps the
    Keras 2 activation names ``swish``/``hard_swish`` to ``silu``/``hard_silu``; with the input rank
    known (``context``), writes input axes as non-negative numbers (``-1`` of a rank-4 input is
    ``3``); drops keys whose value is the default (:data:`BASE_LAYER_DEFAULTS` and the class's
    catalogued defaults, :func:`catalogue_defaults`), so an omitted key and its default compare equal.

    ``context.strict`` skips it (only the name and, for nested models, the layer lists are left
    out): ``diff --strict-config``.
    """
    context = context or ConfigContext()
    skip = MODEL_GRAPH_KEYS if layer.subgraph is not None else frozenset()
    class_name = canonical_class(layer.class_name)
    if context.strict:
        return {k: v for k, v in sorted(layer.config.items()) if k != "name" and k not in skip}
    out = _norm_layer_config(class_name, layer.config, skip=skip, keras_version=context.keras_version)
    if context.input_rank is not None and "axis" in out and _input_axis(class_name):
        out["axis"] = _axis(out["axis"], context.input_rank)
    return out


def _input_axis(class_name: str) -> bool:
    """Whether the class's ``axis`` counts its input's dimensions (its catalogue entry says)."""
    spec = catalogue.spec_for(class_name)
    return spec is not None and spec.input_axis


def _axis(value: Any, rank: int) -> Any:
    """Input axes as non-negative numbers (a list sorted), when they are in range for ``rank``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value + rank if -rank <= value < 0 else value
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return sorted(_axis(v, rank) for v in value)
    return value


#: A key present on one side only is no difference when the other side's value is one of these
#: (Keras 3 added ``optional: false``, ``quantization_config: null``, ``lora_rank: null``, ...).
ABSENT_EQUIVALENTS: tuple[Any, ...] = (None, False)

_MISSING = object()


def config_changes(a: Any, b: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """``[(dotted key, old, new)]`` between two normalised configs; a missing side is ``_MISSING``."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[tuple[str, Any, Any]] = []
        for key in list(a) + [k for k in b if k not in a]:
            path = f"{prefix}.{key}" if prefix else key
            va, vb = a.get(key, _MISSING), b.get(key, _MISSING)
            if va is _MISSING and any(vb is e or vb == e and type(vb) is type(e) for e in ABSENT_EQUIVALENTS):
                continue
            if vb is _MISSING and any(va is e or va == e and type(va) is type(e) for e in ABSENT_EQUIVALENTS):
                continue
            if va is _MISSING or vb is _MISSING:
                out.append((path, va, vb))
            else:
                out.extend(config_changes(va, vb, path))
        return out
    if _same(a, b):
        return []
    return [(prefix, a, b)]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def is_missing(value: Any) -> bool:
    return value is _MISSING


# --- auto-generated names -----------------------------------------------------------------------


def snake_case(class_name: str) -> str:
    """Keras's ``to_snake_case``: ``BatchNormalization`` -> ``batch_normalization``, ``Conv2D`` -> ``conv2d``."""
    name = re.sub(r"\W+", "", class_name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


_INPUT_AUTO = re.compile(r"^(input_layer(_\d+)?|input_\d+|.+_input)$")
_MODEL_AUTO = re.compile(r"^(model|functional|sequential)(_\d+)?$")


def is_auto_name(name: str, class_name: str, config: Mapping[str, Any] | None = None) -> bool:
    """True when ``name`` looks generated by Keras for this class (``dense``, ``dense_7``, ``tf.math.add_2``)."""
    base = re.sub(r"_\d+$", "", name)
    if base == snake_case(class_name):
        return True
    if catalogue.is_model_input(class_name) and _INPUT_AUTO.match(name):
        return True
    if class_name in ("Functional", "Model", "Sequential") and _MODEL_AUTO.match(name):
        return True
    if class_name in catalogue.OP_LAMBDA_CLASSES and config is not None:
        fn = config.get("function")
        if isinstance(fn, str) and base == f"tf.{fn}":
            return True
    return False


# --- alignment ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pair:
    a: Layer
    b: Layer
    by: str


@dataclass
class _Side:
    graph: ModelGraph
    order: list[str]
    rank: dict[str, int]
    first_inputs: dict[str, tuple[TensorRef, ...] | None]
    consumers: dict[str, list[tuple[str, int, int, TensorRef]]]
    norm: dict[str, dict[str, Any]]
    auto: dict[str, bool]

    @classmethod
    def of(cls, graph: ModelGraph) -> _Side:
        order: list[str] = []
        seen: set[str] = set()
        first_inputs: dict[str, tuple[TensorRef, ...] | None] = {}
        consumers: dict[str, list[tuple[str, int, int, TensorRef]]] = defaultdict(list)
        for node in graph.nodes:
            if node.layer not in seen:
                seen.add(node.layer)
                order.append(node.layer)
            if node.index == 0:
                first_inputs[node.layer] = node.inputs
            else:
                first_inputs.setdefault(node.layer, node.inputs)
            for k, ref in enumerate(node.inputs):
                consumers[ref.layer].append((node.layer, node.index, k, ref))
        for lyr in graph.layers:
            if lyr.name not in seen:
                seen.add(lyr.name)
                order.append(lyr.name)
                first_inputs.setdefault(lyr.name, None)
        context = ConfigContext(keras_version=graph.keras_version)
        norm = {lyr.name: normalize_config(lyr, context) for lyr in graph.layers}
        auto = {lyr.name: is_auto_name(lyr.name, lyr.class_name, lyr.config) for lyr in graph.layers}
        return cls(graph, order, {n: i for i, n in enumerate(order)}, first_inputs, consumers, norm, auto)


def align(ga: ModelGraph, gb: ModelGraph) -> tuple[list[Pair], list[Layer], list[Layer]]:
    """Pair the layers of two graphs (one nesting level): ``(pairs, only in A, only in B)``."""
    A, B = _Side.of(ga), _Side.of(gb)
    a2b: dict[str, str] = {}
    b2a: dict[str, str] = {}
    how: dict[str, str] = {}

    def cls_a(n: str) -> str:
        return canonical_class(ga.layer(n).class_name)

    def cls_b(n: str) -> str:
        return canonical_class(gb.layer(n).class_name)

    def pair(na: str, nb: str, by: str) -> None:
        a2b[na] = nb
        b2a[nb] = na
        how[na] = by

    def same_config(na: str, nb: str) -> bool:
        return not config_changes(A.norm[na], B.norm[nb])

    # 1. user-given names
    for name in A.order:
        if gb.has_layer(name) and cls_a(name) == cls_b(name) and not (A.auto[name] and B.auto[name]):
            pair(name, name, "name")
    # 2. model inputs by position
    for ra, rb in zip(ga.inputs, gb.inputs, strict=False):
        if ra.layer not in a2b and rb.layer not in b2a and cls_a(ra.layer) == cls_b(rb.layer):
            pair(ra.layer, rb.layer, "position")

    # index of B's unpaired layers by (class, mapped first-call input signature)
    def b_signature(nb: str) -> tuple | None:
        ins = B.first_inputs.get(nb)
        if not ins:
            return None
        return (cls_b(nb), tuple((r.layer, r.node_index, r.tensor_index) for r in ins))

    by_sig: dict[tuple, list[str]] = defaultdict(list)
    for nb in B.order:
        sig = b_signature(nb)
        if sig is not None:
            by_sig[sig].append(nb)

    def forward(strict: bool) -> int:
        added = 0
        for na in A.order:
            if na in a2b:
                continue
            ins = A.first_inputs.get(na)
            if not ins or any(r.layer not in a2b for r in ins):
                continue
            sig = (cls_a(na), tuple((a2b[r.layer], r.node_index, r.tensor_index) for r in ins))
            cands = [nb for nb in by_sig.get(sig, ()) if nb not in b2a]
            if strict:
                cands = [nb for nb in cands if same_config(na, nb)]
            if not cands:
                continue
            cands.sort(key=lambda nb: (not same_config(na, nb), nb != na, B.rank[nb]))
            pair(na, cands[0], "input")
            added += 1
        return added

    def backward(strict: bool) -> int:
        added = 0
        out_a = {ref: k for k, ref in enumerate(ga.outputs)}
        for na in reversed(A.order):
            if na in a2b:
                continue
            found: tuple[str, str] | None = None
            for ref, k in out_a.items():
                if ref.layer == na and k < len(gb.outputs):
                    rb = gb.outputs[k]
                    if (rb.node_index, rb.tensor_index) == (ref.node_index, ref.tensor_index):
                        found = (rb.layer, "output")
                        break
            if found is None:
                for cons, node_index, k, ref in A.consumers.get(na, ()):
                    cb = a2b.get(cons)
                    if cb is None or not gb.has_layer(cb):
                        continue
                    try:
                        node_b = gb.node(cb, node_index)
                    except KeyError:
                        continue
                    if k >= len(node_b.inputs):
                        continue
                    rb = node_b.inputs[k]
                    if (rb.node_index, rb.tensor_index) == (ref.node_index, ref.tensor_index):
                        found = (rb.layer, "consumer")
                        break
            if found is None:
                continue
            nb, by = found
            if nb in b2a or cls_a(na) != cls_b(nb) or (strict and not same_config(na, nb)):
                continue
            pair(na, nb, by)
            added += 1
        return added

    def fixpoint() -> None:
        for strict in (True, False):
            while forward(strict) + backward(strict):
                pass

    while True:
        fixpoint()
        extra = 0
        # 4a. auto-generated names left over: same name, same class
        for na in A.order:
            if na not in a2b and gb.has_layer(na) and na not in b2a and cls_a(na) == cls_b(na):
                pair(na, na, "name")
                extra += 1
        # 4b. equal configs of one class, in order
        if not extra:
            left_b: dict[str, list[str]] = defaultdict(list)
            for nb in B.order:
                if nb not in b2a:
                    left_b[cls_b(nb)].append(nb)
            for na in A.order:
                if na in a2b:
                    continue
                for nb in left_b.get(cls_a(na), ()):
                    if nb not in b2a and same_config(na, nb):
                        pair(na, nb, "config")
                        extra += 1
                        break
        if not extra:
            break

    pairs = [Pair(ga.layer(na), gb.layer(a2b[na]), how[na]) for na in A.order if na in a2b]
    only_a = [ga.layer(na) for na in A.order if na not in a2b]
    only_b = [gb.layer(nb) for nb in B.order if nb not in b2a]
    return pairs, only_a, only_b


def layer_order(graph: ModelGraph) -> list[str]:
    """Layer names by first call in topological order, then layers without calls."""
    return _Side.of(graph).order
