"""Convert the compiled samples (``samples/training/``) and check with real Keras 3 that the training
state came across: the model loads compiled, its optimizer's variables equal the ones the original
Keras reported, and one more training step gives the original Keras's weights.

    KERAS_BACKEND=tensorflow /work/venvs/k3/bin/python samples/verify_training.py [--modelgraph .venv/bin/modelgraph]

Writes ``samples/training/verified.json``: per source file, the ``convert`` notes, the sha256 of the
exact file Keras verified, and what Keras found. Tests re-convert and compare the bytes, so the
suite needs no Keras.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from convert_cases import canonical_hash, use_keras3_environment, writer_versions  # noqa: E402

use_keras3_environment()

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DIR = HERE / "training"
SLOT_NAMES = {"m": "momentum", "v": "velocity", "vhat": "velocity_hat"}


def _slot_key(path: str) -> str:
    """One spelling for an optimizer variable across Keras versions: ``<var path>:<slot>``."""
    path = path.removesuffix(":0")
    head, _, rest = path.partition("/")
    if rest in ("iteration", "iter") or path == "iteration":
        return "iteration"
    if rest == "learning_rate":
        return "learning_rate"
    new = re.match(r"^(m|v|vhat|velocity|momentum|average_gradient)/(.+)$", rest)
    if new:  # tf.keras: Adam/m/dense/kernel
        return f"{new[2].replace('/', '_')}:{SLOT_NAMES.get(new[1], new[1])}"
    legacy = re.match(r"^(.+)/(m|v|vhat|momentum|rms|mg)$", rest)
    if legacy:  # tf.keras legacy: Adam/dense/kernel/m
        slot = {"rms": "velocity", "mg": "average_gradient"}.get(legacy[2], SLOT_NAMES.get(legacy[2], legacy[2]))
        return f"{legacy[1].replace('/', '_')}:{slot}"
    for slot in ("velocity_hat", "momentum", "velocity", "average_gradient"):  # Keras 3: adam/dense_kernel_momentum
        if rest.endswith("_" + slot):
            return f"{rest[: -len(slot) - 1]}:{slot}"
    return rest


def verify(source: Path, modelgraph: str, out_dir: Path) -> dict:
    import keras

    out = out_dir / (source.name.replace(".", "_") + ".keras")
    proc = subprocess.run(
        [modelgraph, "convert", str(source.relative_to(ROOT)), "-o", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    result: dict = {"source": str(source.relative_to(ROOT)), "exit_code": proc.returncode}
    result["notes"] = [line for line in proc.stderr.splitlines() if "note:" in line]
    if proc.returncode:
        result["stderr"] = proc.stderr.strip()
        return result
    result["sha256"] = hashlib.sha256(out.read_bytes()).hexdigest()
    result["canonical"] = canonical_hash(out)
    golden = json.loads((DIR / (source.stem + ".optimizer.json")).read_text())
    model = keras.saving.load_model(str(out))
    result["compiled"] = bool(model.compiled)
    result["optimizer"] = type(model.optimizer).__name__ if model.optimizer is not None else None
    result["optimizer_matches_class"] = result["optimizer"] == golden["optimizer"]
    expected = {_slot_key(v["path"]): np.asarray(v["values"]) for v in golden["variables"]}
    found = {_slot_key(v.path): np.asarray(v).ravel() for v in model.optimizer.variables}
    shared = sorted(set(expected) & set(found))
    result["optimizer_variables"] = len(found)
    carried = not any("optimizer state is not written" in n or "fresh optimizer" in n for n in result["notes"])
    result["state_carried"] = carried
    if carried:
        missing = sorted(set(expected) - set(found) - {"learning_rate"})
        result["missing_state"] = missing
        result["state_max_abs_error"] = max(
            (float(np.max(np.abs(expected[k].astype(np.float64) - found[k].astype(np.float64)))) for k in shared),
            default=0.0,
        )
    step = golden["next_step"]
    model.train_on_batch(np.asarray(step["x"], dtype="float32"), np.asarray(step["y"], dtype="float32"))
    after = {w.path: np.asarray(w).ravel() for w in model.weights}
    want = {k.removesuffix(":0"): np.asarray(v) for k, v in step["weights_after"].items()}
    result["next_step_max_abs_error"] = max(
        float(np.max(np.abs(after[k] - want[k]))) for k in want if k in after
    )
    result["next_step_compared"] = sum(1 for k in want if k in after)
    result["source_next_step_max_abs_error"] = _source_step(keras, source, step, want)
    return result


def _source_step(keras, source: Path, step: dict, want: dict) -> float | None:
    """The same step on the original file loaded by Keras 3 itself (None when Keras 3 cannot load it):
    the baseline, e.g. for a loss whose config Keras 3 itself does not round-trip."""
    try:
        model = keras.saving.load_model(str(source))
        model.train_on_batch(np.asarray(step["x"], dtype="float32"), np.asarray(step["y"], dtype="float32"))
    except Exception:  # noqa: BLE001 - Keras 3 refusing its input is the answer
        return None
    after = {w.path: np.asarray(w).ravel() for w in model.weights}
    return max(float(np.max(np.abs(after[k] - want[k]))) for k in want if k in after)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--modelgraph", default=str(ROOT / ".venv" / "bin" / "modelgraph"))
    args = parser.parse_args()
    sources = sorted(p for p in DIR.iterdir() if p.suffix in (".h5", ".keras"))
    with tempfile.TemporaryDirectory() as tmp:
        results = [verify(p, args.modelgraph, Path(tmp)) for p in sources]
    for r in results:
        print(json.dumps({k: v for k, v in r.items() if k != "notes"}))
    import keras

    record = {
        "made_by": "samples/verify_training.py",
        "keras_version": keras.__version__,
        "writer_hdf5_version": writer_versions(args.modelgraph)["writer_hdf5_version"],
        "cases": results,
    }
    (DIR / "verified.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
