"""One self-contained HTML file for a model (``render -o model.html``) or a diff (``diff -o diff.html``).

The page needs no network: the stylesheet (``html_view.css``) and the script (``html_view.js``, plain
JavaScript written for this page) are inlined, and everything the page shows is one JSON document in a
``<script type="application/json">`` tag:

* ``views``: Graphviz drawings (SVG text) of the graph, one per *view state*. A state is the set of
  nested models shown expanded plus whether repeated blocks are folded; Graphviz lays each state out
  here, at render time, and the page swaps drawings when a nested model is opened or closed (see
  :func:`view_states` for which states are laid out). Each drawing maps Graphviz's node titles
  (``n17``) and cluster titles to layer indices; the SVG's node groups also carry ``data-layer`` /
  ``data-call`` attributes (added by :func:`_tag_svg`).
* ``layers``: one record per layer (nested layers included, in :meth:`ModelGraph.walk` order): class,
  config, shapes, dtypes, params, MACs, weight statistics, inbound/outbound layers and findings.

Escaping: the JSON is written ASCII-only with ``<``, ``>`` and ``&`` as ``\\u003c``/``\\u003e``/``\\u0026``,
so no layer name (``</script>``, quotes, control or bidi characters) can end the script element; the
script puts file strings into the page only as text (``textContent``), shows control and bidi
characters as ``\\uXXXX``, and never builds markup from them. Graphviz's SVG escapes the labels itself.

Weight statistics (min/max/mean/std) are computed here, in float64, for weights of up to
:data:`WEIGHT_STATS_MAX_ELEMENTS` elements each and :data:`WEIGHT_STATS_BUDGET` elements in all;
larger weights are listed with their name, shape and dtype and a note saying the statistics were not
computed, so a multi-gigabyte model renders in bounded time and memory.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from modelgraph.graph import Layer, ModelGraph

WEIGHT_STATS_MAX_ELEMENTS = 4_000_000
"""Largest weight (elements) whose statistics are computed; larger ones are listed without them."""

WEIGHT_STATS_BUDGET = 64_000_000
"""Elements read for statistics over the whole model; weights past the budget are listed without them."""

PROGRESS_NODES = 200
"""Drawings with more nodes than this report their layout steps to the ``progress`` callback."""

MAX_RUN_STATES = 12
"""With ``--collapse-repeats``, each of up to this many repeated blocks also gets a drawing of its own
unfolded (the others folded); past that, unfolding one block unfolds them all."""

MAX_NESTED_STATES = 16
"""Up to this many nested-model combinations are laid out; beyond, each model alone and all together."""

_ASSETS = Path(__file__).resolve().parent


# --- escaping -------------------------------------------------------------------------------------


def script_json(data: Any) -> str:
    """``data`` as JSON that is safe inside a ``<script>`` element: ASCII only, ``< > &`` escaped."""
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"), default=str, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def html_attr(text: str) -> str:
    """``text`` escaped for a double-quoted HTML/SVG attribute."""
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def _jsonable(value: Any) -> Any:
    """A config value as JSON data (non-finite floats as strings; anything else by ``str``)."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float):
        return value if np.isfinite(value) else str(value)
    if isinstance(value, bool | int | str) or value is None:
        return value
    return str(value)


# --- weights --------------------------------------------------------------------------------------


class _Budget:
    def __init__(self, total: int) -> None:
        self.left = total


def weight_summary(weight: Any, budget: _Budget) -> dict[str, Any]:
    """Name, shape, dtype and (within the size caps) min/max/mean/std of one stored weight."""
    record: dict[str, Any] = {
        "name": weight.name,
        "shape": list(weight.shape),
        "dtype": weight.dtype,
        "size": weight.size,
    }
    if weight.size > WEIGHT_STATS_MAX_ELEMENTS:
        record["note"] = (
            f"statistics not computed: {weight.size:,} elements (cap {WEIGHT_STATS_MAX_ELEMENTS:,})"
        )
        return record
    if weight.size > budget.left:
        record["note"] = "statistics not computed: the model's statistics budget is spent"
        return record
    budget.left -= weight.size
    try:
        values = np.asarray(weight.read())
        if values.dtype.kind not in "biuf":
            record["note"] = f"no statistics for {values.dtype} values"
            return record
        data = values.astype(np.float64, copy=False).ravel()
    except Exception as exc:  # noqa: BLE001 - a weight that cannot be read is shown, not fatal
        record["note"] = f"could not be read: {type(exc).__name__}"
        return record
    finite = data[np.isfinite(data)]
    if finite.size != data.size:
        record["nonfinite"] = int(data.size - finite.size)
    if finite.size:
        record.update(
            {
                k: _round(v)
                for k, v in (
                    ("min", finite.min()),
                    ("max", finite.max()),
                    ("mean", finite.mean()),
                    ("std", finite.std()),
                )
            }
        )
    return record


