"""The HTML view (``render -o model.html``, ``diff -o diff.html``), checked in a real browser.

Headless Chromium opens the page from a ``file://`` URL with the network blocked and dumps the DOM
after the page's script has run. Actions go through the URL fragment, which the page's script handles
with the same functions as the mouse and keyboard: ``#search=TEXT`` (type in the search box, Enter),
``#click=NAME`` (a click event on the layer's drawn node), ``#select=NAME``, ``#expand=NAME`` /
``#collapse=NAME`` (a nested model's toggle). Screenshots of the same pages are in docs/images.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pytest

from modelgraph.cli.main import cli
from modelgraph.html_view import script_json
from modelgraph.loading import load

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
needs_browser = pytest.mark.skipif(
    CHROMIUM is None,
    reason="Chromium is not installed (apt-get install chromium; .ci/run installs it)",
)
_BLOB = re.compile(r'<script type="application/json" id="modelgraph-data">(.*?)</script>', re.S)


def _render(args: list[str]) -> None:
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, args)
    assert result.exit_code in (0, 1), result.output
    return None


def page_data(path: Path) -> dict[str, Any]:
    match = _BLOB.search(path.read_text(encoding="utf-8"))
    assert match, "no JSON blob"
    return json.loads(match.group(1))


def browse(page: Path, fragment: str, tmp_path: Path, screenshot: Path | None = None) -> str:
    """The page's DOM after its script ran, opened from file:// with every network name unresolvable."""
    assert CHROMIUM is not None
    url = page.resolve().as_uri() + ("#" + fragment if fragment else "")
    args = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--proxy-server=127.0.0.1:9",
        "--window-size=1400,900",
        "--virtual-time-budget=5000",
    ]
    if screenshot is not None:
        args.append(f"--screenshot={screenshot}")
    else:
        args.append("--dump-dom")
    done = subprocess.run([*args, url], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def element_text(dom: str, ident: str) -> str:
    """The text of the element with ``id=ident`` (tags stripped, entities decoded)."""
    start = dom.find(f'id="{ident}"')
    assert start >= 0, f"no #{ident} in the page"
    open_end = dom.index(">", start) + 1
    tag = dom[dom.rfind("<", 0, start) + 1 :].split()[0]
    depth, i = 1, open_end
    pattern = re.compile(rf"<(/?){tag}\b[^>]*>")
    for match in pattern.finditer(dom, open_end):
        depth += -1 if match.group(1) else 1
        if depth == 0:
            i = match.start()
            break
    return html.unescape(re.sub(r"<[^>]+>", " ", dom[open_end:i]))


def body_attr(dom: str, name: str) -> str | None:
    match = re.search(r"<body([^>]*)>", dom)
    assert match
    found = re.search(rf'{name}="([^"]*)"', match.group(1))
    return found.group(1) if found else None


# --- fixtures -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nasnet(tmp_path_factory: pytest.TempPathFactory, rebuilt_app) -> tuple[Path, Path]:
    """NASNetMobile (771 layers) rebuilt from its weight manifest, and its HTML view."""
    model = rebuilt_app("k3_nasnetmobile")
    out = (
        tmp_path_factory.mktemp("nasnet") / "view" / "nasnet.html"
    )  # the folder does not exist yet: render creates it
    _render(["render", str(model), "-o", str(out)])
    return model, out


@pytest.fixture(scope="module")
def nested_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("nested") / "nested.html"
    _render(["render", str(SAMPLES / "k3" / "nested.keras"), "-o", str(out)])
    return out


# --- the page itself (no browser) -------------------------------------------------------------------


def test_nasnet_page_is_self_contained_and_small(nasnet: tuple[Path, Path]) -> None:
    _, page = nasnet
    text = page.read_text(encoding="utf-8")
    assert page.stat().st_size < 3_000_000
    # no resource from anywhere: the only URLs are the SVG/XLink namespace names
    urls = set(re.findall(r"https?://[^\s\"'\\)]+", text))
    assert urls <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}, urls
    assert not re.search(r"<(link|img|iframe)\b|\bsrc=", text)
    assert "default-src 'none'" in text
    data = page_data(page)
    assert len(data["layers"]) == 771
    assert len(data["views"]) == 1


