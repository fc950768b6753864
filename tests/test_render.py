"""modelgraph render: DOT/SVG structure, labels, nesting, shared layers, folding, findings, escaping, CLI.

SVG tests parse Graphviz's output with xml.etree: every drawn call is a ``<g class="node">`` whose
``<title>`` is our generated id, edges are ``<g class="edge">`` titled ``src->dst``, clusters are
``<g class="cluster">``.
"""

from __future__ import annotations

import importlib
import json
import re
import shutil
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from modelgraph.cli.main import cli
from modelgraph.errors import ToolMissingError, UsageError
from modelgraph.loading import load
from modelgraph.validate.issue import Issue

R = importlib.import_module("modelgraph.render")

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
HAS_DOT = shutil.which("dot") is not None
needs_dot = pytest.mark.skipif(not HAS_DOT, reason="Graphviz dot is not installed")
SVG_NS = "{http://www.w3.org/2000/svg}"


# --- parsing SVG ---------------------------------------------------------------------------------


@dataclass
class Svg:
    nodes: dict[str, str] = field(default_factory=dict)  # id -> label text (rows joined by "|")
    fills: dict[str, list[str]] = field(default_factory=dict)  # id -> fill colours of its shapes
    shapes: dict[str, list[str]] = field(default_factory=dict)  # id -> svg element tags
    italic: dict[str, bool] = field(default_factory=dict)
    edges: list[tuple[str, str, str]] = field(default_factory=list)  # (src, dst, label)
    clusters: dict[str, str] = field(default_factory=dict)  # title -> label text

    def ids(self, text: str) -> list[str]:
        """Ids of the nodes whose label contains ``text``."""
        return [i for i, label in self.nodes.items() if text in label]

    def one(self, text: str) -> str:
        """The one node whose label starts with ``text`` (else: contains it)."""
        found = [i for i, label in self.nodes.items() if label.startswith(text)] or self.ids(text)
        assert len(found) == 1, (text, found, self.nodes)
        return found[0]

    def label(self, text: str) -> str:
        return self.nodes[self.one(text)]


def parse_svg(payload: bytes) -> Svg:
    root = ET.fromstring(payload)
    out = Svg()
    for g in root.iter(f"{SVG_NS}g"):
        cls = g.get("class")
        title_el = g.find(f"{SVG_NS}title")
        title = title_el.text if title_el is not None else ""
        texts = [t for t in g.iter(f"{SVG_NS}text")]
        if cls == "node":
            rows: list[str] = []
            last_y = None
            for t in texts:
                y = t.get("y")
                if rows and y == last_y:
                    rows[-1] += t.text or ""
                else:
                    rows.append(t.text or "")
                last_y = y
            out.nodes[title] = "|".join(rows)
            drawn = [
                e for e in g.iter() if e.tag in (f"{SVG_NS}path", f"{SVG_NS}polygon", f"{SVG_NS}ellipse")
            ]
            out.fills[title] = [e.get("fill") for e in drawn if e.get("fill")]
            out.shapes[title] = [e.tag.replace(SVG_NS, "") for e in drawn]
            out.italic[title] = any(t.get("font-style") == "italic" for t in texts)
        elif cls == "edge":
            src, _, dst = title.partition("->")
            out.edges.append((src, dst, " ".join(t.text or "" for t in texts)))
        elif cls == "cluster":
            out.clusters[title] = "".join(t.text or "" for t in texts)
    return out


def svg_of(graph, **options) -> Svg:
    return parse_svg(R.render(graph, format="svg", **options))


def pairs(svg: Svg) -> set[tuple[str, str]]:
    return {(s, d) for s, d, _ in svg.edges}


# --- synthetic models (Keras 2 list-form JSON, loaded by the real loader) ----------------------


