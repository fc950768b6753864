"""A node's keyword tensors are flattened in the order the Keras that wrote the file uses.

Checked against real Keras (the expectations below are what each one computed from these configs):

* tf_keras 2.19+ (``Node`` flattens ``(call_args, call_kwargs.values())``, keras-team/tf-keras@ea2cc87)
  keeps the keywords in recorded order: the order they were passed, positional ``value``/``key``
  first because a Keras 2 config records every argument after the first as a keyword.
* tf.keras up to 2.18 (``tf.nest.flatten((call_args, call_kwargs))``) and Keras 3
  (``tree.flatten``) sort them by name.
* Mappings nested inside one argument are sorted by key in every version.

The order decides ``Node.inputs`` and, through Keras's graph walk, the order of ``model.layers``.
The committed sample samples/k2/kw_order.* (tf_keras 2.21) checks the same against a live model in
tests/test_load_samples.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import modelgraph.loading as loading
from modelgraph.graph import TensorRef, call_tensor_refs
from modelgraph.loading.normalize import build_graph, kwarg_order

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def _ref(name: str) -> list[Any]:
    return [name, 0, 0]


def _k2_input(name: str, shape: tuple[int, ...]) -> dict[str, Any]:
    config = {"batch_input_shape": [None, *shape], "dtype": "float32", "name": name}
    return {"class_name": "InputLayer", "config": config, "name": name, "inbound_nodes": []}


def _k2_layer(class_name: str, name: str, node_kwargs: dict[str, Any]) -> dict[str, Any]:
    config = {"name": name, "trainable": True, "dtype": "float32"}
    if class_name == "MultiHeadAttention":
        config.update(num_heads=2, key_dim=3, query_shape=None, value_shape=None, key_shape=None)
    return {
        "class_name": class_name,
        "config": config,
        "name": name,
        "inbound_nodes": [[["q", 0, 0, node_kwargs]]],
    }


def _k2_model() -> dict[str, Any]:
    """mha(q, v, k); mha(q, v, attention_mask=am, key=k); a layer with a dict keyword (tf_keras format)."""
    layers = [
        _k2_input("q", (4, 6)),
        _k2_input("v", (5, 6)),
        _k2_input("k", (5, 6)),
        _k2_input("am", (4, 5)),
        _k2_layer("MultiHeadAttention", "mha_qvk", {"value": _ref("v"), "key": _ref("k")}),
        _k2_layer(
            "MultiHeadAttention",
            "mha_v_am_k",
            {"value": _ref("v"), "attention_mask": _ref("am"), "key": _ref("k")},
        ),
        _k2_layer("DictKw", "dk", {"more": _ref("am"), "extra": {"zeta": _ref("k"), "alpha": _ref("v")}}),
    ]
    body = {
        "name": "kw",
        "layers": layers,
        "input_layers": [_ref("q"), _ref("v"), _ref("k"), _ref("am")],
        "output_layers": [_ref("mha_qvk"), _ref("mha_v_am_k"), _ref("dk")],
    }
    return {"class_name": "Functional", "config": body}


def _inputs(graph, layer: str) -> list[str]:
    return [r.layer for r in graph.node(layer).inputs]


# What tf_keras 2.21.0 and tf_keras 2.18.0 compute from _k2_model() (model_from_json, node.keras_inputs).
K2_EXPECTED = {
    "2.21.0": {
        "mha_qvk": ["q", "v", "k"],
        "mha_v_am_k": ["q", "v", "am", "k"],
        "dk": ["q", "am", "v", "k"],
        "layers": ["q", "v", "k", "am", "mha_qvk", "mha_v_am_k", "dk"],
    },
    "2.18.0": {
        "mha_qvk": ["q", "k", "v"],
        "mha_v_am_k": ["q", "am", "k", "v"],
        "dk": ["q", "v", "k", "am"],
        "layers": ["q", "k", "v", "am", "mha_qvk", "mha_v_am_k", "dk"],
    },
}


@pytest.mark.parametrize("version", sorted(K2_EXPECTED))
def test_keras2_node_inputs_follow_the_writing_version(version: str) -> None:
    graph = build_graph(_k2_model(), keras_version=version)
    expected = K2_EXPECTED[version]
    for layer in ("mha_qvk", "mha_v_am_k", "dk"):
        assert _inputs(graph, layer) == expected[layer], layer
    assert [lyr.name for lyr in graph.layers] == expected["layers"]
    assert all(n.depth == 0 for n in graph.nodes if n.layer in ("mha_qvk", "mha_v_am_k", "dk"))


def test_keras2_kwargs_mapping_is_kept_as_recorded() -> None:
    """The runner fills arguments by name: the kwargs mapping keeps names, values and recorded order."""
    node = build_graph(_k2_model(), keras_version="2.21.0").node("mha_v_am_k")
    assert list(node.kwargs) == ["value", "attention_mask", "key"]
    assert node.kwargs["value"] == TensorRef("v") and node.kwargs["key"] == TensorRef("k")
    assert node.args == (TensorRef("q"),)


def _kt(name: str) -> dict[str, Any]:
    history = {"shape": [None, 3], "dtype": "float32", "keras_history": [name, 0, 0]}
    return {"class_name": "__keras_tensor__", "config": history}


def _k3_model() -> dict[str, Any]:
    def inp(name: str) -> dict[str, Any]:
        config = {"batch_shape": [None, 3], "dtype": "float32", "name": name}
        return {
            "module": "keras.layers",
            "class_name": "InputLayer",
            "config": config,
            "name": name,
            "inbound_nodes": [],
        }

    node = {"args": [_kt("a")], "kwargs": {"more": _kt("d"), "extra": {"zeta": _kt("b"), "alpha": _kt("c")}}}
    layer = {
        "module": None,
        "class_name": "DictKw",
        "registered_name": "probe>DictKw",
        "config": {"name": "dk", "trainable": True, "dtype": "float32"},
        "name": "dk",
        "inbound_nodes": [node],
    }
    body = {
        "name": "kw3",
        "layers": [inp("a"), inp("b"), inp("c"), inp("d"), layer],
        "input_layers": [_ref("a"), _ref("b"), _ref("c"), _ref("d")],
        "output_layers": [_ref("dk")],
    }
    return {"module": "keras.src.models.functional", "class_name": "Functional", "config": body}


def test_keras3_sorts_keywords_by_name() -> None:
    # Keras 3.15.1 on this config: node input_tensors [a, c, b, d], operations [a, c, b, d, dk].
    graph = build_graph(_k3_model(), keras_version="3.15.1")
    assert _inputs(graph, "dk") == ["a", "c", "b", "d"]
    assert [lyr.name for lyr in graph.layers] == ["a", "c", "b", "d", "dk"]
    assert list(graph.node("dk").kwargs) == ["more", "extra"]


@pytest.mark.parametrize(
    ("dialect", "version", "order"),
    [
        ("list", "2.21.0", "call"),
        ("list", "2.19.0", "call"),
        ("list", "2.18.0", "sorted"),
        ("list", "2.15.0", "sorted"),
        ("list", "2.2.4-tf", "sorted"),
        ("list", None, "sorted"),
        ("list", ["2", "21"], "sorted"),  # a malformed keras_version from a hand-edited file
        ("list", "3.15.1", "sorted"),
        ("dict", "3.15.1", "sorted"),
        ("dict", "2.21.0", "sorted"),
    ],
)
def test_kwarg_order_per_dialect_and_version(dialect: str, version: Any, order: str) -> None:
    assert kwarg_order(dialect, version) == order  # type: ignore[arg-type]


def test_call_tensor_refs_orders() -> None:
    a, b, c, d, e = (TensorRef(n) for n in "abcde")
    args = (a, [e])
    kwargs = {"zeta": b, "alpha": {"y": c, "x": d}}
    assert call_tensor_refs(args, kwargs) == [a, e, d, c, b]
    assert call_tensor_refs(args, kwargs, "call") == [a, e, b, d, c]


def test_the_kw_order_sample_reads_in_call_order() -> None:
    """samples/k2/kw_order.* (tf_keras 2.21): node inputs as the live tf_keras model recorded them."""
    expected = {
        "mha_q_v_k": ["emb_q", "emb_v", "emb_k"],
        "mha_q_v_k_mask": ["emb_q", "emb_v", "emb_k", "att_mask"],
        "mha_kw_value_key_mask": ["emb_q", "emb_v", "emb_k", "att_mask"],
        "mha_v_kw_mask_key": ["emb_q", "emb_v", "att_mask", "emb_k"],
    }
    for suffix in (".h5", ".keras", ".json"):
        graph = loading.load(SAMPLES / "k2" / f"kw_order{suffix}")
        assert graph.keras_version == "2.21.0"
        for layer, refs in expected.items():
            assert _inputs(graph, layer) == refs, (suffix, layer)
        names = [lyr.name for lyr in graph.layers]
        assert names.index("tok_v") < names.index("tok_k"), suffix


def test_the_same_config_read_as_older_tf_keras_sorts() -> None:
    """Without a version >= 2.19 the same list-node config keeps the sorted order (older tf.keras)."""
    graph = build_graph(_k2_model())
    assert _inputs(graph, "mha_v_am_k") == K2_EXPECTED["2.18.0"]["mha_v_am_k"]
