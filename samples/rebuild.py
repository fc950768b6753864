"""Rebuild Keras-written files from a weights manifest, without Keras.

Pure numpy + h5py (no keras, no tensorflow, no modelgraph). Importable from tests:

    import importlib.util, pathlib
    spec = importlib.util.spec_from_file_location("rebuild", "samples/rebuild.py")
    ...
    path = rebuild.rebuild("samples/apps/k3_resnet50", tmp_path)   # -> tmp_path/k3_resnet50.keras

Why: the weights of the larger ``keras.applications`` models are too big to commit. Their values were
drawn by ``samples/gen_k3.py``/``gen_k2.py`` with ``numpy.random.default_rng(seed)`` from recipes, set
into the real Keras model (``variable.assign``), and saved by Keras. The manifest records, for every
HDF5 dataset Keras wrote, its path, shape, dtype, attributes, the recipe, and the sha256 of the array
bytes as Keras saved them; every group's attributes (``@name`` in ``.keras`` weights, ``layer_names``,
``weight_names``, ``model_config``, ... in legacy ``.h5``) are recorded too. Replaying gives back
exactly the arrays Keras saved; :func:`build_h5` checks every sha256 and raises if one differs.

Manifest layout (``manifest.json``)::

    {"manifest_version": 1,
     "container": "keras_zip" | "h5",       # what rebuild() produces
     "h5_member": "model.weights.h5",        # keras_zip only: name of the HDF5 member
     "zip_members": ["metadata.json", "config.json", "model.weights.h5"],   # keras_zip only, in order
     "groups": [{"path": "/layers/dense", "attrs": {NAME: ATTR}}, ...],     # every group, root first
     "datasets": [{"path": "/layers/dense/vars/0", "shape": [..], "dtype": "<f4",
                   "attrs": {...}, "sha256": "..", "recipe": RECIPE}, ...]}

    RECIPE = {"seed": int, "dist": "normal", "mean": m, "std": s}
           | {"seed": int, "dist": "uniform", "low": a, "high": b}
           | {"dist": "values", "values": nested list}          (small non-random arrays, e.g. counters)
           | {"dist": "raw", "hex": "..."}                      (small arrays stored verbatim)
    ATTR   = {"type": "str", "value": s}                       (h5py variable-length str)
           | {"type": "bytes", "value": s}                     (fixed-length bytes, utf-8 decoded)
           | {"type": "array", "dtype": "|S12" | "<f8" | "object" ..., "shape": [..], "value": list}
           | {"type": "scalar", "dtype": "<i8", "value": v}

A recipe is replayed as ``default_rng(seed).normal(mean, std, size=shape).astype(dtype)`` (or
``.uniform(low, high, size=shape)``); ``numpy.random.default_rng`` streams are stable across numpy
versions for these distributions.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path

import h5py
import numpy as np

__all__ = ["draw", "sha256_of", "build_h5", "rebuild", "load_manifest", "decode_attr", "encode_attr"]


def sha256_of(arr: np.ndarray) -> str:
    """sha256 of the array's C-order bytes (exactly as stored; dtype not included)."""
    return hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest()


def draw(recipe: dict, shape, dtype) -> np.ndarray:
    """Replay one recipe into an array of ``shape`` and ``dtype``."""
    shape = tuple(int(s) for s in shape)
    dist = recipe["dist"]
    if dist == "normal":
        rng = np.random.default_rng(int(recipe["seed"]))
        return rng.normal(recipe["mean"], recipe["std"], size=shape).astype(dtype)
    if dist == "uniform":
        rng = np.random.default_rng(int(recipe["seed"]))
        return rng.uniform(recipe["low"], recipe["high"], size=shape).astype(dtype)
    if dist == "values":
        return np.asarray(recipe["values"], dtype=dtype).reshape(shape)
    if dist == "raw":
        return np.frombuffer(bytes.fromhex(recipe["hex"]), dtype=dtype).reshape(shape).copy()
    raise ValueError(f"unknown recipe dist {dist!r}")


