"""``render -o x.html --overlay ...``: nodes coloured by a number per layer, a legend, values in the panel.

Checked in headless Chromium (helpers from tests/test_html_view.py). The run-based overlays run
samples/k2/cnn.h5 on its golden input (samples/goldens/k2_cnn.npz, written by tf_keras with every
layer's output); the statistics are compared with the goldens' own arrays, the divergence overlay
with a copy of the goldens in which one layer's array was disturbed.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from modelgraph.cli.main import cli
from modelgraph.loading import load
from modelgraph.stats import layer_stats
from tests.test_html_view import CHROMIUM, SAMPLES, body_attr, browse, element_text, page_data

CNN = SAMPLES / "k2" / "cnn.h5"
GOLDEN = SAMPLES / "goldens" / "k2_cnn.npz"
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed")


def _render(*args: str) -> None:
    result = CliRunner().invoke(cli, ["render", *args])
    assert result.exit_code == 0, result.output


def _index(data: dict, name: str) -> int:
    return next(i for i, r in enumerate(data["layers"]) if r["name"] == name)


def _fill(dom: str, layer: int) -> str | None:
    match = re.search(
        rf'<g id="n\d+" class="node[^"]*" data-layer="{layer}"[^>]*>.*?style="fill: (rgb\([^)]*\))', dom, re.S
    )
    return match.group(1) if match else None


@pytest.fixture(scope="module")
def static_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    page = tmp_path_factory.mktemp("overlay") / "cnn.html"
    _render(str(CNN), "-o", str(page), "--overlay", "macs", "--overlay", "params", "--overlay", "bytes")
    return page


@needs_chromium
def test_macs_overlay_colours_the_heaviest_layer_darkest_with_a_legend(
    static_page: Path, tmp_path: Path
) -> None:
    data = page_data(static_page)
    assert [o["name"] for o in data["overlays"]] == ["macs", "params", "bytes"]
    rows = {row.path[-1]: row for row in layer_stats(load(CNN))}
    heaviest = max(rows, key=lambda n: rows[n].macs or 0)
    lightest = min((n for n in rows if rows[n].macs), key=lambda n: rows[n].macs)
    dom = browse(static_page, "", tmp_path)
    assert body_attr(dom, "data-overlay") == "macs"  # the first overlay given is shown first
    legend = element_text(dom, "overlay-legend")
    assert "MACs per sample" in legend and "no value" in legend
    top, bottom = _fill(dom, _index(data, heaviest)), _fill(dom, _index(data, lightest))
    assert top == "rgb(204, 76, 2)" and bottom == "rgb(255, 255, 212)"  # the two ends of the scale
    assert int(body_attr(dom, "data-overlay-painted") or 0) == len(data["overlays"][0]["values"])
    # the input has no MACs: grey, not coloured
    assert re.search(rf'class="node nov" data-layer="{_index(data, "img")}"', dom)


@needs_chromium
def test_another_overlay_is_chosen_in_the_page_and_its_values_are_in_the_panel(
    static_page: Path, tmp_path: Path
) -> None:
    layer = load(CNN).layer("sep")
    params = sum(w.size for w in layer.weights)
    dom = browse(static_page, "overlay=params&click=sep", tmp_path)
    assert body_attr(dom, "data-overlay") == "params"
    assert "Parameters" in element_text(dom, "overlay-legend")
    values = element_text(dom, "panel-overlay")
    assert re.search(rf"params\s+{params:,}\b", values), values
    assert re.search(r"bytes\s+512\b", values), values  # output (None, 4, 4, 8) float32 per sample
    dom = browse(static_page, "overlay=", tmp_path)
    assert body_attr(dom, "data-overlay") == "" and 'style="fill:' not in dom


@needs_chromium
def test_expect_overlay_marks_the_first_diverging_layer(tmp_path: Path) -> None:
    golden = dict(np.load(GOLDEN))
    golden["intermediate/b2_dw/0/0"] = golden["intermediate/b2_dw/0/0"] + 0.5  # one layer disturbed
    ref = tmp_path / "ref.npz"
    np.savez(ref, **golden)
    page = tmp_path / "expect.html"
    _render(str(CNN), "-o", str(page), "--overlay", f"expect={ref}", "--input", str(GOLDEN))
    data = page_data(page)
    overlay = data["overlays"][0]
    b2 = _index(data, "b2_dw")
    assert overlay["marked"] == [b2]
    assert overlay["details"][str(b2)]["max abs"] == pytest.approx(0.5, rel=1e-3)
    # the undisturbed layers match tf_keras's arrays (the runner's accuracy on this model)
    conv1 = overlay["details"][str(_index(data, "conv1"))]
    assert conv1["passed"] is True and conv1["max abs"] < 1e-5
    dom = browse(page, "click=b2_dw", tmp_path)
    assert re.search(rf'class="node mark[^"]*" data-layer="{b2}"', dom)
    legend = element_text(dom, "overlay-legend")
    assert "marked: b2_dw" in legend and "first diverging layer: b2_dw" in legend
    assert "first diverging" in element_text(dom, "panel-overlay")


def test_stats_overlay_matches_the_keras_activations() -> None:
    from modelgraph.html_view import layer_records
    from modelgraph.overlays import OverlaySpec, build_overlays

    graph = load(CNN)
    records = layer_records(graph, weight_stats=False)
    (stats,) = build_overlays(graph, records, [OverlaySpec("stats")], [str(GOLDEN)])
    golden = np.load(GOLDEN)
    for name in ("conv1", "relu1", "cat", "probs"):
        keras = golden[f"intermediate/{name}/0/0"].astype(np.float64)
        shown = stats.details[_index({"layers": records}, name)]
        assert shown["min"] == pytest.approx(keras.min(), abs=1e-5)
        assert shown["max"] == pytest.approx(keras.max(), abs=1e-5)
        assert shown["mean"] == pytest.approx(keras.mean(), abs=1e-5)
        assert shown["std"] == pytest.approx(keras.std(), abs=1e-5)
        assert shown["zeros"] == pytest.approx(np.mean(keras == 0), abs=1e-3)
        assert shown["nan"] == 0 and shown["inf"] == 0
    relu = stats.details[_index({"layers": records}, "relu1")]
    assert relu["zeros"] > 0.2  # a ReLU zeroes a good share of its inputs


def test_stats_overlay_marks_layers_that_output_nan(tmp_path: Path) -> None:
    from modelgraph.html_view import layer_records
    from modelgraph.overlays import OverlaySpec, build_overlays

    x = np.load(GOLDEN)["input/img"].copy()
    x[0, 3, 3, 0] = np.nan
    feed = tmp_path / "nan.npz"
    np.savez(feed, img=x)
    graph = load(CNN)
    records = layer_records(graph, weight_stats=False)
    (stats,) = build_overlays(graph, records, [OverlaySpec("stats")], [str(feed)])
    conv1 = _index({"layers": records}, "conv1")
    assert conv1 in stats.marked and stats.details[conv1]["nan"] > 0
    assert "NaN/Inf" in stats.note


@needs_chromium
def test_profile_overlay_times_every_computing_layer(tmp_path: Path) -> None:
    page = tmp_path / "profile.html"
    _render(str(CNN), "-o", str(page), "--overlay", "profile", "--overlay", "stats", "--input", str(GOLDEN))
    data = page_data(page)
    profile = data["overlays"][0]
    assert profile["name"] == "profile" and "ms per run" in profile["note"]
    assert all(v > 0 for v in profile["values"].values())
    assert str(_index(data, "conv1")) in profile["values"]
    dom = browse(page, "overlay=stats&click=conv1", tmp_path)
    assert "Largest |activation|" in element_text(dom, "overlay-legend")
    panel = element_text(dom, "panel-overlay")
    for word in ("min", "max", "mean", "std", "nan", "inf", "zeros", "ms"):
        assert re.search(rf"\b{word}\b", panel), word


@pytest.mark.parametrize(
    "args, message",
    [
        (["--overlay", "profile"], "give its inputs with --input"),
        (["--overlay", "colour"], "unknown overlay 'colour'"),
        (["--overlay", "expect"], "expect=REF.npz"),
        (["--overlay", "expect=missing.npz", "--input", str(GOLDEN)], "does not exist"),
        (["--input", str(GOLDEN)], "--input feeds --overlay"),
    ],
)
def test_bad_overlay_options_are_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["render", str(CNN), "-o", str(tmp_path / "x.html"), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "x.html").exists()


def test_overlay_needs_the_html_view(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["render", str(CNN), "-o", str(tmp_path / "x.dot"), "--overlay", "macs"])
    assert result.exit_code == 2 and "-o FILE.html" in result.output
