"""modelgraph.diff: cross-format identity, and each single targeted edit reported exactly.

Edited models are made from the committed Keras 3 samples by rewriting ``config.json`` and/or the
``model.weights.h5`` inside a copy of the ``.keras`` zip (no Keras needed).
"""

from __future__ import annotations

import gc
import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from modelgraph.diff import diff, to_dot
from modelgraph.diff_align import is_auto_name, normalize_config, snake_case
from modelgraph.graph import Layer
from modelgraph.loading import load
from modelgraph.schemas.diff_report import DiffReport

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
K3 = SAMPLES / "k3"
K2 = SAMPLES / "k2"
TFJS = SAMPLES / "tfjs"

K3_MODELS = sorted(p.stem for p in K3.glob("*.keras") if (K3 / f"{p.stem}.h5").exists())
K2_MODELS = sorted(p.stem for p in K2.glob("*.h5") if not p.stem.endswith("_weights"))


@pytest.fixture(autouse=True)
def _release_files():
    # lazily read HDF5 files stay open while a graph lives; free them between tests
    yield
    gc.collect()


# --- helpers ---------------------------------------------------------------------------------------


def edit_keras(
    src: Path,
    dst: Path,
    config: Callable[[dict], None] | None = None,
    weights: Callable[[h5py.File], None] | None = None,
) -> Path:
    """Copy a .keras zip, editing its config (in place on the parsed JSON) and/or its weights file."""
    with zipfile.ZipFile(src) as zin:
        members = {name: zin.read(name) for name in zin.namelist()}
    if config is not None:
        cfg = json.loads(members["config.json"])
        config(cfg)
        members["config.json"] = json.dumps(cfg).encode()
    if weights is not None:
        buf = io.BytesIO(members["model.weights.h5"])
        with h5py.File(buf, "r+") as f:
            weights(f)
        members["model.weights.h5"] = buf.getvalue()
    with zipfile.ZipFile(dst, "w") as zout:
        for name, data in members.items():
            zout.writestr(name, data)
    return dst


def layers_of(cfg: dict) -> list[dict]:
    return cfg["config"]["layers"]


def layer_cfg(cfg: dict, name: str) -> dict:
    for entry in layers_of(cfg):
        if entry["config"].get("name") == name:
            return entry
    raise KeyError(name)


def rename_everywhere(cfg: Any, old: str, new: str) -> Any:
    """Rename a layer in a Keras 3 config: its entry, keras_history refs and model input/output lists."""

    def walk(x: Any) -> Any:
        if isinstance(x, dict):
            if "keras_history" in x and x["keras_history"][0] == old:
                x["keras_history"][0] = new
            if x.get("name") == old:
                x["name"] = new
            for key in ("input_layers", "output_layers"):
                refs = x.get(key)
                if isinstance(refs, list) and len(refs) == 3 and isinstance(refs[0], str):
                    x[key] = [new if refs[0] == old else refs[0], *refs[1:]]
                elif isinstance(refs, list):
                    x[key] = [[new if r[0] == old else r[0], *r[1:]] for r in refs]
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        return x

    return walk(cfg)


def set_vars_name(f: h5py.File, old: str, new: str) -> None:
    def visit(name: str, obj: Any) -> None:
        if isinstance(obj, h5py.Group) and obj.attrs.get("name") == old:
            obj.attrs["name"] = new

    f.visititems(visit)


def set_history(entry: dict, position: int, new_ref: list) -> None:
    """Point tensor ``position`` of the first call of a Keras 3 layer entry at ``new_ref``."""
    found: list[dict] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            if "keras_history" in x:
                found.append(x)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(entry["inbound_nodes"][0])
    found[position]["keras_history"] = new_ref


# --- a model against itself in another format -------------------------------------------------------


@pytest.mark.parametrize("name", K3_MODELS)
@pytest.mark.parametrize("other", ["h5", "dir", "json"])
def test_k3_keras_vs_other_format_is_identical(name, other):
    target = {"h5": K3 / f"{name}.h5", "dir": K3 / f"{name}_dir", "json": K3 / f"{name}.json"}[other]
    if not target.exists():
        pytest.skip(f"no {other} form of {name}")
    result = diff(K3 / f"{name}.keras", target)
    assert not result, (result.verdict, [e.model_dump(exclude_none=True) for e in result.layers])
    assert result.identical and result.similarity == 1.0
    assert result.report.params_delta == (None if other == "json" else 0)
    assert result.report.options.weights == (other != "json")


