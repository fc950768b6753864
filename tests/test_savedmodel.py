"""tf.keras SavedModel directories and TensorFlow checkpoints, replayed without TensorFlow.

The samples were written by tf_keras 2.21 (samples/gen_savedmodel.py): each model as a SavedModel
directory, a legacy .h5, a to_json() config and a save_weights checkpoint (two also as a
tf.train.Checkpoint with Adam slots), with tf_keras's outputs on seeded inputs.
samples/verify_savedmodel.py converted each one to .keras and loaded it with real Keras 3;
these tests pin the files it verified.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import struct
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import modelgraph
from modelgraph.errors import FormatError, LoadError, UnsupportedFormatError
from modelgraph.loading.detect import detect

from ._savedmodel_samples import GOLDENS, SM, assert_runs_to_tf_keras, golden_arrays, invoke

ROOT = Path(__file__).resolve().parent.parent
MODELS = sorted(GOLDENS)
RUNNABLE = [m for m in MODELS if m != "lambda_model"]
TRAINED = sorted(m for m, g in GOLDENS.items() if "train_ckpt" in g["files"])
VERIFIED = json.loads((SM / "verified.json").read_text())["cases"]


def _layout(graph) -> list:
    """Every layer (nested too) with its depth and its weights' names, shapes and dtypes."""
    return [
        (path, layer.class_name, layer.depth, [(w.name, w.shape, w.dtype) for w in layer.weights])
        for path, layer in graph.walk()
    ]


def _values(graph) -> list[np.ndarray]:
    return [w.read() for _, layer in graph.walk() for w in layer.weights]


def _same_as_h5(graph, name: str) -> None:
    h5 = modelgraph.load(SM / f"{name}.h5")
    assert _layout(graph) == _layout(h5)
    assert [n.depth for n in graph.nodes] == [n.depth for n in h5.nodes]
    for got, want in zip(_values(graph), _values(h5), strict=True):
        np.testing.assert_array_equal(got, want)


# --- detection ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", MODELS)
def test_savedmodel_directory_and_its_pb_are_detected(name):
    assert detect(SM / name) == "savedmodel"
    assert detect(SM / name / "saved_model.pb") == "savedmodel"


@pytest.mark.parametrize(
    "path", ["ckpt/seq_mlp", "ckpt/seq_mlp.index", "train_seq_mlp", "train_seq_mlp/ckpt-1.index"]
)
def test_checkpoints_are_weights_only(path):
    assert detect(SM / path) == "tf_checkpoint"
    if (SM / path).exists():  # a bare prefix is no file: the MODEL argument refuses it as usage
        result = invoke("inspect", SM / path)
        assert result.exit_code == 3
        assert "weights-only file (tf_checkpoint)" in result.output


def test_tf_module_savedmodel_is_refused_naming_what_is_missing():
    with pytest.raises(UnsupportedFormatError, match="SavedModel without Keras metadata"):
        detect(SM / "tf_module")
    result = invoke("inspect", SM / "tf_module")
    assert result.exit_code == 3
    assert "no keras_metadata.pb" in result.output and "Traceback" not in result.output


def test_subclassed_model_without_config_is_refused():
    with pytest.raises(
        UnsupportedFormatError, match=r"subclassed Keras model \('Scaler'\) without a layer graph"
    ):
        modelgraph.load(SM / "subclassed")
    assert invoke("inspect", SM / "subclassed").exit_code == 3


def _onnx_bytes() -> bytes:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
    )
    model = helper.make_model(graph, producer_name="test")
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _safetensors_bytes() -> bytes:
    header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    return struct.pack("<Q", len(header)) + header + np.zeros(2, "<f4").tobytes()


def _torch_zip(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
        zf.writestr("archive/version", b"3\n")


@pytest.mark.parametrize(
    ("name", "make", "what"),
    [
        ("model.onnx", lambda p: p.write_bytes(_onnx_bytes()), "an ONNX model"),
        ("model.safetensors", lambda p: p.write_bytes(_safetensors_bytes()), "a SafeTensors file"),
        ("model.pt", _torch_zip, "a PyTorch checkpoint"),
        (
            "model.tflite",
            lambda p: p.write_bytes(b"\x1c\x00\x00\x00TFL3" + bytes(40)),
            "a TensorFlow Lite flatbuffer",
        ),
        ("model.gguf", lambda p: p.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(16)), "a GGUF model"),
        (
            "loose.pb",
            lambda p: p.write_bytes((SM / "seq_mlp" / "saved_model.pb").read_bytes()),
            "outside its directory",
        ),
    ],
)
def test_other_formats_are_named_in_the_refusal(tmp_path, name, make, what):
    path = tmp_path / name
    make(path)
    with pytest.raises(FormatError, match=what):
        detect(path)
    result = invoke("inspect", path)
    assert result.exit_code == 3 and what in result.output


