"""Parameter counts (vs Keras's count_params and trainable split), MACs and memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from modelgraph.loading import load
from modelgraph.loading.normalize import build_graph
from modelgraph.shapes import infer_shapes
from modelgraph.stats import layer_stats, model_totals

from ._samples import golden_model_files

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"


CASES = golden_model_files()


@pytest.mark.skipif(not CASES, reason="samples not generated yet")
@pytest.mark.parametrize(("golden", "rel"), CASES, ids=[c[1] for c in CASES])
def test_param_counts_match_keras(golden: str, rel: str) -> None:
    """Stored weights, and architecture-only files (json, app configs) through expected_weights."""
    want = json.loads((SAMPLES / "goldens" / golden).read_text())["params"]
    graph = load(SAMPLES / rel)
    totals = model_totals(graph)
    got = {
        "total": totals.total_params,
        "trainable": totals.trainable_params,
        "non_trainable": totals.non_trainable_params,
    }
    assert got == want
    assert not totals.unknown_param_layers
    # MACs are per sample: an input with an unknown axis after the batch leaves its layers' unknown.
    declared = [
        graph.layer(n).config.get("batch_shape", graph.layer(n).config.get("batch_input_shape"))
        for n in graph.input_names
    ]
    if all(shape is None or None not in list(shape)[1:] for shape in declared):
        assert not totals.unknown_mac_layers
    if graph.has_weights:
        assert totals.total_params == graph.param_count


@pytest.mark.skipif(not (SAMPLES / "apps" / "k2_mobilenetv3small").is_dir(), reason="app manifest missing")
def test_tf_keras_app_params(rebuilt_app) -> None:
    path = rebuilt_app("k2_mobilenetv3small")
    want = json.loads((SAMPLES / "goldens" / "k2_app_mobilenetv3small.json").read_text())["params"]
    totals = model_totals(load(path))
    assert (totals.total_params, totals.trainable_params, totals.non_trainable_params) == (
        want["total"],
        want["trainable"],
        want["non_trainable"],
    )


def _sample(rel: str) -> Path:
    path = SAMPLES / rel
    if not path.exists():
        pytest.skip(f"{rel} not generated")
    return path


def test_shared_layer_params_once_macs_per_call() -> None:
    graph = load(_sample("k3/multi_io_list.keras"))
    rows = {r.path: r for r in layer_stats(graph)}
    shared = rows[("shared_dense",)]
    kernel = graph.layer("shared_dense").weight("kernel").shape
    assert shared.calls == 3
    assert shared.params == kernel[0] * kernel[1] + kernel[1]
    assert shared.macs == 3 * kernel[0] * kernel[1]
    assert shared.output_elements == 3 * kernel[1]
    assert shared.output_bytes == 4 * shared.output_elements


def test_nested_models_and_frozen_layers() -> None:
    """Nested rows follow their model's row; the model row includes them; BN moving stats are frozen."""
    graph = load(_sample("k3/nested.keras"))
    rows = layer_stats(graph)
    by_path = {r.path: r for r in rows}
    inner = by_path[("inner_model",)]
    children = [r for r in rows if r.path[:1] == ("inner_model",) and r.level == 1]
    assert children and inner.params == sum(r.params or 0 for r in children)
    assert rows.index(inner) < rows.index(children[0])
    bn = next(r for r in children if r.class_name == "BatchNormalization")
    assert (
        bn.non_trainable_params
        == 2 * graph.layer("inner_model").subgraph.layer(bn.name).weight("moving_mean").size
    )
    # a nested model called twice: inner MACs counted for both calls
    dense = next(r for r in children if r.class_name == "Dense")
    assert dense.calls == 2 and inner.macs == dense.macs
    totals = model_totals(graph, stats=rows)
    assert totals.total_params == graph.param_count


def _k3_model(layers: list[dict[str, Any]], inputs: list[str], outputs: list[str]) -> Any:
    envelope = {
        "class_name": "Functional",
        "config": {
            "name": "m",
            "trainable": True,
            "layers": layers,
            "input_layers": [[n, 0, 0] for n in inputs],
            "output_layers": [[n, 0, 0] for n in outputs],
        },
    }
    return build_graph(envelope, keras_version="3.15.1", format="json_config")


def _kt(name: str) -> dict[str, Any]:
    return {
        "class_name": "__keras_tensor__",
        "config": {"shape": None, "dtype": "float32", "keras_history": [name, 0, 0]},
    }


def _layer(cls: str, name: str, src: str, **config: Any) -> dict[str, Any]:
    return {
        "module": "keras.layers",
        "class_name": cls,
        "config": {"name": name, "trainable": config.pop("trainable", True), "dtype": "float32", **config},
        "name": name,
        "inbound_nodes": [{"args": [_kt(src)], "kwargs": {}}],
    }


def _input(name: str, shape: list[Any]) -> dict[str, Any]:
    return {
        "class_name": "InputLayer",
        "config": {"batch_shape": shape, "dtype": "float32", "name": name},
        "name": name,
        "inbound_nodes": [],
    }