class Builder:
    """Writes a Keras 2 ``model.to_json()`` document; layers in creation order."""

    def __init__(self, name: str = "synthetic") -> None:
        self.name = name
        self.layers: list[dict] = []
        self.count: dict[str, int] = {}

    def add(self, cls: str, inputs, name: str | None = None, **config) -> str:
        if name is None:
            i = self.count.get(cls, 0)
            self.count[cls] = i + 1
            name = f"{cls.lower()}_{i}"
        cfg = {"name": name, "trainable": True, "dtype": "float32", **config}
        # A nested model's node 0 is its own graph in Keras 2 configs: its first call is ("m", 1).
        refs = [(n, 0) if isinstance(n, str) else n for n in inputs]
        nodes = [[[n, i, 0, {}] for n, i in refs]] if inputs else []
        self.layers.append({"class_name": cls, "name": name, "config": cfg, "inbound_nodes": nodes})
        return name

    def model_config(self, inputs, outputs) -> dict:
        return {
            "name": self.name,
            "layers": self.layers,
            "input_layers": [[n, 0, 0] for n in inputs],
            "output_layers": [[n, 0, 0] for n in outputs],
        }

    def doc(self, inputs, outputs) -> dict:
        return {
            "class_name": "Functional",
            "keras_version": "2.15.0",
            "backend": "tensorflow",
            "config": self.model_config(inputs, outputs),
        }

    def save(self, path: Path, inputs, outputs):
        path.write_text(json.dumps(self.doc(inputs, outputs)))
        return load(path)


def dense_chain(tmp_path: Path, n: int = 8):
    b = Builder("chain")
    x = inp = b.add("InputLayer", [], name="inp", batch_input_shape=[None, 16])
    for _ in range(n):
        x = b.add("Dense", [x], units=16, activation="relu")
    out = b.add("Dense", [x], name="head", units=3, activation="softmax")
    return b.save(tmp_path / "chain.json", [inp], [out])


def resnet_like(tmp_path: Path, blocks: int = 4, tap: int | None = None):
    """Identity blocks ``x + bn(conv(relu(bn(conv(x)))))``; ``tap`` also feeds block ``tap`` to the head."""
    b = Builder("resnet_like")
    inp = b.add("InputLayer", [], name="image", batch_input_shape=[None, 32, 32, 8])
    x = b.add("Conv2D", [inp], name="stem", filters=8, kernel_size=[5, 5], padding="same")
    taps = []
    for _ in range(blocks):
        y = b.add("Conv2D", [x], filters=8, kernel_size=[3, 3], padding="same")
        y = b.add("BatchNormalization", [y], axis=-1)
        y = b.add("Activation", [y], activation="relu")
        y = b.add("Conv2D", [y], filters=8, kernel_size=[3, 3], padding="same")
        y = b.add("BatchNormalization", [y], axis=-1)
        x = b.add("Add", [x, y])
        taps.append(x)
    if tap is not None:
        x = b.add("Concatenate", [x, taps[tap]], name="join", axis=-1)
    x = b.add("GlobalAveragePooling2D", [x], name="gap")
    out = b.add("Dense", [x], name="logits", units=10)
    return b.save(tmp_path / "resnet.json", [inp], [out])


