"""Convert every sample with modelgraph, load each result with real Keras 3, and record the goldens.

Run with the Keras 3 venv (development only; tests never import Keras):

    KERAS_BACKEND=tensorflow /work/venvs/k3/bin/python samples/verify_convert.py [--modelgraph .venv/bin/modelgraph]

For every model file a sample golden lists (``samples/goldens/*.json`` ``files``), it runs
``modelgraph convert FILE [--weights W] -o OUT.keras`` as a subprocess, loads OUT with
``keras.saving.load_model(OUT)`` (safe mode, no custom objects), runs it on the golden's inputs and
compares with the golden's outputs (Keras's own numbers for the original model). It also records
whether Keras 3 loads the original file itself (the "before" count). Results, with the sha256 of
the exact bytes Keras verified and a canonical content hash (see ``canonical_hash``), go to
``samples/convert/verified.json``; the converted files are not kept.
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
from convert_cases import (  # noqa: E402
    canonical_hash,
    convert_cases,
    extract_cases,
    h5_cases,
    refusal_cases,
    use_keras3_environment,
    writer_versions,
)

use_keras3_environment()

FLOAT_TOLERANCE = 1e-4  # absolute, on outputs of order 1 (float32 reordering noise is ~1e-6)


def _keras():
    import keras

    return keras


def run_keras(path: Path, feeds: dict[str, str], data: dict[str, np.ndarray]) -> list:
    keras = _keras()
    model = keras.saving.load_model(str(path))  # safe_mode=True is the default
    feed = {name: data[key] for name, key in feeds.items()}
    struct = getattr(model, "_inputs_struct", None)
    if isinstance(struct, dict):
        x = {k: feed[k] for k in struct}
    else:
        x = [feed[n] for n in _input_layer_order(model)]
        if len(x) == 1 and not isinstance(struct, list | tuple):
            x = x[0]
    result = model(x, training=False)
    return [np.asarray(t) for t in keras.tree.flatten(result)]


def _input_layer_order(model) -> list[str]:
    out = []
    for t in model.inputs:
        history = getattr(t, "_keras_history", None)
        out.append(history.operation.name if history is not None else t.name)
    return out


_TF_KERAS_CHECK = """
import json, os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf
import tf_keras as keras
results = []
for job in json.load(open(sys.argv[1])):
    try:
        model = keras.models.load_model(job["model"], compile=False)
        feeds = dict(np.load(job["feeds"]))
        x = [feeds[n] for n in model.input_names]
        result = model(x if len(x) > 1 else x[0], training=False)
        np.savez(job["out"], *[np.asarray(t) for t in tf.nest.flatten(result)])
        results.append({"loaded": True})
    except Exception as exc:
        results.append({"loaded": False, "error": type(exc).__name__ + ": " + str(exc)[:300]})
print(json.dumps(results))
"""


def check_with_tf_keras(python: str, pending: list, tmp: Path) -> None:
    """Load every converted ``.h5`` with tf_keras (one process for all) and run it on its inputs."""
    if not pending:
        return
    jobs = [
        {"model": str(out), "feeds": str(feeds), "out": str(tmp / f"{out.stem}.tf_keras.npz")}
        for _, out, feeds, _, _ in pending
    ]
    manifest = tmp / "tf_keras_jobs.json"
    manifest.write_text(json.dumps(jobs))
    proc = subprocess.run(
        [python, "-c", _TF_KERAS_CHECK, str(manifest)], capture_output=True, text=True, check=False
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("[")]
    results = json.loads(lines[-1]) if lines else [{"loaded": False, "error": proc.stderr[-300:]}] * len(jobs)
    for (record, _, _, want, tolerance), job, result in zip(pending, jobs, results, strict=True):
        record["tf_keras_loaded"] = result["loaded"]
        if not result["loaded"]:
            record["tf_keras_error"] = result["error"]
            record["matches"] = False
            continue
        arrays = np.load(job["out"])
        got = [arrays[k] for k in sorted(arrays.files, key=lambda k: int(k.split("_")[1]))]
        err = max_abs_error(got, want)
        record["tf_keras_max_abs_error"] = err
        record["matches"] = bool(record.get("matches")) and err is not None and err <= tolerance
        print(f"{record['id']}: tf_keras err={err}", flush=True)


def _runner_reference(modelgraph: str, source: Path, case, golden: dict, data: dict, tmp: Path) -> list:
    """modelgraph's own run of the source (TF.js quantized weights: the values the file holds)."""
    feeds = tmp / "feeds.npz"
    np.savez(feeds, **{name: data[key] for name, key in case.feed_keys(golden).items()})
    out = tmp / "reference.npz"
    subprocess.run(
        [modelgraph, "run", str(source), "--input", str(feeds), "-o", str(out)],
        check=True,
        capture_output=True,
    )
    ref = np.load(out)
    return [ref[k] for k in ref.files]


