"""convert: every sample written as a Keras 3 ``.keras`` that real Keras 3 verified (goldens made by
``samples/verify_convert.py``); the bytes, the read-back graph and the runner's numbers are checked here
without Keras."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

import modelgraph
from modelgraph.errors import NotConvertibleError, SecurityRefusedError
from modelgraph.saving.security_gate import security_errors

from ._cli import run_cli

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = json.loads((ROOT / "samples" / "convert" / "verified.json").read_text())


def _cases_module():
    spec = importlib.util.spec_from_file_location("convert_cases", ROOT / "samples" / "convert_cases.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["convert_cases"] = module
    spec.loader.exec_module(module)
    return module


CASES = _cases_module()
BY_ID = {
    case.id: case
    for case in [*CASES.convert_cases(), *CASES.extract_cases(), *CASES.h5_cases(), *CASES.refusal_cases()]
}
VERIFIED = [r for r in GOLDEN["cases"] if r.get("matches")]
REFUSED = [r for r in GOLDEN["cases"] if r.get("exit_code") == 4]


def _convert(case, tmp_path: Path) -> Path:
    """What ``modelgraph convert``/``extract`` writes for this case (through the Python API)."""
    out = tmp_path / f"{case.id.replace('/', '_')}{case.suffix}"
    graph = _source(case)
    if case.command == "extract":
        options = dict(zip(case.extra[::2], case.extra[1::2], strict=True))
        inputs = options.get("--inputs", "")
        graph = modelgraph.extract(
            graph, outputs=options["--outputs"].split(","), inputs=inputs.split(",") if inputs else []
        )
    modelgraph.save(graph, out)
    return out


def _source(case):
    return modelgraph.load(ROOT / case.source, weights=ROOT / case.weights if case.weights else None)


def test_the_golden_covers_every_case():
    recorded = {r["id"] for r in GOLDEN["cases"]}
    assert set(BY_ID) <= recorded, sorted(set(BY_ID) - recorded)


def test_every_sample_keras3_cannot_load_loads_after_conversion():
    """The issue's measure: of the sample files Keras 3 itself cannot load, how many convert to a
    .keras that Keras 3 loads and runs to the original outputs (the rest are refused by name)."""
    failing = [
        r for r in GOLDEN["cases"] if r.get("keras3_loads_source") is False and not r["id"].startswith("h5/")
    ]
    fixed = [r for r in failing if r.get("matches")]
    refused = [r for r in failing if r.get("exit_code") == 4]
    assert failing
    assert len(fixed) + len(refused) == len(failing), [r["id"] for r in failing if r not in fixed + refused]


@pytest.mark.parametrize("record", VERIFIED, ids=[r["id"] for r in VERIFIED])
def test_converted_file_is_the_one_keras_verified(record, tmp_path):
    case = BY_ID[record["id"]]
    out = _convert(case, tmp_path)
    # The content Keras loaded, whatever the HDF5 library's byte layout; the exact bytes too when
    # this h5py writes with the HDF5 version that made the golden (CI pins the same versions).
    assert CASES.canonical_hash(out) == record["canonical"]
    if h5py.version.hdf5_version == GOLDEN["writer_hdf5_version"]:
        assert hashlib.sha256(out.read_bytes()).hexdigest() == record["sha256"]


@pytest.mark.parametrize("record", VERIFIED, ids=[r["id"] for r in VERIFIED])
def test_runner_on_converted_file_matches_keras(record, tmp_path):
    case = BY_ID[record["id"]]
    out = _convert(case, tmp_path)
    data = dict(np.load(ROOT / case.golden_npz))
    golden = json.loads((ROOT / case.golden).read_text())
    feeds = {name: data[key] for name, key in case.feed_keys(golden).items()}
    graph = modelgraph.load(out)
    got = list(modelgraph.run(graph, {k: v for k, v in feeds.items() if k in graph.input_names}).values())
    if case.reference == "runner":  # TF.js quantized: the dequantized values the source file holds
        want = list(modelgraph.run(_source(case), feeds).values())
    else:
        want = [data[k] for k in case.output_keys(data)]
    assert len(got) == len(want)
    # Keras's own error on this very file is record["max_abs_error"]; the runner must be as close.
    loose = case.tolerance > CASES.DEFAULT_TOLERANCE  # low-precision compute: relative, like Keras's hint
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(
            np.asarray(g, np.float64),
            np.asarray(w, np.float64),
            atol=case.tolerance,
            rtol=case.tolerance if loose else 0,
        )


KERAS3_SOURCES = [r for r in VERIFIED if r["id"].split("/")[0].startswith("k3_")]
H5_VERIFIED = [r for r in VERIFIED if r["id"].startswith("h5/")]


def test_h5_files_were_verified_by_both_loaders():
    assert H5_VERIFIED
    for record in H5_VERIFIED:
        assert record["loaded"] and record["tf_keras_loaded"], record["id"]


@pytest.mark.parametrize("record", KERAS3_SOURCES, ids=[r["id"] for r in KERAS3_SOURCES])
def test_keras3_models_read_back_identical(record, tmp_path):
    """A Keras 3 model needs no upgrade: the written file reads back with no difference at all."""
    case = BY_ID[record["id"]]
    out = _convert(case, tmp_path)
    source = modelgraph.load(ROOT / case.source, weights=ROOT / case.weights if case.weights else None)
    changes = modelgraph.diff(source, modelgraph.load(out))
    assert not changes, changes


def test_same_model_gives_same_bytes(tmp_path):
    graph = modelgraph.load(ROOT / "samples" / "k2" / "nested.h5")
    a = modelgraph.save(graph, tmp_path / "a.keras")
    b = modelgraph.save(modelgraph.load(ROOT / "samples" / "k2" / "nested.h5"), tmp_path / "b.keras")
    assert a.sha256 == b.sha256
    assert (tmp_path / "a.keras").read_bytes() == (tmp_path / "b.keras").read_bytes()


def test_refused_samples_are_refused_naming_each_layer(tmp_path):
    """The exact message verify_convert.py recorded from the CLI (exit 4), and nothing written."""
    assert REFUSED, "the goldens record no refused sample"
    for record in REFUSED:
        case = BY_ID[record["id"]]
        out = tmp_path / f"x{case.suffix}"
        graph = _source(case)
        if security_errors(graph):  # a bytecode Lambda: the security gate refuses it first
            with pytest.raises(SecurityRefusedError) as refused:
                modelgraph.save(graph, out)
            assert "SEC001 at " in str(refused.value)
        else:
            with pytest.raises(NotConvertibleError) as info:
                modelgraph.save(graph, out)
            assert f"modelgraph: error: {info.value}" == record["stderr"].replace(f"OUT{case.suffix}", str(out))
        assert not list(tmp_path.iterdir())  # nothing written, no temporary file left


def test_refusal_exit_code_and_one_line(tmp_path):
    proc = run_cli("convert", ROOT / "samples" / "convert" / "unconvertible.h5", "-o", tmp_path / "x.keras")
    assert proc.returncode == 4
    assert proc.stderr.count("\n") == 1
    # The bytecode Lambda is a security error (SEC001): the gate refuses before the writer looks.
    for words in ("SEC001 at ", "layer 'double'", "modelgraph validate "):
        assert words in proc.stderr
    assert not list(tmp_path.iterdir())


def _config_with(layers: list[dict]) -> dict:
    inp = {
        "class_name": "InputLayer",
        "config": {"batch_input_shape": [None, 4], "dtype": "float32", "name": "x"},
        "name": "x",
        "inbound_nodes": [],
    }
    return {
        "class_name": "Functional",
        "config": {
            "name": "m",
            "layers": [inp, *layers],
            "input_layers": [["x", 0, 0]],
            "output_layers": [[layers[-1]["name"], 0, 0]],
        },
        "keras_version": "2.15.0",
        "backend": "tensorflow",
    }


def test_every_unconvertible_layer_is_named(tmp_path):
    lam = {
        "class_name": "Lambda",
        # a named function, not bytecode: a warning (SEC004) the gate lets through to the writer
        "config": {"name": "lam", "function": "double", "function_type": "function", "module": "__main__"},
        "name": "lam",
        "inbound_nodes": [[["x", 0, 0, {}]]],
    }
    custom = {
        "class_name": "MyLayer",
        "config": {"name": "mine"},
        "name": "mine",
        "inbound_nodes": [[["lam", 0, 0, {}]]],
    }
    tfop = {
        "class_name": "TFOpLambda",
        "config": {"name": "tf.math.bessel_i0", "function": "math.bessel_i0"},
        "name": "tf.math.bessel_i0",
        "inbound_nodes": [["mine", 0, 0, {"name": None}]],
    }
    path = tmp_path / "model.json"
    path.write_text(json.dumps(_config_with([lam, custom, tfop])))
    with pytest.raises(NotConvertibleError) as info:
        modelgraph.save(modelgraph.load(path), tmp_path / "out.keras")
    names = [r.path for r in info.value.refusals]
    assert names == ["lam", "mine", "tf.math.bessel_i0"]
    assert not (tmp_path / "out.keras").exists()
    proc = run_cli("convert", path, "-o", tmp_path / "out.keras")
    assert proc.returncode == 4
    for name in names:
        assert f"'{name}'" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_keras2_hard_sigmoid_is_refused(tmp_path):
    dense = {
        "class_name": "Dense",
        "config": {"name": "d", "units": 2, "activation": "hard_sigmoid"},
        "name": "d",
        "inbound_nodes": [[["x", 0, 0, {}]]],
    }
    path = tmp_path / "model.json"
    path.write_text(json.dumps(_config_with([dense])))
    with pytest.raises(NotConvertibleError, match="hard_sigmoid"):
        modelgraph.save(modelgraph.load(path), tmp_path / "out.keras")


def test_bad_output_suffix_is_a_usage_error(tmp_path):
    proc = run_cli("convert", ROOT / "samples" / "k2" / "nested.h5", "-o", tmp_path / "out.onnx")
    assert proc.returncode == 2
    assert "must end in .keras or .h5" in proc.stderr


def test_a_nested_functional_feeding_a_layer_is_refused_for_h5(tmp_path):
    proc = run_cli("convert", ROOT / "samples" / "k2" / "nested.h5", "-o", tmp_path / "out.h5")
    assert proc.returncode == 4
    assert "'inner_model' (Functional): a nested Functional whose output feeds another layer" in proc.stderr
    assert "seq_inner" not in proc.stderr  # a nested Sequential is written without its InputLayer
    assert not list(tmp_path.iterdir())


KERAS2_SOURCES = [
    r for r in VERIFIED if not r["id"].startswith(("h5/", "extract/")) and not r["id"].startswith("k3_")
]


@pytest.mark.parametrize("record", KERAS2_SOURCES, ids=[r["id"] for r in KERAS2_SOURCES])
def test_keras2_models_keep_every_weight(record, tmp_path):
    """Upgraded models (docs/writing.md) keep every layer's weights, value for value; TF op layers
    become weightless ops and '/' in names becomes '_'."""
    case = BY_ID[record["id"]]
    written = modelgraph.load(_convert(case, tmp_path))
    source = _source(case)
    for path, layer in source.walk():
        if not layer.weights:
            continue
        target = written.layer(path[0].replace("/", "_"))
        for name in path[1:]:
            target = target.subgraph.layer(name.replace("/", "_"))
        mine = {w.name: w for w in target.weights}
        for weight in layer.weights:
            np.testing.assert_array_equal(mine[weight.name].read().reshape(weight.shape), weight.read())


def test_cli_notes_and_strip(tmp_path):
    """Notes go to stderr; --strip changes nothing for a model that was never compiled
    (tests/test_training_state.py covers compiled ones)."""
    source = ROOT / "samples" / "tfjs" / "cnn_q8" / "model.json"
    plain = run_cli("convert", source, "-o", tmp_path / "a.keras")
    stripped = run_cli("convert", source, "--strip", "-o", tmp_path / "b.keras")
    assert plain.returncode == stripped.returncode == 0, plain.stderr
    assert plain.stdout == stripped.stdout == ""
    assert "TF.js quantized weights are written dequantized" in plain.stderr
    assert "--strip" not in stripped.stderr
    assert (tmp_path / "a.keras").read_bytes() == (tmp_path / "b.keras").read_bytes()


@pytest.mark.parametrize(
    ("source", "suffix", "refused", "reason"),
    [
        # Keras 2 RNN(cell) in .h5: Keras 3's legacy loader does not build the cells' weights
        ("k2/rnn_cells.h5", ".h5", ["rnn_simple", "rnn_stacked"], "RNN(cell) layer"),
        # tf_keras reads a nested Functional's call as node 1, Keras 3's .h5 loader cannot
        ("k3/random_ids.keras", ".h5", ["inner"], "feeds another layer"),
        # tf_keras's LayerNormalization has no RMS form
        ("k3/ln_rms.keras", ".h5", ["ln_rms", "ln_rms_noscale"], "rms_scaling=True has no tf_keras"),
    ],
)
def test_what_keras_cannot_read_back_is_refused(source, suffix, refused, reason, tmp_path):
    """Keras 3 (or tf_keras, for .h5) failed to load what these were written as: now refused by name."""
    proc = run_cli("convert", ROOT / "samples" / source, "-o", tmp_path / f"out{suffix}")
    assert proc.returncode == 4, proc.stderr
    for name in refused:
        assert f"'{name}' (" in proc.stderr
    assert reason in proc.stderr
    assert "'td_conv2d'" not in proc.stderr
    assert not list(tmp_path.iterdir())