def nasnet_like(path: Path, cells_per_stage: int = 5, stages: int = 3):
    """A 771-layer NASNetMobile-sized graph: cells reading the two previous cells, 5 branches each."""
    b = Builder("nasnet_like")
    inp = b.add("InputLayer", [], name="input_1", batch_input_shape=[None, 224, 224, 3])
    x = b.add("Conv2D", [inp], filters=32, kernel_size=[3, 3], strides=[2, 2])
    x = b.add("BatchNormalization", [x], axis=-1)
    p = x

    def sep(t, k):
        for _ in range(2):
            t = b.add("Activation", [t], activation="relu")
            t = b.add("SeparableConv2D", [t], filters=44, kernel_size=[k, k], padding="same")
            t = b.add("BatchNormalization", [t], axis=-1)
        return t

    def adj(t):
        t = b.add("Activation", [t], activation="relu")
        t = b.add("Conv2D", [t], filters=44, kernel_size=[1, 1], padding="same")
        return b.add("BatchNormalization", [t], axis=-1)

    def pool(t):
        return b.add("AveragePooling2D", [t], pool_size=[3, 3], strides=[1, 1], padding="same")

    def cell(x, p, k):
        pa, h = adj(p), adj(x)
        b1 = b.add("Add", [sep(h, k), sep(pa, 3)])
        b2 = b.add("Add", [sep(pa, k), sep(pa, 3)])
        b3 = b.add("Add", [pool(h), pa])
        b4 = b.add("Add", [pool(pa), pool(pa)])
        b5 = b.add("Add", [sep(h, 3), h])
        return b.add("Concatenate", [pa, b1, b2, b3, b4, b5], axis=-1)

    for stage in range(stages):
        if stage:
            x, p = cell(x, p, 7), x
        for _ in range(cells_per_stage):
            x, p = cell(x, p, 5), x
    x = b.add("Activation", [x], activation="relu")
    x = b.add("GlobalAveragePooling2D", [x])
    out = b.add("Dense", [x], name="predictions", units=1000, activation="softmax")
    return b.save(path, [inp], [out])


def two_level_nested(tmp_path: Path):
    """outer -> mid (Functional) -> leaf (Functional): two levels of nesting."""
    leaf = Builder("leaf")
    li = leaf.add("InputLayer", [], name="leaf_in", batch_input_shape=[None, 4])
    lo = leaf.add("Dense", [li], name="leaf_dense", units=4)
    mid = Builder("mid")
    mi = mid.add("InputLayer", [], name="mid_in", batch_input_shape=[None, 4])
    mid.layers.append(
        {
            "class_name": "Functional",
            "name": "leaf",
            "config": leaf.model_config([li], [lo]),
            "inbound_nodes": [[[mi, 0, 0, {}]]],
        }
    )
    mo = mid.add("Dense", [("leaf", 1)], name="mid_dense", units=4)
    top = Builder("outer")
    ti = top.add("InputLayer", [], name="x", batch_input_shape=[None, 4])
    top.layers.append(
        {
            "class_name": "Functional",
            "name": "mid",
            "config": mid.model_config([mi], [mo]),
            "inbound_nodes": [[[ti, 0, 0, {}]]],
        }
    )
    out = top.add("Dense", [("mid", 1)], name="out", units=2)
    return top.save(tmp_path / "two_level.json", [ti], [out])


HOSTILE = [
    'a"b',
    "<script>alert(1)</script>",
    "x & y &amp;",
    "ünï 中文 🙂",
    "back\\slash\\N",
    "it's",
    "tab\there",
]


def hostile_model(tmp_path: Path):
    b = Builder('hostile "model" <b>')
    x = inp = b.add("InputLayer", [], name=HOSTILE[0], batch_input_shape=[None, 4])
    for name in HOSTILE[1:]:
        x = b.add("Dense", [x], name=name, units=4, activation="relu")
    return b.save(tmp_path / "hostile.json", [inp], [x])


# --- escaping ------------------------------------------------------------------------------------


def test_html_escape_entities_and_control_characters():
    assert R.html_escape('<a href="x">&\'') == "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
    assert R.html_escape("a\nb\x00") == "a\\\\x0ab\\\\x00"
    assert R.html_escape("x\\N") == "x\\\\N"
    assert R.html_escape("\ud800") == "\\\\ud800"
    assert R.html_escape("中文 🙂") == "中文 🙂"


def test_dot_quote_neutralises_escapes():
    assert R.dot_quote('a"b') == '"a\\"b"'
    assert R.dot_quote("x\\N") == '"x\\\\N"'


