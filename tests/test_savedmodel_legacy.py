"""SavedModels in the layout TensorFlow 2.0-2.3 wrote: Keras metadata inside saved_model.pb.

samples/gen_savedmodel.py made ``samples/savedmodel/legacy/NAME`` from a tf_keras 2.21 SavedModel of
each model by moving every Keras node's JSON metadata into its ``SavedUserObject.metadata`` (with
TensorFlow's own protobuf messages) and removing keras_metadata.pb; tf_keras loaded each one back
through its pre-2.4 path to the same outputs. These tests replay them without TensorFlow: each must
read exactly like the same model's .h5 and its keras_metadata.pb directory.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import modelgraph
from modelgraph.errors import UnsupportedFormatError
from modelgraph.loading.detect import detect
from modelgraph.loading.keras_metadata import read_keras_metadata
from modelgraph.loading.protos import saved_model_pb2
from modelgraph.loading.saved_object_graph import legacy_metadata_nodes, object_paths, read_object_graph

from ._savedmodel_samples import GOLDENS, SM, assert_runs_to_tf_keras, invoke

LEGACY = SM / "legacy"
MODELS = sorted(m for m, g in GOLDENS.items() if "legacy_savedmodel" in g["files"])


def _layout(graph) -> list:
    return [
        (path, layer.class_name, layer.depth, [(w.name, w.shape, w.dtype) for w in layer.weights])
        for path, layer in graph.walk()
    ]


def test_every_model_has_a_legacy_sample_without_keras_metadata_pb():
    assert len(MODELS) == len(GOLDENS) >= 14
    for name in MODELS:
        assert (LEGACY / name / "saved_model.pb").is_file()
        assert not (LEGACY / name / "keras_metadata.pb").exists()
        assert GOLDENS[name]["legacy_reload_max_abs_err"] <= 1e-6  # tf_keras read it back itself


@pytest.mark.parametrize("name", MODELS)
def test_legacy_directory_and_its_pb_are_detected(name):
    assert detect(LEGACY / name) == "savedmodel"
    assert detect(LEGACY / name / "saved_model.pb") == "savedmodel"


@pytest.mark.parametrize("name", MODELS)
def test_legacy_metadata_holds_the_same_documents_as_keras_metadata_pb(name):
    """The object graph gives every node path, identifier and JSON document tf_keras wrote into the
    keras_metadata.pb of the same model (node ids differ: the legacy sample was saved without traces)."""
    legacy = legacy_metadata_nodes(read_object_graph(LEGACY / name))
    current = read_keras_metadata(SM / name)
    assert legacy[0].node_id == 0 and legacy[0].node_path == "root"
    got = sorted(
        (n.node_path, n.identifier, json.dumps(json.loads(n.metadata), sort_keys=True)) for n in legacy
    )
    want = sorted(
        (n.node_path, n.identifier, json.dumps(json.loads(n.metadata), sort_keys=True)) for n in current
    )
    assert got == want


@pytest.mark.parametrize("name", MODELS)
def test_legacy_savedmodel_gives_the_h5s_layers_depths_and_weights(name):
    graph = modelgraph.load(LEGACY / name)
    h5 = modelgraph.load(SM / f"{name}.h5")
    assert graph.format == "savedmodel" and graph.keras_version == "2.21.0"
    assert _layout(graph) == _layout(h5)
    assert [n.depth for n in graph.nodes] == [n.depth for n in h5.nodes]
    got = [w.read() for _, layer in graph.walk() for w in layer.weights]
    want = [w.read() for _, layer in h5.walk() for w in layer.weights]
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
    assert graph.metadata.get("weight_notes") == []


@pytest.mark.parametrize("name", [m for m in MODELS if m != "lambda_model"])
def test_legacy_run_matches_tf_keras(name):
    assert_runs_to_tf_keras(modelgraph.load(LEGACY / name), name)


@pytest.mark.parametrize("name", ["nested_shared", "bidi_lstm", "nested_sequential"])
def test_diff_legacy_and_h5_are_identical(name):
    result = invoke("diff", LEGACY / name, SM / f"{name}.h5")
    assert result.exit_code == 0, result.output
    assert "identical" in result.output


def test_validate_finds_the_lambda_in_saved_model_pb_once():
    result = invoke("validate", LEGACY / "lambda_model", "--format", "json")
    issues = json.loads(result.output)["results"][0]["issues"]
    sec = [(i["rule"], i["location"]["where"]) for i in issues if i["rule"].startswith("SEC")]
    assert sec == [("SEC001", "$.config.layers[2].config.function")]
    assert result.exit_code == 1


def test_a_lambda_only_in_a_layer_node_is_found_there(tmp_path):
    """A gadget planted in a layer's own metadata (not in the root config) is scanned where it is."""
    folder = tmp_path / "m"
    shutil.copytree(LEGACY / "seq_mlp", folder)
    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((folder / "saved_model.pb").read_bytes())
    nodes = saved.meta_graphs[0].object_graph_def.nodes
    paths = object_paths(saved.meta_graphs[0].object_graph_def)
    layer = next(i for i, n in enumerate(nodes) if i and n.user_object.identifier == "_tf_keras_layer")
    doc = json.loads(nodes[layer].user_object.metadata)
    doc["config"]["activation"] = {"module": "os", "class_name": "system", "config": "echo hi"}
    nodes[layer].user_object.metadata = json.dumps(doc)
    (folder / "saved_model.pb").write_bytes(saved.SerializeToString())
    issues = json.loads(invoke("validate", folder, "--format", "json").output)["results"][0]["issues"]
    where = [i["location"]["where"] for i in issues if i["rule"].startswith("SEC0")]
    assert any(w.startswith(f"saved_model.pb:{paths[layer]}$") for w in where), where


