"""A layered (Sugiyama-style) layout of a directed graph with nested clusters, in pure Python.

The HTML view draws its graph with this instead of Graphviz ``dot``, so ``render -o x.html`` needs
nothing but the package. The steps are the classic ones, each kept simple and linear or near-linear
so a 10,000-layer model lays out in about a second (``bench/bench_view.py``):

1. **Ranks**: longest path from the sources over a topological order; edges that close a cycle (a
   broken file drawn with ``--highlight-issues``) are left out of the ranking and drawn as they are.
2. **Long edges** get one invisible *dummy* point per rank they cross, so they bend around nodes.
3. **Order within a rank**: declaration order, then a few down/up sweeps sorting by the mean
   position of each node's neighbours in the previous rank (barycentre). The sort key is taken per
   cluster level, so the members of a cluster stay next to each other in every rank.
4. **Coordinates**: each rank is placed as close as possible (least squares) to the mean position
   of its neighbours in the previous rank, keeping the order and a minimum gap (pool-adjacent-
   violators, linear time); repeated down and up, which straightens chains and long edges.
5. **Clusters** are drawn as the bounding boxes of their members, with room for their label kept
   free between ranks and between neighbours.

Why not a library: grandalf (the maintained pure-Python Sugiyama package) knows no clusters, which
the view needs for nested models and folded repeats; measured on a 3,000-node chain it is also much
slower than this (see ``bench/bench_view.py --grandalf``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

RANK_GAP = 26.0
"""Space between two ranks (points)."""

NODE_GAP = 14.0
"""Least space between two neighbours in a rank (points)."""

CLUSTER_PAD = 8.0
"""Space between a cluster's border and what it holds (points)."""

DUMMY_WIDTH = 4.0
"""Width kept free for an edge passing through a rank."""

SWEEPS = 4
"""Down/up sweeps of the ordering and of the coordinate steps."""

MAX_DUMMIES = 400_000
"""Past this many dummy points (long skip connections in a huge graph), long edges are drawn
straight and do not take part in the ordering: the layout stays bounded in time and memory."""


@dataclass(frozen=True)
class Cluster:
    """A cluster's label box (width, height) and its enclosing cluster (None at the top)."""

    label_width: float
    label_height: float
    parent: str | None = None


