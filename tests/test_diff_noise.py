"""``diff`` without noise (issue 22, part 3): settings equal in effect compare equal, through the one
normalisation step :func:`modelgraph.diff_align.normalize_config`; ``--strict-config`` shows raw
differences; no change prints the same on both sides; a shared layer does not draw a cycle.

The twins are the same models saved by Keras 3.15.1 (``samples/k3/X.keras``) and tf_keras 2.21
(``samples/k2/X.h5``).
"""

from __future__ import annotations

import json
import re
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest
from click.testing import CliRunner

from modelgraph.cli.main import cli
from modelgraph.diff import diff
from modelgraph.diff_align import ConfigContext, config_changes, normalize_config, set_defaults_provider
from modelgraph.graph import Layer
from modelgraph.loading import load

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
TWINS = ["cnn", "mha", "nested", "dtypes", "multi_io_list", "multi_io_dict", "rnn_state"]
# (seq_noin is left out: a Sequential built by calling it records the batch size it was called with,
# [1, 5] in the Keras 3 file and [None, 5] in the tf_keras one; a real difference, not noise.)

#: What stays after normalisation: nothing. What used to stay needed per-class knowledge, now in the
#: catalogue entries' ConfigSpec (see the tests below): tf_keras's SeparableConv2D writes its base
#: Conv's unused groups: 1 and kernel_initializer; Keras 3's Bidirectional always writes the backward
#: copy and its wrapped RNN's zero_output_for_mask as the wrapper forces it.
NEEDS_CLASS_DEFAULTS: set[tuple[str, str]] = set()


def config_noise(name: str, **options: bool) -> set[tuple[str, str]]:
    a = load(SAMPLES / "k3" / f"{name}.keras")
    b = load(SAMPLES / "k2" / f"{name}.h5")
    report = diff(a, b, weights=False, **options).report
    return {(e.class_name, c.key) for e in report.layers for c in e.config}


@pytest.mark.parametrize("name", TWINS)
def test_keras3_and_tf_keras_twins_differ_only_where_class_defaults_are_needed(name: str) -> None:
    assert config_noise(name) <= NEEDS_CLASS_DEFAULTS


def test_the_noise_that_is_gone() -> None:
    # axis -1 (Keras 3) vs [3] (tf.keras) on a rank-4 input, and vs 2 / 1 on rank-3 / rank-2 inputs
    assert ("BatchNormalization", "axis") in config_noise("cnn", strict_config=True)
    assert ("BatchNormalization", "axis") not in config_noise("cnn")
    assert ("LayerNormalization", "axis") not in config_noise("mha")
    # a Sequential's dtype "float32" and trainable true (Keras 3) vs left out (tf_keras)
    assert not config_noise("nested")
    assert config_noise("mha") == set()


def test_strict_config_shows_raw_differences() -> None:
    runner = CliRunner()
    k3, k2 = SAMPLES / "k3" / "mha.keras", SAMPLES / "k2" / "mha.h5"
    quiet = runner.invoke(cli, ["diff", str(k3), str(k2), "--no-weights"])
    raw = runner.invoke(cli, ["diff", str(k3), str(k2), "--no-weights", "--strict-config"])
    assert quiet.exit_code == 0, quiet.output
    assert raw.exit_code == 1
    assert "axis: [-1] -> [2]" in raw.output and "dtype:" in raw.output


def test_strict_config_still_shows_what_the_catalogue_normalises() -> None:
    assert {
        ("SeparableConv2D", "groups"),
        ("SeparableConv2D", "kernel_initializer"),
    } <= config_noise("cnn", strict_config=True)
    raw = config_noise("rnn_state", strict_config=True)
    assert {
        ("Bidirectional", "backward_layer"),
        ("Bidirectional", "layer.config.zero_output_for_mask"),
    } <= raw


def _bidirectional(name: str) -> Layer:
    return next(lyr for lyr in load(SAMPLES / name).layers if lyr.class_name == "Bidirectional")


def test_a_backward_layer_that_differs_is_still_reported() -> None:
    k3, k2 = _bidirectional("k3/rnn_state.keras"), _bidirectional("k2/rnn_state.h5")
    assert config_changes(normalize_config(k3), normalize_config(k2)) == []
    assert "backward_layer" not in normalize_config(k3)  # the one Keras makes anyway
    backward = k3.config["backward_layer"]
    changed = {**k3.config, "backward_layer": {**backward, "config": {**backward["config"], "units": 7}}}
    k3_changed = Layer(name=k3.name, class_name=k3.class_name, kind=k3.kind, config=changed)
    assert normalize_config(k3_changed)["backward_layer"]["config"]["units"] == 7
    # a wrapped RNN's zero_output_for_mask is forced to its return_sequences by the wrapper
    assert normalize_config(k3)["layer"]["config"].get("zero_output_for_mask") is True
    assert normalize_config(k2)["layer"]["config"].get("zero_output_for_mask") is True


