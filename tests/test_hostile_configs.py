"""Malformed configs found by mutating the samples: each gets a clean exit code and one line, never an
internal error, a hang or an allocation sized by the file.

Each case is a one-field edit of samples/k3/single_bare.json (Input(5) -> Dense d1 -> Dense d2, Keras
3.15.1), run through the installed CLI in a subprocess with a time limit, so a regression fails
instead of hanging the suite.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ._cli import run_cli as cli

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "k3" / "single_bare.json"
WEIGHTS = SAMPLE.with_name("single_bare.weights.h5")


def mutated(tmp_path: Path, edit) -> Path:
    config = json.loads(SAMPLE.read_text())
    layers = {layer["name"]: layer for layer in config["config"]["layers"]}
    edit(layers)
    path = tmp_path / "model.json"
    path.write_text(json.dumps(config))
    return path


def assert_clean(res: subprocess.CompletedProcess, code: int, *words: str) -> None:
    assert res.returncode == code, res.stdout + res.stderr
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    for word in words:
        assert word in res.stderr, res.stderr


def test_an_absurd_tensor_index_is_not_allocated(tmp_path):
    def edit(layers):
        keras_history = layers["d2"]["inbound_nodes"][0]["args"][0]["config"]["keras_history"]
        keras_history[2] = 2**40

    model = mutated(tmp_path, edit)
    assert_clean(cli("validate", model), 1)
    res = cli("run", model, "--weights", WEIGHTS, "--random")
    assert_clean(res, 5, "d1[0]", "returned 1 outputs", str(2**40))


@pytest.mark.parametrize("units", [[2, 3], {"a": 1}, -4])
def test_a_weight_shape_from_a_malformed_config_is_unknown_not_a_crash(tmp_path, units):
    def edit(layers):
        layers["d1"]["config"]["units"] = units

    model = mutated(tmp_path, edit)
    res = cli("inspect", model)
    assert res.returncode == 0, res.stderr
    assert "d1" in res.stdout
    assert "internal error" not in cli("validate", model).stderr


def test_a_malformed_input_shape_is_a_config_error(tmp_path):
    def edit(layers):
        layers["x"]["config"]["batch_shape"] = [[None, None], 5]

    res = cli("run", mutated(tmp_path, edit), "--weights", WEIGHTS, "--random")
    assert_clean(res, 3, "input layer 'x'", "[[None, None], 5]")


def test_a_negative_tensor_index_is_a_config_error(tmp_path):
    def edit(layers):
        layers["d2"]["inbound_nodes"][0]["args"][0]["config"]["keras_history"][2] = -(2**31)

    res = cli("inspect", mutated(tmp_path, edit))
    assert_clean(res, 3, "non-negative", str(-(2**31)))


def test_diff_of_a_config_with_a_list_for_a_class_name(tmp_path):
    def edit(layers):
        layers["d1"]["config"]["dtype"]["class_name"] = ["DTypePolicy"]

    res = cli("diff", SAMPLE, mutated(tmp_path, edit))
    assert_clean(res, 1)
    assert "d1" in res.stdout


def cnn_with(tmp_path: Path, class_name: str, key: str, value: object) -> Path:
    """samples/k3/cnn.keras (weights included) with ``key`` of its first ``class_name`` layer set."""
    import zipfile

    target = tmp_path / "cnn.keras"
    with zipfile.ZipFile(SAMPLE.parent / "cnn.keras") as zin, zipfile.ZipFile(target, "w") as zout:
        for item in zin.namelist():
            data = zin.read(item)
            if item == "config.json":
                config = json.loads(data)
                first = next(
                    layer for layer in config["config"]["layers"] if layer["class_name"] == class_name
                )
                first["config"][key] = value
                data = json.dumps(config).encode()
            zout.writestr(item, data)
    return target


def test_a_malformed_relu_max_value_is_refused_not_a_crash(tmp_path):
    """ReLU(max_value="") after a BatchNormalization: the fusion pass must not parse it."""
    assert_clean(cli("run", cnn_with(tmp_path, "ReLU", "max_value", ""), "--random"), 4, "max_value")


def test_a_malformed_batchnorm_epsilon_is_refused_not_a_crash(tmp_path):
    """BatchNormalization(epsilon="") after a Conv2D: the fold must not parse it either."""
    model = cnn_with(tmp_path, "BatchNormalization", "epsilon", "")
    assert_clean(cli("run", model, "--random"), 4, "epsilon")


@pytest.mark.parametrize(("dim", "validate_code", "rule"), [(10**40, 1, "SHP004"), (2**40, 0, "SHP012")])
def test_an_absurd_input_dimension_is_reported_not_a_crash(tmp_path, dim, validate_code, rule):
    """Past int64 (no Keras tensor can have it) an error; 2**40 elements per sample a warning. Neither
    crashes inspect, and a random draw of it is refused before anything is allocated."""

    def edit(layers):
        layers["x"]["config"]["batch_shape"] = [None, dim]

    model = mutated(tmp_path, edit)
    res = cli("validate", model)
    assert res.returncode == validate_code, res.stdout + res.stderr
    assert rule in res.stdout and "layer 'x'" in res.stdout
    inspected = cli("inspect", model)
    assert inspected.returncode == 0 and str(dim) in inspected.stdout, inspected.stderr
    assert_clean(cli("run", model, "--weights", WEIGHTS, "--random"), 2, "input 'x'", "at most 2 GiB")


def test_a_tfjs_manifest_shape_past_int64_is_counted_exactly(tmp_path):
    """The bytes a manifest entry needs are computed exactly (an int64 product wrapped around, and
    could have matched a small shard)."""
    import shutil

    source = SAMPLE.parents[1] / "tfjs" / "single_bare"
    target = tmp_path / "single_bare"
    shutil.copytree(source, target)
    topology = json.loads((target / "model.json").read_text())
    entry = topology["weightsManifest"][0]["weights"][0]
    entry["shape"] = [10**11, 10**11]
    (target / "model.json").write_text(json.dumps(topology))
    res = cli("validate", target / "model.json")
    assert res.returncode == 1 and "STR001" in res.stdout, res.stdout + res.stderr
    assert entry["dtype"] == "float32"
    assert f"the manifest needs {4 * 10**22}" in res.stdout
    assert_clean(cli("inspect", target / "model.json"), 3, entry["name"])


def tfjs_with(tmp_path: Path, model: str, edit) -> Path:
    """A copy of samples/tfjs/<model> with ``edit(first manifest entry)`` applied."""
    import shutil

    target = tmp_path / model
    shutil.copytree(SAMPLE.parents[1] / "tfjs" / model, target)
    document = json.loads((target / "model.json").read_text())
    edit(document["weightsManifest"][0]["weights"][0])
    (target / "model.json").write_text(json.dumps(document))
    return target / "model.json"


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("dtype", [1, 2, 3], ["unsupported weight dtype", ".dtype"]),
        ("quantization", -1, ["'quantization' must be an object"]),
        ("original_dtype", [None, None], ["unsupported weight dtype", "original_dtype"]),
        ("original_dtype", "V2147483647", ["unsupported weight dtype", "V2147483647"]),
        ("scale", "", ["'scale' must be a finite number"]),
        ("min", float("nan"), ["'min' must be a finite number"]),
        ("dtype_q", "int8", ["unsupported weight dtype 'int8'", "quantization.dtype"]),
    ],
)
def test_a_malformed_tfjs_manifest_entry_is_a_config_error(tmp_path, key, value, words):
    """Every manifest field is checked before it is used (a list as dtype, a structured or huge
    void original_dtype, a string scale were internal errors)."""

    def edit(entry):
        if key == "dtype":
            entry["dtype"] = value
        elif key == "quantization":
            entry["quantization"] = value
        else:
            entry["quantization"]["dtype" if key == "dtype_q" else key] = value

    model = tfjs_with(tmp_path, "cnn_q8", edit)
    for command in ("inspect", "run"):
        assert_clean(cli(command, model, *(["--random"] if command == "run" else [])), 3, *words)
    assert "STR" in cli("validate", model).stdout


@pytest.mark.parametrize("input_dim", [-1, 0, True])
def test_random_ids_for_an_embedding_with_an_unusable_input_dim(tmp_path, input_dim):
    """The draw ignores an unusable ``input_dim`` (it asked NumPy for ids below -1: an internal
    error); the Embedding runs from its stored weights."""
    import shutil

    target = tmp_path / "rnn_mask"
    shutil.copytree(SAMPLE.parents[1] / "tfjs" / "rnn_mask", target)
    document = json.loads((target / "model.json").read_text())
    layers = document["modelTopology"]["model_config"]["config"]["layers"]
    next(layer for layer in layers if layer["class_name"] == "Embedding")["config"]["input_dim"] = input_dim
    (target / "model.json").write_text(json.dumps(document))
    assert_clean(cli("run", target / "model.json", "--random"), 0)


FLIPPED = Path(__file__).resolve().parent / "data" / "flipped_link_name.h5"


@pytest.mark.parametrize(
    ("args", "code"),
    [(["inspect"], 3), (["run", "--random"], 3), (["validate"], 1), (["validate", "--format", "json"], 1),
     (["validate", "--format", "sarif"], 1)],
)  # fmt: skip
def test_a_link_name_that_is_not_utf8_is_reported_printably(args, code):
    """tests/data/flipped_link_name.h5: samples/k2/kw_order.h5 with 32 random bytes changed, one of
    them inside an HDF5 link name (0xab). Its messages used to carry the raw byte: text output was
    not UTF-8, and the JSON report failed to serialise (an internal error)."""
    res = cli(args[0], FLIPPED, *args[1:], text=False)
    out, err = res.stdout.decode("utf-8"), res.stderr.decode("utf-8")  # both must be UTF-8
    assert res.returncode == code, out + err
    assert "internal error" not in err and "Traceback" not in err
    assert "attention_output\\xabkernel:0" in out + err or "attention_output\\\\xabkernel:0" in out


def test_a_corrupt_float_datatype_is_a_format_error(tmp_path):
    """tests/data/flipped_float_type.keras: samples/k3/nested.keras with random bytes changed, one of
    them in a dataset's float datatype message (h5py raised ValueError on ``dtype``: an internal
    error); now a load error naming the dataset."""
    flipped = FLIPPED.with_name("flipped_float_type.keras")
    res = cli("inspect", flipped)
    assert_clean(res, 3, "model.weights.h5", "CRC-32")  # the zip's CRC catches the change first
    model = tmp_path / "crc_rewritten.keras"
    _rezip_with_fresh_crcs(flipped, model)
    res = cli("inspect", model)
    assert_clean(res, 3, "unreadable shape or datatype", "/layers/sequential/layers/dense_1/vars/0")
    assert cli("validate", model).returncode == 1


def _rezip_with_fresh_crcs(source: Path, target: Path) -> None:
    """The stored members of ``source`` (their bytes as they are) in a new zip whose CRCs match them."""
    import zipfile

    data = source.read_bytes()
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w") as dst:
        for info in src.infolist():
            assert info.compress_type == zipfile.ZIP_STORED
            at = info.header_offset
            start = at + 30 + int.from_bytes(data[at + 26 : at + 28], "little")
            start += int.from_bytes(data[at + 28 : at + 30], "little")
            dst.writestr(info.filename, data[start : start + info.compress_size])
