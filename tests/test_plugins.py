"""Plugins: the three examples of docs/plugins.md against real Keras, and plugins that go wrong.

The model (samples/plugins/custom_text.{keras,h5}) and its golden were made by real Keras 3 with the
custom layers' own code (samples/gen_plugins.py); the converted files in samples/plugins/converted/
were loaded back by Keras 3 with ``custom_objects`` and their outputs recorded in
samples/plugins/converted.json. Everything here replays them without TensorFlow.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from modelgraph import catalogue, plugins
from modelgraph.catalogue.spec import LayerSpec, support
from modelgraph.errors import NotConvertibleError, PluginError
from modelgraph.loading import load
from modelgraph.runner.interpreter import Runner

from ._cli import run_cli

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples" / "plugins"
EXAMPLES = ROOT / "examples" / "plugins"
EXAMPLE_FILES = [EXAMPLES / f"{name}.py" for name in ("attention_pooling", "position_embedding", "gelu_tanh")]
MODELS = ["custom_text.keras", "custom_text.h5"]
ATOL, RTOL = 1e-4, 1e-3


@pytest.fixture
def with_examples():
    """The three example plugins loaded (and forgotten afterwards: other tests see the built-ins)."""
    with plugins.scratch():
        for path in EXAMPLE_FILES:
            plugins.load_plugin(str(path))
        yield


@pytest.fixture
def scratch():
    with plugins.scratch():
        yield


def _golden() -> dict[str, np.ndarray]:
    with np.load(SAMPLES / "custom_text_golden.npz") as data:
        return {k: data[k] for k in data.files}


def _close(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.shape == expected.shape
    err = np.abs(actual.astype(np.float64) - expected)
    assert np.all(err <= ATOL + RTOL * np.abs(expected)), float(err.max())


def _run(path: Path) -> list[np.ndarray]:
    golden = _golden()
    result = Runner(load(path)).run({"ids": golden["input/ids"]})
    return [np.asarray(v) for v in result.values()]


# --- the examples, against Keras ----------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
def test_examples_run_to_keras_outputs(with_examples, model):
    golden = _golden()
    outs = _run(SAMPLES / model)
    assert len(outs) == 2
    _close(outs[0], golden["output/0"])
    _close(outs[1], golden["output/1"])


def test_examples_give_shapes_weights_and_macs(with_examples):
    from modelgraph.summary import summarize

    graph = load(SAMPLES / "custom_text.keras")
    rows = {row.name: row for row in summarize(graph).layers}
    time, width = graph.layer("positions").weights[0].shape[0], 16
    assert [list(s) for s in rows["attention"].output_shapes] == [[None, width], [None, time]]
    assert [list(s) for s in rows["positions"].output_shapes] == [[None, time, width]]
    assert rows["attention"].macs == 2 * time * width  # scores + weighted sum, as the plugin says
    assert rows["positions"].macs == 0
    # Weights are named as the plugins name them and have the shapes their rules expect.
    assert [w.name for w in graph.layer("attention").weights] == ["W"]
    assert [w.name for w in graph.layer("positions").weights] == ["embeddings"]


def test_examples_export_to_onnx_and_run_on_onnxruntime(with_examples, tmp_path):
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from modelgraph.saving.onnx import export_onnx

    out = tmp_path / "custom_text.onnx"
    export_onnx(load(SAMPLES / "custom_text.keras"), out)
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    golden = _golden()
    feed = {session.get_inputs()[0].name: golden["input/ids"].astype(np.int32)}
    outs = session.run(None, feed)
    _close(outs[0], golden["output/0"])
    _close(outs[1], golden["output/1"])


def _verified() -> dict:
    return json.loads((SAMPLES / "converted.json").read_text())


@pytest.mark.parametrize("source", ["keras", "h5"])
@pytest.mark.parametrize("target", ["keras", "h5"])
def test_convert_with_plugins_writes_what_keras_verified(with_examples, tmp_path, source, target):
    from modelgraph.saving import save

    name = f"plugin_from_{source}.{target}"
    out = tmp_path / name
    save(load(SAMPLES / f"custom_text.{source}"), out)
    assert out.read_bytes() == (SAMPLES / "converted" / name).read_bytes()
    verified = _verified()[name]
    assert verified["max_abs_diff_vs_golden"] <= ATOL
    assert {"AttentionWeightedAverage", "PositionEmbedding"} <= set(verified["layer_classes"])
    golden = _golden()
    outs = _run(out)  # and modelgraph reads its own output back to Keras's numbers
    _close(outs[0], golden["output/0"])


# --- without the plugins ------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["keras", "h5"])
@pytest.mark.parametrize("target", ["keras", "h5"])
def test_keep_unknown_writes_unknown_classes_as_they_are(tmp_path, source, target):
    from modelgraph.saving import save

    graph = load(SAMPLES / f"custom_text.{source}")
    with pytest.raises(NotConvertibleError, match="PositionEmbedding"):
        save(graph, tmp_path / f"refused.{target}")
    name = f"keep_unknown_from_{source}.{target}"
    save(graph, tmp_path / name, keep_unknown=True)
    assert (tmp_path / name).read_bytes() == (SAMPLES / "converted" / name).read_bytes()
    assert _verified()[name]["max_abs_diff_vs_golden"] <= ATOL


def test_keep_unknown_keeps_registered_names():
    import zipfile

    with zipfile.ZipFile(SAMPLES / "converted" / "keep_unknown_from_h5.keras") as z:
        layers = json.loads(z.read("config.json"))["config"]["layers"]
    records = {layer["name"]: layer for layer in layers}
    assert records["attention"]["class_name"] == "AttentionWeightedAverage"
    assert records["attention"]["registered_name"] == "plugins>AttentionWeightedAverage"
    assert records["ffn"]["config"]["activation"]["config"] == "plugins>gelu_tanh"


def test_unknown_classes_inspect_render_and_validate(tmp_path):
    from modelgraph.render import to_dot
    from modelgraph.summary import summarize
    from modelgraph.validate.api import validate

    graph = load(SAMPLES / "custom_text.keras")
    rows = {row.name: row for row in summarize(graph).layers}
    assert rows["attention"].params == 16 and rows["attention"].macs is None
    assert "AttentionWeightedAverage" in to_dot(graph).source
    report = validate([str(SAMPLES / "custom_text.keras")])
    found = [i for f in report for i in f.issues if i.rule == "CAT001"]
    assert len(found) == 3  # two classes and one custom activation (used by two layers)
    assert all("docs/plugins.md" in i.message for i in found)
    assert any("'ffn', 'act'" in i.message for i in found)


def test_validate_does_not_report_what_a_plugin_describes(with_examples):
    from modelgraph.validate.api import validate

    report = validate([str(SAMPLES / "custom_text.keras")])
    assert not [i for f in report for i in f.issues if i.rule in ("CAT001", "RUN001", "RUN002")]


# --- the registration API -----------------------------------------------------------------------


def test_builtins_go_through_register():
    assert len(catalogue.declared()) > 300
    with plugins.scratch(), pytest.raises(Exception, match="already registered by modelgraph"):
        catalogue.register(LayerSpec("Dense"))


def test_omitted_concerns_are_reported_per_concern(scratch):
    catalogue.register(LayerSpec("OnlyShapes", shape=lambda call: call.x()), family=None)
    with catalogue.plugin_scope("tiny"):
        catalogue.register(LayerSpec("TinyLayer", shape=lambda call: call.x(), weight_names=()))
    spec = catalogue.spec_for("TinyLayer", *catalogue.PROVIDERS)
    concerns = support(spec)
    assert concerns["shapes"] is True
    assert concerns["run"] == concerns["onnx"] == concerns["macs"] == "not given by plugin 'tiny'"
    assert spec.family == "plugin tiny"
    assert catalogue.missing_concerns(spec) == []


def test_layers_command_shows_a_plugins_table(tmp_path):
    plugin = tmp_path / "tiny.py"
    plugin.write_text(
        textwrap.dedent(
            """
            from modelgraph.catalogue import LayerSpec, register
            register(LayerSpec("TinyLayer", shape=lambda call: call.x(), weight_names=()))
            """
        )
    )
    result = run_cli("layers", "TinyLayer", "--plugin", plugin)
    assert result.returncode == 0, result.stderr
    assert "plugin tiny" in result.stdout
    assert "run      no: not given by plugin 'tiny'" in result.stdout
    assert "shapes   yes" in result.stdout


def test_replace_needs_to_be_asked_for(scratch):
    spec = catalogue.register(LayerSpec("Softmax", kernel="replaced"), replace=True)
    assert catalogue.spec_for("Softmax") is spec


NONSENSE = {
    "raises": ("raise RuntimeError('boom')", "failed while loading: RuntimeError: boom"),
    "not_a_spec": ("register({'key': 'X'})", "register() takes a LayerSpec, got dict"),
    "clash": ("register(LayerSpec('Dense'))", "'Dense' is already registered by modelgraph (core)"),
    "shape_not_callable": (
        "register(LayerSpec('Odd', shape=3))",
        "entry 'Odd': shape must be a callable or a string saying why there is none, got int 3",
    ),
    "bad_masks": ("register(LayerSpec('Odd', masks={3: 'pass'}))", "masks must be a mapping"),
    "activation_clash": ("register_activation('relu', kernel=abs)", "activation 'relu' is built into"),
}


@pytest.mark.parametrize("case", sorted(NONSENSE))
def test_a_plugin_that_goes_wrong_is_one_error_naming_it(scratch, tmp_path, case):
    body, message = NONSENSE[case]
    plugin = tmp_path / f"{case}.py"
    plugin.write_text(
        "from modelgraph.catalogue import LayerSpec, register, register_activation\n" + body + "\n"
    )
    with pytest.raises(PluginError) as err:
        plugins.load_plugin(str(plugin))
    assert f"plugin '{plugin}'" in str(err.value)
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("no/such/plugin.py", "plugin 'no/such/plugin.py': no such file"),
        ("no_such_plugin_module", "no module named 'no_such_plugin_module'"),
        ("entry:nothing", "no entry point 'nothing' in group 'modelgraph.plugins'"),
    ],
)
def test_a_missing_plugin_is_named(scratch, ref, message):
    with pytest.raises(PluginError, match=message):
        plugins.load_plugin(ref)


def test_cli_plugin_error_is_one_line_exit_2(tmp_path):
    plugin = tmp_path / "broken.py"
    plugin.write_text("raise ValueError('bad weights table')\n")
    model = SAMPLES / "custom_text.keras"
    for args in (["--plugin", plugin, "inspect", model], ["inspect", model, "--plugin", plugin]):
        result = run_cli(*args)
        assert result.returncode == 2
        assert result.stderr.strip().splitlines() == [
            f"modelgraph: error: plugin '{plugin}' failed while loading: ValueError: bad weights table"
        ]


def test_env_var_loads_plugins(tmp_path, monkeypatch):
    import os
    import subprocess
    import sys

    env = dict(os.environ, MODELGRAPH_PLUGINS=os.pathsep.join(str(p) for p in EXAMPLE_FILES))
    golden = SAMPLES / "custom_text_golden.npz"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "modelgraph",
            "run",
            SAMPLES / "custom_text.keras",
            "--input",
            golden,
            "--expect",
            golden,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "PASSED" in result.stdout


def test_entry_points_load_only_when_named(scratch, tmp_path, monkeypatch):
    dist = tmp_path / "tinyplug-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tinyplug\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[modelgraph.plugins]\ntiny = tinyplug_mod\n")
    (tmp_path / "tinyplug_mod.py").write_text(
        "from modelgraph.catalogue import LayerSpec, register\nregister(LayerSpec('EntryLayer'))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    graph_has_it = catalogue.spec_for("EntryLayer")
    assert graph_has_it is None  # installed, but not named: nothing is loaded
    assert plugins.load_plugin("entry:tiny") == "tiny"
    assert catalogue.spec_for("EntryLayer").plugin == "tiny"


def test_registered_activation_matches_keras3_names(scratch):
    from modelgraph.runner.activations import get_activation

    catalogue.register_activation("twice", kernel=lambda x: 2 * x)
    value = {
        "module": "builtins",
        "class_name": "function",
        "config": "mine>twice",
        "registered_name": "function",
    }
    assert get_activation(value)(np.ones(2, np.float32)).tolist() == [2.0, 2.0]
    assert get_activation("twice")(np.ones(1, np.float32)).tolist() == [2.0]


def test_a_plugins_failing_shape_rule_is_named(scratch, tmp_path):
    from modelgraph.shapes import infer_shapes

    plugin = tmp_path / "buggy.py"
    plugin.write_text(
        "from modelgraph.catalogue import LayerSpec, register\n"
        "register(LayerSpec('AttentionWeightedAverage', shape=lambda call: call.config['nope']))\n"
    )
    plugins.load_plugin(str(plugin))
    problems = [
        p for p in infer_shapes(load(SAMPLES / "custom_text.keras")).problems if p.layer == "attention"
    ]
    assert [p.kind for p in problems] == ["plugin"]
    assert (
        "the shape rule of plugin 'buggy' for AttentionWeightedAverage failed: KeyError"
        in problems[0].message
    )


def test_a_model_file_never_loads_a_plugin(tmp_path, monkeypatch):
    """A record's module naming an importable plugin module does not import it."""
    import sys
    import zipfile

    (tmp_path / "sneaky_plugin.py").write_text("import sys\nsys.modules['sneaky_ran'] = sys\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with zipfile.ZipFile(SAMPLES / "custom_text.keras") as z:
        members = {n: z.read(n) for n in z.namelist()}
    config = json.loads(members["config.json"])
    for record in config["config"]["layers"]:
        if record["class_name"] == "AttentionWeightedAverage":
            record["module"] = "sneaky_plugin"
    members["config.json"] = json.dumps(config).encode()
    path = tmp_path / "sneaky.keras"
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    graph = load(path)
    assert graph.layer("attention").module == "sneaky_plugin"
    assert "sneaky_plugin" not in sys.modules and "sneaky_ran" not in sys.modules
    assert catalogue.spec_for("AttentionWeightedAverage") is None


def test_validate_workers_load_the_same_plugins(with_examples, tmp_path):
    import multiprocessing
    import shutil

    from modelgraph.validate.api import validate

    for name in MODELS:
        shutil.copy(SAMPLES / name, tmp_path / name)
    # Spawned workers (the default start method from Python 3.14) inherit nothing from this process.
    method = multiprocessing.get_start_method()
    multiprocessing.set_start_method("spawn", force=True)
    try:
        report = validate([str(tmp_path)], jobs=2)
    finally:
        multiprocessing.set_start_method(method, force=True)
    assert len(report) == 2
    assert not [i for f in report for i in f.issues if i.rule in ("CAT001", "RUN001")]