def _rewrite(folder: Path, edit) -> None:
    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((folder / "saved_model.pb").read_bytes())
    edit(saved.meta_graphs[0].object_graph_def)
    (folder / "saved_model.pb").write_bytes(saved.SerializeToString())


def _copy(tmp_path: Path, name: str = "seq_mlp") -> Path:
    folder = tmp_path / name
    shutil.copytree(LEGACY / name, folder)
    return folder


def test_tf_saved_model_save_of_a_keras_model_is_refused():
    """TensorFlow wrote it (samples/gen_savedmodel.py): the objects keep their Keras identifiers,
    their metadata is empty and there is no keras_metadata.pb: exit 3, one line."""
    folder = SM / "keras_tf_saved_model"
    graph = read_object_graph(folder)
    assert graph.nodes[0].user_object.identifier == "_tf_keras_sequential"
    assert not graph.nodes[0].user_object.metadata and not legacy_metadata_nodes(graph)
    with pytest.raises(UnsupportedFormatError, match="SavedModel without Keras metadata"):
        detect(folder)
    result = invoke("inspect", folder)
    assert result.exit_code == 3 and len(result.output.strip().splitlines()) == 1
    assert "tf.saved_model.save" in result.output


def test_keras_objects_without_metadata_are_refused_like_tf_saved_model_save(tmp_path):
    """The same with every metadata field of a Keras-written legacy sample emptied."""
    folder = _copy(tmp_path)

    def strip(graph) -> None:
        for node in graph.nodes:
            node.user_object.metadata = ""

    _rewrite(folder, strip)
    with pytest.raises(UnsupportedFormatError, match="SavedModel without Keras metadata"):
        detect(folder)
    result = invoke("inspect", folder)
    assert result.exit_code == 3 and len(result.output.strip().splitlines()) == 1
    assert "no keras_metadata.pb" in result.output


