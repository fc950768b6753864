"""Builders of small Keras-3-style model files (good ones and broken ones) for the validate tests.

Everything is written here with json, zipfile, NumPy and h5py: no Keras. Weights go to
``layers/<group>/vars/<i>`` as Keras 3 saves them (group = snake_case class name + counter).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import h5py
import numpy as np

Ref = str | tuple[str, int, int]


def _tensor(ref: Ref) -> dict[str, Any]:
    name, node, tensor = (ref, 0, 0) if isinstance(ref, str) else ref
    return {
        "class_name": "__keras_tensor__",
        "config": {"shape": None, "dtype": "float32", "keras_history": [name, node, tensor]},
    }


def inp(name: str = "in", shape: list[int | None] | None = (None, 4)) -> dict[str, Any]:  # type: ignore[assignment]
    return {
        "module": "keras.layers",
        "class_name": "InputLayer",
        "config": {
            "batch_shape": list(shape) if shape is not None else None,
            "dtype": "float32",
            "name": name,
        },
        "registered_name": None,
        "name": name,
        "inbound_nodes": [],
    }


def layer(
    cls: str,
    name: str,
    inputs: Ref | list[Ref] | None,
    *,
    calls: int = 1,
    module: str = "keras.layers",
    **cfg: Any,
) -> dict[str, Any]:
    """A layer record called ``calls`` times on ``inputs`` (a list means one call on a list of tensors)."""
    config = {"name": name, "trainable": True, "dtype": "float32", **cfg}
    nodes = []
    if inputs is not None:
        arg = [_tensor(r) for r in inputs] if isinstance(inputs, list) else _tensor(inputs)
        nodes = [{"args": [arg], "kwargs": {}} for _ in range(calls)]
    return {
        "module": module,
        "class_name": cls,
        "config": config,
        "registered_name": None,
        "name": name,
        "inbound_nodes": nodes,
    }


def dense(name: str, src: Ref, units: int = 3, **cfg: Any) -> dict[str, Any]:
    return layer(
        "Dense", name, src, units=units, activation="linear", use_bias=cfg.pop("use_bias", True), **cfg
    )


def model(
    layers: list[dict[str, Any]], inputs: list[Ref] | None = None, outputs: list[Ref] | None = None
) -> dict[str, Any]:
    ins = inputs if inputs is not None else ["in"]
    outs = outputs if outputs is not None else [layers[-1]["name"]]

    def triple(r: Ref) -> list[Any]:
        return [r, 0, 0] if isinstance(r, str) else list(r)

    return {
        "module": "keras.src.models.functional",
        "class_name": "Functional",
        "config": {
            "name": "model",
            "trainable": True,
            "layers": layers,
            "input_layers": [triple(r) for r in ins],
            "output_layers": [triple(r) for r in outs],
        },
        "registered_name": "Functional",
    }


def simple(units: int = 3) -> dict[str, Any]:
    """in (None, 4) -> Dense 'd1' (units) : the smallest valid model."""
    return model([inp(), dense("d1", "in", units)])


def weights_h5(path: Path, groups: dict[str, list[np.ndarray]]) -> Path:
    with h5py.File(path, "w") as f:
        f.create_group("layers")
        f.create_group("vars")
        for group, arrays in groups.items():
            g = f.create_group(f"layers/{group}/vars")
            for i, a in enumerate(arrays):
                g.create_dataset(str(i), data=a)
    return path


def write_keras(path: Path, config: Any, groups: dict[str, list[np.ndarray]] | None = None) -> Path:
    """A ``.keras`` zip with ``config`` and (when ``groups`` is given) a weights file."""
    members = {
        "metadata.json": json.dumps(
            {"keras_version": "3.15.1", "date_saved": "2026-01-01@00:00:00"}
        ).encode(),
        "config.json": json.dumps(config).encode(),
    }
    if groups is not None:
        h5 = weights_h5(path.with_suffix(".tmp.h5"), groups)
        members["model.weights.h5"] = h5.read_bytes()
        h5.unlink()
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def write_json(path: Path, config: Any) -> Path:
    path.write_text(json.dumps(config))
    return path


def dense_weights(n_in: int = 4, units: int = 3, dtype: str = "float32") -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.normal(size=(n_in, units)).astype(dtype), rng.normal(size=(units,)).astype(dtype)]


def valid_keras(path: Path) -> Path:
    return write_keras(path, simple(), {"dense": dense_weights()})