def _round(value: Any) -> float:
    """A statistic to 6 significant digits (what the panel shows; keeps the page small)."""
    return float(f"{float(value):.6g}")


# --- per-layer records ----------------------------------------------------------------------------


def _shape(shape: Any) -> Any:
    if shape is None:
        return None
    if isinstance(shape, list | tuple):
        return [None if d is None else (d if isinstance(d, int) else str(d)) for d in shape]
    return str(shape)


def layer_records(
    graph: ModelGraph, issues: Iterable[Any] = (), weight_stats: bool = True
) -> list[dict[str, Any]]:
    """One JSON record per layer of ``graph`` (nested layers included, ``walk`` order)."""
    from modelgraph.render import Prefix, default_facts, place_issues

    walked = list(graph.walk())
    index = {path: i for i, (path, _) in enumerate(walked)}
    placed, _ = place_issues(graph, issues)
    facts_of = default_facts(graph)
    stats_by_path: dict[tuple[str, ...], Any] = {}
    try:
        from modelgraph.stats import layer_stats

        stats_by_path = {row.path: row for row in layer_stats(graph)}
    except Exception:  # noqa: BLE001 - the panel shows "?" for what cannot be computed
        stats_by_path = {}
    budget = _Budget(WEIGHT_STATS_BUDGET)
    records: list[dict[str, Any]] = []

    def scope(g: ModelGraph, prefix: Prefix) -> None:
        path = tuple(p[0] for p in prefix)
        inbound: dict[str, list[str]] = {}
        outbound: dict[str, list[str]] = {}
        for node in g.nodes:
            for ref in node.inputs:
                inbound.setdefault(node.layer, []).append(ref.layer)
                outbound.setdefault(ref.layer, []).append(node.layer)
        for layer in g.layers:
            lpath = (*path, layer.name)
            calls = []
            for node in g.nodes_of(layer.name):
                facts = facts_of(prefix, layer, node)
                calls.append(
                    {
                        "inputs": [str(r) for r in node.inputs],
                        "input_shapes": [_shape(s) for s in facts.input_shapes or ()],
                        "output_shapes": [_shape(s) for s in facts.output_shapes or ()],
                        "output_dtypes": list(facts.output_dtypes or ()),
                        "macs": facts.macs,
                    }
                )
            row = stats_by_path.get(lpath)
            record: dict[str, Any] = {
                "name": layer.name,
                "path": list(lpath),
                "class": layer.class_name,
                "kind": layer.kind,
                "parent": index[path] if path else -1,
                "trainable": layer.trainable,
                "config": _jsonable(layer.config),
                "calls": calls,
                "params": row.params if row is not None else None,
                "trainable_params": row.trainable_params if row is not None else None,
                "macs": row.macs if row is not None else None,
                "weights": [
                    weight_summary(w, budget)
                    if weight_stats
                    else {"name": w.name, "shape": list(w.shape), "dtype": w.dtype, "size": w.size}
                    for w in layer.own_weights  # a nested model's are shown on its layers
                ],
                "inbound": _indices(index, path, inbound.get(layer.name, ())),
                "outbound": _indices(index, path, outbound.get(layer.name, ())),
                "findings": [
                    {
                        "severity": str(getattr(i, "severity", "")),
                        "rule": str(getattr(i, "rule", "")),
                        "message": str(getattr(i, "message", "")),
                    }
                    for i in placed.get(lpath, ())
                ],
            }
            if layer.subgraph is not None:
                record["nested_layers"] = sum(1 for _ in layer.subgraph.walk())
            records.append(record)
            if layer.subgraph is not None:
                scope(layer.subgraph, (*prefix, (layer.name, 0)))

    scope(graph, ())
    # records were appended in scope order (a model's layers, then its nested ones); put them in walk order
    by_path = {tuple(r["path"]): r for r in records}
    return [by_path[path] for path, _ in walked]


