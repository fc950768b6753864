"""The HTML view's drawing as SVG, laid out in Python (:mod:`modelgraph.layout`), no Graphviz needed.

The input is the same :class:`~modelgraph.render.DotGraph` the DOT output is written from: its
nodes' and clusters' styles (label, shape, colours) and its edges. The SVG has the structure the
page's script expects from a Graphviz drawing: ``<g class="node">`` / ``<g class="cluster">`` /
``<g class="edge">`` groups, each with a ``<title>`` naming the DOT node, cluster or edge (``n17``,
``cluster_3``, ``n3->n4``), so the same page works on either.

Labels are Graphviz HTML-like labels written by :mod:`modelgraph.render` (``<B>``, ``<I>``,
``<FONT POINT-SIZE= COLOR=>``, ``<BR/>``, entities): they are read back into lines of styled runs
and written as SVG text, every character escaped; control, invisible and bidi characters are shown
as ``\\uXXXX``.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from modelgraph.layout import Cluster, Layout, layered_layout

FONT = "Helvetica,Arial,sans-serif"
NODE_FONT = 10.0
SMALL_FONT = 9.0
MARGIN_X = 8.6
"""Space left and right of a node's label (Graphviz's 0.12 inch)."""
MARGIN_Y = 4.0
MIN_WIDTH = 54.0
MIN_HEIGHT = 21.6
"""A node's least size (Graphviz's defaults: 0.75 by 0.3 inch)."""
EDGE_COLOR = "#555555"

_INVISIBLE = re.compile(
    r"[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]"
)


@dataclass(frozen=True)
class Run:
    """A piece of label text in one style."""

    text: str
    size: float
    bold: bool = False
    italic: bool = False
    color: str | None = None


_TAG = re.compile(r"<(/?)(B|I|FONT|BR)\b([^>]*)>", re.I)
_ATTR = re.compile(r"""(POINT-SIZE|COLOR)\s*=\s*['"]([^'"]*)['"]""", re.I)


def label_lines(label: str, size: float = NODE_FONT) -> list[list[Run]]:
    """The lines of a Graphviz HTML-like label (as :mod:`modelgraph.render` writes them)."""
    lines: list[list[Run]] = [[]]
    bold = italic = 0
    fonts: list[tuple[float, str | None]] = [(size, None)]
    pos = 0

    def text(raw: str) -> None:
        if raw:
            value = html.unescape(raw).replace("\\\\", "\\")
            cur_size, color = fonts[-1]
            lines[-1].append(Run(value, cur_size, bold > 0, italic > 0, color))

    for match in _TAG.finditer(label):
        text(label[pos : match.start()])
        pos = match.end()
        closing, tag = match.group(1) == "/", match.group(2).upper()
        if tag == "BR":
            lines.append([])
        elif tag == "B":
            bold += -1 if closing else 1
        elif tag == "I":
            italic += -1 if closing else 1
        elif tag == "FONT":
            if closing:
                if len(fonts) > 1:
                    fonts.pop()
            else:
                attrs = {k.upper(): v for k, v in _ATTR.findall(match.group(3))}
                cur_size, color = fonts[-1]
                size_text = attrs.get("POINT-SIZE", "")
                if re.fullmatch(r"\d+(\.\d+)?", size_text):
                    cur_size = float(size_text)
                fonts.append((cur_size, attrs.get("COLOR", color)))
    text(label[pos:])
    return lines


# Helvetica advance widths (per em), by character class: close enough to size boxes; the browser
# draws the text centred in them.
_NARROW = set("il.,:;'|!`")
_THIN = set('fjtrI[]()/ -{}"')
_WIDE = set("mwMW%@")


def char_width(ch: str) -> float:
    """Advance width of ``ch`` in ems (Helvetica, approximately)."""
    if ch in _NARROW:
        return 0.25
    if ch in _THIN:
        return 0.31
    if ch in _WIDE:
        return 0.86
    if ch.isupper():
        return 0.69
    if ch.isdigit() or ch == "_":
        return 0.556
    if ord(ch) < 128:
        return 0.54
    if ord(ch) >= 0x2E80:  # CJK and wider scripts
        return 1.0
    return 0.62


def visible(text: str) -> str:
    """Control, invisible and bidi characters as ``\\uXXXX``."""
    return _INVISIBLE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def run_width(run: Run) -> float:
    """Width of a run in points."""
    return sum(char_width(c) for c in visible(run.text)) * run.size * (1.07 if run.bold else 1.0)


def lines_size(lines: list[list[Run]]) -> tuple[float, float]:
    """(width, height) of label lines in points."""
    width = max((sum(run_width(r) for r in line) for line in lines), default=0.0)
    height = sum(_line_height(line) for line in lines)
    return width, height


def _line_height(line: list[Run]) -> float:
    return max((r.size for r in line), default=SMALL_FONT) * 1.22


def _esc(text: str) -> str:
    return (
        visible(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


def _text(lines: list[list[Run]], x: float, top: float, anchor: str) -> str:
    """SVG text elements for ``lines`` starting at ``top``; ``anchor`` is ``middle`` or ``start``."""
    out = []
    y = top
    for line in lines:
        h = _line_height(line)
        y += h
        if not line:
            continue
        spans = []
        for r in line:
            attrs = f' font-size="{r.size:g}"'
            if r.bold:
                attrs += ' font-weight="bold"'
            if r.italic:
                attrs += ' font-style="italic"'
            if r.color:
                attrs += f' fill="{_esc(r.color)}"'
            spans.append(f"<tspan{attrs}>{_esc(r.text)}</tspan>")
        out.append(f'<text text-anchor="{anchor}" x="{x:.1f}" y="{y - h * 0.25:.1f}">{"".join(spans)}</text>')
    return "".join(out)


def _rounded(x0: float, y0: float, x1: float, y1: float, r: float) -> str:
    r = min(r, (x1 - x0) / 2, (y1 - y0) / 2)
    return (
        f"M{x0 + r:.1f},{y0:.1f}H{x1 - r:.1f}Q{x1:.1f},{y0:.1f} {x1:.1f},{y0 + r:.1f}"
        f"V{y1 - r:.1f}Q{x1:.1f},{y1:.1f} {x1 - r:.1f},{y1:.1f}H{x0 + r:.1f}"
        f"Q{x0:.1f},{y1:.1f} {x0:.1f},{y1 - r:.1f}V{y0 + r:.1f}Q{x0:.1f},{y0:.1f} {x0 + r:.1f},{y0:.1f}Z"
    )


def _edge_path(points: list[tuple[float, float]], horizontal: bool) -> str:
    """A smooth path through ``points``: cubic segments leaving and entering along the rank axis."""
    (x, y), rest = points[0], points[1:]
    parts = [f"M{x:.1f},{y:.1f}"]
    for nx, ny in rest:
        if horizontal:
            mx = (x + nx) / 2
            parts.append(f"C{mx:.1f},{y:.1f} {mx:.1f},{ny:.1f} {nx:.1f},{ny:.1f}")
        else:
            my = (y + ny) / 2
            parts.append(f"C{x:.1f},{my:.1f} {nx:.1f},{my:.1f} {nx:.1f},{ny:.1f}")
        x, y = nx, ny
    return "".join(parts)


def _arrow(points: list[tuple[float, float]], horizontal: bool) -> tuple[list[tuple[float, float]], str]:
    """The edge shortened by the arrowhead, and the arrowhead polygon at its end."""
    (px, py), (x, y) = points[-2], points[-1]
    if horizontal:
        dx, dy = (1.0 if x >= px else -1.0), 0.0
    else:
        dx, dy = 0.0, (1.0 if y >= py else -1.0)
    length, half = 6.0, 3.0
    bx, by = x - dx * length, y - dy * length
    head = (
        f"{x:.1f},{y:.1f} {bx - dy * half:.1f},{by + dx * half:.1f} {bx + dy * half:.1f},{by - dx * half:.1f}"
    )
    return [*points[:-1], (bx, by)], head


def drawing_svg(drawing: Any, rankdir: str = "TB", progress: Callable[[str], None] | None = None) -> str:
    """The SVG of ``drawing`` (a :class:`modelgraph.render.DotGraph`), laid out without Graphviz."""
    node_lines = {ident: label_lines(style.label) for ident, style in drawing.node_styles.items()}
    sizes: dict[str, tuple[float, float]] = {}
    for ident, style in drawing.node_styles.items():
        w, h = lines_size(node_lines[ident])
        w, h = max(w + 2 * MARGIN_X, MIN_WIDTH), max(h + 2 * MARGIN_Y, MIN_HEIGHT)
        if style.shape == "ellipse":
            w, h = w * 1.3, h * 1.25
        sizes[ident] = (w, h)
    cluster_lines = {name: label_lines(style.label) for name, style in drawing.cluster_styles.items()}
    clusters = {}
    for name, style in drawing.cluster_styles.items():
        w, h = lines_size(cluster_lines[name])
        clusters[name] = Cluster(w + 4, h + 2, style.parent)
    if progress:
        progress(f"laying out {len(sizes):,} nodes and {len(drawing.edge_list):,} edges")
    layout = layered_layout(
        sizes,
        [(a, b) for a, b, _ in drawing.edge_list],
        {ident: style.cluster for ident, style in drawing.node_styles.items()},
        clusters,
        rankdir,
    )
    if progress:
        progress(f"laid out in {layout.ranks:,} ranks; writing the SVG")
    return _write(drawing, layout, node_lines, cluster_lines, rankdir in ("LR", "RL"))


def _write(
    drawing: Any,
    layout: Layout,
    node_lines: dict[str, list[list[Run]]],
    cluster_lines: dict[str, list[list[Run]]],
    horizontal: bool,
) -> str:
    title_lines = label_lines(drawing.title, 11.0) if drawing.title else []
    tw, th = lines_size(title_lines)
    top = th + 6 if title_lines else 0.0
    width, height = max(layout.width, tw + 16), layout.height + top
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}pt" height="{height:.0f}pt" '
        f'viewBox="0 0 {width:.1f} {height:.1f}" font-family="{FONT}">',
        f'<g id="graph0" class="graph" transform="translate(0 {top:.1f})">',
    ]
    if title_lines:
        out.append(f'<g class="title">{_text(title_lines, 8.0, -top, "start")}</g>')
    # clusters, outermost first so inner ones draw on top
    depth: dict[str, int] = {}
    for name, style in drawing.cluster_styles.items():
        d, p = 0, style.parent
        while p is not None and d < 1000:
            d, p = d + 1, drawing.cluster_styles[p].parent if p in drawing.cluster_styles else None
        depth[name] = d
    for k, name in enumerate(sorted(layout.clusters, key=lambda c: depth.get(c, 0))):
        style = drawing.cluster_styles[name]
        x0, y0, x1, y1 = layout.clusters[name]
        fill = style.fill or "none"
        dash = ' stroke-dasharray="5,2"' if style.dashed else ""
        out.append(
            f'<g id="clust{k + 1}" class="cluster">\n<title>{name}</title>'
            f'<path fill="{fill}" stroke="{style.border}" stroke-width="{style.penwidth:g}"{dash} '
            f'd="{_rounded(x0, y0, x1, y1, 6)}"/>'
            f"{_text(cluster_lines[name], x0 + 6, y0 + 2, 'start')}</g>"
        )
    labels = {(a, b): label for a, b, label in drawing.edge_list}
    for k, (a, b, points) in enumerate(layout.edges):
        if len(points) < 2:
            continue
        points, head = _arrow(points, horizontal)
        label = labels.get((a, b), "")
        color, dashed = drawing.edge_colors.get((a, b), (EDGE_COLOR, False))
        dash = ' stroke-dasharray="5,3"' if dashed else ""
        extra = ""
        if label:
            mx, my = points[len(points) // 2]
            extra = _text(label_lines(label, 8.0), mx + 4, my - 8, "start")
        out.append(
            f'<g id="edge{k + 1}" class="edge">\n<title>{a}&#45;&gt;{b}</title>'
            f'<path fill="none" stroke="{color}"{dash} d="{_edge_path(points, horizontal)}"/>'
            f'<polygon fill="{color}" stroke="{color}" points="{head}"/>{extra}</g>'
        )
    for k, (ident, style) in enumerate(drawing.node_styles.items()):
        cx, cy = layout.centres[ident]
        w, h = layout.sizes[ident]
        x0, y0, x1, y1 = cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2
        stroke = f'fill="{style.fill}" stroke="{style.border}" stroke-width="{style.penwidth or 1.1:g}"'
        if style.shape == "ellipse":
            shape = f'<ellipse {stroke} cx="{cx:.1f}" cy="{cy:.1f}" rx="{w / 2:.1f}" ry="{h / 2:.1f}"/>'
        elif style.shape == "box3d":
            shape = (
                f'<path {stroke} d="M{x0 + 4:.1f},{y0 - 4:.1f}H{x1 + 4:.1f}V{y1 - 4:.1f}H{x1:.1f}V{y0:.1f}'
                f'H{x0:.1f}Z"/><path {stroke} d="M{x0:.1f},{y0:.1f}H{x1:.1f}V{y1:.1f}H{x0:.1f}Z"/>'
            )
        else:
            shape = f'<path {stroke} d="{_rounded(x0, y0, x1, y1, 5)}"/>'
        if style.double:
            shape += f'<path fill="none" stroke="{style.border}" d="{_rounded(x0 - 3, y0 - 3, x1 + 3, y1 + 3, 7)}"/>'
        lines = node_lines[ident]
        _, th_ = lines_size(lines)
        out.append(
            f'<g id="node{k + 1}" class="node">\n<title>{ident}</title>{shape}'
            f"{_text(lines, cx, cy - th_ / 2, 'middle')}</g>"
        )
    out.append("</g></svg>")
    return "\n".join(out)