@needs_dot
def test_hostile_names_are_drawn_literally(tmp_path):
    graph = hostile_model(tmp_path)
    payload = R.render(graph, format="svg", show_shapes=True)
    svg = parse_svg(payload)  # parses: nothing broke out of the labels
    assert len(svg.nodes) == len(HOSTILE)
    for name in HOSTILE:
        shown = name.replace("\t", "\\x09")
        assert len(svg.ids(shown + " : ")) == 1, (name, svg.nodes)
    assert b"<script>" not in payload
    dot = R.to_dot(graph).source
    assert "<B><script>" not in dot and "<B>&lt;script&gt;alert(1)&lt;/script&gt;</B>" in dot
    assert 'tooltip="<script>alert(1)</script> (Dense)\\n' in dot  # quoted string: Graphviz escapes it


# --- structure -----------------------------------------------------------------------------------


@needs_dot
def test_multi_io_shared_layer_one_node_per_call():
    graph = load(SAMPLES / "k3" / "multi_io_list.keras")
    svg = svg_of(graph, show_shapes=True, show_params=True)
    assert len(svg.nodes) == len(graph.nodes) == 12
    assert len(svg.edges) == sum(len(n.inputs) for n in graph.nodes) == 13
    calls = [svg.one(f"call {i}/3") for i in (1, 2, 3)]
    assert all("shared_dense : Dense" in svg.nodes[c] for c in calls)
    a, b = svg.one("a : InputLayer"), svg.one("b : InputLayer")
    assert "input 0" in svg.nodes[a] and "input 1" in svg.nodes[b]
    add, concat = svg.one("add_layer : Add"), svg.one("concat : Concatenate")
    assert (a, calls[0]) in pairs(svg) and (b, calls[1]) in pairs(svg)
    assert {(calls[0], add), (calls[1], add), (add, calls[2])} <= pairs(svg)
    assert {(c, concat) for c in calls} <= pairs(svg)
    for name, mark in (("out1 : Dense", "output 0"), ("out2 : Activation", "output 1"), ("out3", "output 2")):
        node = svg.one(name)
        assert mark in svg.nodes[node]
        assert svg.shapes[node].count("path") + svg.shapes[node].count("polygon") == 2  # double border
    label = svg.label("mix : Dense")
    assert "in: (None, 24)" in label and "out: (None, 6)" in label and "params: 150" in label


@needs_dot
def test_keras3_ops_are_italic_ellipses_and_tensor_indices_on_edges():
    graph = load(SAMPLES / "k3" / "ops.keras")
    svg = svg_of(graph)
    split = svg.one("split : Split")
    assert "ellipse" in svg.shapes[split] and svg.italic[split]
    dense = svg.one("out_dense : Dense")
    assert "ellipse" not in svg.shapes[dense] and not svg.italic[dense]
    add_layer = svg.one("add_layer : Add")
    labels = sorted(label for s, d, label in svg.edges if (s, d) == (split, add_layer))
    assert labels == ["[0]", "[1]"]
    assert "output 2 [1]" in svg.nodes[split]


@needs_dot
def test_nested_collapsed_is_one_box_per_call():
    graph = load(SAMPLES / "k3" / "nested.keras")
    svg = svg_of(graph)
    assert not svg.clusters
    assert len(svg.nodes) == len(graph.nodes)
    boxes = svg.ids("inner_model : Functional")
    assert len(boxes) == 2
    assert all("nested model" in svg.nodes[b] for b in boxes)
    assert (svg.one("call 1/2"), svg.one("call 2/2")) in pairs(svg)


