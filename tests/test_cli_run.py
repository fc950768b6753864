"""``modelgraph run`` in-process with click's CliRunner: exit codes, npz round trip, --expect."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from modelgraph.cli.main import cli

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
NESTED = SAMPLES / "k3" / "nested.keras"
NESTED_GOLDEN = SAMPLES / "goldens" / "k3_nested.npz"
MULTI = SAMPLES / "k3" / "multi_io_list.keras"
QUANT = SAMPLES / "k3" / "quant_int8.keras"

pytestmark = pytest.mark.skipif(not NESTED.exists(), reason="samples/k3/nested.keras is not committed")


def invoke(*args: str):
    return CliRunner().invoke(cli, ["run", *map(str, args)], catch_exceptions=False)


def golden_inputs(tmp_path: Path) -> Path:
    with np.load(NESTED_GOLDEN, allow_pickle=False) as g:
        path = tmp_path / "in.npz"
        np.savez(path, a=g["input/a"])
    return path


def test_round_trip_and_expect_pass(tmp_path):
    inputs = golden_inputs(tmp_path)
    out = tmp_path / "out.npz"
    res = invoke(NESTED, "--input", inputs, "-o", out, "--tap", "bn")
    assert res.exit_code == 0, res.output
    with np.load(out, allow_pickle=False) as saved:
        assert list(saved.files) == ["head", "inner_model", "seq_inner", "tap/bn"]
        saved = {k: saved[k] for k in saved.files}
    # our own outputs as the reference: exact match
    res = invoke(NESTED, "--input", inputs, "--expect", out, "--atol", "0", "--rtol", "0")
    assert res.exit_code == 0, res.output
    # the golden (with intermediates) as reference and as input source
    res = invoke(NESTED, "--expect", NESTED_GOLDEN)
    assert res.exit_code == 0, res.output
    assert "PASSED" in res.output


def test_expect_mismatch_exits_1_and_names_the_diverging_layer(tmp_path):
    with np.load(NESTED_GOLDEN, allow_pickle=False) as g:
        ref = {k: g[k] for k in g.files}
    ref["intermediate/bn/0/0"] = ref["intermediate/bn/0/0"] + 1.0
    ref["intermediate/cat/0/0"] = ref["intermediate/cat/0/0"] + 1.0
    ref["output/0"] = ref["output/0"] + 1.0
    bad = tmp_path / "bad.npz"
    np.savez(bad, **ref)
    res = invoke(NESTED, "--expect", bad, "--format", "json")
    assert res.exit_code == 1
    payload = json.loads(res.stdout)
    assert payload["schema_version"] and payload["comparison"]["passed"] is False
    assert payload["comparison"]["first_divergence"] == "bn"
    assert "first diverging layer: bn" in res.stderr


def test_unknown_input_exits_2(tmp_path):
    path = tmp_path / "x.npz"
    np.savez(path, img=np.zeros((1, 6), np.float32))
    res = invoke(NESTED, "--input", path)
    assert res.exit_code == 2
    assert "unknown input 'img'; model inputs are ['a']" in res.stderr


def test_usage_errors_exit_2(tmp_path):
    assert invoke(NESTED).exit_code == 2  # no inputs
    assert invoke(NESTED, "--random", "--tap", "nope").exit_code == 2


def test_name_equals_file_and_npy(tmp_path):
    x = np.random.default_rng(0).standard_normal((2, 6)).astype(np.float32)
    npy = tmp_path / "a.npy"
    np.save(npy, x)
    r1 = invoke(NESTED, "--input", npy, "-o", tmp_path / "1.npz")
    r2 = invoke(NESTED, "--input", f"a={npy}", "-o", tmp_path / "2.npz", "--batch-size", "1")
    assert r1.exit_code == 0 and r2.exit_code == 0, r1.output + r2.output
    with np.load(tmp_path / "1.npz") as a, np.load(tmp_path / "2.npz") as b:
        for k in a.files:
            np.testing.assert_allclose(a[k], b[k], rtol=1e-6, atol=1e-7)


def test_random_profile_json():
    res = invoke(NESTED, "--random", "--seed", "3", "--batch", "2", "--profile", "--format", "json")
    assert res.exit_code == 0, res.output
    payload = json.loads(res.stdout)
    assert [o["shape"][0] for o in payload["outputs"]] == [2, 2, 2]
    assert payload["profile"]["layers"] and payload["profile"]["peak_live_bytes"] > 0


def test_profile_names_the_threads_and_the_blas_kernels(monkeypatch: pytest.MonkeyPatch):
    """The GEMMs' speed depends on the BLAS kernel set: the profile says which one ran (threadpoolctl's
    own reading), on how many threads, and names OPENBLAS_CORETYPE when the environment chose it."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    blas = [p for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
    monkeypatch.setenv("MODELGRAPH_THREADS", "2")
    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    payload = json.loads(invoke(NESTED, "--random", "--profile", "--format", "json").stdout)["profile"]
    assert payload["threads"] == 2
    assert [(b["library"], b["kernels"]) for b in payload["blas"]] == [
        (p["internal_api"], p.get("architecture")) for p in blas
    ]
    assert all(b["chosen_by"] is None for b in payload["blas"])
    text = invoke(NESTED, "--random", "--profile").stdout
    assert "  2 threads; BLAS " in text and "chosen by" not in text
    if blas and blas[0]["internal_api"] == "openblas":
        monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
        text = invoke(NESTED, "--random", "--profile").stdout
        assert "(chosen by OPENBLAS_CORETYPE=Haswell, not by the library" in text


