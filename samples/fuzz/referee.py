"""The fuzzer's second referee: Keras 3 on JAX runs every case, and loads what modelgraph converted.

Dev-time only, in the Keras 3 venv (no TensorFlow is imported)::

    /work/venvs/k3/bin/python samples/fuzz/referee.py DIR [DIR...]

For each case directory (``fuzz.py``) it

1. loads the model Keras wrote (Keras 3 cases: the ``.keras`` file; tf_keras cases: the legacy
   ``.h5``, through Keras 3's legacy loader) with Keras 3 on JAX, runs it on the case's inputs and
   writes the outputs to ``jax.npz`` (``out/<i>``, Keras's flattened output order);
2. decides which outputs the case follows (``case.json`` key ``referee``): TensorFlow's when both
   backends agree within the case's tolerance. When they do not, a Keras 3 case follows JAX: with
   the reason "TensorFlow's channels_first kernel differs from its channels_last twin" when
   ``fuzz.twin_check`` saw that, else by default (both run the same Keras 3 layer code, and every
   disagreement localised so far was a TensorFlow CPU kernel; docs/fuzz-report.md). A tf_keras case
   always follows tf_keras (it defines what its file means; Keras 3 on JAX reading it differently
   is recorded, not followed). The first layer whose outputs part (from ``tf_inter.npz``, Keras 3
   cases) is named with its class and config;
3. loads ``converted.keras`` (written by ``check_cases.py --prepare`` with modelgraph) with Keras 3
   in safe mode, runs it, and records in ``case.json`` key ``convert`` whether it reproduces the
   followed outputs within the case's tolerance.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
import warnings
from pathlib import Path

os.environ["KERAS_BACKEND"] = "jax"
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import numpy as np  # noqa: E402

warnings.filterwarnings("ignore")
import keras  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from keras3_graph import feed, functional_of, intermediates  # noqa: E402

# Each case starts with clear_session(), a full garbage collection: Keras's and JAX's own objects are
# moved out of its reach once imported (as in fuzz.py), so only what the cases make is walked.
gc.freeze()


def err(e: BaseException) -> str:
    s = f"{type(e).__name__}: {e}"
    return s.splitlines()[0][:300]






def run(model, arrays: dict) -> list[np.ndarray]:
    out = model(feed(model, arrays), training=False)
    return [np.asarray(keras.ops.convert_to_numpy(o)) for o in keras.tree.flatten(out)]




def excess(got: np.ndarray, want: np.ndarray, tol: dict) -> float:
    """The largest ``|got - want|`` where it exceeds ``atol + rtol |want|`` (0.0 when within)."""
    g, w = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if g.shape != w.shape:
        return float("inf")
    if not np.all(np.isfinite(g) == np.isfinite(w)):
        return float("inf")
    fin = np.isfinite(w)
    diff = np.abs(g[fin] - w[fin])
    over = diff - (tol["atol"] + tol["rtol"] * np.abs(w[fin]))
    return float(diff.max()) if over.size and over.max() > 0 else 0.0


def worst(gots: list, wants: list, tol: dict) -> float:
    if len(gots) != len(wants):
        return float("inf")
    return max((excess(g, w, tol) for g, w in zip(gots, wants, strict=True)), default=0.0)


def _config_of(layer) -> dict:
    cfg = layer.get_config()
    for key in list(cfg):
        if key in ("name", "trainable", "dtype") or key.endswith(("_initializer", "_regularizer", "_constraint")):
            cfg.pop(key)
    return json.loads(json.dumps(cfg, default=str))


def localise(model, arrays: dict, tf_inter: dict, tol: dict) -> dict | None:
    """The first layer (in the graph's order) whose JAX output differs from TensorFlow's."""
    mine = intermediates(model, arrays)
    fn = functional_of(model)
    for key, value in mine.items():
        if key not in tf_inter:
            continue
        e = excess(value, tf_inter[key], tol)
        if e:
            name = key.split("/")[1]
            layer = next((op for op in fn.operations if op.name == name), None)
            return {
                "layer": name,
                "class": type(layer).__name__ if layer is not None else "?",
                "config": _config_of(layer) if isinstance(layer, keras.layers.Layer) else {},
                "max_err": e,
            }
    return None


@contextlib.contextmanager
def _zero_initial_values():
    """Variables made while loading a file start as zeros instead of their initializer's draw.

    Loading builds every layer, which runs its initializers before the file's values are assigned;
    on JAX each new weight shape compiles a random-number program (97 of 201 s on 12 cases). The
    file's values replace every variable (Keras 3 refuses a file that lacks one), so the outputs are
    the same."""
    from keras.src.backend.common.variables import Variable

    original = Variable._initialize_with_initializer

    def zeros(self, initializer):
        try:
            value = np.zeros(self._shape, dtype=self._dtype)
        except TypeError:
            return original(self, initializer)
        self._initialize(self._convert_to_tensor(value))

    Variable._initialize_with_initializer = zeros
    try:
        yield
    finally:
        Variable._initialize_with_initializer = original


def load(path: Path, **kw):
    """``keras.saving.load_model`` without compiling, variables starting as zeros until loaded."""
    with _zero_initial_values():
        return keras.saving.load_model(path, compile=False, **kw)


def load_original(case: Path, golden: dict):
    files = golden["files"]
    if golden["flavour"] == "k3" and "keras" in files:
        return load(case / files["keras"])
    if "h5" in files:
        return load(case / files["h5"])
    raise ValueError("no file Keras 3 reads")


def referee_case(case: Path) -> dict:
    """Run the JAX referee and the convert check on one case; updates and returns its case.json."""
    golden = json.loads((case / "case.json").read_text(encoding="utf-8"))
    with np.load(case / "io.npz") as npz:
        arrays = {k[3:]: npz[k] for k in npz.files if k.startswith("in/")}
        tf_outs = [npz[f"out/{i}"] for i in range(golden["outputs"])]
    tol = golden["tolerance"]
    keras.backend.clear_session()
    referee: dict = {"follows": "tensorflow"}
    outs = tf_outs
    try:
        model = load_original(case, golden)
        jax_outs = run(model, arrays)
    except Exception as e:  # noqa: BLE001 - what Keras 3 refuses is recorded
        referee["jax"] = {"status": "refused", "error": err(e)}
        model = None
    if model is not None:
        np.savez_compressed(case / "jax.npz", **{f"out/{i}": o for i, o in enumerate(jax_outs)})
        gap = worst(jax_outs, tf_outs, tol)
        referee["jax"] = {"status": "agrees" if not gap else "differs", "max_err": gap}
        if gap:
            where = None
            inter = case / "tf_inter.npz"
            if inter.is_file():
                with np.load(inter) as npz:
                    try:
                        where = localise(model, arrays, {k: npz[k] for k in npz.files}, tol)
                    except Exception as e:  # noqa: BLE001
                        where = {"error": err(e)}
            referee["first_difference"] = where
            if golden["flavour"] == "k2":
                referee["reason"] = "a tf_keras file means what tf_keras computes; Keras 3 on JAX reads it differently"
            else:
                referee["follows"] = "jax"
                outs = jax_outs
                twin = golden.get("tf_twin_disagrees") or []
                referee["reason"] = (
                    f"TensorFlow's channels_first kernel differs from its channels_last twin ({', '.join(twin)})"
                    if twin
                    else "default: both backends run the same Keras 3 layer code; JAX's kernels are followed"
                )
    golden["referee"] = referee
    convert = golden.get("convert") or {}
    if (case / "converted.keras").is_file():
        keras.backend.clear_session()
        try:
            back = load(case / "converted.keras", safe_mode=True)
            gap = worst(run(back, arrays), outs, tol)
            convert["keras3"] = "pass" if not gap else "fail"
            if gap:
                convert["max_err"] = gap
        except Exception as e:  # noqa: BLE001
            convert["keras3"] = "refused"
            convert["error"] = err(e)
        (case / "converted.keras").unlink()
    golden["convert"] = convert
    (case / "case.json").write_text(json.dumps(golden, indent=1, default=str) + "\n", encoding="utf-8")
    return golden


def main(argv: list[str]) -> int:
    done = 0
    for arg in argv:
        root = Path(arg)
        cases = [root] if (root / "case.json").is_file() else sorted(c for c in root.iterdir() if (c / "case.json").is_file())
        for case in cases:
            try:
                g = referee_case(case)
            except Exception as e:  # noqa: BLE001
                print(f"{case.name}: referee failed: {err(e)}", flush=True)
                continue
            done += 1
            r = g["referee"]
            if r["jax"]["status"] != "agrees" or g["convert"].get("keras3") not in (None, "pass"):
                print(f"{case.name}: jax {r['jax']['status']} follows {r['follows']} convert {g['convert']}", flush=True)
    print(f"refereed {done} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