def _indices(index: Mapping[tuple[str, ...], int], path: tuple[str, ...], names: Iterable[str]) -> list[int]:
    found = []
    for name in dict.fromkeys(names):
        i = index.get((*path, name))
        if i is not None:
            found.append(i)
    return found


# --- view states ----------------------------------------------------------------------------------


def nested_paths(graph: ModelGraph) -> list[tuple[str, ...]]:
    """Layer paths of every nested model, in walk order."""
    return [path for path, layer in graph.walk() if layer.subgraph is not None]


def view_states(paths: Sequence[tuple[str, ...]]) -> list[frozenset[tuple[str, ...]]]:
    """The sets of expanded nested models to lay out.

    A set is meaningful only when every expanded model's enclosing nested models are expanded too.
    All such sets are laid out when there are at most :data:`MAX_NESTED_STATES`; otherwise the
    collapsed view, each top-level nested model alone (with what it contains expanded) and everything
    expanded: the page shows the nearest laid-out state and says so.
    """
    known = set(paths)

    def closed(subset: Iterable[tuple[str, ...]]) -> bool:
        chosen = set(subset)
        return all(p[:k] in chosen for p in chosen for k in range(1, len(p)) if p[:k] in known)

    states: list[frozenset[tuple[str, ...]]] = []
    if len(paths) <= 12:
        for size in range(len(paths) + 1):
            for subset in combinations(paths, size):
                if closed(subset):
                    states.append(frozenset(subset))
                    if len(states) > MAX_NESTED_STATES:
                        break
            if len(states) > MAX_NESTED_STATES:
                break
    if len(states) <= MAX_NESTED_STATES and len(paths) <= 12:
        return states
    tops = [p for p in paths if not any(p[:k] in known for k in range(1, len(p)))]
    states = [frozenset()]
    for top in tops:
        states.append(frozenset(p for p in paths if p[: len(top)] == top))
    states.append(frozenset(paths))
    return list(dict.fromkeys(states))


_COMMENT = re.compile(r"<!--.*?-->\n?", re.S)
_TOOLTIP_TAIL = re.compile(r'&#10;[^"]*"')
_NODE_G = re.compile(r'<g id="(?:node|a_node)\d+" class="node">\s*<title>(n\d+)</title>')
_CLUSTER_G = re.compile(r'<g id="clust\d+" class="cluster">\s*<title>(cluster_r?\d+)</title>')


def run_id(key: Any) -> str:
    """A repeated block's name in the page: its first call as ``outer/layer:call``."""
    prefix, layer, call = key
    return "/".join([*(p[0] for p in prefix), layer]) + f":{call}"


def _tag_svg(
    svg: str,
    nodes: Mapping[str, tuple[int, int]],
    clusters: Mapping[str, dict[str, Any]],
    runs: Mapping[str, str] | None = None,
) -> str:
    """Graphviz's SVG with the XML prologue dropped and layer ids on node and cluster groups."""
    start = svg.find("<svg")
    svg = svg[start:] if start >= 0 else svg
    svg = _COMMENT.sub("", svg)
    svg = _TOOLTIP_TAIL.sub('"', svg)  # hover shows the first line; the panel shows the rest

    def node(match: re.Match[str]) -> str:
        title = match.group(1)
        layer, call = nodes.get(title, (-1, 0))
        extra = f' data-run-id="{html_attr(runs[title])}"' if runs and title in runs else ""
        return (
            f'<g id="{title}" class="node" data-layer="{layer}" data-call="{call}"{extra}>'
            + match.group(0)[match.group(0).index("<title>") :]
        )

    def cluster(match: re.Match[str]) -> str:
        title = match.group(1)
        info = clusters.get(title, {})
        attrs = f' data-layer="{info["layer"]}"' if "layer" in info else ""
        if "run" in info:
            attrs += f' data-run="{info["run"]}"'
        if runs and title in runs:
            attrs += f' data-run-id="{html_attr(runs[title])}"'
        return f'<g id="{title}" class="cluster"{attrs}>' + match.group(0)[match.group(0).index("<title>") :]

    return _CLUSTER_G.sub(cluster, _NODE_G.sub(node, svg))


