"""Start-up cost of the catalogue (every built-in class goes through ``catalogue.register``) and of
loading the three example plugins, each in a fresh interpreter (median of ``--repeat`` runs).

Prints milliseconds and the ratio plugins / catalogue (what naming three plugins adds to a command).
Run: ``python bench/bench_catalogue.py [--repeat 15]`` (no Keras needed).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = [
    ROOT / "examples" / "plugins" / f"{n}.py"
    for n in ("attention_pooling", "position_embedding", "gelu_tanh")
]

CATALOGUE = (
    "import time; t = time.perf_counter(); import modelgraph.catalogue; print(time.perf_counter() - t)"
)
WITH_PLUGINS = (
    "import time, numpy, modelgraph.catalogue, modelgraph.plugins as p; t = time.perf_counter(); "
    f"p.load_plugins({[str(path) for path in PLUGINS]!r}); print(time.perf_counter() - t)"
)


def _median(code: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
        )
        times.append(float(out.stdout))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    catalogue = _median(CATALOGUE, args.repeat)
    plugins = _median(WITH_PLUGINS, args.repeat)
    print(f"import modelgraph.catalogue: {catalogue * 1000:.1f} ms (median of {args.repeat})")
    print(f"load the 3 example plugins:  {plugins * 1000:.1f} ms")
    print(f"ratio plugins / catalogue:   {plugins / catalogue:.2f}")


if __name__ == "__main__":
    main()
