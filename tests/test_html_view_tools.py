"""The HTML view's first screen and tools, in headless Chromium: the model summary in the panel,
severity colours, the minimap and the SVG/PNG export of the drawing as shown.

Export is driven by ``#export=svg`` / ``#export=png``, which run the same code as the page's SVG
and PNG buttons but leave the file's text (or PNG data URL) in a hidden ``<textarea>`` instead of
starting a download, so the test can read it from the dumped DOM.
"""

from __future__ import annotations

import base64
import html
import re
import struct
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from modelgraph.cli.main import cli
from modelgraph.loading import load
from tests.test_html_view import CHROMIUM, SAMPLES, body_attr, browse, element_text, page_data

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed")
SVG = "{http://www.w3.org/2000/svg}"


def _render(model: Path, page: Path, *args: str) -> Path:
    result = CliRunner().invoke(cli, ["render", str(model), "-o", str(page), *args])
    assert result.exit_code in (0, 1), result.output
    return page


def _textarea(dom: str, ident: str) -> str:
    match = re.search(rf'<textarea id="{ident}"[^>]*>(.*?)</textarea>', dom, re.S)
    assert match, f"no #{ident}"
    return html.unescape(match.group(1))


@pytest.fixture(scope="module")
def findings_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # a Keras 3 file whose npz weights hold pickles: errors, warnings and an info finding
    return _render(SAMPLES / "k3" / "multi_io_list_npz.keras", tmp_path_factory.mktemp("sev") / "sev.html")


@needs_chromium
def test_first_view_shows_the_model_summary(findings_page: Path, tmp_path: Path) -> None:
    from modelgraph.validate.api import validate

    model = SAMPLES / "k3" / "multi_io_list_npz.keras"
    graph = load(model)
    dom = browse(findings_page, "", tmp_path)
    summary = element_text(dom, "panel-summary")
    for name in graph.input_names + graph.output_names:
        assert re.search(rf"\b{re.escape(name)}\b", summary), name
    assert graph.keras_version and graph.keras_version in summary
    assert "Click a layer" not in element_text(dom, "panel-summary")
    issues = [
        i for r in (lambda x: x if isinstance(x, list) else [x])(validate(str(model))) for i in r.issues
    ]
    counts = {s: sum(1 for i in issues if str(i.severity) == s) for s in ("error", "warning", "info")}
    assert all(counts.values())  # the sample has all three
    head = re.search(r"Findings \(([^)]*)\)", element_text(dom, "panel")).group(1)
    assert head == f"{len(issues)}: " + ", ".join(f"{n} {s}" for s, n in counts.items())
    # each finding in its severity's colour class, errors first
    classes = re.findall(r'class="finding (\w+)"', dom)
    assert classes == sorted(classes, key=["error", "warning", "info"].index)
    assert classes.count("info") == counts["info"] and classes.count("error") == counts["error"]


def test_info_findings_are_drawn_blue_not_red(tmp_path: Path) -> None:
    from modelgraph.render import _SEVERITY_COLORS

    page = _render(SAMPLES / "k2" / "app_mobilenetv3small.h5", tmp_path / "info.html")
    data = page_data(page)
    flagged = {i for i, r in enumerate(data["layers"]) if r["findings"]}
    assert flagged and all(f["severity"] == "info" for i in flagged for f in data["layers"][i]["findings"])
    svg = data["views"][0]["svg"]
    fill, border = _SEVERITY_COLORS["info"]
    red = _SEVERITY_COLORS["error"][0]
    for i in flagged:
        node = re.search(
            rf'data-layer="{i}"[^>]*>\s*<title>n\d+</title><path fill="([^"]+)" stroke="([^"]+)"', svg
        )
        assert node, i
        assert node.group(1) == fill and node.group(2) == border and node.group(1) != red


@needs_chromium
def test_minimap_shows_where_the_view_is_and_hides_when_all_is_visible(tmp_path: Path) -> None:
    big = _render(SAMPLES / "k3" / "app_mobilenetv2.keras", tmp_path / "big.html")
    dom = browse(big, "", tmp_path)
    assert re.search(r'<canvas id="minimap"(?![^>]*hidden)', dom)
    top = [
        float(v) for v in re.search(r'<canvas id="minimap"[^>]*data-view="([^"]+)"', dom).group(1).split(",")
    ]
    dom = browse(big, "select=predictions", tmp_path)  # the last layer: the framed part moves down
    bottom = [
        float(v) for v in re.search(r'<canvas id="minimap"[^>]*data-view="([^"]+)"', dom).group(1).split(",")
    ]
    assert bottom[1] > top[1] + top[3]
    small = _render(SAMPLES / "k2" / "cnn.h5", tmp_path / "small.html")
    dom = browse(small, "", tmp_path)
    assert re.search(r'<canvas id="minimap"[^>]*hidden', dom)  # the whole drawing fits