def _layer_index(graph: ModelGraph) -> dict[tuple[str, ...], int]:
    return {path: i for i, (path, _) in enumerate(graph.walk())}


def model_views(
    graph: ModelGraph,
    options: Any,
    issues: Sequence[Any] = (),
    progress: Callable[[str], None] | None = None,
) -> tuple[list[dict[str, Any]], list[int]]:
    """The laid-out drawings of ``graph`` (one per view state) and the layer indices of nested models.

    The drawings are laid out here in Python (:mod:`modelgraph.html_svg`); Graphviz is not needed.
    ``progress`` receives a line of text per step of a big drawing.
    """
    from modelgraph.html_svg import drawing_svg
    from modelgraph.render import to_dot

    index = _layer_index(graph)
    paths = nested_paths(graph)
    initial = frozenset(p for p in paths if options.expands(len(p) - 1))
    views = []
    # (expanded nested models, repeats folded, the one run drawn unfolded among folded ones)
    states: list[tuple[frozenset[tuple[str, ...]], bool, Any]] = []
    for state in view_states(paths):
        states.append((state, False, None))
        if options.collapse_repeats:
            states.append((state, True, None))
            folded = to_dot(graph, replace(options, expand_paths=state, collapse_repeats=True), issues=issues)
            runs = list(dict.fromkeys(folded.run_keys.values()))
            states.extend((state, True, run) for run in runs[:MAX_RUN_STATES])
    for number, (state, fold, unfold) in enumerate(states, 1):
        opts = replace(
            options,
            expand_paths=state,
            collapse_repeats=fold,
            unfold_runs=frozenset([unfold]) if unfold is not None else frozenset(),
            title=True,
        )
        drawing = to_dot(graph, opts, issues=issues)
        step = None
        if progress is not None and drawing.nodes > PROGRESS_NODES:
            where = f"view {number}/{len(states)}: " if len(states) > 1 else ""

            def step(text: str, where: str = where) -> None:
                progress(where + text)

        nodes = {}
        for ident, (prefix, name, call) in drawing.node_keys.items():
            nodes[ident] = (index.get((*(p[0] for p in prefix), name), -1), call)
        clusters: dict[str, dict[str, Any]] = {}
        for title, (prefix, name, _call) in drawing.cluster_keys.items():
            clusters[title] = {"layer": index.get((*(p[0] for p in prefix), name), -1)}
        for title, ((prefix, name, _call), count) in drawing.run_clusters.items():
            clusters[title] = {"layer": index.get((*(p[0] for p in prefix), name), -1), "run": count}
        svg = drawing_svg(drawing, opts.rankdir, step)
        runs = {title: run_id(key) for title, key in drawing.run_keys.items()}
        for ident, style in drawing.node_styles.items():
            # a node drawn inside a folded block's cluster belongs to that block
            cluster, seen = style.cluster, 0
            while cluster is not None and ident not in runs and seen < 1000:
                if cluster in runs:
                    runs[ident] = runs[cluster]
                cluster_style = drawing.cluster_styles.get(cluster)
                cluster, seen = (cluster_style.parent if cluster_style else None), seen + 1
        views.append(
            {
                "expanded": sorted(index[p] for p in state),
                "folded": fold,
                "unfolded": [run_id(unfold)] if unfold is not None else [],
                "initial": state == initial and fold == options.collapse_repeats and unfold is None,
                "svg": _tag_svg(svg, nodes, clusters, runs),
            }
        )
    return views, [index[p] for p in paths]


# --- the page -------------------------------------------------------------------------------------