@pytest.mark.parametrize("name", K2_MODELS)
@pytest.mark.parametrize("other", ["keras", "json", "tfjs"])
def test_k2_h5_vs_other_format_is_identical(name, other):
    target = {"keras": K2 / f"{name}.keras", "json": K2 / f"{name}.json", "tfjs": TFJS / name / "model.json"}[
        other
    ]
    if not target.exists():
        pytest.skip(f"no {other} form of {name}")
    result = diff(K2 / f"{name}.h5", target)
    changed = [e.model_dump(exclude_none=True) for e in result.layers if e.status != "unchanged"]
    if other == "tfjs":
        # TF.js has no int64: the converter stores Normalization's count as int32 (same value).
        changed = [
            e
            for e in changed
            if e["config"]
            or e["wiring"]
            or any(
                (w["status"], w["old_dtype"], w["new_dtype"], w["mismatched"])
                != ("dtype", "int64", "int32", 0)
                for w in e["weights"]
            )
        ]
        assert not changed, (result.verdict, changed)
        return
    assert not result, (result.verdict, changed)


def test_self_diff_is_identical_and_falsy():
    g = load(K3 / "nested.keras")
    result = diff(g, g)
    assert not result
    assert result.verdict.startswith("identical")
    assert result.report.counts.matched == result.report.counts.layers_a == 16
    assert all(m.a == m.b for m in result.report.alignment)


# --- single targeted edits: each reported exactly, naming the layer -----------------------------------


def only_entry(result) -> Any:
    assert result, "expected a difference"
    assert len(result.layers) == 1, [e.model_dump(exclude_none=True) for e in result.layers]
    return result.layers[0]


def test_renamed_layer(tmp_path):
    def cfg(c):
        rename_everywhere(c, "ffn1", "ffn_up")

    b = edit_keras(K3 / "mha.keras", tmp_path / "b.keras", cfg, lambda f: set_vars_name(f, "ffn1", "ffn_up"))
    result = diff(K3 / "mha.keras", b)
    e = only_entry(result)
    assert (e.name, e.status, e.marker) == ("ffn_up", "changed", "~")
    assert e.rename is not None and (e.rename.old, e.rename.new, e.rename.auto) == ("ffn1", "ffn_up", False)
    assert not e.config and not e.wiring and not e.weights  # ffn2 reads the renamed layer: not rewired
    assert result.report.counts.renamed == 1
    assert "1 renamed" in result.verdict


def test_changed_activation(tmp_path):
    def cfg(c):
        layer_cfg(c, "ffn1")["config"]["activation"] = "relu"

    result = diff(K3 / "mha.keras", edit_keras(K3 / "mha.keras", tmp_path / "b.keras", cfg))
    e = only_entry(result)
    assert e.name == "ffn1" and e.class_name == "Dense"
    assert [(c.key, c.old, c.new) for c in e.config] == [("activation", "gelu", "relu")]
    assert not e.wiring and not e.weights and e.rename is None
    assert result.report.params_delta == 0


def test_changed_units_with_weights_reshaped(tmp_path):
    rng = np.random.default_rng(1)

    def cfg(c):
        layer_cfg(c, "ffn1")["config"]["units"] = 12

    def weights(f):
        for path, shape in (
            ("layers/dense/vars/0", (8, 12)),
            ("layers/dense/vars/1", (12,)),
            ("layers/dense_1/vars/0", (12, 8)),
        ):
            del f[path]
            f[path] = rng.standard_normal(shape).astype("float32")

    result = diff(K3 / "mha.keras", edit_keras(K3 / "mha.keras", tmp_path / "b.keras", cfg, weights))
    assert result.changed() == ["ffn1", "ffn2"]
    ffn1, ffn2 = result.layer("ffn1"), result.layer("ffn2")
    assert [(c.key, c.old, c.new) for c in ffn1.config] == [("units", 16, 12)]
    assert [(w.name, w.status, w.old_shape, w.new_shape) for w in ffn1.weights] == [
        ("kernel", "shape", [8, 16], [8, 12]),
        ("bias", "shape", [16], [12]),
    ]
    # the consumer's kernel must follow: its input width changed; its config did not
    assert not ffn2.config and not ffn2.wiring
    assert [(w.name, w.status, w.old_shape, w.new_shape) for w in ffn2.weights] == [
        ("kernel", "shape", [16, 8], [12, 8])
    ]
    assert result.report.params_delta == (8 * 12 + 12 + 12 * 8) - (8 * 16 + 16 + 16 * 8)
    assert (ffn1.old_params, ffn1.new_params) == (144, 108)


