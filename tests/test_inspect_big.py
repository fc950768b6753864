"""``inspect`` for big models: --depth, --filter, --totals, --columns, the torchinfo-like columns,
ellipsis instead of wrapping, piped width, TF.js stored bytes (issue 22, part 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from modelgraph.cli.main import cli
from modelgraph.loading import load
from modelgraph.summary import summarize

from ._samples import SAMPLES, golden_model_files

K3 = SAMPLES / "k3"


def invoke(*args: object, columns: int | None = None):
    env = {"COLUMNS": str(columns)} if columns else {}
    return CliRunner(env=env).invoke(cli, [str(a) for a in args], prog_name="modelgraph")


def inspect_json(*args: object) -> dict:
    result = invoke("inspect", *args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("model", sorted({f for _, f in golden_model_files()}))
def test_depth_filter_totals_columns_on_every_sample(model: str) -> None:
    path = SAMPLES / model
    graph = load(path)  # the options are summarize()'s; the CLI passes them through (tested below)
    full = summarize(graph, expand_nested=True)
    top = summarize(graph, depth=1)
    assert [lyr.path for lyr in top.layers] == [lyr.path for lyr in full.layers if len(lyr.path) == 1]
    assert top.totals == full.totals and top.shown_layers == len(top.layers)
    # a filter by class keeps exactly the layers of that class, at every nesting level
    cls = full.layers[-1].class_name
    filtered = summarize(graph, pattern=cls)
    expected = [
        lyr.path for lyr in full.layers if cls.lower() in (lyr.class_name + "/".join(lyr.path)).lower()
    ]
    assert [lyr.path for lyr in filtered.layers] == expected
    totals = summarize(graph, totals_only=True)
    assert totals.layers == [] and totals.totals == full.totals
    text = invoke(
        "inspect",
        path,
        "--columns",
        "type,layer,dtype,bytes,trainable,params",
        "--depth",
        "2",
        "--filter",
        "*",
    )
    assert text.exit_code == 0, text.output
    header = next(line for line in text.stdout.splitlines() if "Layer" in line)
    positions = [header.find(h) for h in ("Type", "Layer", "Dtype", "Output bytes", "Trainable", "Param #")]
    assert -1 not in positions and positions == sorted(positions), header


def test_the_cli_passes_depth_filter_and_totals_through() -> None:
    path = K3 / "nested.keras"
    assert [r["path"] for r in inspect_json(path, "--depth", "1")["layers"]] == [
        r["path"] for r in inspect_json(path)["layers"]
    ]
    deep = inspect_json(path, "--depth", "2")["layers"]
    assert any(len(r["path"]) == 2 for r in deep)
    assert [r["name"] for r in inspect_json(path, "--filter", "inner_*")["layers"]] == [
        "inner_model",
        "inner_in",
        "inner_dense",
        "inner_bn",
    ]
    assert inspect_json(path, "--totals")["layers"] == []
    text = invoke("inspect", path, "--totals").stdout
    assert "Total params" in text and "┃" not in text


def test_new_per_layer_fields_match_the_graph() -> None:
    report = inspect_json(K3 / "nested.keras", "--expand-nested")
    rows = {"/".join(r["path"]): r for r in report["layers"]}
    assert rows["proj"]["dtype"] == "float32"
    assert rows["proj"]["output_bytes"] == 8 * 4  # (None, 8) float32, one call
    assert rows["inner_model"]["trainable"] is True
    # torchinfo's forward-pass size: every layer output of one sample
    leaves = [r for r in report["layers"] if r["kind"] != "model"]
    assert report["totals"]["activation_bytes"] == sum(r["output_bytes"] for r in leaves)


def test_filter_globs_and_substrings() -> None:
    path = SAMPLES / "k3" / "cnn.keras"
    names = lambda *a: [r["name"] for r in inspect_json(path, *a)["layers"]]  # noqa: E731
    assert names("--filter", "b?_conv") == ["b1_conv", "b2_conv", "b3_conv", "b4_conv"]
    assert names("--filter", "*norm*") == ["bn1", "bn2"]  # class BatchNormalization
    everything = inspect_json(path)["layers"]
    by_word = [r["name"] for r in everything if "conv" in r["name"] or "Conv" in r["class_name"]]
    assert names("--filter", "CONV") == by_word and "b2_dw" in by_word  # DepthwiseConv2D by its class
    assert names("--filter", "zzz") == []


def test_unknown_column_lists_the_valid_ones() -> None:
    result = invoke("inspect", K3 / "cnn.keras", "--columns", "layer,flops")
    assert result.exit_code == 2
    assert "'flops'" in result.output and "trainable" in result.output and "connected" in result.output


@pytest.fixture(scope="module")
def nasnet(rebuilt_app) -> Path:
    return rebuilt_app("k3_nasnetmobile")


def _column(lines: list[str], index: int) -> list[str]:
    """The non-empty cells of one column of a Rich table, top to bottom (wrapped cells as pieces)."""
    return [
        c.strip() for line in lines if line.startswith("│") for c in [line.split("│")[index + 1]] if c.strip()
    ]


@pytest.mark.parametrize("width", [80, 100, 120])
def test_piped_text_wraps_cells_and_keeps_every_number_whole(nasnet: Path, width: int) -> None:
    from modelgraph.cli.inspect_cmd import _compact
    from modelgraph.cli.output import fmt_count

    result = invoke("inspect", nasnet, columns=width)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= width
    assert all(line.endswith("│") for line in lines if line.startswith("│"))  # the right border stays
    report = summarize(load(nasnet))
    # every number is whole, in its row's order, with its unit: full or written short (830.3K), never cut
    for index, attr in ((2, "params"), (3, "macs")):
        shown = _column(lines, index)
        full = [fmt_count(getattr(layer, attr)) for layer in report.layers]
        assert len(shown) == len(full)
        assert all(s in (f, _compact(f)) for s, f in zip(shown, full, strict=True)), (attr, width)
        assert not any("…" in s for s in shown)
    # names wrap instead of being cut: the column's pieces spell every "name (Class)" in order
    names = "".join(_column(lines, 0)).replace(" ", "").replace("└", "")
    assert names == "".join(f"{layer.name}({layer.class_name})" for layer in report.layers)
    assert "…" not in names


def test_wide_keeps_full_names_on_one_line(nasnet: Path) -> None:
    result = invoke("inspect", nasnet, "--wide", columns=80)
    assert result.exit_code == 0
    body = [line for line in result.stdout.splitlines() if line.startswith("│")]
    layers = load(nasnet).layers
    assert len(body) == len(layers)  # one line per layer
    for line, layer in zip(body, layers, strict=True):
        assert f"{layer.name} ({layer.class_name})" in line


def test_max_depth_is_spelled_and_bounded_like_render() -> None:
    path = K3 / "nested.keras"
    top = [r["name"] for r in inspect_json(path, "--max-depth", "0")["layers"]]
    one = [r["path"] for r in inspect_json(path, "--max-depth", "1")["layers"]]
    assert top == [r["name"] for r in inspect_json(path, "--depth", "1")["layers"]]  # the old spelling
    assert one == [r["path"] for r in inspect_json(path, "--depth", "2")["layers"]]
    assert any(len(p) == 2 for p in one) and "inner_dense" not in top
    for command in ("inspect", "render"):
        result = invoke(command, path, "--max-depth", "-1")
        assert result.exit_code == 2 and "--max-depth" in result.output


def test_piped_width_defaults_to_120(nasnet: Path) -> None:
    result = CliRunner().invoke(cli, ["inspect", str(nasnet)], env={"COLUMNS": None})
    assert max(len(line) for line in result.stdout.splitlines()) <= 120


def test_quantized_tfjs_reports_stored_and_dequantized_bytes() -> None:
    q8 = inspect_json(SAMPLES / "tfjs" / "cnn_q8")["totals"]
    f16 = inspect_json(SAMPLES / "tfjs" / "cnn_f16")["totals"]
    plain = inspect_json(SAMPLES / "tfjs" / "cnn")["totals"]
    params = plain["total_params"]
    assert q8["stored_bytes_by_dtype"] == {"uint8": params}
    assert f16["stored_bytes_by_dtype"] == {"float16": 2 * params}
    assert plain["stored_bytes_by_dtype"] is None  # stored as read: nothing to add
    assert q8["weight_bytes"] == 4 * params  # dequantized to float32
    text = invoke("inspect", SAMPLES / "tfjs" / "cnn_q8", "--totals").stdout
    assert "Stored on disk: uint8" in text and "dequantized to" in text