# --- the same model as the .h5 ------------------------------------------------------------------


@pytest.mark.parametrize("name", MODELS)
def test_savedmodel_gives_the_h5s_layers_depths_and_weights(name):
    graph = modelgraph.load(SM / name)
    assert graph.format == "savedmodel" and graph.keras_version == "2.21.0"
    _same_as_h5(graph, name)
    assert graph.metadata.get("weight_notes") == []


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("form", ["{name}", "{name}.index", "{name}.data-00000-of-00001"])
def test_save_weights_checkpoint_attaches_to_the_json_config(name, form):
    graph = modelgraph.load(SM / f"{name}.json", weights=SM / "ckpt" / form.format(name=name))
    _same_as_h5(graph, name)


@pytest.mark.parametrize("name", TRAINED)
@pytest.mark.parametrize("form", ["train_{name}", "train_{name}/ckpt-1", "train_{name}/ckpt-1.index"])
def test_training_checkpoint_folder_attaches_and_reports_optimizer_left_out(name, form):
    graph = modelgraph.load(SM / f"{name}.json", weights=SM / form.format(name=name))
    golden, feeds = golden_arrays(f"train_{name}")
    out = list(modelgraph.Runner(graph).run(feeds).values())
    np.testing.assert_allclose(out[0], golden["output/0"], atol=1e-4, rtol=1e-3)
    (note,) = graph.metadata["weight_notes"]
    assert "optimizer variable(s)" in note and "save_counter" in note


def test_checkpoint_of_another_model_is_refused():
    with pytest.raises(LoadError):
        modelgraph.load(SM / "seq_mlp.json", weights=SM / "ckpt" / "mha")


# --- commands -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", RUNNABLE)
def test_run_matches_tf_keras(name):
    assert_runs_to_tf_keras(modelgraph.load(SM / name), name)


@pytest.mark.parametrize("name", ["nested_shared", "bidi_lstm", "mha"])
def test_diff_savedmodel_and_h5_are_identical(name):
    result = invoke("diff", SM / name, SM / f"{name}.h5")
    assert result.exit_code == 0, result.output
    assert "identical" in result.output


def test_inspect_json_report(tmp_path):
    result = invoke("inspect", SM / "multi_io", "--format", "json")
    assert result.exit_code == 0
    h5 = invoke("inspect", SM / "multi_io.h5", "--format", "json")
    got, want = json.loads(result.output), json.loads(h5.output)
    assert [(r["name"], r.get("depth")) for r in got["layers"]] == [
        (r["name"], r.get("depth")) for r in want["layers"]
    ]


def test_validate_finds_the_lambda_once_as_in_the_h5():
    result = invoke("validate", SM / "lambda_model", "--format", "json")
    issues = json.loads(result.output)["results"][0]["issues"]
    sec = [(i["rule"], i["location"]["where"]) for i in issues if i["rule"].startswith("SEC")]
    h5 = json.loads(invoke("validate", SM / "lambda_model.h5", "--format", "json").output)["results"][0][
        "issues"
    ]
    assert sec == [("SEC001", "$.config.layers[2].config.function")]
    assert len([i for i in h5 if i["rule"] == "SEC001"]) == 1
    assert result.exit_code == 1


def test_validate_clean_savedmodel_and_checkpoint_weights():
    assert invoke("validate", SM / "bidi_lstm").exit_code == 0
    assert invoke("validate", SM / "seq_mlp.json", "--weights", SM / "ckpt" / "seq_mlp").exit_code == 0


@pytest.mark.parametrize("case", [c for c in VERIFIED if c["exit_code"] == 0], ids=lambda c: c["case"])
def test_converted_file_is_the_one_keras_3_verified(case, tmp_path):
    assert case["loads_in_safe_mode"] and case["outputs_within_tolerance"]
    args = case["command"]
    weights = ROOT / args[2] if len(args) == 3 else None
    out = tmp_path / "out.keras"
    modelgraph.save(modelgraph.load(ROOT / args[0], weights=weights), out)
    assert _canonical_hash(out) == case["canonical_hash"]