def test_profile_names_merged_steps_and_no_fuse_times_every_layer():
    model = SAMPLES / "k3" / "app_mobilenetv2.keras"
    fused = invoke(model, "--random", "--profile", "--format", "json")
    plain = invoke(model, "--random", "--profile", "--no-fuse", "--format", "json")
    assert fused.exit_code == 0 and plain.exit_code == 0, fused.output + plain.output
    fused_classes = {r["class_name"] for r in json.loads(fused.stdout)["profile"]["layers"]}
    plain_classes = {r["class_name"] for r in json.loads(plain.stdout)["profile"]["layers"]}
    assert "modelgraph/InvertedBottleneck" in fused_classes and "BatchNormalization" not in fused_classes
    assert {"DepthwiseConv2D", "BatchNormalization", "ReLU"} <= plain_classes
    assert not any(c.startswith("modelgraph/") for c in plain_classes)
    text = invoke(model, "--random", "--profile")
    assert "--no-fuse times every layer" in text.stdout
    # Both plans give the same numbers.
    a = json.loads(fused.stdout)["outputs"][0]
    b = json.loads(plain.stdout)["outputs"][0]
    assert a["mean"] == pytest.approx(b["mean"], rel=1e-4, abs=1e-5)


def test_check_exit_codes():
    res = invoke(NESTED, "--check")
    assert res.exit_code == 0 and "supported" in res.stdout


def test_check_unsupported_exits_4(tmp_path):
    cfg = {
        "class_name": "Functional",
        "config": {
            "name": "m",
            "layers": [
                {
                    "class_name": "InputLayer",
                    "name": "x",
                    "config": {"name": "x", "batch_shape": [None, 3], "dtype": "float32"},
                    "inbound_nodes": [],
                },
                {
                    "class_name": "Frobnicate",
                    "name": "f1",
                    "config": {"name": "f1"},
                    "inbound_nodes": [
                        {
                            "args": [
                                {
                                    "class_name": "__keras_tensor__",
                                    "config": {
                                        "shape": [None, 3],
                                        "dtype": "float32",
                                        "keras_history": ["x", 0, 0],
                                    },
                                }
                            ],
                            "kwargs": {},
                        }
                    ],
                },
                {
                    "class_name": "Wobble",
                    "name": "f2",
                    "config": {"name": "f2"},
                    "inbound_nodes": [
                        {
                            "args": [
                                {
                                    "class_name": "__keras_tensor__",
                                    "config": {
                                        "shape": [None, 3],
                                        "dtype": "float32",
                                        "keras_history": ["f1", 0, 0],
                                    },
                                }
                            ],
                            "kwargs": {},
                        }
                    ],
                },
            ],
            "input_layers": [["x", 0, 0]],
            "output_layers": [["f2", 0, 0]],
        },
    }
    path = tmp_path / "m.json"
    path.write_text(json.dumps(cfg))
    res = invoke(path, "--check")
    assert res.exit_code == 4, res.output
    assert "f1" in res.stdout and "f2" in res.stdout
    res = invoke(path, "--random")
    assert res.exit_code == 4