@dataclass
class Layout:
    """Where everything goes (points, y downwards, origin at the top left of the drawing)."""

    width: float
    height: float
    centres: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Node id -> the centre of its box."""
    sizes: dict[str, tuple[float, float]] = field(default_factory=dict)
    edges: list[tuple[str, str, list[tuple[float, float]]]] = field(default_factory=list)
    """(source, target, points from the source's border to the target's border)."""
    clusters: dict[str, tuple[float, float, float, float]] = field(default_factory=dict)
    """Cluster name -> (left, top, right, bottom)."""
    ranks: int = 0


def _chain(cluster: str | None, clusters: Mapping[str, Cluster]) -> tuple[str, ...]:
    """Enclosing clusters of a node in ``cluster``, outermost first."""
    out: list[str] = []
    seen: set[str] = set()
    while cluster is not None and cluster not in seen and cluster in clusters:
        seen.add(cluster)
        out.append(cluster)
        cluster = clusters[cluster].parent
    return tuple(reversed(out))


def _ranks(ids: Sequence[str], succ: Mapping[str, list[str]], pred_count: dict[str, int]) -> dict[str, int]:
    """Longest-path ranks; nodes on a cycle are ranked after what feeds them that is ranked."""
    rank = dict.fromkeys(ids, 0)
    indeg = dict(pred_count)
    ready = [v for v in reversed(ids) if indeg[v] == 0]
    done: set[str] = set()
    order_pos = {v: i for i, v in enumerate(ids)}
    pending = sorted((v for v in ids if indeg[v] > 0), key=order_pos.__getitem__, reverse=True)
    while len(done) < len(ids):
        if not ready:  # a cycle: take the first unranked node in declaration order
            while pending and pending[-1] in done:
                pending.pop()
            ready.append(pending.pop())
        v = ready.pop()
        if v in done:
            continue
        done.add(v)
        for w in succ.get(v, ()):
            if w in done:
                continue  # closes a cycle
            rank[w] = max(rank[w], rank[v] + 1)
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
    return rank


def _pav(desired: list[float], gaps: list[float]) -> list[float]:
    """Positions in the given order, each at least ``gaps[i]`` after the previous, closest (least
    squares) to ``desired``: pool-adjacent-violators on positions shifted by the cumulative gaps."""
    offsets = [0.0]
    for g in gaps:
        offsets.append(offsets[-1] + g)
    blocks: list[list[float]] = []  # [sum, count]
    for d, o in zip(desired, offsets, strict=True):
        blocks.append([d - o, 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, c = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += c
    out: list[float] = []
    for s, c in blocks:
        out.extend([s / c] * int(c))
    return [y + o for y, o in zip(out, offsets, strict=True)]


def layered_layout(
    sizes: Mapping[str, tuple[float, float]],
    edges: Sequence[tuple[str, str]],
    node_cluster: Mapping[str, str | None] | None = None,
    clusters: Mapping[str, Cluster] | None = None,
    rankdir: str = "TB",
) -> Layout:
    """Lay out nodes (``sizes``: id -> (width, height), in declaration order) joined by ``edges``.

    ``node_cluster`` puts a node in its innermost cluster; ``clusters`` describes each cluster's label
    and parent. ``rankdir`` is TB (ranks top to bottom), BT, LR or RL.
    """
    node_cluster = node_cluster or {}
    clusters = clusters or {}
    horizontal = rankdir in ("LR", "RL")
    ids = list(sizes)
    # extents: along the rank ("across") and along the order ("along") axes
    along = {v: (sizes[v][1] if horizontal else sizes[v][0]) for v in ids}
    across = {v: (sizes[v][0] if horizontal else sizes[v][1]) for v in ids}
    chains = {v: _chain(node_cluster.get(v), clusters) for v in ids}
    succ: dict[str, list[str]] = {}
    pred_count = dict.fromkeys(ids, 0)
    real_edges = [(a, b) for a, b in edges if a in sizes and b in sizes and a != b]
    for a, b in real_edges:
        succ.setdefault(a, []).append(b)
        pred_count[b] += 1
    rank = _ranks(ids, succ, pred_count)

    # dummies for edges that cross ranks
    span_total = sum(max(abs(rank[b] - rank[a]) - 1, 0) for a, b in real_edges)
    use_dummies = span_total <= MAX_DUMMIES
    up: dict[str, list[str]] = {v: [] for v in ids}  # neighbours in the rank above
    down: dict[str, list[str]] = {v: [] for v in ids}
    routes: list[tuple[str, str, list[str]]] = []
    for k, (a, b) in enumerate(real_edges):
        lo, hi = (a, b) if rank[a] <= rank[b] else (b, a)
        path = [lo]
        if use_dummies and rank[hi] - rank[lo] > 1:
            common = _common(chains[a], chains[b])
            for r in range(rank[lo] + 1, rank[hi]):
                d = f"\x00{k}.{r}"
                rank[d] = r
                along[d] = DUMMY_WIDTH
                across[d] = 0.0
                chains[d] = common
                path.append(d)
        path.append(hi)
        for u, w in zip(path, path[1:], strict=False):
            if rank[w] == rank[u] + 1 or not use_dummies:
                down[u].append(w)
                up.setdefault(w, []).append(u)
                down.setdefault(w, [])
        for d in path[1:-1]:
            up.setdefault(d, [])
            down.setdefault(d, [])
        routes.append((a, b, path if rank[a] <= rank[b] else path[::-1]))
    nranks = max(rank.values(), default=-1) + 1
    layers: list[list[str]] = [[] for _ in range(nranks)]
    for v in rank:  # declaration order, dummies after the node that created them
        layers[rank[v]].append(v)

    def gap(a: str, b: str) -> float:
        ca, cb = chains[a], chains[b]
        common = len(_common(ca, cb))
        return NODE_GAP + CLUSTER_PAD * ((len(ca) - common) + (len(cb) - common))

    # ordering
    pos = {v: float(i) for layer in layers for i, v in enumerate(layer)}
    cluster_ids = {c: i for i, c in enumerate(clusters)}
    for sweep in range(SWEEPS):
        downward = sweep % 2 == 0
        seq = layers[1:] if downward else layers[-2::-1]
        for layer in seq:
            nbrs = up if downward else down
            bary: dict[str, float] = {}
            for v in layer:
                ns = [pos[u] for u in nbrs.get(v, ())]
                bary[v] = sum(ns) / len(ns) if ns else pos[v]
            sums: dict[str, list[float]] = {}
            for v in layer:
                for c in chains[v]:
                    acc = sums.setdefault(c, [0.0, 0.0])
                    acc[0] += bary[v]
                    acc[1] += 1
            cbary = {c: s / n for c, (s, n) in sums.items()}
            layer.sort(key=lambda v: _order_key(chains[v], bary[v], cbary, cluster_ids))
            for i, v in enumerate(layer):
                pos[v] = float(i)

    # coordinates along the order axis
    x: dict[str, float] = {}
    for layer in layers:
        cur = 0.0
        for i, v in enumerate(layer):
            if i:
                cur += (along[layer[i - 1]] + along[v]) / 2 + gap(layer[i - 1], v)
            x[v] = cur
    for sweep in range(SWEEPS):
        downward = sweep % 2 == 0
        seq = layers[1:] if downward else layers[-2::-1]
        nbrs = up if downward else down
        for layer in seq:
            desired = []
            for v in layer:
                ns = [x[u] for u in nbrs.get(v, ())]
                desired.append(sum(ns) / len(ns) if ns else x[v])
            gaps = [(along[a] + along[b]) / 2 + gap(a, b) for a, b in zip(layer, layer[1:], strict=False)]
            for v, p in zip(layer, _pav(desired, gaps), strict=True):
                x[v] = p

    _separate_clusters(layers, x, along, chains, clusters, horizontal)

    # coordinates along the rank axis, with room for cluster labels and borders between ranks
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for v in ids:
        for c in chains[v]:
            first[c] = min(first.get(c, nranks), rank[v])
            last[c] = max(last.get(c, -1), rank[v])
    head = [0.0] * (nranks + 1)
    tail = [0.0] * (nranks + 1)
    for c in first:
        depth = len(_chain(c, clusters))
        label = clusters[c].label_width if horizontal else clusters[c].label_height
        head[first[c]] = max(head[first[c]], depth * CLUSTER_PAD + label)
        tail[last[c]] = max(tail[last[c]], depth * CLUSTER_PAD)
    thick = [max((across[v] for v in layer), default=0.0) for layer in layers]
    y: list[float] = []
    cur = 0.0
    for r in range(nranks):
        cur += head[r] + thick[r] / 2
        y.append(cur)
        cur += thick[r] / 2 + tail[r] + RANK_GAP
    return _finish(ids, rank, x, y, along, across, routes, chains, clusters, horizontal, rankdir, nranks)


def _cluster_spans(
    layers: list[list[str]],
    x: Mapping[str, float],
    along: Mapping[str, float],
    chains: Mapping[str, tuple[str, ...]],
    clusters: Mapping[str, Cluster],
    horizontal: bool,
) -> dict[str, list[float]]:
    """Per cluster: [left, right, first rank, last rank] along the order axis, padding included."""
    spans: dict[str, list[float]] = {}
    for r, layer in enumerate(layers):
        for v in layer:
            a0, a1 = x[v] - along[v] / 2, x[v] + along[v] / 2
            for depth, c in enumerate(reversed(chains[v])):
                pad = CLUSTER_PAD * (depth + 1)
                span = spans.setdefault(c, [a0 - pad, a1 + pad, r, r])
                span[0], span[1] = min(span[0], a0 - pad), max(span[1], a1 + pad)
                span[2], span[3] = min(span[2], r), max(span[3], r)
    for c, span in spans.items():
        label = clusters[c].label_height if horizontal else clusters[c].label_width
        span[1] = max(span[1], span[0] + label + 2 * CLUSTER_PAD)
    return spans


def _separate_clusters(
    layers: list[list[str]],
    x: dict[str, float],
    along: Mapping[str, float],
    chains: Mapping[str, tuple[str, ...]],
    clusters: Mapping[str, Cluster],
    horizontal: bool,
    rounds: int = 12,
) -> None:
    """Push nodes out of the boxes of clusters they are not in.

    Orders keep each cluster contiguous within a rank, but a cluster's box spans its widest rank:
    a neighbour in a narrower rank can sit inside it. Such a neighbour and everything beyond it in
    its rank move out (left or right, whichever side of the cluster it is on); boxes are then
    measured again, a few rounds until nothing moves.
    """
    if not clusters:
        return
    for _ in range(rounds):
        spans = _cluster_spans(layers, x, along, chains, clusters, horizontal)
        by_rank: dict[int, list[str]] = {}
        for c, span in spans.items():
            for r in range(int(span[2]), int(span[3]) + 1):
                by_rank.setdefault(r, []).append(c)
        moved = False
        for r, names in by_rank.items():
            layer = layers[r]
            for c in names:
                left, right = spans[c][0], spans[c][1]
                inside = [i for i, v in enumerate(layer) if c in chains[v]]
                centre = (left + right) / 2
                for i, v in enumerate(layer):
                    if c in chains[v]:
                        continue
                    a0, a1 = x[v] - along[v] / 2, x[v] + along[v] / 2
                    if a1 <= left + 0.01 or a0 >= right - 0.01:
                        continue
                    on_left = i < inside[0] if inside else x[v] < centre
                    shift = (left - NODE_GAP / 2) - a1 if on_left else (right + NODE_GAP / 2) - a0
                    for j in range(0, i + 1) if on_left else range(i, len(layer)):
                        x[layer[j]] += shift
                    moved = True
        if not moved:
            return


def _common(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return a[:n]


def _order_key(
    chain: tuple[str, ...], own: float, cluster_bary: Mapping[str, float], cluster_ids: Mapping[str, int]
) -> list[tuple[float, int, int]]:
    """Sort key keeping a cluster's members together: per cluster level, the cluster's mean
    barycentre in this rank (and its id, to keep two clusters apart), then the node's own."""
    key = [(cluster_bary[c], 1, cluster_ids.get(c, 0)) for c in chain]
    key.append((own, 0, 0))
    return key