def test_weight_statistics_are_the_stored_values(nasnet: tuple[Path, Path]) -> None:
    model, page = nasnet
    data = page_data(page)
    graph = load(model)
    record = next(r for r in data["layers"] if r["name"] == "separable_conv_1_normal_left1_5")
    layer = graph.layer("separable_conv_1_normal_left1_5")
    assert [w["name"] for w in record["weights"]] == [w.name for w in layer.weights]
    for shown, weight in zip(record["weights"], layer.weights, strict=True):
        values = weight.read().astype(np.float64)
        assert shown["shape"] == list(weight.shape)
        assert shown["min"] == pytest.approx(values.min(), rel=1e-5)
        assert shown["max"] == pytest.approx(values.max(), rel=1e-5)
        assert shown["mean"] == pytest.approx(values.mean(), rel=1e-4, abs=1e-9)
        assert shown["std"] == pytest.approx(values.std(), rel=1e-4)


def test_script_json_cannot_end_the_script_element() -> None:
    hostile = "</script><script>alert(1)</script>\"'\x00\u202e\u2028<!--"
    text = script_json({"name": hostile})
    assert "<" not in text and ">" not in text and "&" not in text
    assert all(ord(c) < 128 and c.isprintable() for c in text)
    assert json.loads(text)["name"] == hostile


# --- in the browser -------------------------------------------------------------------------------


@needs_browser
def test_nasnet_opens_offline_and_search_finds_a_layer(nasnet: tuple[Path, Path], tmp_path: Path) -> None:
    _, page = nasnet
    dom = browse(page, "search=reduction_add_1_reduce", tmp_path)
    assert body_attr(dom, "data-ready") == "1"
    assert "2 matches" in element_text(dom, "qcount")
    results = element_text(dom, "results")
    assert "reduction_add_1_reduce_4" in results and "reduction_add_1_reduce_8" in results
    # Enter went to the first match: it is selected, highlighted and shown in the panel
    assert element_text(dom, "panel-name").strip() == "reduction_add_1_reduce_4"
    assert re.search(r'<g id="n\d+" class="node (hit sel|sel hit)" data-layer="\d+"', dom)
    # a search by class finds every layer of that class
    count = sum(1 for r in page_data(page)["layers"] if r["class"] == "SeparableConv2D")
    assert count > 100
    dom = browse(page, "search=separableconv2d", tmp_path)
    assert f"{count} matches" in element_text(dom, "qcount")


@needs_browser
def test_clicking_a_layer_shows_its_config_and_weights(nasnet: tuple[Path, Path], tmp_path: Path) -> None:
    model, page = nasnet
    dom = browse(page, "click=separable_conv_1_normal_left1_5", tmp_path)
    assert element_text(dom, "panel-name").strip() == "separable_conv_1_normal_left1_5"
    assert element_text(dom, "panel-class").strip() == "SeparableConv2D"
    config = element_text(dom, "panel-config")
    layer = load(model).layer("separable_conv_1_normal_left1_5")
    for key in layer.config:  # every key of the config is shown
        assert re.search(rf"(^|\s){re.escape(key)}\s*:", config), key
    weights = element_text(dom, "panel-weights")
    for w in layer.weights:
        assert w.name in weights
        assert "(" + ", ".join(map(str, w.shape)) + ")" in weights
    assert "min" in weights and "std" in weights
    # inbound and outbound layers are links to those layers
    panel = dom[dom.index('id="panel"') :]
    assert re.search(r'<a class="layer"[^>]*>activation_\d+</a>', panel)