def test_onnxruntime_backend_export_extract_and_render(tmp_path):
    pytest.importorskip("onnxruntime")
    golden = np.load(SM / "goldens" / "cnn_bn.npz")
    np.savez(tmp_path / "in.npz", image=golden["input/image"])
    np.savez(tmp_path / "ref.npz", out=golden["output/0"])
    args = [
        "--input",
        tmp_path / "in.npz",
        "--expect",
        tmp_path / "ref.npz",
        "--atol",
        "1e-4",
        "--rtol",
        "1e-3",
    ]
    assert invoke("run", SM / "cnn_bn", "--backend", "onnxruntime", *args).exit_code == 0
    assert invoke("export", SM / "bidi_lstm", "-o", tmp_path / "m.onnx").exit_code == 0
    assert (
        invoke("extract", SM / "nested_shared", "--outputs", "inner", "-o", tmp_path / "s.keras").exit_code
        == 0
    )
    assert invoke("render", SM / "mha", "-o", tmp_path / "m.dot").exit_code == 0
    assert "mha" in (tmp_path / "m.dot").read_text()


def test_lambda_savedmodel_is_not_converted(tmp_path):
    result = invoke("convert", SM / "lambda_model", "-o", tmp_path / "x.keras")
    assert result.exit_code == 4 and not (tmp_path / "x.keras").exists()


def _canonical_hash(path: Path) -> str:
    spec = importlib.util.spec_from_file_location("convert_cases", ROOT / "samples" / "convert_cases.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("convert_cases", module)
    spec.loader.exec_module(module)
    return module.canonical_hash(path)


# --- hostile directories ------------------------------------------------------------------------


def _copy(tmp_path: Path, name: str = "seq_mlp") -> Path:
    target = tmp_path / name
    shutil.copytree(SM / name, target)
    return target


def test_truncated_keras_metadata_is_one_line_exit_3(tmp_path):
    folder = _copy(tmp_path)
    blob = (folder / "keras_metadata.pb").read_bytes()
    (folder / "keras_metadata.pb").write_bytes(blob[: len(blob) // 2])
    result = invoke("inspect", folder)
    assert result.exit_code == 3
    assert "not a Keras metadata protobuf" in result.output and len(result.output.strip().splitlines()) == 1


def test_metadata_json_is_under_the_json_caps(tmp_path):
    from modelgraph.loading.protos.keras_metadata_pb2 import SavedMetadata

    folder = _copy(tmp_path)
    message = SavedMetadata()
    node = message.nodes.add()
    node.node_path, node.identifier = "root", "_tf_keras_network"
    node.metadata = "[" * 100_000 + "]" * 100_000
    (folder / "keras_metadata.pb").write_bytes(message.SerializeToString())
    result = invoke("inspect", folder)
    assert result.exit_code == 3 and "Traceback" not in result.output


def test_symlink_in_savedmodel_is_a_finding_and_never_followed(tmp_path):
    folder = _copy(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("outside")
    (folder / "assets").mkdir(exist_ok=True)  # TensorFlow writes it empty; git keeps no empty folder
    os.symlink(secret, folder / "assets" / "link.txt")
    issues = json.loads(invoke("validate", folder, "--format", "json").output)["results"][0]["issues"]
    assert any(i["rule"] == "SEC102" and "link.txt" in i["message"] for i in issues)


def test_keras_metadata_symlink_is_refused(tmp_path):
    folder = _copy(tmp_path)
    (folder / "keras_metadata.pb").rename(tmp_path / "elsewhere.pb")
    os.symlink(tmp_path / "elsewhere.pb", folder / "keras_metadata.pb")
    result = invoke("inspect", folder)
    assert result.exit_code == 3 and "Traceback" not in result.output


def test_checkpoint_state_file_cannot_point_outside_its_folder(tmp_path):
    folder = tmp_path / "ck"
    shutil.copytree(SM / "train_seq_mlp", folder)
    (folder / "checkpoint").write_text('model_checkpoint_path: "../../etc/ckpt-1"\n')
    with pytest.raises(LoadError, match="not a checkpoint in its own folder"):
        modelgraph.load(SM / "seq_mlp.json", weights=folder)
