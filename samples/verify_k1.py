"""Convert each genuine Keras 1 sample (``samples/k1/``) to ``.keras`` and check it with real Keras 3.

    KERAS_BACKEND=tensorflow /work/venvs/k3/bin/python samples/verify_k1.py [--modelgraph .venv/bin/modelgraph]

The samples were made by Keras 1.2.2 on Theano, so they are converted with
``modelgraph --keras1-backend theano convert``. Keras 3 loads each result in safe mode and runs it
on the golden inputs; the outputs are compared with Keras 1's own. Writes
``samples/k1/verified.json`` (sha256 and content hash of the file Keras verified, its max error),
which ``tests/test_keras1.py`` replays without Keras.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from convert_cases import canonical_hash, use_keras3_environment, writer_versions  # noqa: E402

use_keras3_environment()

TOLERANCE = 1e-5


def main() -> None:
    import keras

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--modelgraph", default=str(ROOT / ".venv" / "bin" / "modelgraph"))
    args = parser.parse_args()
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        for golden_path in sorted((HERE / "k1").glob("*.golden.json")):
            golden = json.loads(golden_path.read_text())
            source = Path("samples") / golden["file"]
            out = Path(tmp) / (source.stem + ".keras")
            argv = ["--keras1-backend", "theano", "convert", str(source), "-o", str(out)]
            proc = subprocess.run([args.modelgraph, *argv], cwd=ROOT, capture_output=True, text=True)
            case = {"source": str(source), "argv": [*argv[:-1], "OUT.keras"], "exit_code": proc.returncode}
            if proc.returncode == 0:
                case["sha256"] = hashlib.sha256(out.read_bytes()).hexdigest()
                case["canonical"] = canonical_hash(out)
                try:
                    model = keras.saving.load_model(str(out))
                except Exception as exc:  # noqa: BLE001 - Keras refusing the file is the finding
                    case["error"] = f"{type(exc).__name__}: {exc}"[:2000]
                    case["matches"] = False
                    print(json.dumps(case))
                    cases.append(case)
                    continue
                case["loaded"] = True
                inputs = [np.asarray(v["data"], dtype=v["dtype"]) for v in golden["inputs"].values()]
                try:
                    result = model(inputs[0] if len(inputs) == 1 else inputs, training=False)
                except Exception as exc:  # noqa: BLE001 - e.g. TensorFlow has no channels_first conv on CPU
                    case["run_error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
                    case["matches"] = None
                    print(json.dumps(case))
                    cases.append(case)
                    continue
                outputs = [np.asarray(t) for t in keras.tree.flatten(result)]
                case["max_abs_error"] = max(
                    float(np.max(np.abs(o.ravel() - np.asarray(w["data"])))) for o, w in zip(outputs, golden["outputs"], strict=True)
                )
                case["matches"] = case["max_abs_error"] <= TOLERANCE
            else:
                case["stderr"] = proc.stderr.strip()
            print(json.dumps(case))
            cases.append(case)
    record = {
        "made_by": "samples/verify_k1.py",
        "keras_version": keras.__version__,
        "writer_hdf5_version": writer_versions(args.modelgraph)["writer_hdf5_version"],
        "tolerance": TOLERANCE,
        "cases": cases,
    }
    (HERE / "k1" / "verified.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
