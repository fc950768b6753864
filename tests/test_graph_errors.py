"""Broken structure raises a typed error that names the layer and the reference."""

from __future__ import annotations

import copy

import pytest

from modelgraph.errors import (
    ConfigError,
    CycleError,
    DanglingReferenceError,
    DisconnectedGraphError,
    DuplicateNameError,
    IndexOutOfRangeError,
    UnsupportedFormatError,
)
from modelgraph.loading.normalize import build_graph


def _k2_model():
    """A tf.keras-style (list node) Functional: a -> d1 -> d2, with an inner model called twice."""
    inner = {
        "class_name": "Functional",
        "config": {
            "name": "inner",
            "layers": [
                {
                    "class_name": "InputLayer",
                    "name": "ii",
                    "config": {"name": "ii", "batch_input_shape": [None, 4]},
                    "inbound_nodes": [],
                },
                {
                    "class_name": "Dense",
                    "name": "id",
                    "config": {"name": "id", "units": 4},
                    "inbound_nodes": [[["ii", 0, 0, {}]]],
                },
            ],
            "input_layers": [["ii", 0, 0]],
            "output_layers": [["id", 0, 0]],
        },
        "name": "inner",
        # Keras 2 counts the inner model's construction node: its first call here is node 1.
        "inbound_nodes": [[["a", 0, 0, {}]], [["inner", 1, 0, {}]]],
    }
    return {
        "class_name": "Functional",
        "config": {
            "name": "outer",
            "layers": [
                {
                    "class_name": "InputLayer",
                    "name": "a",
                    "config": {"name": "a", "batch_input_shape": [None, 4]},
                    "inbound_nodes": [],
                },
                inner,
                {
                    "class_name": "Add",
                    "name": "add",
                    "config": {"name": "add"},
                    "inbound_nodes": [[["inner", 1, 0, {}], ["inner", 2, 0, {}]]],
                },
            ],
            "input_layers": [["a", 0, 0]],
            "output_layers": [["add", 0, 0], ["inner", 2, 0]],
        },
    }


def _layer(cfg, name):
    return next(layer for layer in cfg["config"]["layers"] if layer["name"] == name)


def test_keras2_nested_offsets_are_normalised():
    graph = build_graph(_k2_model(), keras_version="2.15.0")
    add = graph.node("add", 0)
    assert [str(r) for r in add.args[0]] == ["inner[0][0]", "inner[1][0]"]
    assert [str(r) for r in graph.outputs] == ["add[0][0]", "inner[1][0]"]
    assert {lyr.name: lyr.depth for lyr in graph.layers} == {"a": 3, "inner": 2, "add": 0}
    assert graph.node("inner", 1).depth == 1 and graph.node("inner", 0).depth == 2


def test_dangling_reference_names_layer_and_reference():
    cfg = _k2_model()
    _layer(cfg, "add")["inbound_nodes"] = [[["inner", 1, 0, {}], ["ghost", 0, 0, {}]]]
    with pytest.raises(
        DanglingReferenceError,
        match=r"layer 'add' node 0 refers to unknown layer 'ghost' \(ghost\[0\]\[0\]\)",
    ):
        build_graph(cfg, keras_version="2.15.0")


def test_node_index_out_of_range():
    cfg = _k2_model()
    _layer(cfg, "add")["inbound_nodes"] = [[["inner", 3, 0, {}]]]
    with pytest.raises(
        IndexOutOfRangeError,
        match=r"layer 'add' node 0 refers to inner\[3\]\[0\], but layer 'inner' has 2 node",
    ):
        build_graph(cfg, keras_version="2.15.0")


def test_tensor_index_out_of_range_of_nested_model():
    cfg = _k2_model()
    cfg["config"]["output_layers"] = [["inner", 2, 1]]
    with pytest.raises(IndexOutOfRangeError, match=r"nested model 'inner' has 1 output"):
        build_graph(cfg, keras_version="2.15.0")


def test_cycle_is_a_typed_error():
    cfg = {
        "class_name": "Functional",
        "config": {
            "name": "cyc",
            "layers": [
                {"class_name": "InputLayer", "name": "a", "config": {"name": "a"}, "inbound_nodes": []},
                {
                    "class_name": "Dense",
                    "name": "x",
                    "config": {"name": "x"},
                    "inbound_nodes": [[["y", 0, 0, {}]]],
                },
                {
                    "class_name": "Dense",
                    "name": "y",
                    "config": {"name": "y"},
                    "inbound_nodes": [[["x", 0, 0, {}]]],
                },
            ],
            "input_layers": [["a", 0, 0]],
            "output_layers": [["y", 0, 0]],
        },
    }
    with pytest.raises(CycleError, match="cycle"):
        build_graph(cfg, keras_version="2.15.0")


def test_duplicate_names():
    cfg = _k2_model()
    cfg["config"]["layers"].append(copy.deepcopy(_layer(cfg, "add")))
    with pytest.raises(
        DuplicateNameError,
        match=r"layer name 'add' is used twice \(\$\.config\.layers\[2\] and \$\.config\.layers\[3\]\)",
    ):
        build_graph(cfg, keras_version="2.15.0")