@pytest.mark.parametrize("fuse", [[], ["--no-fuse"]])
def test_a_file_layer_cannot_claim_a_merged_step_class(tmp_path, fuse):
    """The plan's merged-step kernels (class names "modelgraph/...") are never reachable from a file."""
    path = tmp_path / "m.json"
    path.write_text(json.dumps(_functional_json("modelgraph/AddActivation")))
    res = invoke(path, "--check", *fuse)
    assert res.exit_code == 4, res.output
    assert "modelgraph/AddActivation" in res.stdout and "sneaky" in res.stdout
    res = invoke(path, "--random", *fuse)
    assert res.exit_code == 4, res.output


def _functional_json(class_name: str) -> dict:
    """A Keras 3 functional config: input x (None, 3) -> one layer ``sneaky`` of ``class_name``
    called on ``[x, x]``."""
    tensor = {
        "class_name": "__keras_tensor__",
        "config": {"shape": [None, 3], "dtype": "float32", "keras_history": ["x", 0, 0]},
    }
    layers = [
        {
            "class_name": "InputLayer",
            "name": "x",
            "config": {"name": "x", "batch_shape": [None, 3], "dtype": "float32"},
            "inbound_nodes": [],
        },
        {
            "module": "keras.layers",
            "class_name": class_name,
            "name": "sneaky",
            "config": {"name": "sneaky", "activation": "relu", "overwrite": 0},
            "inbound_nodes": [{"args": [[tensor, tensor]], "kwargs": {}}],
        },
    ]
    return {
        "class_name": "Functional",
        "config": {
            "name": "m",
            "layers": layers,
            "input_layers": [["x", 0, 0]],
            "output_layers": [["sneaky", 0, 0]],
        },
    }


def test_cannot_load_exits_3(tmp_path):
    bad = tmp_path / "bad.keras"
    bad.write_bytes(b"not a zip")
    assert invoke(bad, "--random").exit_code == 3


def test_bad_input_dtype_exits_2(tmp_path):
    path = tmp_path / "x.npz"
    np.savez(path, a=np.zeros((2, 6), np.complex64))
    assert invoke(NESTED, "--input", path).exit_code == 2


def test_kernel_failure_exits_5(tmp_path):
    def kt(name):
        return {
            "class_name": "__keras_tensor__",
            "config": {"shape": [None, None], "dtype": "float32", "keras_history": [name, 0, 0]},
        }

    cfg = {
        "class_name": "Functional",
        "config": {
            "name": "m",
            "layers": [
                {
                    "class_name": "InputLayer",
                    "name": "x",
                    "config": {"name": "x", "batch_shape": [None, None], "dtype": "float32"},
                    "inbound_nodes": [],
                },
                {
                    "module": "keras.src.ops.numpy",
                    "class_name": "Reshape",
                    "name": "reshape",
                    "config": {"name": "reshape", "newshape": [-1, 5]},
                    "inbound_nodes": [{"args": [kt("x")], "kwargs": {}}],
                },
            ],
            "input_layers": [["x", 0, 0]],
            "output_layers": [["reshape", 0, 0]],
        },
    }
    path = tmp_path / "m.json"
    path.write_text(json.dumps(cfg))
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((2, 6), np.float32))
    res = invoke(path, "--input", x)
    assert res.exit_code == 5, res.output
    assert "reshape[0]" in res.stderr and "(2, 6)" in res.stderr


def test_multi_output_names():
    if not MULTI.exists():
        pytest.skip("samples/k3/multi_io_list.keras is not committed")
    res = invoke(MULTI, "--random", "--format", "json")
    assert res.exit_code == 0, res.output
    names = [o["name"] for o in json.loads(res.stdout)["outputs"]]
    assert len(names) == len(set(names)) == 3


CONFIG_ONLY = SAMPLES / "k3" / "cnn.json"
CONFIG_WEIGHTS = SAMPLES / "k3" / "cnn.weights.h5"


def test_a_config_only_model_without_weights_is_a_usage_error():
    res = CliRunner().invoke(cli, ["run", str(CONFIG_ONLY), "--random"])
    assert res.exit_code == 2, res.output
    assert "holds no weights" in res.output and "--weights" in res.output
    assert "Traceback" not in res.output
    res = invoke(CONFIG_ONLY, "--random", "--weights", CONFIG_WEIGHTS)
    assert res.exit_code == 0, res.output


