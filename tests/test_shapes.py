"""Static shape inference against real Keras-made files and hand-written configs."""

from __future__ import annotations

import importlib.util
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from modelgraph.graph import ModelGraph, Weight
from modelgraph.loading import load
from modelgraph.loading.normalize import build_graph
from modelgraph.loading.weights import attach
from modelgraph.shapes import expected_weights, infer_shapes

from ._samples import golden_model_files

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
SCRATCH = [Path("/tmp/scratch/complex.keras"), Path("/tmp/scratch/seq.keras")]


CASES = golden_model_files()


def _refines(got: Any, want: Any) -> bool:
    """Our shape is Keras's, or more precise where Keras recorded None."""
    if want is None:
        return True
    if got is None or len(got) != len(want):
        return False
    return all(w is None or g == w for g, w in zip(got, want, strict=True))


def _compare_recorded(graph: ModelGraph, result: Any, recorded: dict[str, Any]) -> list[str]:
    bad = []
    for name, per_node in recorded.items():
        assert graph.has_layer(name), name
        for i, outs in enumerate(per_node):
            got = result.outputs.get((name, i))
            want = [o[0] for o in outs]
            if (
                got is None
                or len(got) != len(want)
                or not all(_refines(g, w) for g, w in zip(got, want, strict=True))
            ):
                bad.append(f"{name}[{i}] ({graph.layer(name).class_name}): got {got}, Keras {want}")
                continue
            dtypes = result.dtypes.get((name, i))
            if dtypes != [o[1] for o in outs]:
                bad.append(f"{name}[{i}] dtype: got {dtypes}, Keras {[o[1] for o in outs]}")
    return bad


@pytest.mark.skipif(not CASES, reason="samples not generated yet")
@pytest.mark.parametrize(("golden", "rel"), CASES, ids=[c[1] for c in CASES])
def test_output_shapes_match_keras(golden: str, rel: str) -> None:
    info = json.loads((SAMPLES / "goldens" / golden).read_text())
    graph = load(SAMPLES / rel)
    result = infer_shapes(graph)
    assert not result.problems, [str(p) for p in result.problems]
    bad = []
    if info.get("node_output_shapes_dtypes"):
        bad += _compare_recorded(graph, result, info["node_output_shapes_dtypes"])
    for name, nested in (info.get("nested") or {}).items():
        sub = graph.layer(name).subgraph
        if sub is not None and nested.get("node_output_shapes_dtypes"):
            bad += [
                f"{name}/{b}"
                for b in _compare_recorded(sub, infer_shapes(sub), nested["node_output_shapes_dtypes"])
            ]
    assert not bad, "\n".join(bad)
    for out in info.get("outputs", []):
        ref = out.get("ref")
        if ref and "shape" in out and graph.has_layer(ref[0]):
            from modelgraph.graph import TensorRef

            got = result.shape(TensorRef(*ref))  # golden outputs are real arrays: compare past the batch
            assert got is not None and _refines(got[1:], out["shape"][1:]), (ref, got, out["shape"])


def _keras_tensors(value: Any) -> list[dict[str, Any]]:
    found = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("class_name") == "__keras_tensor__":
                found.append(item["config"])
            else:
                stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _check_against_keras_tensors(graph: ModelGraph, config: dict[str, Any]) -> int:
    """Every consumer's recorded input shape (``__keras_tensor__``) vs our producer's output shape."""
    result = infer_shapes(graph)
    checked = 0
    for record in config.get("layers", []):
        for node in record.get("inbound_nodes", []):
            for kt in _keras_tensors(node):
                layer, node_index, tensor_index = kt["keras_history"]
                outs = result.outputs[(layer, node_index)]
                assert _refines(outs[tensor_index], kt["shape"]), (record["name"], kt, outs)
                checked += 1
        inner = record.get("config")
        if isinstance(inner, dict) and "layers" in inner and graph.layer(record["name"]).subgraph is not None:
            checked += _check_against_keras_tensors(graph.layer(record["name"]).subgraph, inner)
    return checked


