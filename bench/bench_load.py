"""Load + inspect time for long chains, a wide model, and a NASNetMobile-size .keras.

Prints seconds and the growth ratio between chain sizes (about 10x per 10x means linear).
Run: ``python bench/bench_load.py`` (no Keras needed; chains are written as Keras 3 config JSON).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import modelgraph

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _keras3_config import input_layer, keras_tensor, layer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def chain_config(n: int, width: int = 4) -> dict:
    """A Keras 3 Functional config: Input -> n Dense layers."""
    layers = [input_layer(width)]
    previous = "x"
    for i in range(n):
        name = f"dense_{i}"
        config = {"units": width, "activation": "relu", "use_bias": True}
        layers.append(
            layer("Dense", name, config, [previous], width, build_config={"input_shape": [None, width]})
        )
        previous = name
    return {
        "module": "keras.src.models.functional",
        "class_name": "Functional",
        "config": {
            "name": f"chain_{n}",
            "trainable": True,
            "layers": layers,
            "input_layers": [["x", 0, 0]],
            "output_layers": [[previous, 0, 0]],
        },
    }


def wide_config(n: int, width: int = 4) -> dict:
    """Input -> n parallel Dense branches -> one Concatenate."""
    cfg = chain_config(0, width)
    layers = cfg["config"]["layers"]
    for i in range(n):
        name = f"branch_{i}"
        layers.append(
            {
                "module": "keras.layers",
                "class_name": "Dense",
                "name": name,
                "config": {"name": name, "trainable": True, "dtype": "float32", "units": width},
                "inbound_nodes": [{"args": [keras_tensor("x", width)], "kwargs": {}}],
            }
        )
    layers.append(
        {
            "module": "keras.layers",
            "class_name": "Concatenate",
            "name": "concat",
            "config": {"name": "concat", "trainable": True, "dtype": "float32", "axis": -1},
            "inbound_nodes": [
                {"args": [[keras_tensor(f"branch_{i}", width) for i in range(n)]], "kwargs": {}}
            ],
        }
    )
    cfg["config"]["output_layers"] = [["concat", 0, 0]]
    return cfg


def _rebuild(app_dir: Path, into: Path) -> Path:
    """The real Keras-written NASNetMobile .keras, rebuilt from its committed weights manifest."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("samples_rebuild", ROOT / "samples" / "rebuild.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return Path(module.rebuild(app_dir, into))


def timed(path: Path) -> tuple[float, float, int]:
    start = time.perf_counter()
    graph = modelgraph.load(path)
    loaded = time.perf_counter()
    modelgraph.summarize(graph)
    done = time.perf_counter()
    return loaded - start, done - loaded, len(graph.layers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--wide", type=int, default=20000)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        previous = None
        for n in sizes:
            path = Path(tmp) / f"chain_{n}.json"
            path.write_text(json.dumps(chain_config(n)))
            load_s, inspect_s, count = timed(path)
            total = load_s + inspect_s
            ratio = f"{total / previous[1]:.1f}x time for {n / previous[0]:.0f}x layers" if previous else ""
            rows.append((f"chain {n:>7,}", count, load_s, inspect_s, ratio))
            previous = (n, total)
        path = Path(tmp) / "wide.json"
        path.write_text(json.dumps(wide_config(args.wide)))
        load_s, inspect_s, count = timed(path)
        rows.append((f"wide {args.wide:>8,}", count, load_s, inspect_s, ""))
    with tempfile.TemporaryDirectory() as tmp:
        nasnet = _rebuild(ROOT / "samples" / "apps" / "k3_nasnetmobile", Path(tmp))
        load_s, inspect_s, count = timed(nasnet)
        rows.append(("NASNetMobile", count, load_s, inspect_s, ""))
    print(f"{'model':<16} {'layers':>8} {'load s':>8} {'inspect s':>10}  growth")
    for name, count, load_s, inspect_s, ratio in rows:
        print(f"{name:<16} {count:>8,} {load_s:>8.3f} {inspect_s:>10.3f}  {ratio}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