def test_truncated_saved_model_pb_is_one_line_exit_3(tmp_path):
    folder = _copy(tmp_path)
    blob = (folder / "saved_model.pb").read_bytes()
    (folder / "saved_model.pb").write_bytes(blob[: len(blob) // 2])
    result = invoke("inspect", folder)
    assert result.exit_code == 3 and len(result.output.strip().splitlines()) == 1
    assert "not a TensorFlow SavedModel protobuf" in result.output


def test_cyclic_and_out_of_range_children_are_bounded(tmp_path):
    """Edges back to the root, to themselves and past the node list neither loop nor fail."""
    folder = _copy(tmp_path)

    def tangle(graph) -> None:
        for i, node in enumerate(graph.nodes):
            node.children.add(node_id=0, local_name="up")
            node.children.add(node_id=i, local_name="self")
            node.children.add(node_id=len(graph.nodes) + 5, local_name="nowhere")

    _rewrite(folder, tangle)
    graph = modelgraph.load(folder)
    assert _layout(graph) == _layout(modelgraph.load(SM / "seq_mlp.h5"))


def test_root_without_metadata_is_refused(tmp_path):
    folder = _copy(tmp_path)

    def drop_root(graph) -> None:
        graph.nodes[0].user_object.metadata = ""

    _rewrite(folder, drop_root)
    result = invoke("inspect", folder)
    assert result.exit_code == 3 and "Traceback" not in result.output


def test_legacy_metadata_json_is_under_the_json_caps(tmp_path):
    folder = _copy(tmp_path)

    def deep(graph) -> None:
        graph.nodes[0].user_object.metadata = "[" * 100_000 + "]" * 100_000

    _rewrite(folder, deep)
    result = invoke("inspect", folder)
    assert result.exit_code == 3 and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "blob",
    [
        b"\x0b" * 200_000,  # 200,000 nested groups
        b"\x12" + bytes([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]) + b"abc",  # a 2**42-byte meta graph
        b"\x12\x05\x3a\x03\x0a\x01",  # an object graph cut inside a node
    ],
    ids=["nested-groups", "length-bomb", "cut-node"],
)
def test_hostile_saved_model_pb_is_one_line_exit_3_and_one_validate_finding(tmp_path, blob):
    folder = _copy(tmp_path)
    (folder / "saved_model.pb").write_bytes(blob)
    assert detect(folder) == "savedmodel"  # a SavedModel by its files; loading says what is wrong
    result = invoke("inspect", folder)
    assert result.exit_code == 3 and len(result.output.strip().splitlines()) == 1
    assert "saved_model.pb: not a TensorFlow SavedModel protobuf" in result.output
    report = json.loads(invoke("validate", folder, "--format", "json").output)
    (checked,) = report["results"]
    rules = sorted(i["rule"] for i in checked["issues"])
    assert rules == ["SEC100", "STR001"], rules


def test_saved_model_pb_symlinked_outside_is_not_read(tmp_path):
    folder = _copy(tmp_path)
    (folder / "saved_model.pb").rename(tmp_path / "outside.pb")
    os.symlink(tmp_path / "outside.pb", folder / "saved_model.pb")
    result = invoke("inspect", folder)
    assert result.exit_code == 3 and len(result.output.strip().splitlines()) == 1
    assert "outside the model folder" in result.output


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_saved_model_pb_fifo_is_refused_without_blocking(tmp_path):
    folder = _copy(tmp_path)
    (folder / "saved_model.pb").unlink()
    os.mkfifo(folder / "saved_model.pb")
    result = invoke("inspect", folder)
    assert result.exit_code == 3 and "FIFO" in result.output


def test_every_legacy_sample_validates_without_errors_but_the_lambda():
    from modelgraph.validate.api import validate

    results = validate([LEGACY], check_values=True)
    assert sorted(Path(r.path).name for r in results) == MODELS
    errors = sorted((Path(r.path).name, i.rule) for r in results for i in r.issues if i.severity == "error")
    assert errors == [("lambda_model", "SEC001")]


def test_validate_decodes_saved_model_pb_once(monkeypatch):
    """Detection, the security scan and the loader share one decode of the same saved_model.pb."""
    from modelgraph.loading import saved_object_graph

    decodes = []
    decode = saved_object_graph._decode_object_graph
    monkeypatch.setattr(saved_object_graph, "_last_read", None)
    monkeypatch.setattr(
        saved_object_graph, "_decode_object_graph", lambda *a: decodes.append(a[0]) or decode(*a)
    )
    result = invoke("validate", LEGACY / "lambda_model", "--format", "json")
    assert result.exit_code == 1, result.output
    assert decodes == [LEGACY / "lambda_model" / "saved_model.pb"]


def test_a_rewritten_saved_model_pb_is_decoded_again(tmp_path):
    """The kept decode is never served for a file that changed since: a truncated rewrite fails."""
    folder = _copy(tmp_path)
    assert invoke("inspect", folder).exit_code == 0
    blob = (folder / "saved_model.pb").read_bytes()
    (folder / "saved_model.pb").write_bytes(blob[: len(blob) // 2])
    result = invoke("inspect", folder)
    assert result.exit_code == 3 and "not a TensorFlow SavedModel protobuf" in result.output