def test_rewired_skip_connection(tmp_path):
    def cfg(c):
        set_history(layer_cfg(c, "res2"), 0, ["ln1", 0, 0])

    result = diff(K3 / "mha.keras", edit_keras(K3 / "mha.keras", tmp_path / "b.keras", cfg))
    e = only_entry(result)
    assert e.name == "res2" and e.marker == "~"
    assert [(w.node, w.old, w.new) for w in e.wiring] == [
        (0, ["res_c[0][0]", "ffn2[0][0]"], ["ln1[0][0]", "ffn2[0][0]"])
    ]
    assert not e.config and not e.weights
    assert result.report.counts.rewired == 1


def test_one_perturbed_weight(tmp_path):
    def weights(f):
        d = f["layers/dense_1/vars/0"]
        values = d[()]
        values[3, 2] += 0.5
        d[...] = values

    result = diff(K3 / "mha.keras", edit_keras(K3 / "mha.keras", tmp_path / "b.keras", weights=weights))
    e = only_entry(result)
    assert e.name == "ffn2" and e.marker == "!"
    (w,) = e.weights
    assert (w.name, w.status, w.mismatched, w.size) == ("kernel", "values", 1, 128)
    assert w.max_abs == pytest.approx(0.5, abs=1e-6)
    assert w.rms == pytest.approx(0.5 / np.sqrt(128), rel=1e-5)
    assert 0 < w.rel < 1
    assert not e.config and not e.wiring
    assert 0.9 < result.similarity < 1


def test_perturbation_below_tolerance_and_no_weights(tmp_path):
    def tiny(f):
        d = f["layers/dense_1/vars/0"]
        d[...] = d[()] * (1 + 1e-7)

    b = edit_keras(K3 / "mha.keras", tmp_path / "b.keras", weights=tiny)
    assert not diff(K3 / "mha.keras", b)
    assert diff(K3 / "mha.keras", b, atol=0, rtol=0)

    def big(f):
        d = f["layers/dense_1/vars/0"]
        d[...] = d[()] + 1.0

    c = edit_keras(K3 / "mha.keras", tmp_path / "c.keras", weights=big)
    assert diff(K3 / "mha.keras", c)
    result = diff(K3 / "mha.keras", c, weights=False)
    assert not result and result.report.options.weights is False


def test_removed_layer(tmp_path):
    def cfg(c):
        c["config"]["layers"] = [e for e in layers_of(c) if e["name"] != "drop"]
        set_history(layer_cfg(c, "probs"), 0, ["cat2", 0, 0])

    result = diff(K3 / "cnn.keras", edit_keras(K3 / "cnn.keras", tmp_path / "b.keras", cfg))
    assert result.changed() == ["probs", "drop"]
    drop, probs = result.layer("drop"), result.layer("probs")
    assert (drop.status, drop.marker, drop.class_name) == ("removed", "-", "Dropout")
    assert [(w.old, w.new) for w in probs.wiring] == [(["drop[0][0]"], ["cat2[0][0]"])]
    assert result.report.counts.removed == 1 and result.report.counts.added == 0
    # the other direction: added
    back = diff(tmp_path / "b.keras", K3 / "cnn.keras")
    assert back.layer("drop").status == "added" and back.layer("drop").marker == "+"


# --- auto-generated names align structurally ------------------------------------------------------------

OPS_AUTO = ["add", "multiply", "split", "gelu", "concatenate", "get_item", "reshape"]


def _renumber_ops(c: dict) -> None:
    for i, name in enumerate(OPS_AUTO):
        rename_everywhere(c, name, f"{name}_{i + 7}")