def page(data: Mapping[str, Any], title: str) -> str:
    """The HTML document: inline style and script, ``data`` as the JSON blob."""
    css = (_ASSETS / "html_view.css").read_text(encoding="utf-8")
    js = (_ASSETS / "html_view.js").read_text(encoding="utf-8")
    safe_title = title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    safe_title = "".join(ch if ch.isprintable() else "\ufffd" for ch in safe_title)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n"
        f"<title>{safe_title}</title>\n<style>\n{css}</style>\n</head>\n<body>\n"
        f'<script type="application/json" id="modelgraph-data">{script_json(data)}</script>\n'
        f"<script>\n{js}</script>\n</body></html>\n"
    )


def model_page(
    graph: ModelGraph,
    options: Any,
    *,
    issues: Sequence[Any] = (),
    source: str = "",
    weight_stats: bool = True,
    progress: Callable[[str], None] | None = None,
    overlays: Sequence[Any] = (),
    inputs: Sequence[str] = (),
) -> str:
    """The HTML view of ``graph`` drawn with ``options`` (a ``RenderOptions``) and its findings;
    ``progress`` receives a line of text per step of a big model. ``overlays`` are
    :class:`modelgraph.overlays.OverlaySpec` s (the run-based ones run the model on ``inputs``,
    ``--input`` values)."""
    from modelgraph._version import __version__
    from modelgraph.overlays import build_overlays

    views, nested = model_views(graph, options, issues, progress)
    if progress is not None and len(views) and sum(1 for _ in graph.walk()) > PROGRESS_NODES:
        progress("collecting layer records and weight statistics")
    records = layer_records(graph, issues, weight_stats)
    if overlays and progress is not None:
        progress("computing overlays: " + ", ".join(s.kind for s in overlays))
    built = build_overlays(graph, records, overlays, inputs)
    data = {
        "kind": "model",
        "title": graph.name,
        "class": graph.class_name,
        "source": source,
        "version": __version__,
        "keras_version": getattr(graph, "keras_version", None),
        "params": graph.param_count if graph.has_weights else None,
        "weight_stats_cap": WEIGHT_STATS_MAX_ELEMENTS,
        "layers": records,
        "overlays": [o.as_json() for o in built],
        "inputs": _io_names(graph.inputs),
        "outputs": _io_names(graph.outputs),
        "nested": nested,
        "views": views,
        "findings": [
            {
                "severity": str(getattr(i, "severity", "")),
                "rule": str(getattr(i, "rule", "")),
                "message": str(getattr(i, "message", "")),
                "where": str(getattr(i, "where", "")),
            }
            for i in issues
        ],
    }
    return page(data, f"{graph.name} · modelgraph")


def _io_names(refs: Sequence[Any]) -> list[str]:
    """The layer names of a model's input or output tensors, in order."""
    return [str(getattr(r, "layer", r)) for r in refs]


# --- diff -----------------------------------------------------------------------------------------


