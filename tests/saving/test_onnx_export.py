"""``modelgraph export`` and the onnxruntime backend: files, names, refusals, determinism, options.

Parity of every sample with Keras's goldens is tests/runner/test_onnx_parity.py; this file checks the
command, the API and the exporter's structure on real Keras-made samples.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import json
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from modelgraph.cli.main import cli
from modelgraph.errors import ToolMissingError
from modelgraph.loading import load
from modelgraph.runner.interpreter import Runner

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from modelgraph.saving.onnx import ExportRefusedError, to_onnx  # noqa: E402
from modelgraph.saving.onnx.passes import cancel_transposes, optimise  # noqa: E402

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
CNN = SAMPLES / "k3" / "cnn.keras"
GOLDEN_CNN = SAMPLES / "goldens" / "k3_cnn.npz"


def invoke(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def golden(stem: str) -> dict[str, np.ndarray]:
    with np.load(SAMPLES / "goldens" / f"{stem}.npz", allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def session(model) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_cli_export_writes_a_checked_model_with_keras_names(tmp_path):
    out = tmp_path / "sub" / "cnn.onnx"
    result = invoke("export", CNN, "-o", out, "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["inputs"] == ["img"] and report["outputs"] == ["probs"]
    assert report["bytes"] == out.stat().st_size
    model = onnx.load(str(out))
    onnx.checker.check_model(model, full_check=True)
    assert [i.name for i in model.graph.input] == ["img"]
    assert [o.name for o in model.graph.output] == ["probs"]
    props = {p.key: p.value for p in model.metadata_props}
    assert props["keras_version"] == "3.15.1" and props["source_format"]
    g = golden("k3_cnn")
    (y,) = session(model).run(None, {"img": g["input/img"]})
    np.testing.assert_allclose(y, g["output/0"], atol=1e-5, rtol=1e-4)
    assert not [p for p in out.parent.iterdir() if p.name != "cnn.onnx"], "temporary file left behind"


def test_export_is_deterministic(tmp_path):
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    assert invoke("export", CNN, "-o", a).exit_code == 0
    assert invoke("export", CNN, "-o", b).exit_code == 0
    assert a.read_bytes() == b.read_bytes()


def test_batch_option_fixes_the_batch_dimension(tmp_path):
    out = tmp_path / "cnn.onnx"
    assert invoke("export", CNN, "-o", out, "--batch", "2").exit_code == 0
    model = onnx.load(str(out))
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 2
    assert model.graph.output[0].type.tensor_type.shape.dim[0].dim_value == 2
    dynamic = to_onnx(load(CNN)).model
    assert dynamic.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    bad = invoke("export", CNN, "-o", out, "--batch", "0")
    assert bad.exit_code == 2


@pytest.mark.parametrize("opset", [17, 18, 21])
@pytest.mark.parametrize("stem", ["k3_cnn", "k3_mha", "k2_mask_rnn", "k2_passthrough", "k2_transposed"])
def test_every_supported_opset_runs_to_the_golden(stem, opset):
    meta = json.loads((SAMPLES / "goldens" / f"{stem}.json").read_text())["files"]
    graph = load(SAMPLES / (meta.get("keras") or meta["h5"]))
    model = to_onnx(graph, opset=opset).model
    assert model.opset_import[0].version == opset
    g = golden(stem)
    runner = Runner(graph)
    feeds = {i.name: runner._cast(g[f"input/{i.name}"], n) for n, i in enumerate(runner.inputs)}
    outs = session(model).run(None, feeds)
    for i, y in enumerate(outs):
        np.testing.assert_allclose(y, g[f"output/{i}"], atol=1e-5, rtol=1e-4, equal_nan=True)


def _with_classes(src: Path, dst: Path, renames: dict[str, str]) -> Path:
    """A copy of a .keras file whose named layers claim other classes."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item)
            if item.filename == "config.json":
                config = json.loads(data)
                for layer in config["config"]["layers"]:
                    if layer["config"]["name"] in renames:
                        layer["class_name"] = renames[layer["config"]["name"]]
                data = json.dumps(config).encode()
            zout.writestr(item, data)
    return dst


def test_unmappable_layers_are_all_named_and_nothing_is_written(tmp_path):
    model = _with_classes(CNN, tmp_path / "odd.keras", {"relu1": "MyCustomLayer", "drop": "OtherCustomLayer"})
    out = tmp_path / "odd.onnx"
    result = CliRunner().invoke(cli, ["export", str(model), "-o", str(out)])
    assert result.exit_code == 4
    message = result.stderr if hasattr(result, "stderr") else result.output
    assert message.startswith("modelgraph: error: cannot export to ONNX: 2 layer(s)")
    assert "relu1 (MyCustomLayer)" in message and "drop (OtherCustomLayer)" in message
    assert not out.exists() and not list(tmp_path.glob("*.tmp"))