def test_auto_named_layers_renumbered_are_identical(tmp_path):
    b = edit_keras(K3 / "ops.keras", tmp_path / "b.keras", _renumber_ops)
    result = diff(K3 / "ops.keras", b)
    assert not result, [e.model_dump(exclude_none=True) for e in result.layers]
    assert result.report.counts.auto_renamed == len(OPS_AUTO)
    pairs = {m.a[0]: m.b[0] for m in result.report.alignment}
    assert pairs["add"] == "add_7" and pairs["reshape"] == "reshape_13"
    assert "auto-generated" in result.verdict


def test_auto_names_swapped_between_places_align_by_position(tmp_path):
    """add_1 here must match add_2 there when that one sits in its place: names are session history."""

    def names_a(c):
        rename_everywhere(c, "res1", "add_1")
        rename_everywhere(c, "res2", "add_2")

    def names_b(c):
        rename_everywhere(c, "res1", "add_2")
        rename_everywhere(c, "res2", "add_1")

    a = edit_keras(
        K3 / "mha.keras",
        tmp_path / "a.keras",
        names_a,
        lambda f: (set_vars_name(f, "res1", "add_1"), set_vars_name(f, "res2", "add_2")),
    )
    b = edit_keras(
        K3 / "mha.keras",
        tmp_path / "b.keras",
        names_b,
        lambda f: (set_vars_name(f, "res1", "add_2"), set_vars_name(f, "res2", "add_1")),
    )
    result = diff(a, b)
    assert not result, [e.model_dump(exclude_none=True) for e in result.layers]
    pairs = {m.a[0]: m.b[0] for m in result.report.alignment}
    assert pairs["add_1"] == "add_2" and pairs["add_2"] == "add_1"
    assert result.report.counts.auto_renamed == 2


def test_auto_named_layer_with_a_change_is_still_paired(tmp_path):
    def cfg(c):
        _renumber_ops(c)
        layer_cfg(c, "gelu_10")["config"]["approximate"] = False

    result = diff(K3 / "ops.keras", edit_keras(K3 / "ops.keras", tmp_path / "b.keras", cfg))
    e = only_entry(result)
    assert (e.name, e.rename.old, e.rename.auto) == ("gelu_10", "gelu", True)
    assert [(c.key, c.old, c.new) for c in e.config] == [("approximate", True, False)]


def test_renamed_input_pairs_by_position(tmp_path):
    def cfg(c):
        rename_everywhere(c, "tokens", "tok_in")

    b = edit_keras(
        K3 / "mha.keras", tmp_path / "b.keras", cfg, lambda f: set_vars_name(f, "tokens", "tok_in")
    )
    e = only_entry(diff(K3 / "mha.keras", b))
    assert (e.name, e.matched_by, e.rename.old) == ("tok_in", "position", "tokens")


def test_nested_model_change_has_path(tmp_path):
    def cfg(c):
        inner = layer_cfg(c, "inner_model")
        for entry in inner["config"]["layers"]:
            if entry["config"]["name"] == "inner_dense":
                entry["config"]["activation"] = "tanh"

    result = diff(K3 / "nested.keras", edit_keras(K3 / "nested.keras", tmp_path / "b.keras", cfg))
    e = only_entry(result)
    assert e.path == ["inner_model", "inner_dense"]
    assert e.config[0].key == "activation"


# --- normalisation ---------------------------------------------------------------------------------------


def _layer(class_name: str, config: dict) -> Layer:
    return Layer(name=config.get("name", "x"), class_name=class_name, kind="layer", config=config)


