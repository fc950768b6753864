"""How long inspecting a MobileNetV2 SavedModel takes with modelgraph, against tf_keras's load_model.

    python bench/savedmodel_load.py [--k2-python /work/venvs/k2/bin/python] [--repeat 5] [--keep DIR]
                                    [--layout current|tf2.3]

Run with modelgraph's own interpreter. The SavedModel (tf_keras ``MobileNetV2(weights=None)``,
224x224x3, 3.5 M parameters, ``model.save(dir, save_format="tf")``) is made once by the tf_keras
interpreter in a temporary folder (or ``--keep DIR``): it is ~14 MB, too big to commit. With
``--layout tf2.3`` it is written in the layout TF 2.0-2.3 wrote (Keras metadata inside
saved_model.pb, no keras_metadata.pb; made as samples/gen_savedmodel.py makes ``legacy/``, without
traces), so modelgraph decodes saved_model.pb's object graph and tf_keras takes its pre-2.4 path.

Timed, each in a fresh process so no cache is warm, imports excluded (each side reports the time
of its own load call only):

* modelgraph: ``modelgraph.load(dir)`` + ``summary`` (what ``modelgraph inspect`` computes: graph,
  depths, shapes, params, weight entries of the checkpoint);
* tf_keras:   ``tf_keras.models.load_model(dir, compile=False)``.

Prints the medians and the ratio modelgraph / tf_keras (the goal is <= 0.1). Nothing is asserted.
Measured 2026-11-28 on the shared 2-core sandbox (--repeat 1): 449 ms vs 13,394 ms, ratio 0.034;
all 3,538,984 parameters bound, no load notes. Again at load average ~15 (--repeat 3): current
layout 1,969 ms vs 71,335 ms (0.028); ``--layout tf2.3`` (saved_model.pb 0.95 MB, 524 saved objects,
157 Keras nodes; its decoding takes ~120 ms of modelgraph's time) 1,177 ms vs 26,990 ms (0.044).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

MAKE = """
import os, sys
from pathlib import Path
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tf_keras as keras
m = keras.applications.MobileNetV2(weights=None, input_shape=(224, 224, 3))
if sys.argv[2] == "tf2.3":
    sys.path.insert(0, sys.argv[3])
    from gen_savedmodel import write_legacy_layout
    write_legacy_layout(m, Path(sys.argv[1]))
else:
    m.save(sys.argv[1], save_format="tf")
"""
SAMPLES = Path(__file__).resolve().parent.parent / "samples"

TF_LOAD = """
import os, sys, time, json
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tf_keras as keras
t = time.perf_counter()
m = keras.models.load_model(sys.argv[1], compile=False)
print(json.dumps({"seconds": time.perf_counter() - t, "params": int(m.count_params())}))
"""

MG_LOAD = """
import sys, time, json
import modelgraph
from modelgraph.summary import summarize
t = time.perf_counter()
g = modelgraph.load(sys.argv[1])
s = summarize(g)
print(json.dumps({"seconds": time.perf_counter() - t, "layers": len(g.layers)}))
"""


def _last_json(cmd: list[str]) -> dict:
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--k2-python", default="/work/venvs/k2/bin/python")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--keep", type=Path, help="make (or reuse) the SavedModel in this folder")
    ap.add_argument("--layout", choices=("current", "tf2.3"), default="current")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp) / "mobilenetv2"
        if not (folder / "saved_model.pb").exists():
            make = [args.k2_python, "-c", MAKE, str(folder), args.layout, str(SAMPLES)]
            subprocess.run(make, check=True, capture_output=True)
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        mg = [_last_json([sys.executable, "-c", MG_LOAD, str(folder)]) for _ in range(args.repeat)]
        tf = [_last_json([args.k2_python, "-c", TF_LOAD, str(folder)]) for _ in range(args.repeat)]
    mg_s = statistics.median(r["seconds"] for r in mg)
    tf_s = statistics.median(r["seconds"] for r in tf)
    print(
        f"MobileNetV2 SavedModel ({args.layout} layout): {size / 1e6:.1f} MB, {tf[0]['params']:,} params, {mg[0]['layers']} layers"
    )
    print(f"modelgraph load+summary  median {mg_s * 1000:8.1f} ms  ({args.repeat} fresh processes)")
    print(f"tf_keras load_model      median {tf_s * 1000:8.1f} ms")
    print(f"ratio modelgraph / tf_keras = {mg_s / tf_s:.3f}  (goal <= 0.1)")


if __name__ == "__main__":
    main()