@needs_dot
def test_nested_twice_expanded_one_cluster_per_call():
    graph = load(SAMPLES / "wild" / "nested_twice.keras")
    svg = svg_of(graph, expand_nested=True)
    assert len(svg.clusters) == 2
    assert sorted(svg.clusters.values()) == [
        "inner_model (Functional) · call 1/2weights shared by its 2 calls",
        "inner_model (Functional) · call 2/2weights shared by its 2 calls",
    ]
    ins, dense = svg.ids("inner_in : InputLayer"), svg.ids("inner_dense : Dense")
    assert len(ins) == len(dense) == 2
    a, add = svg.one("a : InputLayer"), svg.one("add : Add")
    # The nodes are declared cluster by cluster: the first of each pair belongs to call 1.
    in1, in2 = sorted(ins, key=lambda i: int(i[1:]))
    d1, d2 = sorted(dense, key=lambda i: int(i[1:]))
    assert pairs(svg) == {(a, in1), (in1, d1), (d1, in2), (in2, d2), (d1, add), (d2, add)}
    assert "output 1" in svg.nodes[d2] and "output 0" in svg.nodes[add]


@needs_dot
def test_nested_expanded_edges_enter_inputs_and_leave_outputs():
    graph = load(SAMPLES / "k3" / "nested.keras")
    svg = svg_of(graph, expand_nested=True, show_shapes=True)
    assert len(svg.clusters) == 4
    labels = " ".join(svg.clusters.values())
    assert "inner_model (Functional) · call 1/2" in labels and "call 2/2" in labels
    assert "seq_inner (Sequential)" in labels
    expected_nodes = sum(len(g.nodes) for g in [graph]) - 4  # minus the 4 nested calls...
    expected_nodes += 2 * 3 + 3 + 2  # ...plus their layers (inner_model twice)
    assert len(svg.nodes) == expected_nodes
    proj, cat = svg.one("proj : Dense"), svg.one("cat : Concatenate")
    first_in = min(svg.ids("inner_in : InputLayer"), key=lambda i: int(i[1:]))
    assert (proj, first_in) in pairs(svg)
    assert (svg.one("sn_d : Dense"), cat) in pairs(svg)
    assert (svg.one("sq_d2 : Dense"), svg.one("input_layer_1 : InputLayer")) in pairs(svg)
    assert (svg.one("bn : BatchNormalization"), cat) in pairs(svg)
    assert len(svg.edges) == 16


@needs_dot
def test_max_depth_limits_expansion(tmp_path):
    graph = two_level_nested(tmp_path)
    full = svg_of(graph, expand_nested=True)
    assert len(full.clusters) == 2 and full.ids("leaf_dense : Dense")
    one = svg_of(graph, max_depth=1)
    assert len(one.clusters) == 1 and not one.ids("leaf_dense")
    leaf = one.one("leaf : Functional")
    assert (one.one("mid_in : InputLayer"), leaf) in pairs(one)
    assert (leaf, one.one("mid_dense : Dense")) in pairs(one)
    none = svg_of(graph, max_depth=0, expand_nested=True)
    assert not none.clusters and len(none.nodes) == 3
    assert (full.one("leaf_dense"), full.one("mid_dense")) in pairs(full)
    assert (full.one("x : InputLayer"), full.one("mid_in")) in pairs(full)
    assert (full.one("mid_in"), full.one("leaf_in")) in pairs(full)


# --- collapse repeats ----------------------------------------------------------------------------


def test_find_repeats_prefers_most_coverage_and_smallest_block():
    sig = [None] + ["a"] * 6
    producers = [[]] + [[(i - 1, 0)] for i in range(1, 7)]
    assert R.find_repeats(list(range(7)), sig, producers) == [R.Run(1, 1, 6)]
    sig = [None, "a", "b", "a", "b", "a", "b", "c"]
    producers = [[]] + [[(i - 1, 0)] for i in range(1, 8)]
    assert R.find_repeats(list(range(8)), sig, producers) == [R.Run(1, 2, 3)]


def test_find_repeats_ignores_parallel_lookalikes():
    # Three relu's reading three different producers side by side: not a chain, no fold.
    sig = [None, None, None, "relu", "relu", "relu"]
    producers = [[], [], [], [(0, 0)], [(1, 0)], [(2, 0)]]
    assert R.find_repeats(list(range(6)), sig, producers) == []


