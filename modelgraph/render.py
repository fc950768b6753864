"""Draw a :class:`~modelgraph.graph.ModelGraph` with Graphviz: DOT text always, SVG/PNG/PDF through ``dot``.

The core is :func:`to_dot`, a pure function from a graph and :class:`RenderOptions` to a
:class:`DotGraph` (the DOT source plus counts); :func:`render` adds running the ``dot`` binary
and writing the result. Nothing here prints.

Drawing decisions
-----------------

* **One drawn node per call.** A shared layer called N times is drawn N times, each box saying
  ``shared · call i/N``; the drawing stays a DAG and every edge is the data flow of one call
  (drawing one box per layer, as ``plot_model`` does, turns ``x -> shared -> add -> shared`` into a
  cycle and leaves the reader guessing which input produced which output).
* **Nested models, expanded:** one Graphviz cluster *per call*, labelled ``name (Class) · call i/N``.
  Edges enter the cluster at the nested model's input layers (the i-th tensor of the call feeds the
  i-th model input) and leave it from the layer that produces the requested model output, resolved
  recursively through deeper nested models. Collapsed (not expanded, or deeper than ``max_depth``)
  a nested model call is one 3-D box.
* **Keras 3 ops** (``kind == "op"``) are italic ellipses; **inputs** green, with ``input i``;
  **model outputs** double-bordered, with ``output i`` (dict keys when the model has named outputs).
  A tensor index other than the only one is written on the edge (``[1]``).
* **Validation findings** (``issues=``) colour the layers their ``where`` points at (``layer 'x'``
  or a JSON path into the config, matched against each layer's ``json_path``): errors red,
  warnings amber, infos blue; rule ids are listed in the node and the messages in its tooltip.
* **Escaping:** node ids are generated (``n17``); user strings only ever appear inside HTML-like
  labels (``& < > " '`` as entities, control characters and lone surrogates shown as ``\\xNN``)
  or quoted tooltips (backslashes and quotes escaped), so any layer name is drawn literally.

Collapsing repeated blocks (``collapse_repeats``)
-------------------------------------------------

Per drawn scope (the top-level model, each expanded nested call), on a topological order of its
calls:

1. Every call gets a *signature*: class, kind, the layer config without its name (and without
   Keras's ``shared_object_id`` bookkeeping), the non-tensor call arguments, the input count, whether
   it is a model output, its worst finding, and for nested models the signature of their layers and
   wiring. Input layers never match anything.
2. A *block* is a contiguous slice ``[s, s+L)`` of the order. Block ``b`` repeats the block before
   it, ``p = b - L``, when the signatures agree offset by offset and the wiring is the same up to a
   shift of ``L``: for every input, the producer of ``b[o]`` is the producer of ``p[o]`` moved by
   ``L`` positions (internal edges, the chain from the previous block, and NASNet-style links to
   the block before that), or both read the same producer from before the run (a shared input).
   A repeat must consume something of the block before it: look-alike parallel branches do not fold.
3. Greedy, left to right: at each position take the ``(L, k)`` with ``k >= 2`` repeats that covers
   the most calls (ties: smallest ``L``), then continue after the run. ``L`` is at most 128.
   The run is then rotated (start moved by up to ``L - 1``) to the start with as much coverage and
   the fewest links into each repeat, so block boundaries fall where the model's cells begin.
   Both the loader's order and Keras's depth order are tried; the one covering more calls wins.
4. A run is drawn as its first block, inside a dashed cluster labelled ``× k`` (a single-call
   block is one node marked ``× k``). Edges between blocks of the run are implied by the ``× k``;
   edges entering or leaving a block other than the first/last are drawn to/from the first block
   with a ``repeat j/k`` label, so no connection is lost.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from modelgraph._callable_module import make_callable
from modelgraph.errors import ToolFailedError, ToolMissingError, UsageError
from modelgraph.graph import Layer, ModelGraph, Node, TensorRef

FORMATS = ("svg", "png", "pdf", "dot")
"""Graphviz output formats; everything but ``dot`` needs the Graphviz ``dot`` binary."""

VIEW_FORMATS = (*FORMATS, "html")
"""Everything ``render`` writes: the Graphviz formats and the interactive HTML view
(:mod:`modelgraph.html_view`, laid out by ``dot`` too)."""

RANKDIRS = ("TB", "LR", "BT", "RL")

INSTALL_HINT = (
    "install Graphviz: apt-get install graphviz / brew install graphviz / conda install graphviz "
    "(or write DOT with --format dot, which needs nothing)"
)

BIG_GRAPH = 300
"""Above this many drawn nodes the layout switches to cheaper settings (see :func:`_graph_attrs`)."""

MAX_LAYOUT_NODES = 10_000
"""Most drawn nodes handed to Graphviz ``dot`` (its layout time grows faster than linearly: a
50,000-node graph runs for minutes). Larger drawings are refused with what to do instead
(--collapse-repeats, --max-depth, or DOT output, which needs no layout)."""

DOT_TIMEOUT_SECONDS = 120.0
"""Time limit of one ``dot`` run; past it the run is stopped (ToolFailedError, exit 5)."""

MAX_LABEL_CHARS = 200
"""Longest text drawn in a label or tooltip; longer names are cut with an ellipsis (a 1 MB layer
name made ``dot`` fail)."""

MAX_BLOCK = 128
"""Longest block :func:`find_repeats` looks for."""

Prefix = tuple[tuple[str, int], ...]
"""The nested model calls enclosing a call, outermost first: ``(("encoder", 1),)``."""

Key = tuple[Prefix, str, int]
"""A call in the drawing: (enclosing nested calls, layer name, node index)."""

# --- styling --------------------------------------------------------------------------------------

_FONT = "Helvetica"
_COLORS = {
    "layer": ("#eef3fb", "#4a6fa5"),
    "op": ("#fff6dc", "#b08a2e"),
    "input": ("#e2f4df", "#3c8d40"),
    "model": ("#ece4f7", "#7a5ea8"),
}
_SEVERITY_COLORS = {
    "error": ("#f9d0d0", "#c00000"),
    "warning": ("#fde6b0", "#d08a00"),
    "info": ("#dbe9fb", "#2f6db5"),
}
_SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}
_CLUSTER_BG = ("#f7f4fc", "#efe9f8")


@dataclass(frozen=True)
class RenderOptions:
    """What to draw; the flags mirror ``keras.utils.plot_model`` one for one, plus a few more."""

    rankdir: str = "TB"
    show_shapes: bool = False
    show_dtype: bool = False
    show_layer_names: bool = True
    show_activations: bool = False
    show_trainable: bool = False
    show_params: bool = False
    expand_nested: bool = False
    max_depth: int | None = None
    collapse_repeats: bool = False
    dpi: int | None = None
    title: bool = True
    expand_paths: frozenset[tuple[str, ...]] | None = None
    """When set, exactly the nested models at these layer paths are expanded (the HTML view's
    per-model folding); ``expand_nested``/``max_depth`` then do not apply."""
    unfold_runs: frozenset[Any] = frozenset()
    """With ``collapse_repeats``: repeated blocks drawn unfolded all the same, named by their first
    call (``(prefix, layer, call)``, the keys of :attr:`DotGraph.run_keys`): the HTML view's
    one-group-at-a-time folding."""

    def __post_init__(self) -> None:
        if self.rankdir.upper() not in RANKDIRS:
            raise UsageError(f"unknown rankdir {self.rankdir!r}; expected one of {list(RANKDIRS)}")
        object.__setattr__(self, "rankdir", self.rankdir.upper())
        if self.max_depth is not None and self.max_depth < 0:
            raise UsageError(f"max_depth must be >= 0, got {self.max_depth}")
        if self.dpi is not None and not 1 <= self.dpi <= 2400:
            raise UsageError(f"dpi must be between 1 and 2400, got {self.dpi}")

    def expands(self, level: int, path: tuple[str, ...] | None = None) -> bool:
        """Whether a nested model found at nesting ``level`` (0 = the top model's layers) is expanded;
        ``path`` is its layer path (``('outer', 'inner')``), used when ``expand_paths`` is set."""
        if self.expand_paths is not None and path is not None:
            return path in self.expand_paths
        if self.max_depth is not None:
            return level < self.max_depth
        return self.expand_nested


@dataclass(frozen=True)
class CallFacts:
    """What labels show about one call: shapes, dtypes, params, MACs (None = unknown)."""

    input_shapes: tuple[Any, ...] | None = None
    output_shapes: tuple[Any, ...] | None = None
    output_dtypes: tuple[str | None, ...] | None = None
    params: int | None = None
    macs: int | None = None


FactsFn = Callable[[tuple[tuple[str, int], ...], Layer, Node], CallFacts]
"""``(enclosing nested calls as (model name, call index), layer, node) -> CallFacts``."""


@dataclass(frozen=True)
class DotGraph:
    """The DOT source plus what it contains (for progress messages and tests)."""

    source: str
    nodes: int
    edges: int
    clusters: int
    folded: int = 0
    issues_unplaced: int = 0
    node_keys: Mapping[str, Key] = field(default_factory=dict)
    """Drawn node id (``n17``, the SVG node's ``<title>``) -> the call it draws."""
    cluster_keys: Mapping[str, Key] = field(default_factory=dict)
    """Cluster name (``cluster_3``) -> the expanded nested model call it draws."""
    run_clusters: Mapping[str, tuple[Key, int]] = field(default_factory=dict)
    """Cluster name (``cluster_r0``) of a folded run -> (its first call, its repeat count)."""
    run_keys: Mapping[str, Key] = field(default_factory=dict)
    """Drawn node id or cluster name of a folded run -> the run's first call (names the run)."""
    unfolded_runs: tuple[Key, ...] = ()
    """Runs found but drawn unfolded (``RenderOptions.unfold_runs``), by their first call."""
    node_styles: Mapping[str, NodeStyle] = field(default_factory=dict)
    """Drawn node id -> how it looks (the HTML view draws its own SVG from these)."""
    cluster_styles: Mapping[str, ClusterStyle] = field(default_factory=dict)
    edge_list: tuple[tuple[str, str, str], ...] = ()
    """(source id, target id, label) of every drawn edge."""
    edge_colors: Mapping[tuple[str, str], tuple[str, bool]] = field(default_factory=dict)
    """(source id, target id) -> (colour, dashed) of edges not drawn in the default style."""
    title: str = ""
    """The drawing's title (HTML-like label), empty when ``options.title`` is off."""

    def __str__(self) -> str:
        return self.source


@dataclass(frozen=True)
class Run:
    """``count`` consecutive repeats of a block of ``length`` calls starting at ``start`` of an order."""

    start: int
    length: int
    count: int

    @property
    def stop(self) -> int:
        return self.start + self.length * self.count


# --- escaping -------------------------------------------------------------------------------------

_HTML_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;", "\\": "\\\\"}
# Graphviz expands \N, \G, \L... even inside HTML-like labels (after entities are decoded), and
# turns a doubled backslash into one: so a backslash is written doubled, not as an entity.


def _visible(ch: str) -> str:
    code = ord(ch)
    if code < 0x20 or code == 0x7F or 0x80 <= code < 0xA0:
        return f"\\x{code:02x}"
    if 0xD800 <= code <= 0xDFFF:
        return f"\\u{code:04x}"
    return ch


def html_escape(text: Any) -> str:
    """Text for a Graphviz HTML-like label: entities for markup characters, backslashes doubled,
    control characters and lone surrogates shown as ``\\xNN``/``\\uNNNN``."""
    out = []
    for ch in _cut(str(text)):
        out.append(_HTML_ENTITIES.get(ch) or _visible(ch).replace("\\", "\\\\"))
    return "".join(out)


def _cut(text: str) -> str:
    return text if len(text) <= MAX_LABEL_CHARS else text[: MAX_LABEL_CHARS - 1] + "…"


def dot_quote(text: Any) -> str:
    """A double-quoted DOT string that Graphviz shows literally (no ``\\N``/``\\n`` escapes)."""
    body = "".join(_visible(ch) for ch in _cut(str(text))).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{body}"'


# --- facts (shapes, params, MACs) ----------------------------------------------------------------


def _config_shape(layer: Layer) -> tuple[Any, ...] | None:
    cfg = layer.config
    for key in ("batch_shape", "batch_input_shape"):
        value = cfg.get(key)
        if isinstance(value, list | tuple):
            return tuple(value)
    value = cfg.get("input_shape")
    if isinstance(value, list | tuple):
        return (None, *value)
    return None


def basic_facts(graph: ModelGraph) -> FactsFn:
    """Facts known without shape inference: input layer shapes and stored parameter counts.

    Parameter counts come from the stored weights; for an architecture-only file they are unknown
    (``None``) except for layers that never have weights (inputs, ops).
    """
    weighted = graph.has_weights

    def facts(prefix: tuple[tuple[str, int], ...], layer: Layer, node: Node) -> CallFacts:
        shape = _config_shape(layer) if layer.kind == "input" else None
        params = layer.param_count if weighted else None
        if layer.kind in ("input", "op"):
            params = 0
        return CallFacts(output_shapes=(shape,) if shape is not None else None, params=params)

    return facts


def default_facts(graph: ModelGraph) -> FactsFn:
    """Shapes (``modelgraph.shapes``), params and MACs (``modelgraph.stats``) per call.

    Falls back to :func:`basic_facts` for whatever those modules cannot say; a failure there
    degrades labels to ``?`` instead of failing the drawing.
    """
    basic = basic_facts(graph)
    result: Any = None
    node_macs: Any = None
    params_by_path: dict[tuple[str, ...], int | None] = {}
    try:
        from modelgraph.shapes import infer_shapes

        result = infer_shapes(graph)
    except Exception:  # noqa: BLE001 - labels degrade to "?" rather than failing the drawing
        result = None
    try:
        from modelgraph.stats import layer_stats
        from modelgraph.stats import node_macs as _node_macs

        params_by_path = {row.path: row.params for row in layer_stats(graph, result)}
        node_macs = _node_macs
    except Exception:  # noqa: BLE001 - labels fall back to stored parameter counts
        params_by_path = {}

    def facts(prefix: Prefix, layer: Layer, node: Node) -> CallFacts:
        base = basic(prefix, layer, node)
        path = tuple(name for name, _ in prefix)
        params = params_by_path.get((*path, layer.name), base.params)
        res = result
        for name, call in prefix:
            res = res.nested.get((name, call)) if res is not None else None
        if res is None:
            return replace(base, params=params)
        outs = res.outputs.get(node.key)
        ins = res.inputs.get(node.key)
        dtypes = res.dtypes.get(node.key)
        macs = None
        if node_macs is not None and layer.kind != "input":
            try:
                macs = node_macs(layer, res, node.index)
            except Exception:  # noqa: BLE001
                macs = None
        return CallFacts(
            input_shapes=tuple(ins) if ins is not None else None,
            output_shapes=tuple(outs) if outs is not None else base.output_shapes,
            output_dtypes=tuple(dtypes) if dtypes is not None else None,
            params=params,
            macs=macs,
        )

    return facts


# --- issues ---------------------------------------------------------------------------------------

_LAYER_WHERE = re.compile(r"layer '((?:[^'\\]|\\.)*)'")
_NODE_IN_MESSAGE = re.compile(r"\b([\w./:-]+)\[\d+\]")


_H5_CONFIG_ROOT = re.compile(r"^\$\.model_config(?=[.\[])")


def place_issues(graph: ModelGraph, issues: Iterable[Any]) -> tuple[dict[tuple[str, ...], list[Any]], int]:
    """Map findings to layer paths (``('outer', 'inner_dense')``); also return how many fit none."""
    by_path: dict[tuple[str, ...], list[Any]] = {}
    walked = list(graph.walk())
    by_json = [(lyr.json_path, path, lyr) for path, lyr in walked if lyr.json_path]
    unplaced = 0
    for issue in issues:
        where = str(getattr(issue, "where", "") or "")
        targets: list[tuple[str, ...]] = []
        match = _LAYER_WHERE.search(where)
        if match:
            name = match.group(1).replace("\\'", "'")
            targets = [p for p, _ in walked if "/".join(p) == name]
            if not targets:
                targets = [p for p, _ in walked if p[-1] == name]
        elif "$" in where:
            # a legacy .h5's config sits in its model_config attribute: validate names the layers
            # there ($.model_config.config.layers[i]), the loaded graph from the config ($.config...)
            jp = _H5_CONFIG_ROOT.sub("$", where[where.index("$") :])
            best: list[tuple[int, int, tuple[str, ...]]] = []
            for prefix, path, lyr in by_json:
                if jp == prefix or (jp.startswith(prefix) and jp[len(prefix)] in ".["):
                    best.append((len(prefix), lyr.kind != "input", path))
            if best:
                best.sort(reverse=True)
                targets = [best[0][2]]
        if not targets and not where:
            # no location (a cycle is found on the whole graph): the calls its message names
            named = {m.group(1) for m in _NODE_IN_MESSAGE.finditer(str(getattr(issue, "message", "")))}
            targets = [p for p, _ in walked if "/".join(p) in named]
        if not targets:
            unplaced += 1
        for target in targets:
            by_path.setdefault(target, []).append(issue)
    return by_path, unplaced


def _rule_ids(issues: Sequence[Any]) -> str:
    """The findings' rule ids, the most severe first (then by id), each once, escaped."""
    ranked = sorted(
        issues,
        key=lambda i: (-_SEVERITY_RANK.get(getattr(i, "severity", "info"), 0), str(getattr(i, "rule", "?"))),
    )
    return ", ".join(dict.fromkeys(html_escape(str(getattr(i, "rule", "?"))) for i in ranked))


def _worst(issues: Sequence[Any]) -> str | None:
    worst = None
    for issue in issues:
        sev = getattr(issue, "severity", "info")
        if worst is None or _SEVERITY_RANK.get(sev, 0) > _SEVERITY_RANK.get(worst, 0):
            worst = sev
    return worst


# --- repeats --------------------------------------------------------------------------------------


def _strip_names(value: Any, top: bool = True) -> Any:
    if isinstance(value, Mapping):
        return {
            str(k): _strip_names(v, False)
            for k, v in value.items()
            if k != "shared_object_id" and not (top and k == "name")
        }
    if isinstance(value, list | tuple):
        return [_strip_names(v, False) for v in value]
    if isinstance(value, TensorRef):
        return "<tensor>"
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    return repr(type(value).__name__)


def _canon(value: Any) -> str:
    return json.dumps(_strip_names(value), sort_keys=True, default=str)


def _model_signature(graph: ModelGraph, cache: dict[int, str]) -> str:
    key = id(graph)
    if key not in cache:
        index = {lyr.name: i for i, lyr in enumerate(graph.layers)}
        parts = []
        for lyr in graph.layers:
            sub = _model_signature(lyr.subgraph, cache) if lyr.subgraph is not None else ""
            parts.append(f"{lyr.class_name}|{lyr.kind}|{_canon(lyr.config)}|{sub}")
        for node in graph.nodes:
            refs = [(index.get(r.layer, -1), r.node_index, r.tensor_index) for r in node.inputs]
            parts.append(f"{index.get(node.layer, -1)}:{node.index}:{refs}")
        outs = [(index.get(r.layer, -1), r.node_index, r.tensor_index) for r in graph.outputs]
        parts.append(str(outs))
        cache[key] = "\n".join(parts)
    return cache[key]


def find_repeats(
    order: Sequence[Any],
    signature: Sequence[Any],
    producers: Sequence[Sequence[tuple[int, int]]],
    max_block: int = MAX_BLOCK,
) -> list[Run]:
    """Runs of consecutive repeated blocks in ``order`` (see the module docstring for the rules).

    ``signature[i]`` is a hashable structural signature of ``order[i]`` (``None`` never matches);
    ``producers[i]`` lists ``(position of the producer in order, tensor index)`` per input
    (position ``-1`` when the producer is outside the scope).
    """
    n = len(order)
    runs: list[Run] = []
    s = 0
    while s < n:
        if signature[s] is None:
            s += 1
            continue
        best: Run | None = None
        for length in range(1, min(max_block, (n - s) // 2) + 1):
            if signature[s + length] != signature[s]:
                continue
            count = 1
            while s + (count + 1) * length <= n and _repeats(s, length, count, signature, producers):
                count += 1
            if count >= 2 and (best is None or count * length > best.count * best.length):
                best = Run(s, length, count)
        if best is not None:
            best = _align(best, signature, producers)
            runs.append(best)
            s = best.stop
        else:
            s += 1
    return runs


def _align(run: Run, signature: Sequence[Any], producers: Sequence[Sequence[tuple[int, int]]]) -> Run:
    """The rotation of ``run`` (start moved by 0..L-1) that covers as much with the fewest links
    into each repeat: block boundaries then fall where the model's own blocks (cells) begin."""
    n = len(signature)

    def links(start: int) -> int:
        lo, hi = start + run.length, start + 2 * run.length
        return sum(1 for i in range(lo, hi) for q, _ in producers[i] if not lo <= q < hi)

    best, best_key = run, (run.count * run.length, -links(run.start))
    for start in range(run.start + 1, run.start + run.length):
        if start + 2 * run.length > n or signature[start] is None:
            continue
        count = 1
        while start + (count + 1) * run.length <= n and _repeats(
            start, run.length, count, signature, producers
        ):
            count += 1
        if count < 2:
            continue
        key = (count * run.length, -links(start))
        if key > best_key:
            best, best_key = Run(start, run.length, count), key
    return best


def _repeats(
    start: int,
    length: int,
    count: int,
    signature: Sequence[Any],
    producers: Sequence[Sequence[tuple[int, int]]],
) -> bool:
    """Whether block ``count`` (0-based) of the run at ``start`` repeats block ``count - 1``."""
    b = start + count * length
    p = b - length
    chained = False
    for o in range(length):
        if signature[b + o] is None or signature[b + o] != signature[p + o]:
            return False
        mine, theirs = producers[b + o], producers[p + o]
        if len(mine) != len(theirs):
            return False
        for (q, t), (q2, t2) in zip(mine, theirs, strict=True):
            if t != t2:
                return False
            if q >= 0 and q2 >= 0 and q - q2 == length:
                chained = chained or p <= q < b
                continue
            if q == q2 and q < start:
                continue
            return False
    return chained  # a repeat consumes the block before it (parallel look-alikes do not fold)


# --- the builder ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeStyle:
    """How one drawn node looks; the same facts become DOT attributes and the HTML view's SVG."""

    label: str
    """Graphviz HTML-like label (``<B>``, ``<I>``, ``<FONT>``, ``<BR/>``)."""
    shape: str
    """``box`` (rounded), ``ellipse`` (an op) or ``box3d`` (a nested model)."""
    fill: str
    border: str
    penwidth: float | None = None
    double: bool = False
    """A model output: drawn with a second border."""
    tooltip: tuple[str, ...] = ()
    cluster: str | None = None
    """The innermost cluster holding the node (``cluster_3``, ``cluster_r0``), if any."""

    def dot_attrs(self) -> str:
        """The node's DOT attribute list."""
        attrs = [f"label=<{self.label}>"]
        if self.shape == "ellipse":
            attrs.append('shape=ellipse style="filled"')
        elif self.shape == "box3d":
            attrs.append('shape=box3d style="filled"')
        else:
            attrs.append('shape=box style="rounded,filled"')
        attrs.append(f'fillcolor="{self.fill}" color="{self.border}"')
        if self.double:
            attrs.append("peripheries=2")
        if self.penwidth is not None:
            attrs.append(f"penwidth={self.penwidth}")
        attrs.append(f"tooltip={dot_lines(self.tooltip)}")
        return " ".join(attrs)


@dataclass(frozen=True)
class ClusterStyle:
    """How one cluster (an expanded nested model call, or a folded run) looks."""

    label: str
    fill: str | None
    border: str
    penwidth: float
    dashed: bool = False
    parent: str | None = None


@dataclass
class _RunInfo:
    ident: int
    index: int
    count: int
    length: int
    representative: Key
    last_name: str
    first: Key
    """The run's first call: the run's name (``RenderOptions.unfold_runs``)."""


@dataclass
class _Builder:
    options: RenderOptions
    facts: FactsFn
    issues: dict[tuple[str, ...], list[Any]]
    output_marks: dict[Key, list[str]]
    input_marks: dict[Key, str]
    lines: list[str] = field(default_factory=list)
    ids: dict[Key, str] = field(default_factory=dict)
    expanded: set[Key] = field(default_factory=set)
    run_of: dict[Key, _RunInfo] = field(default_factory=dict)
    edges: dict[tuple[str, str, str], None] = field(default_factory=dict)
    multi_out: set[Key] = field(default_factory=set)
    clusters: int = 0
    folded: int = 0
    runs: int = 0
    sig_cache: dict[int, str] = field(default_factory=dict)
    cluster_keys: dict[str, Key] = field(default_factory=dict)
    run_clusters: dict[str, tuple[Key, int]] = field(default_factory=dict)
    run_keys: dict[str, Key] = field(default_factory=dict)
    unfolded_runs: list[Key] = field(default_factory=list)
    node_styles: dict[str, NodeStyle] = field(default_factory=dict)
    cluster_styles: dict[str, ClusterStyle] = field(default_factory=dict)
    open_clusters: list[str] = field(default_factory=list)

    # scope ----------------------------------------------------------------------------------
    def scope(self, graph: ModelGraph, prefix: Prefix, indent: str) -> None:
        """Declare the calls of one model (top level or one expanded nested call), then its edges."""
        for node in graph.nodes:
            for ref in node.inputs:
                if ref.tensor_index > 0:
                    self.multi_out.add((prefix, ref.layer, ref.node_index))
        for ref in graph.outputs:
            if ref.tensor_index > 0:
                self.multi_out.add((prefix, ref.layer, ref.node_index))
        first_of_run: dict[Key, list[Node]] = {}
        if self.options.collapse_repeats:
            for order, run in self.detect(graph, prefix):
                ident = self.runs
                self.runs += 1
                block = order[run.start : run.start + run.length]
                reps = [(prefix, n.layer, n.index) for n in block]
                if reps[0] in self.options.unfold_runs:
                    self.unfolded_runs.append(reps[0])
                    continue
                last_name = order[run.stop - 1].layer
                for j in range(run.count):
                    for o in range(run.length):
                        node = order[run.start + j * run.length + o]
                        self.run_of[(prefix, node.layer, node.index)] = _RunInfo(
                            ident, j, run.count, run.length, reps[o], last_name, reps[0]
                        )
                for rep in reps:
                    first_of_run[rep] = block
                self.folded += run.length * (run.count - 1)
        placed: set[Key] = set()
        # Inputs first, in the model's input order, on one rank: dot keeps them left to right.
        input_keys = list(dict.fromkeys(r.node_key for r in graph.inputs if graph.has_layer(r.layer)))
        input_nodes = [graph.node(*k) for k in input_keys]
        declared = len(self.ids)
        for node in input_nodes:
            self.item(graph, node, prefix, indent)
            placed.add((prefix, node.layer, node.index))
        if len(input_nodes) > 1:
            ids = [f"n{i}" for i in range(declared, len(self.ids))]
            chain = " -> ".join(ids)
            self.lines.append(f"{indent}{{rank=same; {'; '.join(ids)}; {chain} [style=invis];}}")
        for node in graph.nodes:
            key = (prefix, node.layer, node.index)
            info = self.run_of.get(key)
            if key in placed or (info is not None and info.index > 0):
                continue
            block = first_of_run.get(key)
            if block is not None and len(block) > 1:
                assert info is not None
                self.clusters += 1
                label = (
                    f"<<B>× {info.count}</B>  <FONT POINT-SIZE='9'>repeated block of {info.length}"
                    f" calls: {html_escape(block[0].layer)} … {html_escape(info.last_name)}</FONT>>"
                )
                name = f"cluster_r{info.ident}"
                self.run_clusters[name] = (key, info.count)
                self.run_keys[name] = info.first
                self.lines.append(f"{indent}subgraph {name} {{")
                self.lines.append(
                    f'{indent}  label={label}; style="dashed,rounded"; color="#555555"; penwidth=1.6; labeljust=l;'
                )
                self._open_cluster(name, ClusterStyle(label[1:-1], None, "#555555", 1.6, dashed=True))
                for member in block:
                    self.item(graph, member, prefix, indent + "  ")
                    placed.add((prefix, member.layer, member.index))
                self.open_clusters.pop()
                self.lines.append(f"{indent}}}")
                continue
            self.item(graph, node, prefix, indent)
            placed.add(key)
        self.scope_edges(graph, prefix)

    def detect(self, graph: ModelGraph, prefix: Prefix) -> list[tuple[list[Node], Run]]:
        """Repeated blocks of this scope, on whichever candidate order covers more calls."""
        path = tuple(p[0] for p in prefix)
        output_keys = {r.node_key for r in graph.outputs}
        loader_order = list(graph.nodes)
        candidates = [loader_order]
        depth_order = sorted(loader_order, key=lambda n: -(n.depth if n.depth is not None else -1))
        if depth_order != loader_order:
            candidates.append(depth_order)
        sig_of: dict[tuple[str, int], Any] = {}
        for node in loader_order:
            layer = graph.layer(node.layer)
            if layer.kind == "input" or node.key in output_keys:
                sig_of[node.key] = None
                continue
            sub = _model_signature(layer.subgraph, self.sig_cache) if layer.subgraph is not None else ""
            sig_of[node.key] = (
                layer.class_name,
                layer.kind,
                _canon(layer.config),
                _canon([node.args, dict(node.kwargs)]),
                len(node.inputs),
                _worst(self.issues.get((*path, layer.name), ())),
                sub,
            )
        best: tuple[int, list[Node], list[Run]] | None = None
        for order in candidates:
            pos = {n.key: i for i, n in enumerate(order)}
            sigs = [sig_of[n.key] for n in order]
            producers = [[(pos.get(r.node_key, -1), r.tensor_index) for r in n.inputs] for n in order]
            runs = find_repeats(order, sigs, producers)
            covered = sum(r.length * r.count for r in runs)
            if best is None or covered > best[0]:
                best = (covered, order, runs)
        assert best is not None
        return [(best[1], run) for run in best[2]]

    def item(self, graph: ModelGraph, node: Node, prefix: Prefix, indent: str) -> None:
        """Declare one call: a node, or a cluster for an expanded nested model call."""
        layer = graph.layer(node.layer)
        key = (prefix, node.layer, node.index)
        path = tuple(p[0] for p in prefix)
        level = len(prefix)
        if layer.subgraph is not None and self.options.expands(level, (*path, layer.name)):
            self.expanded.add(key)
            self.clusters += 1
            self.cluster_keys[f"cluster_{self.clusters}"] = key
            found = self.issues.get((*path, layer.name), ())
            worst = _worst(found)
            color = _SEVERITY_COLORS[worst][1] if worst else _COLORS["model"][1]
            head = f"<B>{html_escape(layer.name)}</B> ({html_escape(layer.class_name)})"
            extra = []
            if layer.node_count > 1:
                head += f" · call {node.index + 1}/{layer.node_count}"
                extra.append(f"weights shared by its {layer.node_count} calls")
            run = self.run_of.get(key)
            if run is not None and run.length == 1:
                self.run_keys[f"cluster_{self.clusters}"] = run.first
                head = f"<B>× {run.count}</B>  {head}"
                extra.append(f"{html_escape(layer.name)} … {html_escape(run.last_name)}")
            if self.options.show_params:
                facts = self.facts(prefix, layer, node)
                if facts.params is not None:
                    extra.append(f"params: {facts.params:,}")
            if found:
                rules = _rule_ids(found)
                extra.append(f"<FONT COLOR='{color}'><B>{html_escape(worst)}: {rules}</B></FONT>")
            label = head + "".join(f"<BR/><FONT POINT-SIZE='9'>{e}</FONT>" for e in extra)
            self.lines.append(f"{indent}subgraph cluster_{self.clusters} {{")
            self.lines.append(
                f'{indent}  label=<{label}>; style="rounded,filled"; fillcolor="{_CLUSTER_BG[level % 2]}";'
                f' color="{color}"; penwidth={2.4 if worst else 1.4}; labeljust=l;'
                f" tooltip={dot_lines(_tooltip(layer, found, path))};"
            )
            self._open_cluster(
                f"cluster_{self.clusters}",
                ClusterStyle(label, _CLUSTER_BG[level % 2], color, 2.4 if worst else 1.4),
            )
            self.scope(layer.subgraph, (*prefix, (layer.name, node.index)), indent + "  ")
            self.open_clusters.pop()
            self.lines.append(f"{indent}}}")
            return
        ident = f"n{len(self.ids)}"
        self.ids[key] = ident
        run = self.run_of.get(key)
        if run is not None and run.length == 1:
            self.run_keys[ident] = run.first
        style = self.node_style(layer, node, key)
        self.node_styles[ident] = replace(
            style, cluster=self.open_clusters[-1] if self.open_clusters else None
        )
        self.lines.append(f"{indent}{ident} [{style.dot_attrs()}];")

    def _open_cluster(self, name: str, style: ClusterStyle) -> None:
        parent = self.open_clusters[-1] if self.open_clusters else None
        self.cluster_styles[name] = replace(style, parent=parent)
        self.open_clusters.append(name)

    # labels ---------------------------------------------------------------------------------
    def node_style(self, layer: Layer, node: Node, key: Key) -> NodeStyle:
        """How one call's node looks: label, shape, colours (the DOT attributes and the page's SVG)."""
        opts = self.options
        path = tuple(p[0] for p in key[0])
        kind = "model" if layer.subgraph is not None else layer.kind
        found = self.issues.get((*path, layer.name), ())
        worst = _worst(found)
        fill, border = _SEVERITY_COLORS[worst] if worst else _COLORS.get(kind, _COLORS["layer"])
        run = self.run_of.get(key)
        single_run = run is not None and run.length == 1
        facts = self.facts(key[0], layer, node)
        name = html_escape(layer.name)
        cls = html_escape(layer.class_name)
        if kind == "op":
            head = f"<I>{name}</I> : <I>{cls}</I>" if opts.show_layer_names else f"<I>{cls}</I>"
        elif opts.show_layer_names:
            head = f"<B>{name}</B> : {cls}"
        else:
            head = f"<B>{cls}</B>"
        small: list[str] = []
        if single_run:
            assert run is not None
            head = f"<B>× {run.count}</B>  {head}"
            if opts.show_layer_names:
                small.append(f"{name} … {html_escape(run.last_name)}")
        if key in self.input_marks:
            small.append(f"<B>{html_escape(self.input_marks[key])}</B>")
        if kind == "model":
            count = sum(1 for _ in layer.subgraph.walk()) if layer.subgraph is not None else 0
            small.append(f"nested model · {count} layers")
        if layer.node_count > 1:
            small.append(f"shared · call {node.index + 1}/{layer.node_count}")
        if opts.show_activations:
            act = _activation(layer.config)
            if act:
                small.append(f"activation: {html_escape(act)}")
        if opts.show_dtype:
            dtype = _dtype(layer.config, facts)
            if dtype:
                small.append(f"dtype: {html_escape(dtype)}")
        if opts.show_shapes:
            if kind != "input":
                small.append(f"in: {html_escape(_shapes_text(facts.input_shapes, len(node.inputs)))}")
            small.append(f"out: {html_escape(_shapes_text(facts.output_shapes, None))}")
        if opts.show_trainable and kind not in ("input", "op"):
            small.append(f"trainable: {'yes' if layer.trainable else 'no'}")
        if opts.show_params and kind != "input":
            parts = []
            if kind != "op":
                params = "?" if facts.params is None else f"{facts.params:,}"
                parts.append(f"params: {params}" + (f" ×{run.count}" if single_run and run else ""))
            if facts.macs is not None:
                parts.append(f"MACs: {_human(facts.macs)}")
            if parts:
                small.append(" · ".join(parts))
        if key in self.output_marks:
            small.append(f"<B>{html_escape(', '.join(self.output_marks[key]))}</B>")
        if found:
            rules = _rule_ids(found)
            small.append(f"<FONT COLOR='{border}'><B>{html_escape(worst)}: {rules}</B></FONT>")
        label = head + "".join(f"<BR/><FONT POINT-SIZE='9'>{s}</FONT>" for s in small)
        shape = {"op": "ellipse", "model": "box3d"}.get(kind, "box")
        if worst:
            penwidth = 2.4
        elif single_run or kind == "input" or key in self.output_marks:
            penwidth = 1.8
        else:
            penwidth = None
        return NodeStyle(
            label=label,
            shape=shape,
            fill=fill,
            border=border,
            penwidth=penwidth,
            double=key in self.output_marks,
            tooltip=tuple(_tooltip(layer, found, path, facts)),
        )

    # edges ----------------------------------------------------------------------------------
    def _drawn(self, graph: ModelGraph, key: Key) -> tuple[Key, ModelGraph | None]:
        """The key drawn for node ``key`` (its run's representative when folded into a run) and, when
        that node is an expanded nested model, its subgraph."""
        run = self.run_of.get(key)
        if run is not None:
            key = run.representative
        if key not in self.expanded:
            return key, None
        sub = graph.layer(key[1]).subgraph
        assert sub is not None
        return key, sub

    def source_of(self, prefix: Prefix, graph: ModelGraph, ref: TensorRef) -> tuple[str, bool]:
        """The drawn id producing ``ref`` (through expanded nested models) and whether to show its index."""
        key, sub = self._drawn(graph, (prefix, ref.layer, ref.node_index))
        if sub is not None:
            return self.source_of((*key[0], (key[1], key[2])), sub, sub.outputs[ref.tensor_index])
        return self.ids[key], key in self.multi_out

    def target_of(self, prefix: Prefix, graph: ModelGraph, node: Node, position: int) -> str:
        """The drawn id receiving input ``position`` of ``node`` (a nested model's input layer)."""
        key, sub = self._drawn(graph, (prefix, node.layer, node.index))
        if sub is not None:
            if not sub.inputs:
                return ""
            target = sub.inputs[min(position, len(sub.inputs) - 1)]
            inner = sub.node(target.layer, target.node_index)
            return self.target_of((*key[0], (key[1], key[2])), sub, inner, 0)
        return self.ids[key]

    def scope_edges(self, graph: ModelGraph, prefix: Prefix) -> None:
        for node in graph.nodes:
            ckey: Key = (prefix, node.layer, node.index)
            crun = self.run_of.get(ckey)
            for position, ref in enumerate(node.inputs):
                prun = self.run_of.get((prefix, ref.layer, ref.node_index))
                labels: list[str] = []
                if crun is not None and prun is not None and crun.ident == prun.ident:
                    if crun.index > 0 or prun.index > 0:
                        continue  # inside a folded run: implied by the × k
                else:
                    if prun is not None and prun.index != prun.count - 1:
                        labels.append(f"from repeat {prun.index + 1}/{prun.count}")
                    if crun is not None and crun.index != 0:
                        labels.append(f"to repeat {crun.index + 1}/{crun.count}")
                src, show_index = self.source_of(prefix, graph, ref)
                dst = self.target_of(prefix, graph, node, position)
                if not src or not dst:
                    continue
                if show_index:
                    labels.insert(0, f"[{ref.tensor_index}]")
                self.edges[(src, dst, " ".join(labels))] = None


TOOLTIP_CONFIG_KEYS = 14
"""Config keys listed in a node's tooltip (the rest are counted; the HTML view shows them all)."""


def _tooltip(
    layer: Layer, found: Sequence[Any], path: tuple[str, ...] = (), facts: CallFacts | None = None
) -> list[str]:
    """The lines of a node's hover text: path and class, shapes and params when known, the config's
    settings (short), and the findings' messages."""
    lines = ["/".join((*path, layer.name)) + f" ({layer.class_name})"]
    if facts is not None:
        if facts.output_shapes is not None:
            lines.append(f"output: {_shapes_text(facts.output_shapes, None)}")
        if facts.params is not None and layer.kind != "input":
            lines.append(f"params: {facts.params:,}")
    shown = 0
    items = [(k, v) for k, v in layer.config.items() if k not in ("name", "layers") and v is not None]
    for key, value in items[:TOOLTIP_CONFIG_KEYS]:
        text = _short_value(value)
        lines.append(f"{key}: {text}")
        shown += 1
    if len(items) > shown:
        lines.append(f"... {len(items) - shown} more config keys")
    for issue in found:
        lines.append(
            f"{getattr(issue, 'severity', '?')} {getattr(issue, 'rule', '?')}: {getattr(issue, 'message', '')}"
        )
    return lines


def _short_value(value: Any, width: int = 48) -> str:
    """A config value in a few characters: a serialized object as its class (and its name)."""
    if isinstance(value, Mapping) and isinstance(value.get("class_name"), str):
        inner = value.get("config")
        name = inner.get("name") if isinstance(inner, Mapping) else None
        value = value["class_name"] + (f"({name})" if isinstance(name, str) else "")
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= width else text[: width - 3] + "..."


def dot_lines(lines: Sequence[str]) -> str:
    """A double-quoted DOT string of several lines (``\\n`` between them), each shown literally."""
    return '"' + "\\n".join(dot_quote(line)[1:-1] for line in lines) + '"'


def _activation(config: Mapping[str, Any]) -> str | None:
    act = config.get("activation")
    if act is None:
        return None
    if isinstance(act, Mapping):
        inner = act.get("config")
        if isinstance(inner, Mapping) and isinstance(inner.get("name"), str):
            return inner["name"]
        return str(act.get("registered_name") or act.get("class_name") or "?")
    return str(act)


def _dtype(config: Mapping[str, Any], facts: CallFacts) -> str | None:
    dtype = config.get("dtype")
    if isinstance(dtype, Mapping):
        inner = dtype.get("config")
        if isinstance(inner, Mapping) and inner.get("mode") and not inner.get("name"):
            # A Keras 3 QuantizedDTypePolicy: its name is "<mode>_from_<source>", e.g. int8_from_float32.
            dtype = f"{inner['mode']}_from_{inner.get('source_name', 'float32')}"
        else:
            dtype = inner.get("name") if isinstance(inner, Mapping) else dtype.get("class_name")
    if dtype is None and facts.output_dtypes:
        known = [d for d in facts.output_dtypes if d]
        dtype = known[0] if known else None
    return None if dtype is None else str(dtype)


def _shape_text(shape: Any) -> str:
    if shape is None:
        return "?"
    if isinstance(shape, list | tuple):
        inner = ", ".join("None" if d is None else str(d) for d in shape)
        return f"({inner},)" if len(shape) == 1 else f"({inner})"
    return str(shape)


def _shapes_text(shapes: Sequence[Any] | None, arity: int | None) -> str:
    if shapes is None:
        return "?" if not arity or arity == 1 else "[" + ", ".join("?" for _ in range(arity)) + "]"
    if len(shapes) == 1:
        return _shape_text(shapes[0])
    return "[" + ", ".join(_shape_text(s) for s in shapes) + "]"


def _human(n: int) -> str:
    for unit, size in (("G", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return str(n)


# --- entry points ---------------------------------------------------------------------------------


def _io_names(structure: Any, refs: Sequence[TensorRef], word: str) -> list[str]:
    """``input 0``… or the model's dict keys (``input 'image'``) for each of ``refs``."""
    names = [f"{word} {i}" if len(refs) > 1 else word for i in range(len(refs))]
    if isinstance(structure, Mapping):
        keyed = {}
        for k, v in structure.items():
            if isinstance(v, TensorRef):
                keyed.setdefault(v, str(k))
        for i, ref in enumerate(refs):
            if ref in keyed:
                names[i] = f"{word} '{keyed[ref]}'"
    return names


def _resolve_key(options: RenderOptions, prefix: Prefix, graph: ModelGraph, ref: TensorRef) -> Key:
    layer = graph.layer(ref.layer)
    path = (*(p[0] for p in prefix), ref.layer)
    if layer.subgraph is not None and options.expands(len(prefix), path) and layer.subgraph.outputs:
        sub = layer.subgraph
        inner = sub.outputs[min(ref.tensor_index, len(sub.outputs) - 1)]
        return _resolve_key(options, (*prefix, (ref.layer, ref.node_index)), sub, inner)
    return (prefix, ref.layer, ref.node_index)


MAX_LEGEND_FINDINGS = 30
"""Findings listed with their messages under the title (the rest are counted)."""


def _findings_legend(issues: Sequence[Any]) -> str:
    """The findings' messages as lines under the title: severity, rule, where and message."""
    if not issues:
        return ""
    ranked = sorted(issues, key=lambda i: -_SEVERITY_RANK.get(getattr(i, "severity", "info"), 0))
    lines = []
    for issue in ranked[:MAX_LEGEND_FINDINGS]:
        sev = getattr(issue, "severity", "info")
        color = _SEVERITY_COLORS.get(sev, _SEVERITY_COLORS["info"])[1]
        text = f"{sev} {getattr(issue, 'rule', '?')}: {getattr(issue, 'message', '')}"
        where = getattr(issue, "where", "")
        if where:
            text += f" ({where})"
        if len(text) > 160:
            text = text[:157] + "..."
        lines.append(f"<BR/><FONT POINT-SIZE='9' COLOR='{color}'>{html_escape(text)}</FONT>")
    if len(ranked) > MAX_LEGEND_FINDINGS:
        lines.append(f"<BR/><FONT POINT-SIZE='9'>... {len(ranked) - MAX_LEGEND_FINDINGS} more</FONT>")
    return "".join(lines)


def _graph_attrs(options: RenderOptions, big: bool, label: str) -> list[str]:
    attrs = [
        f"rankdir={options.rankdir}",
        "newrank=true",
        'fontname="Helvetica"',
        "fontsize=11",
        "labelloc=t",
        "labeljust=l",
        'bgcolor="white"',
        "compound=true",
    ]
    if big:
        # Big graphs: straight-segment splines and bounded crossing minimisation keep dot fast.
        attrs += [
            "splines=polyline",
            "nodesep=0.2",
            "ranksep=0.3",
            "mclimit=0.5",
            "nslimit=4",
            "remincross=false",
        ]
    else:
        attrs += ["splines=spline", "nodesep=0.3", "ranksep=0.35"]
    if options.dpi is not None:
        attrs.append(f"dpi={options.dpi}")
    if label:
        attrs.append(f"label=<{label}>")
    return attrs


def to_dot(
    graph: ModelGraph,
    options: RenderOptions | None = None,
    *,
    issues: Iterable[Any] | None = None,
    facts: FactsFn | None = None,
    **option_values: Any,
) -> DotGraph:
    """The DOT drawing of ``graph``; ``option_values`` are :class:`RenderOptions` fields.

    ``issues`` are validation findings (``modelgraph.validate.Issue``) to colour; ``facts`` supplies
    shapes/params/MACs per call (default: :func:`default_facts`, which uses shape inference and
    stats when those modules are installed).
    """
    if options is None:
        options = RenderOptions(**option_values)
    elif option_values:
        options = replace(options, **option_values)
    if facts is None:
        facts = (
            default_facts(graph)
            if (options.show_shapes or options.show_params or options.show_dtype)
            else basic_facts(graph)
        )
    placed, unplaced = place_issues(graph, issues or ())
    output_marks: dict[Key, list[str]] = {}
    for name, ref in zip(
        _io_names(graph.output_structure, graph.outputs, "output"), graph.outputs, strict=True
    ):
        if ref.tensor_index > 0:
            name += f" [{ref.tensor_index}]"
        output_marks.setdefault(_resolve_key(options, (), graph, ref), []).append(name)
    input_marks = {
        ((), ref.layer, ref.node_index): name
        for name, ref in zip(
            _io_names(graph.input_structure, graph.inputs, "input"), graph.inputs, strict=True
        )
    }
    builder = _Builder(options, facts, placed, output_marks, input_marks)
    builder.scope(graph, (), "  ")
    big = len(builder.ids) > BIG_GRAPH
    title = ""
    if options.title:
        layers = sum(1 for _ in graph.walk())
        title = f"<B>{html_escape(graph.name)}</B> ({html_escape(graph.class_name)}) · {layers:,} layers"
        if graph.has_weights or options.show_params:
            title += f" · {graph.param_count:,} stored params" if graph.has_weights else ""
        if builder.folded:
            title += f" · {builder.folded:,} repeated calls folded"
        if unplaced:
            title += f"<BR/><FONT COLOR='#c00000'>{unplaced} finding(s) not tied to a layer</FONT>"
        title += _findings_legend(list(issues or ()))
    lines = ["digraph model {"]
    lines.append("  graph [" + " ".join(_graph_attrs(options, big, title)) + "];")
    lines.append('  node [fontname="Helvetica" fontsize=10 margin="0.12,0.04" height=0.3 penwidth=1.1];')
    lines.append(
        '  edge [arrowsize=0.6 color="#555555" fontname="Helvetica" fontsize=8 fontcolor="#333333"];'
    )
    lines.extend(builder.lines)
    for src, dst, label in builder.edges:
        attr = f" [label=<{html_escape(label)}>]" if label else ""
        lines.append(f"  {src} -> {dst}{attr};")
    lines.append("}")
    return DotGraph(
        source="\n".join(lines) + "\n",
        nodes=len(builder.ids),
        edges=len(builder.edges),
        clusters=builder.clusters,
        folded=builder.folded,
        issues_unplaced=unplaced,
        node_keys={ident: key for key, ident in builder.ids.items()},
        cluster_keys=dict(builder.cluster_keys),
        run_clusters=dict(builder.run_clusters),
        run_keys=dict(builder.run_keys),
        unfolded_runs=tuple(builder.unfolded_runs),
        node_styles=dict(builder.node_styles),
        cluster_styles=dict(builder.cluster_styles),
        edge_list=tuple(builder.edges),
        title=title,
    )


def format_for(output: str | Path | None, fmt: str | None) -> str:
    """The output format: ``fmt`` when given, else the file extension, else ``dot``."""
    if fmt:
        fmt = fmt.lower()
        if fmt not in VIEW_FORMATS:
            raise UsageError(f"unknown format {fmt!r}; expected one of {list(VIEW_FORMATS)}")
        return fmt
    if output is None or str(output) == "-":
        return "dot"
    suffix = Path(output).suffix.lower().lstrip(".")
    if suffix == "gv":
        return "dot"
    if suffix == "htm":
        return "html"
    if suffix in VIEW_FORMATS:
        return suffix
    raise UsageError(
        f"cannot tell the format from {str(output)!r}; use a .svg, .png, .pdf, .dot or .html name, or --format"
    )


def dot_binary() -> str:
    """The path of Graphviz ``dot``; :class:`ToolMissingError` (exit 4) with an install hint."""
    found = shutil.which("dot")
    if not found:
        raise ToolMissingError(f"Graphviz 'dot' was not found on PATH; {INSTALL_HINT}")
    return found


def check_layout_size(nodes: int) -> None:
    """UsageError (exit 2) for a drawing over :data:`MAX_LAYOUT_NODES` nodes, saying what to do."""
    if nodes > MAX_LAYOUT_NODES:
        raise UsageError(
            f"the drawing has {nodes:,} nodes, over the {MAX_LAYOUT_NODES:,} Graphviz dot can lay out in "
            "reasonable time; draw less (--collapse-repeats, --max-depth 0) or write DOT (--format dot)"
        )


def run_dot(source: str, fmt: str, timeout: float = DOT_TIMEOUT_SECONDS) -> bytes:
    """Lay out and draw DOT ``source`` with the ``dot`` binary, returning the ``fmt`` bytes.

    ToolMissingError (exit 4) when ``dot`` is not installed; ToolFailedError (exit 5) with dot's
    first message lines when it fails or runs past ``timeout`` seconds (it is then stopped).
    """
    if fmt == "dot":
        return source.encode("utf-8")
    binary = dot_binary()
    try:
        done = subprocess.run(
            [binary, f"-T{fmt}"],
            input=source.encode("utf-8"),
            capture_output=True,
            check=False,
            timeout=timeout,
        )
    except FileNotFoundError as exc:  # removed between which() and run()
        raise ToolMissingError(f"Graphviz 'dot' could not be started; {INSTALL_HINT}") from exc
    except subprocess.TimeoutExpired:
        raise ToolFailedError(
            f"Graphviz dot ran past its {timeout:g} s limit drawing {fmt} and was stopped; draw less "
            "(--collapse-repeats, --max-depth 0) or write DOT (--format dot)"
        ) from None
    if done.returncode != 0 or not done.stdout:
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ToolFailedError(
            f"Graphviz dot failed to draw {fmt} (exit {done.returncode}): "
            + ("; ".join(line[:200] for line in detail[:3]) or "no message")
        )
    return done.stdout


def render(
    graph: ModelGraph,
    output: str | Path | None = None,
    *,
    format: str | None = None,  # noqa: A002 - the natural name, like graphviz.render(format=)
    options: RenderOptions | None = None,
    issues: Iterable[Any] | None = None,
    facts: FactsFn | None = None,
    **option_values: Any,
) -> bytes:
    """Draw ``graph`` as DOT/SVG/PNG/PDF bytes; with ``output`` (a path) also write them there.

    The format is ``format``, else ``output``'s extension, else DOT. SVG, PNG and PDF need the
    Graphviz ``dot`` binary (:class:`ToolMissingError` otherwise); DOT needs nothing.
    """
    fmt = format_for(output, format)
    if fmt != "dot":
        dot_binary()  # fail before the work
    drawing = to_dot(graph, options, issues=issues, facts=facts, **option_values)
    if fmt != "dot":
        check_layout_size(drawing.nodes)
    payload = run_dot(drawing.source, fmt)
    if output is not None and str(output) != "-":
        Path(output).write_bytes(payload)
    return payload


make_callable(__name__, __name__, "render")
