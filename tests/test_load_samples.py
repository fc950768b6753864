"""Every committed sample, in every format Keras wrote it, loads with Keras's own depths and counts.

The goldens (samples/goldens/*.json) were recorded from the live Keras model by
samples/make_samples.py: layer and node depths, layer order, node input references, param counts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import modelgraph.loading as loading
from modelgraph.graph import ModelGraph
from modelgraph.loading.weights_files import attach_weights_file

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
GOLDENS = sorted((SAMPLES / "goldens").glob("*.json"))


def _cases():
    for golden_path in GOLDENS:
        golden = json.loads(golden_path.read_text())
        files = golden.get("files", {})
        for kind, entry in files.items():
            if kind in golden.get("format_errors", {}):
                continue
            variants = entry.items() if isinstance(entry, dict) else [("", entry)]
            for variant, path in variants:
                if kind == "metadata_json":
                    continue  # metadata.json holds no model
                label = f"{kind}_{variant}" if variant else kind
                yield pytest.param(golden_path.stem, label, path, id=f"{golden_path.stem}-{label}")


@pytest.fixture(scope="session")
def rebuilt(rebuilt_app):
    """Large keras.applications samples rebuilt from their weights manifests (sha256-checked), by
    manifest path: the session's shared rebuild (tests/conftest.py)."""
    return lambda manifest: rebuilt_app(Path(manifest).parent.name)


def _load(kind: str, entry, golden: dict, rebuilt=None) -> ModelGraph:
    files = dict(golden["files"])
    files.setdefault("json", files.get("h5") or files.get("keras"))  # architecture for weights-only files
    if kind == "manifest":
        return loading.load(rebuilt(SAMPLES / entry))
    if isinstance(entry, list):
        first = SAMPLES / entry[0]
        if kind.startswith("weights"):
            return loading.load(SAMPLES / files["json"], weights=first)
        return loading.load(first.parent if kind.endswith("dir") else first)
    path = SAMPLES / entry
    if kind.startswith("weights"):
        return loading.load(SAMPLES / files["json"], weights=path)
    return loading.load(path)


def _check_structure(graph: ModelGraph, golden: dict, where: str) -> None:
    if "tf_keras_reload" in golden:  # a hand-made file: what real Keras computed on reloading it wins
        golden = {
            **golden,
            **{k: v for k, v in golden["tf_keras_reload"].items() if k in ("layer_depths", "layers_order")},
        }
    depths = {lyr.name: lyr.depth for lyr in graph.layers}
    assert depths == golden["layer_depths"], where
    order = golden.get("operations_order") or golden.get("graph_layers_order") or golden["layers_order"]
    assert [lyr.name for lyr in graph.layers if lyr.depth is not None] == order, where
    for name, node_depths in golden.get("node_depths", {}).items():
        assert [n.depth for n in graph.nodes_of(name)] == node_depths, f"{where}: node depths of {name}"
    for name, refs in golden.get("node_input_refs", {}).items():
        ours = [[[r.layer, r.node_index, r.tensor_index] for r in n.inputs] for n in graph.nodes_of(name)]
        assert ours == refs, f"{where}: inputs of {name}"
    assert graph.input_names == golden["input_names"], where
    assert [[r.layer, r.node_index, r.tensor_index] for r in graph.outputs] == golden["output_refs"], where
    for name, nested in golden.get("nested", {}).items():
        sub = graph.layer(name).subgraph
        assert sub is not None, f"{where}: {name} is not nested"
        if "layer_depths" in nested:
            _check_structure(sub, nested, f"{where}/{name}")


@pytest.mark.parametrize(("stem", "kind", "entry"), list(_cases()))
def test_sample_loads_with_keras_depths(stem: str, kind: str, entry, rebuilt) -> None:
    golden = json.loads((SAMPLES / "goldens" / f"{stem}.json").read_text())
    graph = _load(kind, entry, golden, rebuilt)
    _check_structure(graph, golden, f"{stem}:{kind}")
    if graph.has_weights:
        assert graph.param_count == golden["params"]["total"]
    elif "npz" not in kind and kind not in ("json", "config_json"):
        pytest.fail(f"{stem}:{kind} loaded without weights: {dict(graph.metadata)}")


def test_there_are_samples() -> None:
    assert len(GOLDENS) >= 4


@pytest.mark.parametrize(
    ("model", "weights"),
    [
        ("k2/cnn.h5", "k2/cnn_weights.h5"),
        ("k3/cnn.keras", "k3/cnn.weights.h5"),
        ("k3/cnn.keras", "k2/cnn.h5"),
    ],
)
def test_attached_weights_keep_both_files_handles(model: str, weights: str) -> None:
    """Both the model file's open HDF5 handles and the weights file's are listed on the graph, so
    closing the graph's handles (as validate does) closes every file it opened."""
    own = loading.load(SAMPLES / model)
    own_handles = tuple(own.metadata.get("_handles") or ())
    assert own_handles, f"{model} keeps no open handles: the test checks nothing"
    graph = attach_weights_file(own, SAMPLES / weights)
    handles = tuple(graph.metadata["_handles"])
    assert all(any(h is o for h in handles) for o in own_handles)
    assert len(handles) > len(own_handles)