def encode_attr(value) -> dict:
    """JSON form of an HDF5 attribute value as h5py returns it."""
    if isinstance(value, str):
        return {"type": "str", "value": value}
    if isinstance(value, bytes):
        return {"type": "bytes", "value": value.decode("utf-8")}
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "SO":
            items = [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in value.ravel()]
            return {"type": "array", "dtype": value.dtype.str if value.dtype.kind == "S" else "object",
                    "shape": list(value.shape), "value": items}
        return {"type": "array", "dtype": value.dtype.str, "shape": list(value.shape),
                "value": value.ravel().tolist()}
    if isinstance(value, np.generic):
        if isinstance(value, np.bytes_):
            return {"type": "bytes", "value": bytes(value).decode("utf-8")}
        return {"type": "scalar", "dtype": value.dtype.str, "value": value.item()}
    raise TypeError(f"cannot encode attribute of type {type(value).__name__}")


def decode_attr(spec: dict):
    """Inverse of :func:`encode_attr`: the value to assign with ``h5py ... attrs[name] = value``."""
    t = spec["type"]
    if t == "str":
        return spec["value"]
    if t == "bytes":
        return np.bytes_(spec["value"].encode("utf-8"))
    if t == "scalar":
        return np.array(spec["value"], dtype=spec["dtype"])[()]
    if t == "array":
        shape = tuple(spec["shape"])
        if spec["dtype"] == "object":
            arr = np.array(spec["value"], dtype=h5py.string_dtype()).reshape(shape)
            return arr
        if spec["dtype"].startswith("|S"):
            return np.array([v.encode("utf-8") for v in spec["value"]], dtype=spec["dtype"]).reshape(shape)
        return np.array(spec["value"], dtype=spec["dtype"]).reshape(shape)
    raise ValueError(f"unknown attribute type {t!r}")


def load_manifest(app_dir) -> dict:
    with open(Path(app_dir) / "manifest.json", encoding="utf-8") as f:
        return json.load(f)


def build_h5(manifest: dict, h5_path, verify: bool = True) -> Path:
    """Write the HDF5 file described by ``manifest``; check every dataset's sha256."""
    h5_path = Path(h5_path)
    bad = []
    with h5py.File(h5_path, "w") as f:
        for g in manifest["groups"]:
            grp = f if g["path"] in ("", "/") else f.require_group(g["path"])
            for name, spec in g.get("attrs", {}).items():
                grp.attrs[name] = decode_attr(spec)
        for d in manifest["datasets"]:
            dtype = np.dtype(d["dtype"])
            if d.get("storage_dtype") == "V2":  # bfloat16 as opaque 2-byte values
                arr = draw(d["recipe"], d["shape"], "<u2")
                ds = f.create_dataset(d["path"], data=arr.view("V2"))
            else:
                arr = draw(d["recipe"], d["shape"], dtype)
                ds = f.create_dataset(d["path"], data=arr)
            for name, spec in d.get("attrs", {}).items():
                ds.attrs[name] = decode_attr(spec)
            if verify and sha256_of(arr) != d["sha256"]:
                bad.append(d["path"])
    if bad:
        raise ValueError(f"sha256 mismatch for {len(bad)} datasets, first: {bad[:5]}")
    return h5_path


def rebuild(app_dir, out_dir, verify: bool = True) -> Path:
    """Rebuild the file described by ``<app_dir>/manifest.json`` into ``out_dir``.

    ``keras_zip``: writes ``<out_dir>/<app_dir name>.keras`` (members stored, in Keras' order:
    ``metadata.json``, ``config.json``, ``model.weights.h5`` taken from ``app_dir``/rebuilt).
    ``h5``: writes ``<out_dir>/<app_dir name>.h5`` (a legacy full-model HDF5 file).
    Returns the path written.
    """
    app_dir = Path(app_dir)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = load_manifest(app_dir)
    name = app_dir.name
    if manifest["container"] == "h5":
        return build_h5(manifest, out_dir / f"{name}.h5", verify=verify)
    if manifest["container"] != "keras_zip":
        raise ValueError(f"unknown container {manifest['container']!r}")
    h5_member = manifest.get("h5_member", "model.weights.h5")
    tmp_h5 = out_dir / f".{name}.{os.getpid()}.weights.h5"
    build_h5(manifest, tmp_h5, verify=verify)
    out = out_dir / f"{name}.keras"
    try:
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as z:
            for member in manifest.get("zip_members", ["metadata.json", "config.json", h5_member]):
                if member == h5_member:
                    z.write(tmp_h5, h5_member)
                else:
                    z.write(app_dir / member, member)
    finally:
        tmp_h5.unlink(missing_ok=True)
    return out


if __name__ == "__main__":  # python samples/rebuild.py samples/apps/k3_resnet50 /tmp/out
    import sys

    print(rebuild(sys.argv[1], sys.argv[2]))