K3_ZIPS = sorted((SAMPLES / "k3").glob("*.keras")) if (SAMPLES / "k3").is_dir() else []
ORACLE_FILES = [p for p in SCRATCH if p.exists()] + K3_ZIPS


@pytest.mark.skipif(not ORACLE_FILES, reason="no Keras 3 files available")
@pytest.mark.parametrize("path", ORACLE_FILES, ids=[p.name for p in ORACLE_FILES])
def test_shapes_match_recorded_keras_tensors(path: Path) -> None:
    with zipfile.ZipFile(path) as zf:
        raw = json.loads(zf.read("config.json"))
    graph = load(path)
    config = raw["config"]
    if isinstance(config, dict) and "layers" in config and "input_layers" not in config:
        pytest.skip("Sequential configs record no keras tensors")
    assert _check_against_keras_tensors(graph, config) > 0


def test_scratch_complex_nested_results() -> None:
    path = SCRATCH[0]
    if not path.exists():
        pytest.skip("scratch file missing")
    result = infer_shapes(load(path))
    assert result.outputs[("concat", 0)] == [(None, 16)]
    assert result.outputs[("out1", 0)] == [(None, 4)]
    assert set(k for k in result.nested) == {("inner_model", 0), ("inner_model", 1)}
    assert result.find(("inner_model", "inner_bn"), calls=(1,)) == [(None, 8)]
    assert result.expected["out1"] == {"kernel": (16, 4), "bias": (4,)}
    assert result.dtypes[("add", 0)] == ["float32"]


