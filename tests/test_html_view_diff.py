"""The diff page (``diff A B -o d.html``) in headless Chromium: a list of changes that jumps to the
changed node, weight changes with their errors in full, configs key by key, nested models' changes
expandable. The models are the same architecture saved by Keras 3 and by tf_keras (different seeds,
so every weight differs): samples/k3 vs samples/k2.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from modelgraph.cli.main import cli
from modelgraph.diff import diff
from tests.test_html_view import CHROMIUM, SAMPLES, body_attr, browse, element_text, page_data

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed")


def _diff_page(a: Path, b: Path, out: Path) -> Path:
    result = CliRunner().invoke(cli, ["diff", str(a), str(b), "-o", str(out)])
    assert result.exit_code in (0, 1), result.output
    return out


@pytest.fixture(scope="module")
def cnn_diff(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("diff")
    return _diff_page(SAMPLES / "k3" / "cnn.keras", SAMPLES / "k2" / "cnn.h5", folder / "d.html")


@needs_chromium
def test_the_list_of_changes_jumps_to_the_changed_node(cnn_diff: Path, tmp_path: Path) -> None:
    report = diff(SAMPLES / "k3" / "cnn.keras", SAMPLES / "k2" / "cnn.h5").report
    dom = browse(cnn_diff, "", tmp_path)
    listed = re.findall(r'<a href="#" class="layer" data-change="(\d+)">([^<]*)</a>', dom)
    assert sorted(name for _, name in listed) == sorted("/".join(e.path) for e in report.layers)
    data = page_data(cnn_diff)
    # a change near the bottom of the drawing: clicking it centres and highlights its node
    k, name = max(
        listed, key=lambda item: data["layers"][data["changes"][int(item[0])]["layer"]]["name"] == "probs"
    )
    dom = browse(cnn_diff, f"change={k}", tmp_path)
    layer = data["changes"][int(k)]["layer"]
    assert body_attr(dom, "data-selected") == str(layer) and body_attr(dom, "data-change") == k
    assert re.search(rf'class="node sel" data-layer="{layer}"', dom)
    assert float(body_attr(dom, "data-focus-offset") or "inf") < 2.0  # centred in the canvas
    assert element_text(dom, "panel-name").strip() == name


@needs_chromium
def test_weight_changes_show_max_abs_and_relative_error_in_full(cnn_diff: Path, tmp_path: Path) -> None:
    report = diff(SAMPLES / "k3" / "cnn.keras", SAMPLES / "k2" / "cnn.h5").report
    entry = next(e for e in report.layers if e.name == "sep")
    dom = browse(cnn_diff, "select=sep", tmp_path)
    changes = element_text(dom, "panel-changes")
    for w in entry.weights:
        row = re.search(rf"{w.name}\s+values\s+(\S+)\s+(\S+)\s+([\d,]+) / ([\d,]+)", changes)
        assert row, (w.name, changes)
        assert float(row.group(1)) == pytest.approx(w.max_abs, rel=1e-3)
        assert float(row.group(2)) == pytest.approx(w.rel, rel=1e-3)
        assert int(row.group(3).replace(",", "")) == w.mismatched
        assert int(row.group(4).replace(",", "")) == w.size
    # nothing in the panel is cut with an ellipsis
    assert "…" not in changes and "..." not in changes


@needs_chromium
def test_config_is_compared_key_by_key(tmp_path: Path) -> None:
    config = json.loads((SAMPLES / "k3" / "cnn.json").read_text())
    layer = next(x for x in config["config"]["layers"] if x["config"].get("name") == "conv1")
    before = layer["config"]["padding"]
    after = "valid" if before == "same" else "same"
    layer["config"]["padding"] = after
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(config))
    page = _diff_page(SAMPLES / "k3" / "cnn.json", changed, tmp_path / "cfg.html")
    dom = browse(page, "select=conv1", tmp_path)
    table = dom[dom.index('id="panel-config-diff"') :]
    table = table[: table.index("</table>")]
    rows = re.findall(r"<tr([^>]*)>(.*?)</tr>", table, re.S)
    keys = {re.sub(r"<[^>]+>", "", cells.split("</td>")[0]).strip(): attrs for attrs, cells in rows[1:]}
    assert set(layer["config"]) <= set(keys)  # every key of the config has its row
    assert 'class="changed"' in keys["padding"]
    assert [k for k, attrs in keys.items() if "changed" in attrs] == ["padding"]  # only the changed one
    padding = next(cells for attrs, cells in rows if "padding" in cells)
    assert f"&quot;{before}&quot;" in padding or f'"{before}"' in padding
    assert f"&quot;{after}&quot;" in padding or f'"{after}"' in padding


@needs_chromium
def test_changes_inside_nested_models_are_expandable(tmp_path: Path) -> None:
    report = diff(SAMPLES / "k3" / "nested.keras", SAMPLES / "k2" / "nested.h5").report
    inside = ["/".join(e.path) for e in report.layers if len(e.path) > 1 and e.path[0] == "inner_model"]
    assert inside
    page = _diff_page(SAMPLES / "k3" / "nested.keras", SAMPLES / "k2" / "nested.h5", tmp_path / "n.html")
    dom = browse(page, "select=inner_model", tmp_path)
    nested = element_text(dom, "panel-nested")
    for path in inside:
        assert path in nested
    assert dom.count('<details class="nested">') == len(inside)
    # the list of changes names the nested layers too
    assert all(p in element_text(browse(page, "", tmp_path), "changes") for p in inside)


@needs_chromium
def test_side_by_side_panes_move_together(tmp_path: Path) -> None:
    page = _diff_page(SAMPLES / "k3" / "nested.keras", SAMPLES / "k2" / "nested.h5", tmp_path / "p.html")
    data = page_data(page)
    assert [p["side"] for p in data["panes"]] == ["A", "B"]
    k = next(i for i, c in enumerate(data["changes"]) if c["path"] == ["head"])
    dom = browse(page, f"panes=1&change={k}", tmp_path)
    assert body_attr(dom, "data-panes") == "1"
    layer = data["changes"][k]["layer"]
    # the changed layer is highlighted in both models' drawings, centred in the first pane
    for side in ("A", "B"):
        pane = element_text(dom, f"pane-{side}")
        assert "head" in pane
        block = dom[dom.index(f'id="pane-{side}"') :]
        assert re.search(rf'class="node st-changed sel" data-layer="{layer}"', block.split('class="pane"')[0])
    assert float(body_attr(dom, "data-focus-offset") or "inf") < 2.0
    # one transform for both: a point of A's drawing sits where the same point of B's does
    transforms = re.findall(r'<div class="pstage" style="transform: ([^"]+)">', dom)
    assert len(transforms) == 2 and transforms[0] == transforms[1] and "scale" in transforms[0]
