"""The HTML view laid out in Python (no Graphviz): the layout itself, and the pages in headless Chromium
with ``dot`` off the PATH.

The browser helpers are the ones of ``tests/test_html_view.py`` (fragment actions, DOM dump).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from modelgraph.cli.main import cli
from modelgraph.html_svg import label_lines
from modelgraph.layout import Cluster, layered_layout
from modelgraph.loading import load
from modelgraph.render import RenderOptions, to_dot
from tests.test_html_view import CHROMIUM, SAMPLES, body_attr, browse, element_text, page_data

needs_browser = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)"
)


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] - 0.01 and b[0] < a[2] - 0.01 and a[1] < b[3] - 0.01 and b[1] < a[3] - 0.01


def _box(layout, ident: str) -> tuple[float, float, float, float]:
    (x, y), (w, h) = layout.centres[ident], layout.sizes[ident]
    return (x - w / 2, y - h / 2, x + w / 2, y + h / 2)


@pytest.fixture(scope="module")
def no_dot(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A PATH with nothing on it: Graphviz's ``dot`` cannot be found."""
    return str(tmp_path_factory.mktemp("empty-path"))


def _cli(args: list[str], path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", path)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code in (0, 1), result.output


# --- the layout ----------------------------------------------------------------------------------


@pytest.mark.parametrize("rankdir", ["TB", "LR", "BT"])
def test_layout_of_a_real_model_has_no_overlaps_and_edges_follow_the_ranks(rankdir: str) -> None:
    graph = load(SAMPLES / "k3" / "nested.keras")
    drawing = to_dot(graph, RenderOptions(expand_nested=True, rankdir=rankdir))
    from modelgraph.html_svg import MARGIN_X, lines_size

    sizes = {}
    for ident, style in drawing.node_styles.items():
        w, h = lines_size(label_lines(style.label))
        sizes[ident] = (w + 2 * MARGIN_X, h + 8)
    clusters = {name: Cluster(60, 14, s.parent) for name, s in drawing.cluster_styles.items()}
    member = {ident: s.cluster for ident, s in drawing.node_styles.items()}
    layout = layered_layout(sizes, [(a, b) for a, b, _ in drawing.edge_list], member, clusters, rankdir)
    ids = list(sizes)
    assert len(ids) == drawing.nodes and drawing.clusters >= 2
    for i, a in enumerate(ids):  # no two nodes overlap
        for b in ids[i + 1 :]:
            assert not _overlap(_box(layout, a), _box(layout, b)), (a, b)
    axis = 1 if rankdir in ("TB", "BT") else 0
    sign = -1 if rankdir == "BT" else 1
    for a, b, points in layout.edges:  # every edge runs from its source's rank to a later one
        assert sign * (layout.centres[b][axis] - layout.centres[a][axis]) > 0, (a, b)
        assert len(points) >= 2
    for name, box in layout.clusters.items():  # a cluster holds its members and no one else's
        chain = {n for n, s in drawing.node_styles.items() if _inside(drawing, s.cluster, name)}
        for ident in ids:
            inside = all(
                box[k] - 0.01 <= _box(layout, ident)[k] <= box[k + 2] + 0.01 for k in (0, 1)
            ) and all(box[k] - 0.01 <= _box(layout, ident)[k + 2] <= box[k + 2] + 0.01 for k in (0, 1))
            if ident in chain:
                assert inside, (name, ident)
            else:
                assert not _overlap(box, _box(layout, ident)), (name, ident)


def _inside(drawing, cluster: str | None, name: str) -> bool:
    while cluster is not None:
        if cluster == name:
            return True
        cluster = drawing.cluster_styles[cluster].parent
    return False


def test_layout_survives_a_cycle_and_keeps_every_node() -> None:
    sizes = {v: (40.0, 20.0) for v in "abcd"}
    layout = layered_layout(sizes, [("a", "b"), ("b", "c"), ("c", "b"), ("c", "d")])
    assert set(layout.centres) == set("abcd")
    assert layout.centres["a"][1] < layout.centres["b"][1] < layout.centres["c"][1] < layout.centres["d"][1]


def test_labels_are_read_back_with_their_styles() -> None:
    lines = label_lines(
        "<B>a&lt;b\\\\</B> : Dense<BR/><FONT POINT-SIZE='9' COLOR='#c00000'><B>error: x</B></FONT>"
    )
    assert [[r.text for r in line] for line in lines] == [["a<b\\", " : Dense"], ["error: x"]]
    assert lines[0][0].bold and not lines[0][1].bold
    assert lines[1][0].size == 9 and lines[1][0].color == "#c00000"


# --- pages without dot ---------------------------------------------------------------------------


@needs_browser
def test_render_html_needs_no_dot(no_dot: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "nested.html"
    _cli(["render", str(SAMPLES / "k3" / "nested.keras"), "-o", str(page)], no_dot, monkeypatch)
    data = page_data(page)
    svg = data["views"][0]["svg"]
    top = [i for i, r in enumerate(data["layers"]) if r["parent"] == -1]
    for i in top:  # every top-level layer is drawn and tagged for the page
        assert re.search(rf'class="node" data-layer="{i}"', svg), data["layers"][i]["name"]
    names = ["/".join(r["path"]) for r in data["layers"]]
    inner = names.index("inner_model")
    monkeypatch.undo()
    dom = browse(page, "expand=inner_model&select=inner_model/inner_dense", tmp_path)
    assert body_attr(dom, "data-ready") == "1"
    assert re.search(rf'class="cluster( sel)?" data-layer="{inner}"', dom)
    assert element_text(dom, "panel-name").strip() == "inner_dense"
    # other formats still need dot and say so
    monkeypatch.setenv("PATH", no_dot)
    result = CliRunner().invoke(
        cli, ["render", str(SAMPLES / "k3" / "nested.keras"), "-o", str(tmp_path / "x.svg")]
    )
    assert result.exit_code == 4 and "dot" in result.output


@needs_browser
def test_diff_html_needs_no_dot(no_dot: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "diff.html"
    _cli(
        ["diff", str(SAMPLES / "k3" / "cnn.keras"), str(SAMPLES / "k2" / "cnn.h5"), "-o", str(page)],
        no_dot,
        monkeypatch,
    )
    monkeypatch.undo()
    dom = browse(page, "search=conv1", tmp_path)
    assert element_text(dom, "panel-status").strip() == "changed"
    assert "added" in element_text(dom, "legend")