@needs_chromium
def test_export_svg_is_the_drawing_as_shown_and_parses(tmp_path: Path) -> None:
    page = _render(SAMPLES / "k2" / "cnn.h5", tmp_path / "cnn.html", "--overlay", "macs")
    dom = browse(page, "export=svg", tmp_path)
    assert body_attr(dom, "data-exported") == "svg"
    root = ET.fromstring(_textarea(dom, "export-svg").encode("utf-8"))
    assert root.tag == f"{SVG}svg"
    nodes = [g for g in root.iter(f"{SVG}g") if g.get("class", "").startswith("node")]
    assert len(nodes) == len(page_data(page)["layers"])
    # the overlay's colours travel with the file (inline styles)
    assert sum(1 for e in root.iter() if "fill: rgb(" in (e.get("style") or "")) >= 10


@needs_chromium
def test_export_png_has_twice_the_drawing_size(tmp_path: Path) -> None:
    page = _render(SAMPLES / "k2" / "cnn.h5", tmp_path / "cnn.html")
    dom = browse(page, "export=png", tmp_path)
    url = _textarea(dom, "export-png")
    assert url.startswith("data:image/png;base64,")
    png = base64.b64decode(url.split(",", 1)[1])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    box = [
        float(v) for v in re.search(r'viewBox="([^"]+)"', page_data(page)["views"][0]["svg"]).group(1).split()
    ]
    assert (width, height) == (round(box[2] * 2), round(box[3] * 2))
    # a white page with the drawing on it, not an empty image
    assert len(png) > 20_000


@needs_chromium
def test_each_repeated_block_folds_and_unfolds_on_its_own(tmp_path: Path) -> None:
    page = _render(SAMPLES / "k3" / "app_mobilenetv2.keras", tmp_path / "folds.html", "--collapse-repeats")
    views = page_data(page)["views"]
    folded = next(v for v in views if v["folded"] and not v["unfolded"])
    runs = sorted(set(re.findall(r'class="cluster"[^>]*data-run-id="([^"]+)"', folded["svg"])))
    assert len(runs) >= 2  # MobileNetV2 has several runs of identical inverted-residual blocks
    assert sorted(r for v in views for r in v["unfolded"]) == runs  # one drawing per block

    def drawn(svg: str) -> set[int]:
        return {int(i) for i in re.findall(r'class="node[^"]*" data-layer="(\d+)"', svg)}

    first, second = runs[0], runs[1]
    only_first = next(v for v in views if v["unfolded"] == [first])
    hidden = drawn(only_first["svg"]) - drawn(folded["svg"])  # the later repeats of the first block
    assert hidden
    dom = browse(page, "unfold=" + first, tmp_path)
    assert body_attr(dom, "data-unfolded") == first
    assert not re.search(rf'class="cluster"[^>]*data-run-id="{re.escape(first)}"', dom)  # open
    assert re.search(rf'class="cluster"[^>]*data-run-id="{re.escape(second)}"', dom)  # still folded
    assert hidden <= drawn(dom)
    # unfolding another block folds the first again
    dom = browse(page, f"unfold={first}&unfold={second}", tmp_path)
    assert body_attr(dom, "data-unfolded") == second
    assert re.search(rf'class="cluster"[^>]*data-run-id="{re.escape(first)}"', dom)
    assert not hidden & drawn(dom)


def _residual(tmp_path: Path, layers: int) -> Path:
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location(
        "bench_view", Path(__file__).parent.parent / "bench" / "bench_view.py"
    )
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    model = tmp_path / f"residual_{layers}.json"
    model.write_text(json.dumps(bench.residual_config(layers)))
    return model


def test_progress_goes_to_a_terminal_only(tmp_path: Path) -> None:
    import os
    import pty
    import subprocess
    import sys

    model = _residual(tmp_path, 240)  # more nodes than the progress threshold (200)
    command = [sys.executable, "-m", "modelgraph", "render", str(model), "-o", str(tmp_path / "p.html")]
    piped = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert piped.returncode in (0, 1), piped.stderr
    assert "laying out" not in piped.stderr and "validating" not in piped.stderr
    assert "wrote" in piped.stderr  # the one closing line stays
    leader, follower = pty.openpty()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=follower, stdin=subprocess.DEVNULL)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=300)
    os.close(leader)
    text = b"".join(chunks).decode("utf-8", "replace")
    assert "validating" in text and "laying out" in text and "wrote" in text