def _finish(
    ids: list[str],
    rank: Mapping[str, int],
    x: Mapping[str, float],
    y: list[float],
    along: Mapping[str, float],
    across: Mapping[str, float],
    routes: list[tuple[str, str, list[str]]],
    chains: Mapping[str, tuple[str, ...]],
    clusters: Mapping[str, Cluster],
    horizontal: bool,
    rankdir: str,
    nranks: int,
) -> Layout:
    """Turn (order, rank) coordinates into drawing coordinates; route edges; box the clusters."""
    # cluster boxes in (along, across) coordinates, innermost first
    boxes: dict[str, list[float]] = {}
    for v in ids:
        a0, a1 = x[v] - along[v] / 2, x[v] + along[v] / 2
        r0, r1 = y[rank[v]] - across[v] / 2, y[rank[v]] + across[v] / 2
        for c in chains[v]:
            box = boxes.setdefault(c, [a0, r0, a1, r1])
            box[0], box[1], box[2], box[3] = (
                min(box[0], a0),
                min(box[1], r0),
                max(box[2], a1),
                max(box[3], r1),
            )
    for route in routes:  # dummies keep long edges inside the clusters they run through
        for d in route[2][1:-1]:
            for c in chains.get(d, ()):
                if c in boxes:
                    b = boxes[c]
                    b[0], b[2] = min(b[0], x[d]), max(b[2], x[d])
    depth = {c: len(_chain(c, clusters)) for c in boxes}
    for c in sorted(boxes, key=lambda c: -depth[c]):
        info = clusters[c]
        b = boxes[c]
        label_along = info.label_height if horizontal else info.label_width
        label_across = info.label_width if horizontal else info.label_height
        b[0] -= CLUSTER_PAD
        b[2] = max(b[2] + CLUSTER_PAD, b[0] + label_along + 2 * CLUSTER_PAD)
        b[1] -= CLUSTER_PAD + label_across
        b[3] += CLUSTER_PAD
        parent = info.parent
        if parent in boxes:
            p = boxes[parent]
            p[0], p[1], p[2], p[3] = min(p[0], b[0]), min(p[1], b[1]), max(p[2], b[2]), max(p[3], b[3])
    # extent
    lo_a = min([x[v] - along[v] / 2 for v in ids] + [b[0] for b in boxes.values()], default=0.0)
    hi_a = max([x[v] + along[v] / 2 for v in ids] + [b[2] for b in boxes.values()], default=0.0)
    lo_r = min([y[rank[v]] - across[v] / 2 for v in ids] + [b[1] for b in boxes.values()], default=0.0)
    hi_r = max([y[rank[v]] + across[v] / 2 for v in ids] + [b[3] for b in boxes.values()], default=0.0)
    margin = 8.0
    ext_a, ext_r = hi_a - lo_a + 2 * margin, hi_r - lo_r + 2 * margin
    flip = rankdir in ("BT", "RL")

    def point(a: float, r: float) -> tuple[float, float]:
        a, r = a - lo_a + margin, r - lo_r + margin
        if flip:
            r = ext_r - r
        return (r, a) if horizontal else (a, r)

    out = Layout(width=ext_r if horizontal else ext_a, height=ext_a if horizontal else ext_r, ranks=nranks)
    for v in ids:
        out.centres[v] = point(x[v], y[rank[v]])
        out.sizes[v] = (across[v], along[v]) if horizontal else (along[v], across[v])
    for c, b in boxes.items():
        p0, p1 = point(b[0], b[1]), point(b[2], b[3])
        out.clusters[c] = (min(p0[0], p1[0]), min(p0[1], p1[1]), max(p0[0], p1[0]), max(p0[1], p1[1]))
    for a, b, path in routes:
        pts: list[tuple[float, float]] = []
        forward = rank[a] < rank[b]
        for j, v in enumerate(path):
            r = y[rank[v]]
            if v in along and not v.startswith("\x00"):
                half = across[v] / 2
                if j == 0:
                    r += half if forward or rank[a] == rank[b] else -half
                elif j == len(path) - 1:
                    r -= half if forward or rank[a] == rank[b] else -half
            pts.append(point(x[v], r))
        out.edges.append((a, b, pts))
    return out