def test_macs_conventions_architecture_only() -> None:
    graph = _k3_model(
        [
            _input("img", [None, 8, 8, 3]),
            _layer("Conv2D", "conv", "img", filters=4, kernel_size=[3, 3], padding="same", groups=1),
            _layer("DepthwiseConv2D", "dw", "conv", kernel_size=3, padding="valid", depth_multiplier=2),
            _layer(
                "SeparableConv2D", "sep", "dw", filters=5, kernel_size=3, depth_multiplier=1, use_bias=False
            ),
            _layer("Conv2DTranspose", "up", "sep", filters=2, kernel_size=2, strides=2),
            _layer("BatchNormalization", "bn", "up", trainable=False),
            _layer("Flatten", "flat", "bn"),
            _layer("Dense", "fc", "flat", units=10),
            _input("seq", [None, 6, 4]),
            _layer("LSTM", "lstm", "seq", units=3),
            _layer("GRU", "gru", "seq", units=2, reset_after=True),
        ],
        ["img", "seq"],
        ["fc", "lstm", "gru"],
    )
    rows = {r.name: r for r in layer_stats(graph)}
    assert rows["conv"].macs == 8 * 8 * 4 * 9 * 3
    assert rows["dw"].macs == 6 * 6 * 8 * 9
    assert rows["sep"].macs == 4 * 4 * 8 * 9 + 4 * 4 * 8 * 5
    assert rows["up"].macs == 4 * 4 * 5 * 4 * 2
    assert rows["bn"].macs == 0 and rows["flat"].macs == 0
    assert rows["fc"].macs == 8 * 8 * 2 * 10
    assert rows["lstm"].macs == 6 * 4 * 3 * (4 + 3)
    assert rows["gru"].macs == 6 * 3 * 2 * (4 + 2)
    # parameters from expected weights (no weights in a json config)
    assert rows["conv"].params_source == "expected"
    assert rows["conv"].params == 3 * 3 * 3 * 4 + 4
    assert rows["dw"].params == 3 * 3 * 4 * 2 + 8
    assert rows["sep"].params == 3 * 3 * 8 + 8 * 5
    assert rows["up"].params == 2 * 2 * 2 * 5 + 2
    assert rows["bn"].params == 8 and rows["bn"].trainable_params == 0  # trainable=False layer
    assert rows["gru"].params == 4 * 6 + 2 * 6 + 2 * 6
    totals = model_totals(graph)
    assert totals.total_params == sum(r.params or 0 for r in rows.values())
    assert totals.weight_bytes_by_dtype == {"float32": 4 * totals.total_params}
    assert totals.total_macs == sum(r.macs or 0 for r in rows.values())


def test_mha_macs_and_unknowns() -> None:
    graph = _k3_model(
        [
            _input("q", [None, 5, 8]),
            {
                "module": "keras.layers",
                "class_name": "MultiHeadAttention",
                "config": {
                    "name": "mha",
                    "trainable": True,
                    "dtype": "float32",
                    "num_heads": 2,
                    "key_dim": 4,
                },
                "name": "mha",
                "inbound_nodes": [{"args": [_kt("q"), _kt("q")], "kwargs": {}}],
            },
            _layer("Mystery", "x", "mha"),
            _input("v", [None, None, 8]),
            _layer("Dense", "d", "v", units=2),
        ],
        ["q", "v"],
        ["x", "d"],
    )
    shapes = infer_shapes(graph)
    rows = {r.name: r for r in layer_stats(graph, shapes)}
    proj = 3 * (5 * 8 * 2 * 4) + 5 * 2 * 4 * 8
    attend = 2 * 5 * 5 * 4 * 2
    assert rows["mha"].macs == proj + attend
    assert rows["mha"].params == 3 * (8 * 2 * 4 + 2 * 4) + 2 * 4 * 8 + 8
    assert rows["x"].macs is None and rows["x"].params is None and rows["x"].params_source == "unknown"
    assert rows["d"].macs is None  # unknown sequence length
    assert rows["d"].params == 8 * 2 + 2
    totals = model_totals(graph, shapes)
    assert totals.unknown_param_layers == ["x"]
    assert set(totals.unknown_mac_layers) == {"x", "d"}
    assert not totals.complete


@pytest.mark.parametrize("value_dim", [float("inf"), float("nan")])
def test_mac_rule_on_an_absurd_config_number_is_unknown_not_a_crash(value_dim: Any) -> None:
    """``value_dim`` of Infinity or NaN (Python's json reads both): the MACs are unknown (Infinity
    used to stop inspect with an internal OverflowError)."""
    config = {"name": "mha", "dtype": "float32", "num_heads": 2, "key_dim": 4, "value_dim": value_dim}
    layer = {
        "module": "keras.layers",
        "class_name": "MultiHeadAttention",
        "config": config,
        "name": "mha",
        "inbound_nodes": [{"args": [_kt("q"), _kt("q")], "kwargs": {}}],
    }
    graph = _k3_model([_input("q", [None, 5, 8]), layer], ["q"], ["mha"])
    rows = {r.name: r for r in layer_stats(graph, infer_shapes(graph))}
    assert rows["mha"].macs is None


def test_dtype_bytes() -> None:
    graph = load(_sample("k3/dtypes.keras"))
    totals = model_totals(graph)
    stored: dict[str, int] = {}
    for _, lyr in graph.walk():
        for w in lyr.weights:
            stored[w.dtype] = stored.get(w.dtype, 0) + w.nbytes
    assert totals.weight_bytes_by_dtype == stored
    quant = model_totals(
        load(_sample("k3/quant_int8.json"))
    )  # architecture only: int8 kernels + float scales
    assert set(quant.weight_bytes_by_dtype) == {"int8", "float32"}


def test_generic_rnn_macs_are_its_cells_steps() -> None:
    """RNN(LSTMCell(4)) on (6, 3): 4 gates x 4 units x (3 + 4) per step, like LSTM(4); a stack feeds
    each cell the previous cell's units (LSTMCell(3) then GRUCell(2))."""
    rows = {r.path: r for r in layer_stats(load(SAMPLES / "k3" / "rnn_cells.keras"))}
    assert rows[("rnn_lstm",)].macs == 6 * 4 * 4 * (3 + 4)
    assert rows[("rnn_stacked",)].macs == 6 * (4 * 3 * (3 + 3) + 3 * 2 * (3 + 2))