def max_abs_error(got: list[np.ndarray], want: list[np.ndarray]) -> float | None:
    if len(got) != len(want):
        return None
    worst = 0.0
    for g, w in zip(got, want, strict=True):
        if g.shape != w.shape:
            return None
        if g.size:
            worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)))))
    return worst


def loads_in_keras(path: str) -> dict:
    keras = _keras()
    try:
        keras.saving.load_model(path)
        return {"ok": True}
    except Exception as exc:  # noqa: BLE001 - recorded
        return {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--modelgraph", default=str(ROOT / ".venv" / "bin" / "modelgraph"))
    parser.add_argument(
        "--only", default="", help="comma-separated substrings of the case ids to run (any one matches)"
    )
    parser.add_argument("--tf-keras-python", default="/work/venvs/k2/bin/python")
    args = parser.parse_args()
    only = [part for part in args.only.split(",") if part]
    keras = _keras()
    records = []
    pending_tf_keras: list = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in [*convert_cases(), *extract_cases(), *refusal_cases(), *h5_cases()]:
            if only and not any(part in case.id for part in only):
                continue
            golden = json.loads((ROOT / case.golden).read_text()) if case.golden else {}
            data = dict(np.load(ROOT / case.golden_npz)) if case.golden else {}
            out = Path(tmp) / f"{case.id.replace('/', '_')}{case.suffix}"
            proc = subprocess.run(
                [args.modelgraph, *case.argv(ROOT, out)], capture_output=True, text=True, check=False
            )
            record: dict = {"id": case.id, "argv": case.argv(Path("."), Path("OUT" + case.suffix))[:-1]}
            record["exit_code"] = proc.returncode
            if proc.returncode != 0:
                if case.source_loads_check:
                    record["keras3_loads_source"] = loads_in_keras(str(ROOT / case.source))["ok"]
                record["stderr"] = proc.stderr.strip().replace(str(out), "OUT" + case.suffix)
                print(f"{case.id}: convert exit {proc.returncode}: {proc.stderr.strip()[-300:]}", flush=True)
                records.append(record)
                continue
            raw = out.read_bytes()
            record["sha256"] = hashlib.sha256(raw).hexdigest()
            record["canonical"] = canonical_hash(out)
            if case.source_loads_check:
                record["keras3_loads_source"] = loads_in_keras(str(ROOT / case.source))["ok"]
            try:
                got = run_keras(out, case.feed_keys(golden), data)
                want = (
                    _runner_reference(args.modelgraph, ROOT / case.source, case, golden, data, Path(tmp))
                    if case.reference == "runner"
                    else [data[k] for k in case.output_keys(data)]
                )
                err = max_abs_error(got, want)
                record["loaded"] = True
                record["max_abs_error"] = err
                tol = case.tolerance
                record["matches"] = err is not None and err <= tol
                record["tolerance"] = tol
            except Exception as exc:  # noqa: BLE001 - recorded
                record["loaded"] = False
                record["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
            if case.suffix == ".h5" and record.get("loaded"):
                feed_file = Path(tmp) / f"{out.stem}.feeds.npz"
                np.savez(feed_file, **{name: data[key] for name, key in case.feed_keys(golden).items()})
                pending_tf_keras.append((record, out, feed_file, want, case.tolerance))
            print(
                f"{case.id}: loaded={record.get('loaded')} tf_keras={record.get('tf_keras_loaded')} err={record.get('max_abs_error')} "
                f"{record.get('error', '')[:200]}",
                flush=True,
            )
            records.append(record)
        check_with_tf_keras(args.tf_keras_python, pending_tf_keras, Path(tmp))
    document = {
        "made_by": "samples/verify_convert.py",
        **writer_versions(args.modelgraph),
        "keras_version": keras.__version__,
        "python_version": sys.version.split()[0],
        "keras_h5py_version": __import__("h5py").__version__,
        "cases": records,
    }
    target = HERE / "convert" / "verified.json"
    if args.only and target.is_file():  # a partial run replaces its cases in the full record
        previous = json.loads(target.read_text())["cases"]
        fresh = {r["id"]: r for r in records}
        records = [fresh.pop(r["id"], r) for r in previous] + list(fresh.values())
        document["cases"] = records
    target.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    ok = sum(1 for r in records if r.get("matches"))
    print(f"{ok}/{len(records)} converted files load in Keras 3 and match", flush=True)


if __name__ == "__main__":
    main()
