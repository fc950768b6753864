"""Convert every SavedModel and checkpoint sample to .keras with modelgraph, load each result with real
Keras 3 (safe mode), run it on the tf_keras goldens' inputs, and record what was verified.

Run with the Keras 3 venv after gen_savedmodel.py (development only; tests never import Keras):

    KERAS_BACKEND=tensorflow /work/venvs/k3/bin/python samples/verify_savedmodel.py \
        [--modelgraph .venv/bin/modelgraph]

Cases: ``convert savedmodel/NAME`` (the directory), ``convert savedmodel/legacy/NAME`` (the same
model in the TF 2.0-2.3 layout) and ``convert savedmodel/NAME.json --weights
savedmodel/ckpt/NAME`` (a config-only model with a save_weights checkpoint) for every model golden,
and ``--weights savedmodel/train_NAME`` (a tf.train.Checkpoint folder) where one was made. A case
passes when Keras 3 loads the file and its outputs are within 1e-4 + 1e-3 * |tf_keras output|.
Results (with the canonical content hash of the converted file, see convert_cases.canonical_hash)
go to ``samples/savedmodel/verified.json``; the converted files are not kept.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "savedmodel"
sys.path.insert(0, str(HERE))
from convert_cases import canonical_hash, use_keras3_environment  # noqa: E402

use_keras3_environment()
ATOL, RTOL = 1e-4, 1e-3


def cases() -> list[dict]:
    out = []
    for golden in sorted((OUT / "goldens").glob("*.json")):
        info = json.loads(golden.read_text())
        name = info["model"]
        out.append({"case": f"{name}:savedmodel", "golden": name, "args": [f"samples/savedmodel/{name}"]})
        if "legacy_savedmodel" in info["files"]:
            out.append(
                {"case": f"{name}:legacy_savedmodel", "golden": name, "args": [f"samples/savedmodel/legacy/{name}"]}
            )
        out.append(
            {
                "case": f"{name}:json+ckpt",
                "golden": name,
                "args": [f"samples/savedmodel/{name}.json", "--weights", f"samples/savedmodel/ckpt/{name}"],
            }
        )
        if "train_ckpt" in info["files"]:
            out.append(
                {
                    "case": f"{name}:json+train_ckpt",
                    "golden": f"train_{name}",
                    "args": [f"samples/savedmodel/{name}.json", "--weights", f"samples/savedmodel/train_{name}"],
                }
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--modelgraph", default=str(ROOT / ".venv" / "bin" / "modelgraph"))
    args = ap.parse_args()
    import keras

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases():
            target = Path(tmp) / (case["case"].replace(":", "_").replace("+", "_") + ".keras")
            cmd = [*shlex.split(args.modelgraph), "convert", *case["args"], "-o", str(target)]
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            record: dict = {"case": case["case"], "command": case["args"], "exit_code": proc.returncode}
            if proc.returncode != 0:
                record["refused"] = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
                results.append(record)
                print(f"{case['case']}: refused ({record['refused'][:100]})")
                continue
            golden = np.load(OUT / "goldens" / f"{case['golden']}.npz")
            model = keras.saving.load_model(target)  # safe_mode=True by default
            feeds = {k[len("input/") :]: golden[k] for k in golden.files if k.startswith("input/")}
            got = model(feeds if len(feeds) > 1 else next(iter(feeds.values())))
            got = got if isinstance(got, (list, tuple)) else [got]
            excess = -np.inf
            for i, value in enumerate(got):
                ref = golden[f"output/{i}"]
                excess = max(excess, float(np.max(np.abs(np.asarray(value) - ref) - (ATOL + RTOL * np.abs(ref)))))
            record.update(
                {
                    "keras_version": keras.__version__,
                    "loads_in_safe_mode": True,
                    "outputs_within_tolerance": excess <= 0.0,
                    "worst_excess_over_tolerance": excess,
                    "canonical_hash": canonical_hash(target),
                }
            )
            results.append(record)
            print(f"{case['case']}: ok={excess <= 0.0} excess={excess:.2e}")
    (OUT / "verified.json").write_text(json.dumps({"tolerance": [ATOL, RTOL], "cases": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