def test_normalisation_of_keras2_and_keras3_spellings():
    k2 = _layer(
        "BatchNormalization",
        {
            "name": "bn",
            "dtype": "float32",
            "axis": [3],
            "beta_regularizer": {"class_name": "L2", "config": {"l2": 0.009999999776482582}},
            "batch_input_shape": [None, 4, 4, 3],
        },
    )
    k3 = _layer(
        "BatchNormalization",
        {
            "name": "bn_other",
            "dtype": {
                "module": "keras",
                "class_name": "DTypePolicy",
                "config": {"name": "float32"},
                "registered_name": None,
                "shared_object_id": 1,
            },
            "axis": 3,
            "beta_regularizer": {
                "module": "keras.regularizers",
                "class_name": "L2",
                "config": {"l2": 0.01},
                "registered_name": None,
            },
            "synchronized": False,
            "renorm": False,
            "renorm_momentum": 0.99,
        },
    )
    from modelgraph.diff_align import config_changes

    assert config_changes(normalize_config(k2), normalize_config(k3)) == []
    inp2 = _layer(
        "InputLayer", {"batch_input_shape": [None, 4], "dtype": "float32", "sparse": False, "name": "a"}
    )
    inp3 = _layer(
        "InputLayer",
        {"batch_shape": [None, 4], "dtype": "float32", "sparse": False, "name": "a", "optional": False},
    )
    assert config_changes(normalize_config(inp2), normalize_config(inp3)) == []
    swish = _layer("Dense", {"activation": "swish", "units": 3})
    silu = _layer("Dense", {"activation": "silu", "units": 3})
    assert normalize_config(swish) == normalize_config(silu)
    assert normalize_config(_layer("Dense", {"units": 3})) != normalize_config(_layer("Dense", {"units": 4}))


def test_auto_name_detection():
    assert snake_case("BatchNormalization") == "batch_normalization"
    assert snake_case("Conv2D") == "conv2d" and snake_case("GetItem") == "get_item"
    assert is_auto_name("dense_7", "Dense") and is_auto_name("dense", "Dense")
    assert is_auto_name("input_layer_2", "InputLayer") and is_auto_name("input_1", "InputLayer")
    assert is_auto_name("tf.math.add_3", "TFOpLambda", {"function": "math.add"})
    assert not is_auto_name("ffn1", "Dense") and not is_auto_name("dense_head", "Dense")


# --- report, outputs, drawing ----------------------------------------------------------------------------


def test_report_round_trips_and_names_every_changed_layer(tmp_path):
    def cfg(c):
        layer_cfg(c, "ffn1")["config"]["activation"] = "relu"
        set_history(layer_cfg(c, "res2"), 0, ["ln1", 0, 0])

    result = diff(K3 / "mha.keras", edit_keras(K3 / "mha.keras", tmp_path / "b.keras", cfg))
    data = json.loads(result.report.model_dump_json())
    again = DiffReport.model_validate(data)
    assert again == result.report
    assert sorted(e["name"] for e in data["layers"]) == ["ffn1", "res2"]
    assert data["schema_version"] == "1.0" and data["identical"] is False


def test_outputs_compare_on_random_inputs(tmp_path):
    pytest.importorskip("modelgraph.runner.interpreter")

    same = diff(K3 / "mha.keras", K3 / "mha.h5", outputs=True, seed=3)
    assert not same and same.report.outputs is not None and same.report.outputs.equal
    assert same.report.outputs.seed == 3

    def weights(f):  # one element: a uniform shift would vanish in the LayerNormalization after it
        d = f["layers/dense_1/vars/0"]
        values = d[()]
        values[0, 0] += 1.0
        d[...] = values

    changed = diff(
        K3 / "mha.keras", edit_keras(K3 / "mha.keras", tmp_path / "b.keras", weights=weights), outputs=True
    )
    assert changed and not changed.report.outputs.equal
    assert "outputs differ" in changed.verdict


def test_dot_colours_added_removed_changed(tmp_path):
    def cfg(c):
        c["config"]["layers"] = [e for e in layers_of(c) if e["name"] != "drop"]
        set_history(layer_cfg(c, "probs"), 0, ["cat2", 0, 0])
        layer_cfg(c, "conv1")["config"]["activation"] = "relu"

    result = diff(K3 / "cnn.keras", edit_keras(K3 / "cnn.keras", tmp_path / "b.keras", cfg))
    dot = to_dot(result)
    lines = {ln.split(" [", 1)[0].strip(): ln for ln in dot.splitlines() if "label=" in ln and "->" not in ln}
    by_label = {ln.split('label="', 1)[1].split("\\n", 1)[0]: ln for ln in lines.values()}
    assert "#ffcdd2" in by_label["drop"]  # removed: red
    assert "#ffe0b2" in by_label["conv1"] and "#ffe0b2" in by_label["probs"]  # changed: amber
    assert "#ffffff" in by_label["bn1"]
    assert "style=dashed" in dot  # drop -> probs exists only in A