def test_run_on_each_backend_and_export_word_a_config_only_model_alike(tmp_path):
    """The NumPy runner, run on onnxruntime and export refuse a weightless model with one message."""
    lines = set()
    for args in (
        ["run", str(CONFIG_ONLY), "--random"],
        ["run", str(CONFIG_ONLY), "--random", "--backend", "onnxruntime"],
        ["export", str(CONFIG_ONLY), "-o", str(tmp_path / "m.onnx")],
    ):
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 2, (args, res.output)
        lines.add(res.output.strip().splitlines()[-1])
    assert len(lines) == 1, lines
    assert "modelgraph.load(path, weights=...)" in lines.pop()


def test_check_on_a_config_only_model_checks_classes_and_says_so():
    res = CliRunner().invoke(cli, ["run", str(CONFIG_ONLY), "--check"])
    assert res.exit_code == 0, res.output
    assert "holds no weights" in res.output and "every layer and option is supported" in res.output


def test_integer_weights_in_a_float_layer_are_refused_not_read_as_numbers(tmp_path):
    """A MultiHeadAttention whose sublayer kernels are int8 (what model.quantize("int8") leaves in
    a file Keras 3.15.1 itself cannot reload) must be refused: reading int8 codes as weights would
    give outputs in the tens of thousands with exit 0."""
    import shutil

    import h5py

    weights = tmp_path / "mha.weights.h5"
    shutil.copy(SAMPLES / "k3" / "mha.weights.h5", weights)
    with h5py.File(weights, "r+") as f:
        path = "layers/multi_head_attention/query_dense/vars/0"
        codes = np.clip(np.round(f[path][()] * 127), -127, 127).astype(np.int8)
        del f[path]
        f[path] = codes
    res = invoke(SAMPLES / "k3" / "mha.json", "--weights", weights, "--random")
    assert res.exit_code == 4, res.output
    assert "query/kernel" in res.output and "int8" in res.output


def test_a_stateful_model_runs_as_one_batch_only(tmp_path):
    """Keras saves no RNN states, so a run equals a freshly loaded model's first call (the
    rnn_stateful golden); splitting the input would need the state carried between batches."""
    model = SAMPLES / "k3" / "rnn_stateful.keras"
    golden = SAMPLES / "goldens" / "k3_rnn_stateful.npz"
    res = invoke(model, "--input", golden, "--expect", golden)
    assert res.exit_code == 0 and "PASSED" in res.output, res.output
    res = CliRunner().invoke(cli, ["run", str(model), "--input", str(golden), "--batch-size", "1"])
    assert res.exit_code == 2, res.output
    assert "stateful" in res.output and "lstm_stateful" in res.output


SINGLE = SAMPLES / "k3" / "single_bare.keras"


def test_a_reference_naming_no_output_is_a_usage_error_not_a_pass(tmp_path):
    """An .npz of other names compared nothing and printed PASSED; now it is refused up front."""
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, x=np.ones((1, 3), np.float32), y=np.ones(2))
    res = CliRunner().invoke(cli, ["run", str(MULTI), "--random", "--expect", str(wrong)])
    assert res.exit_code == 2, res.output
    assert "none of its arrays ('x', 'y') names a model output (out1, out2, out3)" in res.output


def test_a_partial_reference_says_what_it_did_not_compare(tmp_path):
    out = tmp_path / "out.npz"
    assert invoke(MULTI, "--random", "-o", out).exit_code == 0
    with np.load(out, allow_pickle=False) as saved:
        partial = {"out1": saved["out1"], "out2": saved["out2"], "junk": np.zeros(2)}
    reference = tmp_path / "partial.npz"
    np.savez(reference, **partial)
    res = invoke(MULTI, "--random", "--expect", reference)
    assert res.exit_code == 0, res.output
    assert "not compared (no reference array): out3" in res.output
    assert "ignored 1 reference key(s) naming no output or layer: 'junk'" in res.output
    report = json.loads(invoke(MULTI, "--random", "--expect", reference, "--format", "json").output)
    assert report["comparison"]["not_compared"] == ["out3"] and report["comparison"]["ignored"] == ["junk"]


def test_a_npy_reference_for_a_single_output_model(tmp_path):
    out = tmp_path / "out.npz"
    assert invoke(SINGLE, "--random", "-o", out).exit_code == 0
    with np.load(out, allow_pickle=False) as saved:
        np.save(tmp_path / "ref.npy", saved["d2"])
        np.save(tmp_path / "off.npy", saved["d2"] + 1)
    assert invoke(SINGLE, "--random", "--expect", tmp_path / "ref.npy").exit_code == 0
    assert invoke(SINGLE, "--random", "--expect", tmp_path / "off.npy").exit_code == 1
    res = CliRunner().invoke(cli, ["run", str(MULTI), "--random", "--expect", str(tmp_path / "ref.npy")])
    assert res.exit_code == 2 and "a .npy reference is for a single-output model" in res.output


