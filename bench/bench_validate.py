"""``validate`` on long chains: seconds per size and the growth ratio between sizes.

The models are ``bench_view.py``'s residual stacks (Dense -> BatchNormalization -> ReLU -> Add blocks,
a config-only Keras 3 JSON), validated in this process after one small warm-up file (imports out of
the timing). About 10x time per 10x layers means linear; the cyclic garbage collector and any
per-layer scan of a growing list show up as a larger ratio.

Run: ``python bench/bench_validate.py`` (sizes 1000 3000 10000 by default; ``--sizes 10000``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_view import residual_config  # noqa: E402

from modelgraph.validate.api import validate  # noqa: E402

WARM_UP = Path(__file__).resolve().parent.parent / "samples" / "wild" / "nested_twice.h5"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 3000, 10000])
    args = parser.parse_args()
    validate(str(WARM_UP))
    rows: list[tuple[int, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            path = Path(tmp) / f"residual_{n}.json"
            path.write_text(json.dumps(residual_config(n)))
            start = time.perf_counter()
            report = validate(str(path))
            seconds = time.perf_counter() - start
            findings = sum(len(r.issues) for r in report)
            line = f"{n:>7} layers: validate {seconds:7.2f} s ({findings} finding(s))"
            if rows:
                prev_n, prev_s = rows[-1]
                line += f"  (x{n / prev_n:.1f} layers: x{seconds / prev_s:.1f} time)"
            rows.append((n, seconds))
            print(line, flush=True)


if __name__ == "__main__":
    main()