def test_separable_conv_differences_that_matter_are_still_reported() -> None:
    k3 = next(lyr for lyr in load(SAMPLES / "k3/cnn.keras").layers if lyr.class_name == "SeparableConv2D")
    k2 = next(lyr for lyr in load(SAMPLES / "k2/cnn.h5").layers if lyr.class_name == "SeparableConv2D")
    assert "groups" in k2.config and "kernel_initializer" in k2.config  # tf_keras's unused base-Conv keys
    assert config_changes(normalize_config(k3), normalize_config(k2)) == []
    changed = {**k2.config, "depthwise_initializer": {"class_name": "Zeros", "config": {}}}
    other = Layer(name=k2.name, class_name=k2.class_name, kind=k2.kind, config=changed)
    assert normalize_config(other)["depthwise_initializer"] != normalize_config(k3)["depthwise_initializer"]
    assert (
        normalize_config(Layer(name="x", class_name="SeparableConv2D", kind="layer", config={"groups": 2}))[
            "groups"
        ]
        == 2
    )


def _layer(class_name: str, **config: object) -> Layer:
    return Layer(name="x", class_name=class_name, kind="layer", config={"name": "x", **config})


def test_axis_is_normalised_only_where_the_rank_is_known() -> None:
    rank4 = ConfigContext(input_rank=4)
    assert normalize_config(_layer("BatchNormalization", axis=-1), rank4)["axis"] == 3
    assert normalize_config(_layer("BatchNormalization", axis=[3]), rank4)["axis"] == 3
    assert normalize_config(_layer("LayerNormalization", axis=[-1, -2]), rank4)["axis"] == [2, 3]
    assert normalize_config(_layer("Concatenate", axis=-1), ConfigContext(input_rank=2))["axis"] == 1
    assert normalize_config(_layer("BatchNormalization", axis=-1))["axis"] == -1  # rank unknown
    assert normalize_config(_layer("Dense", axis=-1), rank4)["axis"] == -1  # not an input axis
    policy = {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float16"}}
    assert normalize_config(_layer("Dense", dtype=policy))["dtype"] == "float16"
    assert "dtype" not in normalize_config(_layer("Dense", dtype="float32"))  # the default
    assert normalize_config(
        _layer("Dense", kernel_regularizer={"l2": 0.009999999776482582})
    ) == normalize_config(_layer("Dense", kernel_regularizer={"l2": 0.01}))
    strict = normalize_config(_layer("BatchNormalization", axis=-1), ConfigContext(input_rank=4, strict=True))
    assert strict == {"axis": -1}


def test_class_defaults_plug_in_through_one_hook() -> None:
    seen: list[tuple[str, str | None]] = []

    def provider(class_name: str, version: str | None) -> dict | None:
        seen.append((class_name, version))
        return {"units": 4} if class_name == "Dense" else None

    dense = _layer("Dense", units=4)
    set_defaults_provider(provider)
    try:
        assert "units" not in normalize_config(dense)
        assert config_noise("cnn") == set()
    finally:
        set_defaults_provider(None)
    assert normalize_config(dense)["units"] == 4
    assert ("SeparableConv2D", "3.15.1") in seen and ("SeparableConv2D", "2.21.0") in seen


def test_no_change_prints_the_same_on_both_sides(tmp_path: Path) -> None:
    """Two long values equal in their first 60 characters used to print as the same '...' text."""
    base = json.loads((SAMPLES / "k3" / "single_bare.json").read_text())
    layers = base["config"]["layers"]
    dense = next(lyr for lyr in layers if lyr["class_name"] == "Dense")
    a_cfg, b_cfg = json.loads(json.dumps(base)), json.loads(json.dumps(base))
    long = [{"step": i, "value": "x" * 8} for i in range(12)]
    changed = json.loads(json.dumps(long))
    changed[-1]["value"] = "y" * 8
    for cfg, value in ((a_cfg, long), (b_cfg, changed)):
        target = next(
            lyr for lyr in cfg["config"]["layers"] if lyr["config"]["name"] == dense["config"]["name"]
        )
        target["config"]["schedule"] = value
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_text(json.dumps(a_cfg))
    pb.write_text(json.dumps(b_cfg))
    result = CliRunner().invoke(cli, ["diff", str(pa), str(pb)])
    assert result.exit_code == 1
    line = next(line for line in result.output.splitlines() if "schedule:" in line)
    old, new = line.split("schedule: ", 1)[1].split(" -> ")
    assert old != new and "xxxxxxxx" in old and "yyyyyyyy" in new


def test_a_layer_called_three_times_draws_no_cycle(tmp_path: Path) -> None:
    out = tmp_path / "d.dot"
    k3, k2 = SAMPLES / "k3" / "multi_io_list.keras", SAMPLES / "k2" / "multi_io_list.h5"
    CliRunner().invoke(cli, ["diff", str(k3), str(k2), "--no-weights", "-o", str(out)])
    dot = out.read_text()
    assert dot.count("shared_dense") == 3 and "call 3/3" in dot  # one box per call
    sorter: TopologicalSorter[str] = TopologicalSorter()
    for src, dst in re.findall(r"^\s*(n\d+) -> (n\d+)", dot, flags=re.M):
        sorter.add(dst, src)
    try:
        sorter.prepare()
    except CycleError as exc:  # pragma: no cover - the failure being tested
        pytest.fail(f"the diff drawing has a cycle: {exc}")