@needs_dot
def test_collapse_dense_chain(tmp_path):
    graph = dense_chain(tmp_path, 8)
    svg = svg_of(graph, collapse_repeats=True, show_params=True)
    assert len(svg.nodes) == 3
    rep = svg.one("× 8")
    assert "dense_0 … dense_7" in svg.nodes[rep] and "×8" in svg.nodes[rep]
    assert pairs(svg) == {(svg.one("inp"), rep), (rep, svg.one("head"))}
    assert len(svg_of(graph).nodes) == 10


@needs_dot
def test_collapse_resnet_identity_blocks(tmp_path):
    graph = resnet_like(tmp_path, blocks=4)
    svg = svg_of(graph, collapse_repeats=True)
    assert len(svg.nodes) == 1 + 1 + 6 + 2
    (label,) = svg.clusters.values()
    assert "× 4" in label and "repeated block of 6 calls" in label
    stem, add = svg.one("stem"), svg.one("add_0 : Add")
    assert (stem, svg.one("conv2d_0")) in pairs(svg) and (stem, add) in pairs(svg)
    assert (add, svg.one("gap")) in pairs(svg)
    assert len(svg.edges) == 2 + 6 + 2  # into the block, inside it, out to gap -> logits


@needs_dot
def test_collapse_keeps_links_from_inner_repeats(tmp_path):
    graph = resnet_like(tmp_path, blocks=4, tap=1)
    svg = svg_of(graph, collapse_repeats=True)
    join = svg.one("join : Concatenate")
    labels = {label for s, d, label in svg.edges if d == join}
    assert labels == {"", "from repeat 2/4"}


def test_collapse_nasnet_sized_graph(tmp_path):
    graph = nasnet_like(tmp_path / "nasnet.json")
    assert len(graph.layers) == 771
    plain = R.to_dot(graph)
    assert plain.nodes == 771 and plain.edges == sum(len(n.inputs) for n in graph.nodes)
    folded = R.to_dot(graph, collapse_repeats=True)
    assert folded.folded == 3 * 4 * 45  # three stages of five identical 45-layer cells
    assert folded.nodes == 771 - folded.folded and folded.clusters == 3


@needs_dot
@pytest.mark.slow
def test_nasnet_sized_graph_renders_to_svg(tmp_path):
    graph = nasnet_like(tmp_path / "nasnet.json")
    svg = parse_svg(R.render(graph, format="svg", show_shapes=True, show_params=True))
    assert len(svg.nodes) == 771
    assert len(svg.edges) == sum(len(n.inputs) for n in graph.nodes)


# --- findings ------------------------------------------------------------------------------------


@needs_dot
def test_highlight_issues_colours_layers():
    graph = load(SAMPLES / "k3" / "multi_io_list.keras")
    mix_path = graph.layer("mix").json_path
    issues = [
        Issue("TST001", "error", "bad concat", "layer 'concat'"),
        Issue("TST002", "warning", "odd mix", f"config.json:{mix_path}.config.units"),
        Issue("TST003", "error", "file-level", "model.weights.h5"),
    ]
    drawing = R.to_dot(graph, issues=issues)
    assert drawing.issues_unplaced == 1
    svg = parse_svg(R.render(graph, format="svg", issues=issues))
    concat, mix, drop = svg.one("concat : Concatenate"), svg.one("mix : Dense"), svg.one("drop")
    assert "#f9d0d0" in svg.fills[concat] and "error: TST001" in svg.nodes[concat]
    assert "#fde6b0" in svg.fills[mix] and "warning: TST002" in svg.nodes[mix]
    assert "#eef3fb" in svg.fills[drop]
    title = " ".join(svg.nodes.get("graph", ""))
    assert "not tied to a layer" in R.to_dot(graph, issues=issues).source, title