def test_disconnected_input():
    cfg = _k2_model()
    cfg["config"]["layers"].insert(
        0, {"class_name": "InputLayer", "name": "b", "config": {"name": "b"}, "inbound_nodes": []}
    )
    _layer(cfg, "add")["inbound_nodes"] = [[["inner", 1, 0, {}], ["b", 0, 0, {}]]]
    with pytest.raises(DisconnectedGraphError, match="input layer 'b'"):
        build_graph(cfg, keras_version="2.15.0")


def test_keras3_dict_nodes_and_op_nodes():
    def kt(name):
        return {
            "class_name": "__keras_tensor__",
            "config": {"shape": [None, 4], "dtype": "float32", "keras_history": [name, 0, 0]},
        }

    cfg = {
        "module": "keras.src.models.functional",
        "class_name": "Functional",
        "config": {
            "name": "k3",
            "layers": [
                {
                    "module": "keras.layers",
                    "class_name": "InputLayer",
                    "name": "x",
                    "config": {"name": "x", "batch_shape": [None, 4]},
                    "inbound_nodes": [],
                },
                {
                    "module": "keras.src.ops.numpy",
                    "class_name": "Add",
                    "name": "add",
                    "config": {"name": "add"},
                    "inbound_nodes": [{"args": [kt("x"), 3.0], "kwargs": {}}],
                },
                {
                    "module": "keras.layers",
                    "class_name": "Add",
                    "name": "add_layer",
                    "config": {"name": "add_layer", "trainable": True, "dtype": "float32"},
                    "inbound_nodes": [{"args": [[kt("add"), kt("x")]], "kwargs": {}}],
                },
                {
                    "module": "keras.src.ops.numpy",
                    "class_name": "GetItem",
                    "name": "get_item",
                    "config": {"name": "get_item"},
                    "inbound_nodes": [
                        {
                            "args": [
                                kt("add_layer"),
                                [
                                    {
                                        "class_name": "__slice__",
                                        "config": {"start": None, "stop": None, "step": None},
                                    },
                                    {
                                        "class_name": "__slice__",
                                        "config": {"start": 1, "stop": None, "step": 2},
                                    },
                                ],
                            ],
                            "kwargs": {},
                        }
                    ],
                },
            ],
            "input_layers": ["x", 0, 0],
            "output_layers": ["get_item", 0, 0],
        },
    }
    graph = build_graph(cfg, keras_version="3.15.1")
    assert graph.layer("add").kind == "op" and graph.layer("add_layer").kind == "layer"
    assert graph.node("add", 0).args[1] == 3.0
    assert graph.node("get_item", 0).args[1] == [slice(None, None, None), slice(1, None, 2)]
    assert [lyr.name for lyr in graph.layers] == ["x", "add", "add_layer", "get_item"]


def test_subclassed_model_is_refused_with_the_reason():
    with pytest.raises(UnsupportedFormatError, match="subclassed model"):
        build_graph({"class_name": "MyModel", "config": {"units": 3}}, keras_version="3.15.1")


def test_schema_error_carries_json_path():
    cfg = _k2_model()
    cfg["config"]["layers"][1]["config"]["layers"][1]["class_name"] = 7
    with pytest.raises(ConfigError, match=r"\$\.config\.layers\[1\]\.config\.layers\[1\]\.class_name"):
        build_graph(cfg, keras_version="2.15.0")


def test_collect_mode_reports_every_problem_at_once():
    from modelgraph.errors import LoadError

    cfg = _k2_model()
    _layer(cfg, "add")["inbound_nodes"] = [[["inner", 1, 0, {}], ["ghost", 0, 0, {}], ["inner", 9, 0, {}]]]
    cfg["config"]["layers"].append(copy.deepcopy(_layer(cfg, "add")))
    problems: list[LoadError] = []
    graph = build_graph(cfg, keras_version="2.15.0", problems=problems)
    kinds = sorted(type(p).__name__ for p in problems)
    assert kinds == ["DanglingReferenceError", "DuplicateNameError", "IndexOutOfRangeError"]
    assert [str(r) for r in graph.node("add", 0).inputs] == ["inner[0][0]"]


def test_collect_mode_reports_each_cycle():
    from modelgraph.errors import LoadError

    layers = [{"class_name": "InputLayer", "name": "a", "config": {"name": "a"}, "inbound_nodes": []}]
    for x, y in (("p", "q"), ("q", "p"), ("r", "s"), ("s", "r")):
        layers.append(
            {"class_name": "Dense", "name": x, "config": {"name": x}, "inbound_nodes": [[[y, 0, 0, {}]]]}
        )
    layers.append(
        {
            "class_name": "Add",
            "name": "out",
            "config": {"name": "out"},
            "inbound_nodes": [[["p", 0, 0, {}], ["r", 0, 0, {}]]],
        }
    )
    cfg = {
        "class_name": "Functional",
        "config": {
            "name": "c",
            "layers": layers,
            "input_layers": [["a", 0, 0]],
            "output_layers": [["out", 0, 0]],
        },
    }
    problems: list[LoadError] = []
    graph = build_graph(cfg, keras_version="2.15.0", problems=problems)
    assert [type(p).__name__ for p in problems] == ["CycleError", "CycleError"]
    assert all(lyr.depth is None for lyr in graph.layers)