@needs_browser
def test_nested_models_fold_and_unfold_in_place(nested_page: Path, tmp_path: Path) -> None:
    data = page_data(nested_page)
    names = ["/".join(r["path"]) for r in data["layers"]]
    inner = names.index("inner_model")
    dom = browse(nested_page, "", tmp_path)
    assert not re.search(rf'class="cluster" data-layer="{inner}"', dom)  # collapsed: one node
    assert re.search(rf'class="node" data-layer="{inner}"', dom)
    dom = browse(nested_page, "expand=inner_model", tmp_path)
    assert re.search(rf'class="cluster" data-layer="{inner}"', dom)  # expanded: its cluster
    dense = names.index("inner_model/inner_dense")
    assert re.search(rf'class="node" data-layer="{dense}"', dom)
    dom = browse(nested_page, "expand=inner_model&collapse=inner_model", tmp_path)
    assert not re.search(rf'class="cluster" data-layer="{inner}"', dom)
    # selecting a layer inside a closed nested model opens it
    dom = browse(nested_page, "select=inner_model/inner_dense", tmp_path)
    assert re.search(rf'class="node sel" data-layer="{dense}"', dom)
    assert element_text(dom, "panel-name").strip() == "inner_dense"
    assert 'id="panel-toggle"' not in dom  # the panel shows the layer, not the nested model


@needs_browser
def test_hostile_layer_names_stay_text(tmp_path: Path) -> None:
    hostile = "</script><img src=x onerror=\"document.title='pwned'\">\u202e'\x01"
    config = json.loads((SAMPLES / "k3" / "cnn.json").read_text())

    def rename(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: rename(v) for k, v in value.items()}
        if isinstance(value, list):
            return [rename(v) for v in value]
        return hostile if value == "conv1" else value

    model = tmp_path / "hostile.json"
    model.write_text(json.dumps(rename(config)))
    page = tmp_path / "hostile.html"
    _render(["render", str(model), "-o", str(page)])
    text = page.read_text(encoding="utf-8")
    assert text.count("<script") == 2 and text.count("</script>") == 2
    assert any(r["name"] == hostile for r in page_data(page)["layers"])
    dom = browse(page, "search=" + quote("onerror"), tmp_path)
    assert "pwned" not in re.search(r"<title>(.*?)</title>", dom, re.S).group(1)
    assert "<img" not in dom
    name = element_text(dom, "panel-name")
    assert "\\u202e" in name and "\\u0001" in name and "onerror" in name


@needs_browser
def test_diff_page_has_a_legend_and_the_changes(tmp_path: Path) -> None:
    page = tmp_path / "out" / "diff.html"
    _render(["diff", str(SAMPLES / "k3" / "cnn.keras"), str(SAMPLES / "k2" / "cnn.h5"), "-o", str(page)])
    dom = browse(page, "search=conv1", tmp_path)
    legend = element_text(dom, "legend")
    for word in ("added", "removed", "changed", "unchanged"):
        assert word in legend
    assert element_text(dom, "panel-name").strip() == "conv1"
    assert element_text(dom, "panel-status").strip() == "changed"
    assert "values differ" in element_text(dom, "panel")


@needs_browser
def test_folded_repeats_unfold_to_show_a_layer(nasnet: tuple[Path, Path], tmp_path: Path) -> None:
    model, _ = nasnet
    page = tmp_path / "folded.html"
    _render(["render", str(model), "-o", str(page), "--collapse-repeats"])
    views = page_data(page)["views"]
    assert [v["folded"] for v in views][:2] == [False, True]
    assert all(v["folded"] and len(v["unfolded"]) == 1 for v in views[2:])  # one block open each
    folded_svg = views[1]["svg"]
    assert 'data-run="' in folded_svg  # the folded blocks are groups the page can open
    dom = browse(page, "", tmp_path)
    assert (body_attr(dom, "data-view") or "").endswith(":folded")
    # a layer of a later repeat is not drawn while folded: selecting it unfolds the repeats
    data = page_data(page)
    drawn = {int(i) for i in re.findall(r'class="node" data-layer="(\d+)"', folded_svg)}
    hidden = next(i for i, r in enumerate(data["layers"]) if i not in drawn and r["kind"] == "layer")
    dom = browse(page, "select=" + quote(data["layers"][hidden]["name"]), tmp_path)
    assert not (body_attr(dom, "data-view") or "").endswith(":folded")
    assert re.search(rf'class="node sel" data-layer="{hidden}"', dom)
