"""Helpers shared by gen_k3.py and gen_k2.py (numpy/h5py only; each gen script imports Keras itself)."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import h5py
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import rebuild  # noqa: E402

GOLDENS = HERE / "goldens"


def rel(path) -> str:
    """Path relative to samples/, with forward slashes."""
    return Path(path).resolve().relative_to(HERE).as_posix()


def jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    return obj


def dump_json(path, obj) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(jsonable(obj), f, indent=1, ensure_ascii=False)
        f.write("\n")


def shape_list(shape):
    return None if shape is None else [None if s is None else int(s) for s in shape]


# ---------------------------------------------------------------- random weights with recipes


def recipe_for(var_name: str, class_name: str, path: str, shape, seed: int) -> dict:
    """Distribution for one float variable, chosen by its name/owner so statistics look trained."""
    name = var_name.split("/")[-1].split(":")[0]
    shape = tuple(int(s) for s in shape)
    if name == "moving_mean" or name == "mean":
        return {"seed": seed, "dist": "normal", "mean": 0.0, "std": 0.5}
    if name == "moving_variance" or name == "variance":
        return {"seed": seed, "dist": "uniform", "low": 0.5, "high": 2.0}
    if name == "gamma" and class_name not in ("LayerScale",):
        return {"seed": seed, "dist": "uniform", "low": 0.5, "high": 1.5}
    if name == "beta":
        return {"seed": seed, "dist": "normal", "mean": 0.0, "std": 0.2}
    if name == "bias":
        return {"seed": seed, "dist": "normal", "mean": 0.0, "std": 0.1}
    if name == "embeddings":
        return {"seed": seed, "dist": "normal", "mean": 0.0, "std": 1.0}
    if name == "recurrent_kernel":
        return {"seed": seed, "dist": "normal", "mean": 0.0, "std": 1.0 / math.sqrt(shape[0])}
    if "kernel" in name and len(shape) >= 1:
        if name == "depthwise_kernel" or class_name == "DepthwiseConv2D" or class_name == "DepthwiseConv1D":
            fan_in = int(np.prod(shape[:-2])) if len(shape) > 2 else shape[0]
        elif class_name == "EinsumDense" and len(shape) == 3:
            fan_in = shape[0] * shape[1] if ("output" in path or "attention_output" in path) else shape[0]
        elif len(shape) >= 2:
            fan_in = int(np.prod(shape[:-1]))
        else:
            fan_in = 1
        gain = math.sqrt(2.0) if class_name not in ("EinsumDense", "MultiHeadAttention") else 1.0
        return {"seed": seed, "dist": "normal", "mean": 0.0, "std": gain / math.sqrt(max(fan_in, 1))}
    # LayerScale gamma / "variable", PReLU alpha, anything else
    return {"seed": seed, "dist": "uniform", "low": 0.5, "high": 1.5}


class RecipeBook:
    """Remembers every array that was set into a Keras model, keyed by its sha256."""

    def __init__(self):
        self.by_sha: dict[str, dict] = {}

    def make(self, var_name, class_name, path, shape, dtype, seed):
        rec = recipe_for(var_name, class_name, path, shape, seed)
        arr = rebuild.draw(rec, shape, dtype)
        self.by_sha[rebuild.sha256_of(arr)] = rec
        return arr


def h5_manifest(h5_path, book: RecipeBook, raw_limit: int = 1 << 16) -> dict:
    """Describe every group/dataset of an HDF5 file; datasets get the recipe that produced them."""
    groups, datasets, missing = [], [], []
    with h5py.File(h5_path, "r") as f:
        groups.append({"path": "/", "attrs": {k: rebuild.encode_attr(v) for k, v in f.attrs.items()}})

        def visit(name, obj):
            path = "/" + name
            attrs = {k: rebuild.encode_attr(v) for k, v in obj.attrs.items()}
            if isinstance(obj, h5py.Group):
                groups.append({"path": path, "attrs": attrs})
                return
            arr = obj[()]
            arr = np.asarray(arr)
            entry = {"path": path, "shape": list(arr.shape), "dtype": arr.dtype.str, "attrs": attrs}
            if arr.dtype.kind == "V":
                entry["storage_dtype"] = "V2"
                arr = arr.view("<u2")
                entry["dtype"] = "<u2"
            sha = rebuild.sha256_of(arr)
            entry["sha256"] = sha
            rec = book.by_sha.get(sha)
            if rec is None:
                if arr.nbytes <= raw_limit:
                    rec = {"dist": "raw", "hex": np.ascontiguousarray(arr).tobytes().hex()}
                else:
                    missing.append(path)
            entry["recipe"] = rec
            datasets.append(entry)

        f.visititems(visit)
    if missing:
        raise RuntimeError(f"no recipe for {len(missing)} large datasets: {missing[:5]}")
    return {"manifest_version": 1, "groups": groups, "datasets": datasets}


def save_golden(name: str, inputs: dict, outputs: list, info: dict, extra: dict | None = None):
    """goldens/<name>.npz (input/<layer>, output/<i>, [intermediate/...]) and goldens/<name>.json."""
    GOLDENS.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for k, v in inputs.items():
        arrays[f"input/{k}"] = np.asarray(v)
    for i, v in enumerate(outputs):
        arrays[f"output/{i}"] = np.asarray(v)
    for k, v in (extra or {}).items():
        arrays[k] = np.asarray(v)
    np.savez_compressed(GOLDENS / f"{name}.npz", **arrays)
    info = dict(info)
    info["npz"] = rel(GOLDENS / f"{name}.npz")
    info["npz_keys"] = {k: {"shape": list(a.shape), "dtype": a.dtype.str} for k, a in arrays.items()}
    dump_json(GOLDENS / f"{name}.json", info)


def env_versions(**extra) -> dict:
    out = {
        "python_version": sys.version.split()[0],
        "numpy_version": np.__version__,
        "h5py_version": h5py.__version__,
    }
    out.update(extra)
    return out


def max_abs_diff(a_list, b_list) -> float:
    worst = 0.0
    for a, b in zip(a_list, b_list):
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        if a.shape != b.shape:
            return float("inf")
        if a.size:
            worst = max(worst, float(np.max(np.abs(a - b))))
    return worst


def clean_dir(path: Path):
    """Remove files this generator wrote earlier (only regular files / dirs under path)."""
    import shutil

    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True, exist_ok=True)


os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
