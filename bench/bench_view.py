"""HTML view of deep models: time to write the page (no Graphviz) and to open it in headless Chromium.

For each size, a residual stack (Input, then blocks of Dense -> BatchNormalization -> ReLU -> Add with
the block's input) is written as a Keras 3 config JSON, drawn with ``modelgraph render -o x.html``
(stderr shows the progress lines), and opened in headless Chromium; the page records how long its
script took to build the view (``data-ready-ms`` on ``<body>``). ``modelgraph validate`` on the same
file is timed on its own: the page shows its findings, so it is part of the write time. Prints
seconds, page size and the growth ratio between sizes (about 10x per 10x means linear).

Run: ``python bench/bench_view.py`` (sizes 1000 3000 10000 by default; ``--sizes 10000``).
``--grandalf`` also times grandalf's Sugiyama layout on the same graphs (``pip install grandalf``).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _keras3_config import input_layer, layer  # noqa: E402


def residual_config(n: int, width: int = 8) -> dict:
    """A Keras 3 Functional config with ``n`` layers after the input (blocks of four)."""
    layers = [input_layer(width)]
    previous = "x"
    for b in range(n // 4):
        d, bn, act, add = f"dense_{b}", f"bn_{b}", f"relu_{b}", f"add_{b}"
        layers.append(
            layer("Dense", d, {"units": width, "activation": "linear", "use_bias": True}, [previous], width)
        )
        layers.append(
            layer("BatchNormalization", bn, {"axis": -1, "momentum": 0.99, "epsilon": 0.001}, [d], width)
        )
        layers.append(layer("ReLU", act, {}, [bn], width))
        layers.append(layer("Add", add, {}, [act, previous], width))
        previous = add
    return {
        "module": "keras",
        "class_name": "Functional",
        "config": {
            "name": f"residual_{n}",
            "trainable": True,
            "layers": layers,
            "input_layers": [["x", 0, 0]],
            "output_layers": [[previous, 0, 0]],
        },
        "registered_name": "Functional",
        "keras_version": "3.15.1",
    }


def open_in_chromium(page: Path, profile: Path) -> tuple[float, float]:
    """(wall seconds for headless Chromium to load the page and dump it, the page's own ready ms)."""
    chromium = next(
        (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
    )
    if chromium is None:
        return float("nan"), float("nan")
    started = time.perf_counter()
    done = subprocess.run(
        [
            chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            f"--user-data-dir={profile}", "--window-size=1400,900", "--dump-dom", page.resolve().as_uri(),
        ],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    wall = time.perf_counter() - started
    found = re.search(r'data-ready-ms="([\d.]+)"', done.stdout)
    return wall, float(found.group(1)) if found else float("nan")


def grandalf_seconds(config: dict) -> float:
    """Seconds grandalf's SugiyamaLayout takes on the same graph (layers and their inbound edges)."""
    from grandalf.graphs import Edge, Graph, Vertex
    from grandalf.layouts import SugiyamaLayout

    class View:
        w, h = 80, 24

    vertices = {record["name"]: Vertex(record["name"]) for record in config["config"]["layers"]}
    for v in vertices.values():
        v.view = View()
    edges = []
    for record in config["config"]["layers"]:
        for node in record["inbound_nodes"]:
            args = node["args"][0] if isinstance(node["args"][0], list) else node["args"]
            for arg in args:
                edges.append(Edge(vertices[arg["config"]["keras_history"][0]], vertices[record["name"]]))
    started = time.perf_counter()
    graph = Graph(list(vertices.values()), edges)
    for component in graph.C:
        layout = SugiyamaLayout(component)
        layout.init_all()
        layout.draw()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 3000, 10000])
    parser.add_argument("--grandalf", action="store_true", help="also time grandalf's Sugiyama layout")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for n in args.sizes:
            config = residual_config(n)
            model = folder / f"residual_{n}.json"
            model.write_text(json.dumps(config))
            page = folder / f"residual_{n}.html"
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "modelgraph", "render", str(model), "-o", str(page)], check=True
            )
            write = time.perf_counter() - started
            # the page's findings come from validate: timed alone, the rest of the write is the page's
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "modelgraph", "validate", str(model)], capture_output=True)
            validate = time.perf_counter() - started
            wall, ready = open_in_chromium(page, folder / "profile")
            extra = grandalf_seconds(config) if args.grandalf else None
            rows.append((n, write, validate, page.stat().st_size / 1e6, wall, ready, extra))
    head = f"{'layers':>7} {'write s':>8} {'validate s':>11} {'page MB':>8} {'chromium s':>11} {'page ready s':>13}"
    print(head, end="")
    print(f" {'grandalf s':>11}" if args.grandalf else "")
    for i, (n, write, validate, size, wall, ready, extra) in enumerate(rows):
        ratio = ""
        if i:
            ratio = f"  (x{rows[i][0] / rows[i - 1][0]:.1f} layers: write x{write / rows[i - 1][1]:.1f}, open x{wall / rows[i - 1][4]:.1f})"
        line = f"{n:>7} {write:>8.2f} {validate:>11.2f} {size:>8.2f} {wall:>11.2f} {ready / 1000:>13.2f}"
        if extra is not None:
            line += f" {extra:>11.2f}"
        print(line + ratio)


if __name__ == "__main__":
    main()