def test_issues_in_nested_layers_colour_the_nested_node():
    graph = load(SAMPLES / "k3" / "nested.keras")
    issues = [Issue("TST001", "error", "x", "layer 'inner_model/inner_dense'")]
    placed, unplaced = R.place_issues(graph, issues)
    assert list(placed) == [("inner_model", "inner_dense")] and unplaced == 0
    source = R.to_dot(graph, issues=issues, expand_nested=True).source
    assert source.count("error: TST001") == 2  # both calls of inner_model


# --- options -------------------------------------------------------------------------------------


def test_label_options():
    graph = load(SAMPLES / "k3" / "multi_io_list.keras")
    src = R.to_dot(
        graph, show_activations=True, show_dtype=True, show_trainable=True, rankdir="LR", dpi=150
    ).source
    assert "activation: relu" in src and "activation: softmax" in src
    assert "dtype: float32" in src and "trainable: yes" in src
    assert "rankdir=LR" in src and "dpi=150" in src
    hidden = R.to_dot(graph, show_layer_names=False).source
    assert "shared_dense" not in hidden.replace('tooltip="shared_dense', "")
    assert "<B>Dense</B>" in hidden


def test_bad_options_are_usage_errors():
    with pytest.raises(UsageError):
        R.RenderOptions(rankdir="XY")
    with pytest.raises(UsageError):
        R.format_for("model.gif", None)
    assert R.format_for("m.SVG", None) == "svg" and R.format_for("-", None) == "dot"
    assert R.format_for("m.svg", "png") == "png"


def test_module_is_callable_like_the_public_function():
    import modelgraph

    graph = load(SAMPLES / "k3" / "ops.keras")
    assert modelgraph.render(graph).startswith(b"digraph")


# --- every sample --------------------------------------------------------------------------------

MODEL_FILES = sorted(
    p
    for p in [*SAMPLES.glob("k2/*"), *SAMPLES.glob("k3/*"), *SAMPLES.glob("wild/*")]
    if (p.suffix in (".keras", ".h5", ".json") or p.name.endswith("_dir")) and "weights" not in p.name
)


def _load_or_skip(path: Path):
    from modelgraph.errors import LoadError

    try:
        return load(path)
    except LoadError as exc:
        pytest.skip(f"not a loadable model: {exc}")


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: str(p.relative_to(SAMPLES)))
def test_every_sample_renders_to_dot(path):
    graph = _load_or_skip(path)
    for opts in (
        {},
        {"expand_nested": True, "collapse_repeats": True, "show_shapes": True, "show_params": True},
    ):
        drawing = R.to_dot(graph, **opts)
        assert drawing.source.startswith("digraph model {") and drawing.source.rstrip().endswith("}")
        assert drawing.nodes >= len(graph.inputs)


@needs_dot
@pytest.mark.parametrize(
    "path",
    sorted(SAMPLES.glob("k3/*.keras"))
    + sorted(p for p in SAMPLES.glob("k2/*.h5") if "weights" not in p.name),
    ids=lambda p: str(p.relative_to(SAMPLES)),
)
def test_samples_render_to_svg(path):
    graph = _load_or_skip(path)
    svg = svg_of(graph, expand_nested=True, show_shapes=True, show_params=True, show_dtype=True)
    assert svg.nodes


# --- CLI -----------------------------------------------------------------------------------------


def run_cli(*args: str, env: dict | None = None):
    return CliRunner().invoke(cli, ["render", *args], env=env)


def test_cli_dot_to_stdout_is_only_the_payload():
    result = run_cli(str(SAMPLES / "k3" / "ops.keras"), "-o", "-")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("digraph model {") and result.stdout.rstrip().endswith("}")
    assert result.stderr == ""