def diff_page(gd: Any, source_a: str = "", source_b: str = "") -> str:
    """The HTML view of a diff (``modelgraph.diff.GraphDiff``): the joint drawing, a legend, and per
    layer its status, config, wiring and weight changes, and both sides' configs."""
    from modelgraph._version import __version__
    from modelgraph.diff import DIFF_LEGEND, to_dot_with_ids
    from modelgraph.html_svg import drawing_svg
    from modelgraph.render import RenderOptions, to_dot

    _, ids, drawing = to_dot_with_ids(gd)
    rep = gd.report
    entries: dict[tuple[str, str], list[Any]] = {}
    top_pairs = {m.a[0]: m.b[0] for m in rep.alignment if len(m.a) == 1}
    for e in rep.layers:
        if e.status == "removed":
            key = ("p", top_pairs[e.path[0]]) if e.path[0] in top_pairs else ("a", e.path[0])
        else:
            top = (e.path_b or e.path)[0]
            key = ("p", top) if top in top_pairs.values() else ("b", top)
        entries.setdefault(key, []).append(e.model_dump(mode="json"))
    layers: list[dict[str, Any]] = []
    nodes: dict[str, tuple[int, int]] = {}
    record_of: dict[tuple[str, str], int] = {}
    for title, (key, status) in ids.items():
        if key in record_of:  # another call of a layer called several times
            first = record_of[key]
            nodes[title] = (first, sum(1 for v in nodes.values() if v[0] == first))
            continue
        record_of[key] = len(layers)
        side, name = key
        lb: Layer | None = gd.b.layer(name) if side in ("p", "b") and gd.b.has_layer(name) else None
        a_name = next((a for a, b in top_pairs.items() if b == name), None) if side == "p" else name
        la: Layer | None = (
            gd.a.layer(a_name) if side in ("p", "a") and a_name and gd.a.has_layer(a_name) else None
        )
        layer = lb or la
        assert layer is not None
        nodes[title] = (len(layers), 0)
        layers.append(
            {
                "name": layer.name,
                "path": [layer.name],
                "class": layer.class_name,
                "kind": layer.kind,
                "parent": -1,
                "status": status,
                "name_a": la.name if la is not None else None,
                "config_a": _jsonable(la.config) if la is not None else None,
                "config_b": _jsonable(lb.config) if lb is not None else None,
                "changes": entries.get(key, []),
                "inbound": [],
                "outbound": [],
                "weights": [],
                "findings": [],
                "calls": [],
            }
        )
    by_name = {(r["name"]): i for i, r in enumerate(layers)}
    for g in (gd.a, gd.b):
        for node in g.nodes:
            dst = by_name.get(node.layer)
            for ref in node.inputs:
                src = by_name.get(ref.layer)
                if src is None or dst is None:
                    continue
                if src not in layers[dst]["inbound"]:
                    layers[dst]["inbound"].append(src)
                if dst not in layers[src]["outbound"]:
                    layers[src]["outbound"].append(dst)
    svg = drawing_svg(drawing)
    panes = []
    for side, graph in (("A", gd.a), ("B", gd.b)):
        # each model drawn on its own (top level), its nodes tied to the joint records
        own = to_dot(graph, RenderOptions(title=False))
        tie: dict[str, tuple[int, int]] = {}
        for ident, (prefix, name, call) in own.node_keys.items():
            if prefix:
                continue
            if side == "A":
                key = ("p", top_pairs[name]) if name in top_pairs else ("a", name)
            else:
                key = ("p", name) if name in top_pairs.values() else ("b", name)
            if key in record_of:
                tie[ident] = (record_of[key], call)
        panes.append({"side": side, "name": graph.name, "svg": _tag_svg(drawing_svg(own), tie, {})})
    changes = []
    for key, found in entries.items():
        i = record_of.get(key)
        if i is None:
            continue
        for entry in found:
            changes.append({"layer": i, **_change_summary(entry)})
    changes.sort(key=lambda c: (c["layer"], len(c["path"])))
    data = {
        "kind": "diff",
        "changes": changes,
        "panes": panes,
        "title": f"{rep.a.name} → {rep.b.name}",
        "source": f"{source_a} → {source_b}",
        "version": __version__,
        "verdict": rep.verdict,
        "legend": DIFF_LEGEND,
        "layers": layers,
        "nested": [],
        "views": [{"expanded": [], "folded": False, "initial": True, "svg": _tag_svg(svg, nodes, {})}],
        "findings": [],
        "notes": list(rep.notes),
    }
    return page(data, f"diff {rep.a.name} → {rep.b.name} · modelgraph")


def _change_summary(entry: Mapping[str, Any]) -> dict[str, Any]:
    """One line of the diff page's list of changes: where, what kind, and what changed."""
    parts = []
    if entry.get("old_class_name"):
        parts.append(f"class {entry['old_class_name']} → {entry.get('class_name')}")
    if entry.get("config"):
        keys = [c["key"] for c in entry["config"]]
        parts.append(
            "config " + ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
        )
    if entry.get("wiring"):
        parts.append("inputs rewired")
    for w in entry.get("weights") or ():
        if w.get("status") == "values" and w.get("max_abs") is not None:
            parts.append(f"{w['name']}: max |Δ| {w['max_abs']:.3g}")
        else:
            parts.append(f"{w['name']}: {w.get('status')}")
    rename = entry.get("rename")
    if rename and not rename.get("auto"):
        parts.append(f"renamed {rename.get('old')} → {rename.get('new')}")
    return {
        "path": list(entry.get("path") or []),
        "status": entry.get("status"),
        "marker": entry.get("marker"),
        "what": "; ".join(parts) or entry.get("status", ""),
    }