@pytest.mark.parametrize(
    "args", [["--seed", "-1"], ["--atol", "-1e-3"], ["--rtol", "-1"]], ids=["seed", "atol", "rtol"]
)
def test_negative_seed_and_tolerances_are_usage_errors(args):
    res = CliRunner().invoke(cli, ["run", str(SINGLE), "--random", *args])
    assert res.exit_code == 2 and "is not in the range" in res.output, res.output


def test_a_npy_file_where_an_npz_is_read_is_a_usage_error(tmp_path):
    fake = tmp_path / "inputs.npz"
    with fake.open("wb") as fh:
        np.save(fh, np.ones((1, 5), np.float32))
    res = CliRunner().invoke(cli, ["run", str(SINGLE), "--input", str(fake)])
    assert res.exit_code == 2 and "holds a single .npy array, not an .npz" in res.output, res.output


# --- output keys of a nested model's calls: either numbering in --expect ------------------------------


@pytest.mark.parametrize("model", ["k2/nested_outputs.h5", "k3/nested_outputs.keras"])
@pytest.mark.parametrize("numbering", ["keys", "config", "brackets"])
def test_expect_takes_either_numbering_of_nested_model_outputs(tmp_path, model, numbering):
    """Output keys number a nested model's calls as Keras 3 shows them after reloading (enc:0:0 ..
    enc:1:1); its config (tf.keras and Keras 3) says ["enc", 1, 0] .. ["enc", 2, 1]; both name the
    same outputs in a reference, also as enc[1][0]."""
    import numpy as np
    from click.testing import CliRunner

    from modelgraph.cli.main import cli

    samples = Path(__file__).resolve().parents[1] / "samples"
    family = model.split("/")[0]
    golden = np.load(samples / "goldens" / f"{family}_nested_outputs.npz")
    meta = json.loads((samples / "goldens" / f"{family}_nested_outputs.json").read_text())
    ref = {}
    for i, (layer, node, tensor) in enumerate(meta["config_output_layers"]):
        name = {"keys": f"{layer}:{node - 1}:{tensor}", "config": f"{layer}:{node}:{tensor}"}.get(
            numbering, f"{layer}[{node}][{tensor}]"
        )
        ref[name] = golden[f"output/{i}"]
    for k in golden.files:
        if k.startswith("input/"):
            ref[k] = golden[k]
    np.savez(tmp_path / "ref.npz", **ref)
    res = CliRunner().invoke(cli, ["run", str(samples / model), "--expect", str(tmp_path / "ref.npz")])
    assert res.exit_code == 0, res.output
    assert "not compared" not in res.output
    wrong = {k: v + 1 for k, v in ref.items() if not k.startswith("input/")}
    np.savez(tmp_path / "bad.npz", **wrong, **{k: v for k, v in ref.items() if k.startswith("input/")})
    bad = CliRunner().invoke(cli, ["run", str(samples / model), "--expect", str(tmp_path / "bad.npz")])
    assert bad.exit_code == 1


CNN = SAMPLES / "k3" / "cnn.keras"
CNN_GOLDEN = SAMPLES / "goldens" / "k3_cnn.npz"


def test_reference_runs_the_reference_kernels_and_matches_keras():
    """--reference: every layer's plain reference kernel, no fusion; Keras's outputs all the same."""
    res = invoke(CNN, "--reference", "--expect", CNN_GOLDEN)
    assert "PASSED" in res.output
    from modelgraph.loading import load
    from modelgraph.runner.interpreter import Runner

    graph = load(CNN)
    plan, reference = Runner(graph), Runner(graph, reference=True)
    modules = {step.fn.__module__ for step in reference.steps if step.fn is not None}
    assert not {m for m in modules if m.startswith("modelgraph.runner.fast")}
    assert {"modelgraph.runner.kernels.conv", "modelgraph.runner.kernels.pooling"} <= modules
    plan_modules = {step.fn.__module__ for step in plan.steps if step.fn is not None}
    assert {"modelgraph.runner.fast.conv", "modelgraph.runner.fast.pooling"} <= plan_modules
    assert len(reference.steps) > len(plan.steps)  # no fused steps