def _rebuild_module() -> Any:
    spec = importlib.util.spec_from_file_location("samples_rebuild", SAMPLES / "rebuild.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not (SAMPLES / "apps" / "k2_mobilenetv3small").is_dir(), reason="app manifest missing")
def test_tf_keras_mobilenetv3_tfoplambda(tmp_path: Path) -> None:
    path = _rebuild_module().rebuild(str(SAMPLES / "apps" / "k2_mobilenetv3small"), tmp_path)
    info = json.loads((SAMPLES / "goldens" / "k2_app_mobilenetv3small.json").read_text())
    graph = load(path)
    result = infer_shapes(graph)
    assert not result.problems, [str(p) for p in result.problems]
    assert not _compare_recorded(graph, result, info.get("node_output_shapes_dtypes") or {})
    assert any(lyr.class_name == "TFOpLambda" for lyr in graph.layers)


# ------------------------------------------------------------------------------------------------
# Hand-written configs


def kt(layer: str, node: int = 0, tensor: int = 0) -> dict[str, Any]:
    return {
        "class_name": "__keras_tensor__",
        "config": {"shape": None, "dtype": "float32", "keras_history": [layer, node, tensor]},
    }


def inp(name: str, shape: list[Any], dtype: str = "float32") -> dict[str, Any]:
    return {
        "module": "keras.layers",
        "class_name": "InputLayer",
        "config": {"batch_shape": shape, "dtype": dtype, "name": name},
        "name": name,
        "inbound_nodes": [],
    }


def lyr(
    cls: str, name: str, args: list[Any], kwargs: dict[str, Any] | None = None, **config: Any
) -> dict[str, Any]:
    return {
        "module": "keras.layers",
        "class_name": cls,
        "config": {"name": name, "trainable": True, "dtype": "float32", **config},
        "name": name,
        "inbound_nodes": [{"args": args, "kwargs": kwargs or {}}],
    }


def op(cls: str, name: str, args: list[Any], **config: Any) -> dict[str, Any]:
    return {
        "module": "keras.src.ops.numpy",
        "class_name": cls,
        "config": {"name": name, **config},
        "name": name,
        "inbound_nodes": [{"args": args, "kwargs": {}}],
    }


def model(layers: list[dict[str, Any]], inputs: list[str], outputs: list[tuple[str, int, int]]) -> ModelGraph:
    envelope = {
        "class_name": "Functional",
        "config": {
            "name": "m",
            "layers": layers,
            "input_layers": [[n, 0, 0] for n in inputs],
            "output_layers": [list(o) for o in outputs],
        },
    }
    return build_graph(envelope, keras_version="3.15.1", format="json_config")


def kinds(result: Any) -> list[tuple[str, str]]:
    return [(p.layer, p.kind) for p in result.problems]


def test_incompatible_merge_is_a_problem_and_inference_continues() -> None:
    g = model(
        [
            inp("a", [None, 3]),
            inp("b", [None, 4]),
            lyr("Add", "add", [[kt("a"), kt("b")]]),
            lyr("Dense", "d", [kt("add")], units=2),
            lyr("Dense", "ok", [kt("a")], units=5),
        ],
        ["a", "b"],
        [("d", 0, 0), ("ok", 0, 0)],
    )
    result = infer_shapes(g)
    assert kinds(result) == [("add", "broadcast")]
    assert result.problems[0].severity == "error"
    assert "(None, 3)" in result.problems[0].message and "(None, 4)" in result.problems[0].message
    assert result.outputs[("add", 0)] == [None]
    assert result.outputs[("d", 0)] == [None]  # unknown downstream, no cascade of problems
    assert result.outputs[("ok", 0)] == [(None, 5)]


def test_broadcasting_merge_and_concat_mismatch() -> None:
    g = model(
        [
            inp("a", [None, 5, 3]),
            inp("b", [None, 1, 3]),
            lyr("Multiply", "mul", [[kt("a"), kt("b")]]),
            lyr("Concatenate", "cat", [[kt("a"), kt("b")]], axis=1),
            lyr("Concatenate", "bad", [[kt("a"), kt("b")]], axis=-1),
        ],
        ["a", "b"],
        [("mul", 0, 0), ("cat", 0, 0), ("bad", 0, 0)],
    )
    result = infer_shapes(g)
    assert result.outputs[("mul", 0)] == [(None, 5, 3)]
    assert result.outputs[("cat", 0)] == [(None, 6, 3)]
    assert kinds(result) == [("bad", "concat")]


def test_reshape_size_mismatch_and_minus_one() -> None:
    g = model(
        [
            inp("a", [None, 4, 6]),
            lyr("Reshape", "good", [kt("a")], target_shape=[-1, 3]),
            lyr("Reshape", "bad", [kt("a")], target_shape=[5, 5]),
            lyr("Reshape", "bad2", [kt("a")], target_shape=[-1, 5]),
            op("Reshape", "opr", [kt("a")], newshape=[-1, 24]),
        ],
        ["a"],
        [("good", 0, 0), ("bad", 0, 0), ("bad2", 0, 0), ("opr", 0, 0)],
    )
    result = infer_shapes(g)
    assert result.outputs[("good", 0)] == [(None, 8, 3)]
    assert result.outputs[("opr", 0)] == [(None, 24)]
    assert sorted(kinds(result)) == [("bad", "reshape"), ("bad2", "reshape")]


def _with_weights(graph: ModelGraph, weights: dict[str, dict[str, tuple[int, ...]]]) -> ModelGraph:
    def weight(name: str, shape: tuple[int, ...]) -> Weight:
        return Weight(name, shape, "float32", "test", lambda shape=shape: np.zeros(shape, np.float32))

    return attach(graph, {(layer,): [weight(n, s) for n, s in ws.items()] for layer, ws in weights.items()})


def test_kernel_vs_input_dim_mismatch() -> None:
    g = model(
        [
            inp("a", [None, 8]),
            inp("img", [None, 10, 10, 3]),
            lyr("Dense", "d", [kt("a")], units=4),
            lyr("Conv2D", "c", [kt("img")], filters=2, kernel_size=[3, 3], padding="valid"),
        ],
        ["a", "img"],
        [("d", 0, 0), ("c", 0, 0)],
    )
    g = _with_weights(g, {"d": {"kernel": (6, 4), "bias": (4,)}, "c": {"kernel": (3, 3, 4, 2), "bias": (2,)}})
    result = infer_shapes(g)
    assert sorted(kinds(result)) == [("c", "weight_shape"), ("d", "weight_shape")]
    message = next(p.message for p in result.problems if p.layer == "d")
    assert "(6, 4)" in message and "(8, 4)" in message
    assert result.outputs[("d", 0)] == [(None, 4)]  # the config still decides the output
    assert result.outputs[("c", 0)] == [(None, 8, 8, 2)]


def test_zero_dims_tensor_index_and_unknown_class() -> None:
    g = model(
        [
            inp("a", [None, 4, 6]),
            lyr("Cropping1D", "crop", [kt("a")], cropping=[2, 2]),
            op("Split", "split", [kt("a")], indices_or_sections=2, axis=-1),
            lyr("Dense", "d", [kt("split", 0, 3)], units=2),
            lyr("MyCustomLayer", "custom", [kt("a")]),
            lyr("Dense", "after", [kt("custom")], units=2),
        ],
        ["a"],
        [("crop", 0, 0), ("d", 0, 0), ("after", 0, 0)],
    )
    result = infer_shapes(g)
    got = {(p.layer, p.kind): p.severity for p in result.problems}
    assert got == {
        ("crop", "bad_dim"): "error",
        ("d", "tensor_index"): "error",
        ("custom", "unknown_class"): "info",
    }
    assert result.outputs[("crop", 0)] == [(None, None, 6)]
    assert result.outputs[("split", 0)] == [(None, 4, 3), (None, 4, 3)]
    assert result.outputs[("after", 0)] == [None]


def test_never_raises_on_garbage_config() -> None:
    g = model(
        [
            inp("a", [None, 4]),
            lyr("Dense", "d", [kt("a")], units="many"),
            lyr("Conv2D", "c", [kt("a")], filters=2, kernel_size=3),
            lyr("Permute", "p", [kt("a")], dims=[3, 1]),
        ],
        ["a"],
        [("d", 0, 0), ("c", 0, 0), ("p", 0, 0)],
    )
    result = infer_shapes(g)
    assert sorted(kinds(result)) == [("c", "rank"), ("d", "config"), ("p", "config")]


def test_input_override_and_missing_shape() -> None:
    g = model(
        [
            inp("a", [None, None, 3]),
            lyr("Conv1D", "c", [kt("a")], filters=4, kernel_size=3, strides=2, padding="same"),
        ],
        ["a"],
        [("c", 0, 0)],
    )
    assert infer_shapes(g).outputs[("c", 0)] == [(None, None, 4)]
    assert infer_shapes(g, {"a": (None, 9, 3)}).outputs[("c", 0)] == [(None, 5, 4)]


def test_keras2_tfoplambda_nodes() -> None:
    envelope = {
        "class_name": "Functional",
        "config": {
            "name": "m",
            "layers": [
                {
                    "class_name": "InputLayer",
                    "config": {"batch_input_shape": [None, 4, 6], "dtype": "float32", "name": "x"},
                    "name": "x",
                    "inbound_nodes": [],
                },
                {
                    "class_name": "TFOpLambda",
                    "config": {
                        "name": "tf.split",
                        "function": "split",
                        "dtype": "float32",
                        "trainable": True,
                    },
                    "name": "tf.split",
                    "inbound_nodes": [["x", 0, 0, {"num_or_size_splits": [1, -1], "axis": 1}]],
                },
                {
                    "class_name": "SlicingOpLambda",
                    "config": {
                        "name": "tf.__operators__.getitem",
                        "function": "__operators__.getitem",
                        "dtype": "float32",
                        "trainable": True,
                    },
                    "name": "tf.__operators__.getitem",
                    "inbound_nodes": [
                        [
                            "tf.split",
                            0,
                            1,
                            {
                                "slice_spec": [
                                    {"start": None, "stop": None, "step": None},
                                    0,
                                    {"start": 1, "stop": None, "step": 2},
                                ]
                            },
                        ]
                    ],
                },
                {
                    "class_name": "TFOpLambda",
                    "config": {
                        "name": "tf.math.reduce_mean",
                        "function": "math.reduce_mean",
                        "dtype": "float32",
                        "trainable": True,
                    },
                    "name": "tf.math.reduce_mean",
                    "inbound_nodes": [["x", 0, 0, {"axis": -1, "keepdims": True}]],
                },
                {
                    "class_name": "TFOpLambda",
                    "config": {
                        "name": "tf.__operators__.add",
                        "function": "__operators__.add",
                        "dtype": "float32",
                        "trainable": True,
                    },
                    "name": "tf.__operators__.add",
                    "inbound_nodes": [["x", 0, 0, {"y": ["tf.math.reduce_mean", 0, 0], "name": None}]],
                },
            ],
            "input_layers": [["x", 0, 0]],
            "output_layers": [["tf.__operators__.getitem", 0, 0], ["tf.__operators__.add", 0, 0]],
        },
    }
    result = infer_shapes(build_graph(envelope, keras_version="2.15.0"))
    assert not result.problems
    assert result.outputs[("tf.split", 0)] == [(None, 1, 6), (None, 3, 6)]
    assert result.outputs[("tf.__operators__.getitem", 0)] == [(None, 3)]
    assert result.outputs[("tf.__operators__.add", 0)] == [(None, 4, 6)]


@pytest.mark.parametrize(
    ("cls", "config", "shape", "want"),
    [
        (
            "Conv2D",
            {"filters": 8, "kernel_size": [3, 5], "strides": [2, 3], "padding": "same"},
            (None, 17, 19, 3),
            (None, 9, 7, 8),
        ),
        (
            "Conv2D",
            {"filters": 8, "kernel_size": 3, "dilation_rate": 2},
            (None, 17, 19, 3),
            (None, 13, 15, 8),
        ),
        (
            "Conv2D",
            {"filters": 4, "kernel_size": 3, "data_format": "channels_first"},
            (None, 3, 10, 12),
            (None, 4, 8, 10),
        ),
        (
            "Conv1D",
            {"filters": 4, "kernel_size": 3, "dilation_rate": 2, "padding": "causal"},
            (None, 32, 3),
            (None, 32, 4),
        ),
        (
            "Conv2DTranspose",
            {"filters": 4, "kernel_size": 3, "strides": 2, "padding": "same", "output_padding": 1},
            (None, 9, 7, 8),
            (None, 18, 14, 4),
        ),
        (
            "Conv2DTranspose",
            {"filters": 4, "kernel_size": [2, 3], "strides": [3, 2], "padding": "valid"},
            (None, 9, 7, 8),
            (None, 27, 15, 4),
        ),
        ("Conv1DTranspose", {"filters": 5, "kernel_size": 4, "strides": 3}, (None, 15, 4), (None, 46, 5)),
        (
            "DepthwiseConv2D",
            {"kernel_size": 3, "depth_multiplier": 3, "padding": "same"},
            (None, 17, 19, 3),
            (None, 17, 19, 9),
        ),
        (
            "SeparableConv2D",
            {"filters": 5, "kernel_size": 3, "strides": 2},
            (None, 17, 19, 3),
            (None, 8, 9, 5),
        ),
        ("MaxPooling2D", {"pool_size": [3, 2], "strides": [2, 1]}, (None, 17, 19, 3), (None, 8, 18, 3)),
        ("AveragePooling3D", {"pool_size": 3, "padding": "same"}, (None, 9, 10, 11, 2), (None, 3, 4, 4, 2)),
        ("GlobalAveragePooling2D", {"keepdims": True}, (None, 17, 19, 3), (None, 1, 1, 3)),
        ("ZeroPadding2D", {"padding": [[1, 2], [3, 4]]}, (None, 6, 8, 3), (None, 9, 15, 3)),
        ("Cropping3D", {"cropping": 1}, (None, 4, 6, 8, 2), (None, 2, 4, 6, 2)),
        ("UpSampling2D", {"size": [2, 3]}, (None, 6, 8, 3), (None, 12, 24, 3)),
        ("Permute", {"dims": [3, 1, 2]}, (None, 6, 8, 3), (None, 3, 6, 8)),
        ("Flatten", {}, (None, 6, 8, 3), (None, 144)),
        ("Resizing", {"height": 5, "width": 7}, (None, 6, 8, 3), (None, 5, 7, 3)),
        (
            "EinsumDense",
            {"equation": "ab,bcd->acd", "output_shape": [3, 4], "bias_axes": "cd"},
            (None, 12),
            (None, 3, 4),
        ),
        ("Embedding", {"input_dim": 50, "output_dim": 8}, (None, 10), (None, 10, 8)),
        (
            "ConvLSTM2D",
            {"filters": 2, "kernel_size": 3, "strides": 2, "return_sequences": True},
            (None, 4, 8, 8, 3),
            (None, 4, 3, 3, 2),
        ),
    ],
)
def test_layer_rules(cls: str, config: dict[str, Any], shape: tuple[Any, ...], want: tuple[Any, ...]) -> None:
    g = model([inp("a", list(shape)), lyr(cls, "l", [kt("a")], **config)], ["a"], [("l", 0, 0)])
    result = infer_shapes(g)
    assert not result.problems, [str(p) for p in result.problems]
    assert result.outputs[("l", 0)] == [want]


def test_rnn_bidirectional_and_attention_outputs() -> None:
    lstm = {
        "class_name": "LSTM",
        "config": {"name": "f", "units": 4, "return_sequences": True, "return_state": True},
    }
    g = model(
        [
            inp("a", [None, 7, 5]),
            lyr("LSTM", "lstm", [kt("a")], units=3, return_state=True),
            lyr("Bidirectional", "bi", [kt("a")], layer=lstm, merge_mode=None),
            lyr("Bidirectional", "bic", [kt("a")], layer=lstm, merge_mode="concat"),
            lyr("TimeDistributed", "td", [kt("a")], layer={"class_name": "Dense", "config": {"units": 2}}),
            lyr(
                "MultiHeadAttention",
                "mha",
                [kt("a"), kt("td")],
                {"return_attention_scores": True},
                num_heads=2,
                key_dim=4,
                output_shape=6,
            ),
        ],
        ["a"],
        [("lstm", 0, 0), ("bi", 0, 0), ("bic", 0, 0), ("mha", 0, 0)],
    )
    result = infer_shapes(g)
    assert not result.problems, [str(p) for p in result.problems]
    assert result.outputs[("lstm", 0)] == [(None, 3)] * 3
    assert result.outputs[("bi", 0)] == [(None, 7, 4), (None, 7, 4)] + [(None, 4)] * 4
    assert result.outputs[("bic", 0)] == [(None, 7, 8)] + [(None, 4)] * 4
    assert result.outputs[("td", 0)] == [(None, 7, 2)]
    assert result.outputs[("mha", 0)] == [(None, 7, 6), (None, 2, 7, 7)]
    assert result.expected["mha"]["value/kernel"] == (2, 2, 4)
    assert result.expected["bi"]["backward/recurrent_kernel"] == (4, 16)


def test_op_rules() -> None:
    g = model(
        [
            inp("a", [None, 4, 6]),
            op(
                "GetItem",
                "gi",
                [
                    kt("a"),
                    [
                        slice(None),
                        {"class_name": "__slice__", "config": {"start": 1, "stop": None, "step": None}},
                        2,
                    ],
                ],
            ),
            op("GetItem", "gi2", [kt("a"), [{"class_name": "__ellipsis__", "config": {}}, None, 0]]),
            op("Split", "sp", [kt("a")], indices_or_sections=[1, 3], axis=1),
            op("Mean", "mean", [kt("a")], axis=[1, 2], keepdims=True),
            op("Transpose", "tr", [kt("a")], axes=[0, 2, 1]),
            op("Matmul", "mm", [kt("a"), kt("tr")]),
            op("NotEqual", "ne", [kt("a"), 0]),
            op("Squeeze", "sq", [kt("mean")], axis=-1),
        ],
        ["a"],
        [("gi", 0, 0), ("gi2", 0, 0), ("sp", 0, 0), ("mm", 0, 0), ("ne", 0, 0), ("sq", 0, 0)],
    )
    result = infer_shapes(g)
    assert not result.problems, [str(p) for p in result.problems]
    assert result.outputs[("gi", 0)] == [(None, 3)]
    assert result.outputs[("gi2", 0)] == [(None, 4, 1)]
    assert result.outputs[("sp", 0)] == [(None, 1, 6), (None, 2, 6), (None, 1, 6)]
    assert result.outputs[("mean", 0)] == [(None, 1, 1)]
    assert result.outputs[("mm", 0)] == [(None, 4, 4)]
    assert result.dtypes[("ne", 0)] == ["bool"]
    assert result.outputs[("sq", 0)] == [(None, 1)]


def test_expected_weights_api() -> None:
    g = model(
        [
            inp("a", [None, 5, 12]),
            lyr("Dense", "d", [kt("a")], units=7, use_bias=False),
            lyr("BatchNormalization", "bn", [kt("a")], axis=1, scale=False),
            lyr("MultiHeadAttention", "mha", [kt("a"), kt("a")], num_heads=2, key_dim=3),
            lyr("Mystery", "x", [kt("a")]),
        ],
        ["a"],
        [("d", 0, 0), ("bn", 0, 0), ("mha", 0, 0), ("x", 0, 0)],
    )
    assert expected_weights(g.layer("d"), (None, 5, 12)) == {"kernel": (12, 7)}
    assert expected_weights(g.layer("bn"), [(None, 5, 12)]) == {
        "beta": (5,),
        "moving_mean": (5,),
        "moving_variance": (5,),
    }
    mha = expected_weights(g.layer("mha"), {"query": (None, 5, 12), "value": (None, 9, 10)})
    assert (
        mha is not None and mha["key/kernel"] == (10, 2, 3) and mha["attention_output/kernel"] == (2, 3, 12)
    )
    assert expected_weights(g.layer("x"), (None, 5, 12)) is None
    assert expected_weights(g.layer("d")) is None  # no build_config and no shape given


def test_conv_groups_are_checked_by_one_rule_in_shapes_and_the_kernel() -> None:
    """catalogue.conv.check_groups: the shape rule and the conv kernel refuse the same config alike."""
    from modelgraph.runner.registry import KernelSpec, get_kernel

    g = model(
        [
            inp("img", [None, 10, 10, 4]),
            lyr("Conv2D", "c", [kt("img")], filters=6, kernel_size=[3, 3], groups=4),
        ],
        ["img"],
        [("c", 0, 0)],
    )
    message = next(p.message for p in infer_shapes(g).problems if p.layer == "c")
    assert "filters=6 is not divisible by groups=4" in message
    kernel = np.zeros((3, 3, 1, 6), np.float32)
    spec = KernelSpec("c", "Conv2D", {"filters": 6, "kernel_size": [3, 3], "groups": 4}, {"kernel": kernel})
    with pytest.raises(ValueError, match="filters=6 is not divisible by groups=4"):
        get_kernel("Conv2D")(spec)