def test_refusal_error_lists_every_problem_in_graph_order():
    graph = load(CNN)
    layers = tuple(
        dataclasses.replace(lyr, class_name="Unknown") if lyr.name in ("bn1", "cat2") else lyr
        for lyr in graph.layers
    )
    with pytest.raises(ExportRefusedError) as info:
        to_onnx(dataclasses.replace(graph, layers=layers))
    assert [p[0] for p in info.value.problems] == ["bn1", "cat2"]
    assert all("no ONNX mapping for layer class 'Unknown'" in p[2] for p in info.value.problems)


def test_refusal_quotes_the_catalogue_reason():
    graph = load(CNN)
    layers = tuple(
        dataclasses.replace(lyr, class_name="Cumprod", kind="op", config={"axis": 1})
        if lyr.name == "bn1"
        else lyr
        for lyr in graph.layers
    )
    with pytest.raises(ExportRefusedError) as info:
        to_onnx(dataclasses.replace(graph, layers=layers))
    assert info.value.problems == [
        (
            "bn1",
            "Cumprod",
            "no ONNX mapping for layer class 'op:Cumprod': "
            "ONNX has a cumulative sum (CumSum) but no cumulative product",
        )
    ]


def test_missing_onnx_is_a_clear_unsupported_error(tmp_path, monkeypatch):
    import modelgraph.saving.onnx._onnx as onnx_module

    monkeypatch.setattr(onnx_module, "onnx", None)
    result = CliRunner().invoke(cli, ["export", str(CNN), "-o", str(tmp_path / "x.onnx")])
    assert result.exit_code == 4
    assert "pip install 'modelgraph[onnx]'" in result.output
    assert not (tmp_path / "x.onnx").exists()