@needs_dot
def test_cli_svg_file_with_flags(tmp_path):
    out = tmp_path / "m.svg"
    result = run_cli(
        str(SAMPLES / "k3" / "nested.keras"),
        "-o",
        str(out),
        "--expand-nested",
        "--show-shapes",
        "--show-params",
        "--rankdir",
        "LR",
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    svg = parse_svg(out.read_bytes())
    assert len(svg.clusters) == 4
    assert all("params: 72" in svg.nodes[i] for i in svg.ids("inner_dense : Dense"))


@needs_dot
def test_cli_format_overrides_extension_and_png(tmp_path):
    out = tmp_path / "m.bin"
    result = run_cli(str(SAMPLES / "k3" / "cnn.keras"), "-o", str(out), "--format", "png", "--dpi", "72")
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_unknown_extension_is_usage_error(tmp_path):
    result = run_cli(str(SAMPLES / "k3" / "cnn.keras"), "-o", str(tmp_path / "m.gif"))
    assert result.exit_code == 2
    assert "format" in result.stderr


def test_cli_missing_dot_exits_4_with_install_hint(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    result = run_cli(str(SAMPLES / "k3" / "cnn.keras"), "-o", str(tmp_path / "m.svg"))
    assert result.exit_code == 4
    assert "apt-get install graphviz" in result.stderr and "brew install graphviz" in result.stderr
    assert not (tmp_path / "m.svg").exists()
    ok = run_cli(str(SAMPLES / "k3" / "cnn.keras"), "-o", str(tmp_path / "m.dot"))
    assert ok.exit_code == 0 and (tmp_path / "m.dot").read_text().startswith("digraph")
    with pytest.raises(ToolMissingError):
        R.render(load(SAMPLES / "k3" / "cnn.keras"), format="pdf")


def test_cli_unreadable_model_exits_3(tmp_path):
    bad = tmp_path / "bad.keras"
    bad.write_bytes(b"not a zip at all")
    result = run_cli(str(bad))
    assert result.exit_code == 3
    assert result.stdout == ""


def test_cli_max_depth_implies_expand(tmp_path):
    graph_file = tmp_path / "two_level.json"
    two_level_nested(tmp_path)
    result = run_cli(str(graph_file), "--max-depth", "1")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("subgraph cluster_") == 1


def test_cli_highlight_issues_runs(tmp_path):
    result = run_cli(str(SAMPLES / "k3" / "multi_io_list.keras"), "--highlight-issues", "--collapse-repeats")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("digraph")


def test_cli_progress_for_big_models_goes_to_stderr(tmp_path):
    nasnet_like(tmp_path / "nasnet.json")
    result = run_cli(str(tmp_path / "nasnet.json"), "-o", str(tmp_path / "n.dot"))
    assert result.exit_code == 0, result.output
    assert result.stdout == "" and "wrote dot" in result.stderr


@needs_dot
def test_show_dtype_names_quantized_and_mixed_policies():
    quant = svg_of(load(SAMPLES / "k3" / "quant_int8_text.keras"), show_dtype=True)
    assert "dtype: int8_from_float32" in quant.label("qein ")
    assert "dtype: int8_from_float32" in quant.label("qemb ")
    mixed = svg_of(load(SAMPLES / "k3" / "dtypes.keras"), show_dtype=True)
    assert "dtype: mixed_float16" in mixed.label("d_mixed16 ")
    assert "dtype: float32" in mixed.label("d_f32 ")


def test_tooltips_show_the_settings_not_only_name_and_class():
    graph = load(SAMPLES / "k3" / "cnn.keras")
    dot = R.to_dot(graph).source
    tip = re.search(r'n\d+ \[label=<<B>conv1</B>.*?tooltip="([^"]*)"', dot).group(1)
    lines = tip.split("\\n")
    assert lines[0] == "conv1 (Conv2D)"
    assert "filters: 8" in lines and "kernel_size: [3, 3]" in lines and "padding: same" in lines
    assert "params: 224" in lines
    assert "kernel_initializer: GlorotUniform" in lines  # a serialized object as its class