def test_missing_onnxruntime(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    graph = load(CNN)
    with pytest.raises(ToolMissingError, match=r"modelgraph\[ort\]"):
        Runner(graph, backend="onnxruntime")
    fallback = Runner(graph, backend="auto")
    assert fallback.backend == "numpy" and fallback.steps  # the NumPy plan, built after all
    result = CliRunner().invoke(cli, ["run", str(CNN), "--random", "--backend", "onnxruntime"])
    assert result.exit_code == 4 and "modelgraph[ort]" in result.output


def test_the_onnxruntime_backend_builds_no_numpy_kernels():
    """The backend is chosen first; the plan then only binds feeds and names outputs."""
    g = golden("k3_cnn")
    runner = Runner(load(CNN), backend="onnxruntime")
    assert runner.steps == [] and runner.weight_bytes == 0
    assert runner.input_names == ["img"] and runner.output_keys == ["probs"]
    sliced = runner.run({"img": g["input/img"]}, batch_size=1)
    np.testing.assert_allclose(sliced["probs"], g["output/0"], atol=1e-5, rtol=1e-4)


def test_run_backend_onnxruntime_matches_the_golden_with_batching():
    result = invoke("run", CNN, "--backend", "onnxruntime", "--expect", GOLDEN_CNN, "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["backend"] == "onnxruntime" and report["comparison"]["passed"]
    g = golden("k3_cnn")
    runner = Runner(load(CNN), backend="auto")
    assert runner.backend == "onnxruntime"
    sliced = runner.run({"img": g["input/img"]}, batch_size=1)
    np.testing.assert_allclose(sliced["probs"], g["output/0"], atol=1e-5, rtol=1e-4)
    tapped = CliRunner().invoke(
        cli, ["run", str(CNN), "--random", "--backend", "onnxruntime", "--tap", "conv1"]
    )
    assert tapped.exit_code == 2


def test_convolution_chains_stay_channels_first():
    model = to_onnx(load(SAMPLES / "k3" / "app_mobilenetv2.keras")).model
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("Conv") == 52 and ops.count("Transpose") == 1


def test_mobilenetv2_exports_lean():
    """BatchNormalization folded into the convolutions (and Dense) before it, ZeroPadding2D into the
    strided depthwise convolutions after it, the output named at its source: fewer nodes than
    tf2onnx writes for the same model (140), the same graph once onnxruntime has optimised it."""
    model = to_onnx(load(SAMPLES / "k3" / "app_mobilenetv2.keras")).model
    ops = collections.Counter(n.op_type for n in model.graph.node)
    assert ops == {
        "Conv": 52,
        "Clip": 35,  # ReLU6, fused into the convolutions by onnxruntime
        "Add": 10,  # the residual sums
        "Transpose": 1,  # NHWC input -> NCHW
        "GlobalAveragePool": 1,
        "Flatten": 1,
        "Gemm": 1,
    }
    read = {i for n in model.graph.node for i in n.input}
    assert all(t.name in read for t in model.graph.initializer)


def _lean_pair(nodes, initializers, outputs):
    """The same nodes before and after the passes, as two runnable models."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 7, 6, 2])
    ys = [onnx.helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, None) for o in outputs]

    def model(ns, inits):
        g = onnx.helper.make_graph(ns, "g", [x], ys, inits)
        return onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 17)])

    before = model(copy.deepcopy(nodes), initializers)
    lean = optimise(nodes, set(outputs), initializers)
    return before, model(lean.nodes, lean.initializers), lean


def test_zero_pads_fold_into_the_conv_they_feed_even_through_a_transpose():
    from onnx import numpy_helper

    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(np.array([0, 2, 1, 0, 0, 1, 3, 0], np.int64), "pads_nhwc"),
        numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads_nchw"),
        numpy_helper.from_array(rng.standard_normal((3, 2, 3, 3)).astype(np.float32), "w"),
    ]
    make = onnx.helper.make_node
    nodes = [
        make("Pad", ["x", "pads_nhwc"], ["p"]),  # the ZeroPadding2D of an NHWC input
        _transpose("p", "pt", [0, 3, 1, 2]),
        make("Conv", ["pt", "w"], ["c"], kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 0]),
        make("Pad", ["c", "pads_nchw"], ["q"]),  # a zero pad before MaxPool is not its -inf padding
        make("MaxPool", ["q"], ["y"], kernel_shape=[2, 2]),
        make("Identity", ["c"], ["conv_out"]),
    ]
    before, after, lean = _lean_pair(nodes, inits, ["y", "conv_out"])
    assert [n.op_type for n in lean.nodes] == ["Transpose", "Conv", "Pad", "MaxPool"]
    conv = lean.nodes[1]
    assert list(lean.nodes[0].input) == ["x"] and list(conv.output) == ["conv_out"]
    assert [list(a.ints) for a in conv.attribute if a.name == "pads"] == [[2, 1, 2, 3]]
    assert "pads_nhwc" not in {t.name for t in lean.initializers}
    assert lean.reshaped == {"pt"}
    feed = {"x": rng.standard_normal((1, 7, 6, 2)).astype(np.float32)}
    want = session(before).run(None, feed)
    got = session(after).run(None, feed)
    for a, b in zip(want, got, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-6)


def test_shared_nested_model_stores_its_weights_once():
    graph = load(SAMPLES / "wild" / "nested_twice.keras")
    model = to_onnx(graph).model
    stored = sum(np.prod(i.dims) for i in model.graph.initializer)
    assert stored <= graph.param_count + 64  # the weights once, plus a few shape constants


def test_quantized_layers_are_dequantized_and_say_so():
    model = to_onnx(load(SAMPLES / "k3" / "quant_int8.keras")).model
    props = {p.key: p.value for p in model.metadata_props}
    assert props["dequantized_layers"]
    assert "dequantized" in model.doc_string
    assert all(
        i.data_type == onnx.TensorProto.FLOAT or i.data_type == onnx.TensorProto.INT64
        for i in model.graph.initializer
    )


def test_integer_inputs_keep_their_dtype():
    model = to_onnx(load(SAMPLES / "k3" / "rnn_mask.keras")).model
    kinds = {i.name: i.type.tensor_type.elem_type for i in model.graph.input}
    assert onnx.TensorProto.FLOAT not in kinds.values() or len(kinds) > 1


def test_python_api_export(tmp_path):
    import modelgraph

    result = modelgraph.export_onnx(modelgraph.load(CNN), tmp_path / "m.onnx", batch=1)
    assert result.input_names == ["img"] and (tmp_path / "m.onnx").stat().st_size > 0


def _transpose(inp: str, out: str, perm: list[int]):
    return onnx.helper.make_node("Transpose", [inp], [out], perm=perm)


def test_transpose_pass_cancels_inverse_pairs_and_composes_others():
    nodes = [
        _transpose("x", "a", [0, 3, 1, 2]),
        _transpose("a", "b", [0, 2, 3, 1]),
        onnx.helper.make_node("Relu", ["b"], ["y"]),
    ]
    kept = cancel_transposes(nodes, {"y"})
    assert [n.op_type for n in kept] == ["Relu"] and list(kept[0].input) == ["x"]
    nodes = [_transpose("x", "a", [0, 3, 1, 2]), _transpose("a", "y", [0, 3, 1, 2])]
    kept = cancel_transposes(nodes, {"y"})
    assert len(kept) == 1 and list(kept[0].attribute[0].ints) == [0, 2, 3, 1]
    assert list(kept[0].input) == ["x"] and list(kept[0].output) == ["y"]


def test_config_only_model_asks_for_its_weights(tmp_path):
    out = tmp_path / "m.onnx"
    result = CliRunner().invoke(cli, ["export", str(SAMPLES / "k3" / "cnn.json"), "-o", str(out)])
    assert result.exit_code == 2 and "--weights FILE" in result.output
    ok = invoke(
        "export", SAMPLES / "k3" / "cnn.json", "--weights", SAMPLES / "k3" / "cnn.weights.h5", "-o", out
    )
    assert ok.exit_code == 0 and out.exists()


def test_python_run_with_backend():
    import modelgraph

    g = golden("k3_cnn")
    out = modelgraph.run(CNN, g["input/img"], backend="onnxruntime")
    np.testing.assert_allclose(out["probs"], g["output/0"], atol=1e-5, rtol=1e-4)
