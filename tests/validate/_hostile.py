"""Builders of hostile (and near-miss) model files for the security and safe_io tests.

Everything is generated here, in the test process, with the standard library, NumPy and h5py.
Generating marshalled bytecode with ``marshal.dumps(compile(...))`` is fine; the code under test must
never load it.
"""

from __future__ import annotations

import base64
import json
import marshal
import struct
import types
import zipfile
from pathlib import Path
from typing import Any

import h5py
import numpy as np

# --- JSON / configs -------------------------------------------------------------------------------


def deep_json(depth: int = 100_000) -> str:
    return "[" * depth + "]" * depth


def dtype_policy(name: str = "float32") -> dict[str, Any]:
    return {"module": "keras", "class_name": "DTypePolicy", "config": {"name": name}, "registered_name": None}


def dense(name: str, units: int = 4, **extra: Any) -> dict[str, Any]:
    return {
        "module": "keras.layers",
        "class_name": "Dense",
        "config": {
            "name": name,
            "trainable": True,
            "dtype": dtype_policy(),
            "units": units,
            "activation": "relu",
            "use_bias": True,
            "kernel_initializer": {
                "module": "keras.initializers",
                "class_name": "GlorotUniform",
                "config": {"seed": None},
                "registered_name": None,
            },
            "kernel_regularizer": None,
            **extra,
        },
        "registered_name": None,
        "build_config": {"input_shape": [None, 4]},
        "name": name,
        "inbound_nodes": [
            {
                "args": [
                    {
                        "class_name": "__keras_tensor__",
                        "config": {"shape": [None, 4], "dtype": "float32", "keras_history": ["in", 0, 0]},
                    }
                ],
                "kwargs": {},
            }
        ],
    }


def functional(layers: list[dict[str, Any]], name: str = "model") -> dict[str, Any]:
    """A Keras 3 Functional envelope around ``layers`` (first layer is an InputLayer named 'in')."""
    inp = {
        "module": "keras.layers",
        "class_name": "InputLayer",
        "config": {"batch_shape": [None, 4], "dtype": "float32", "sparse": False, "name": "in"},
        "registered_name": None,
        "name": "in",
        "inbound_nodes": [],
    }
    last = "in"
    if layers:
        cfg = layers[-1].get("config")
        last = layers[-1].get("name") or (cfg.get("name") if isinstance(cfg, dict) else None) or "in"
    return {
        "module": "keras.src.models.functional",
        "class_name": "Functional",
        "config": {
            "name": name,
            "trainable": True,
            "layers": [inp, *layers],
            "input_layers": [["in", 0, 0]],
            "output_layers": [[last, 0, 0]],
        },
        "registered_name": "Functional",
        "build_config": {"input_shape": None},
        "compile_config": {
            "optimizer": {
                "module": "keras.optimizers",
                "class_name": "Adam",
                "config": {"name": "adam", "learning_rate": 0.001},
                "registered_name": None,
            },
            "loss": "mean_squared_error",
            "metrics": None,
        },
    }


def lambda_code(src: str) -> types.CodeType:
    """The code object of the first lambda in ``src`` (compiled, never called)."""
    module = compile(src, "<hostile>", "eval")
    return next(c for c in module.co_consts if isinstance(c, types.CodeType))


def b64_bytecode(code: types.CodeType) -> str:
    """Keras 2 >= 2.1.2 encoding: base64 of marshal.dumps, a newline every 76 characters."""
    raw = base64.b64encode(marshal.dumps(code)).decode("ascii")
    return "\n".join(raw[i : i + 76] for i in range(0, len(raw), 76)) + "\n"


def keras1_bytecode(code: types.CodeType) -> str:
    return marshal.dumps(code).decode("raw_unicode_escape")


def keras2_lambda(name: str, code: types.CodeType, **extra: Any) -> dict[str, Any]:
    return {
        "class_name": "Lambda",
        "config": {
            "name": name,
            "trainable": True,
            "dtype": "float32",
            "function": [b64_bytecode(code), None, None],
            "function_type": "lambda",
            "module": "__main__",
            "output_shape": None,
            "output_shape_type": "raw",
            "output_shape_module": None,
            "arguments": {},
            **extra,
        },
        "name": name,
        "inbound_nodes": [[["in", 0, 0, {}]]],
    }


def keras3_lambda(name: str, code: types.CodeType) -> dict[str, Any]:
    return {
        "module": "keras.layers",
        "class_name": "Lambda",
        "config": {
            "name": name,
            "trainable": True,
            "dtype": dtype_policy(),
            "function": {
                "class_name": "__lambda__",
                "config": {"code": b64_bytecode(code), "defaults": None, "closure": None},
            },
            "arguments": {},
        },
        "registered_name": None,
        "name": name,
        "inbound_nodes": [],
    }


# --- hand-made marshal for interpreters we do not have (3.8-3.10, 3.0-3.7, 2.7) ----------------


def _z(s: str) -> bytes:
    b = s.encode("ascii")
    return b"z" + bytes([len(b)]) + b


def _s(b: bytes) -> bytes:
    return b"s" + struct.pack("<i", len(b)) + b


def _tup(items: list[bytes], small: bool = True) -> bytes:
    if small:
        return b")" + bytes([len(items)]) + b"".join(items)
    return b"(" + struct.pack("<i", len(items)) + b"".join(items)


def legacy_marshal_code(
    layout: str, *, name: str, names: list[str], varnames: list[str], consts: list[bytes]
) -> bytes:
    """A marshalled code object in the 3.8-3.10 ("py38"), 3.0-3.7 ("py37") or 2.7 ("py27") layout."""
    if layout == "py27":

        def st(x: str) -> bytes:
            return b"t" + struct.pack("<i", len(x)) + x.encode()

        body = struct.pack("<4i", 1, 1, 2, 0x43)
        body += _s(b"|\x00\x00S")
        body += _tup(consts, small=False)
        body += _tup([st(n) for n in names], small=False)
        body += _tup([st(n) for n in varnames], small=False)
        body += _tup([], small=False) + _tup([], small=False)
        body += _s(b"<py2>") + st(name) + struct.pack("<i", 1) + _s(b"")
        return b"c" + body
    nints = 6 if layout == "py38" else 5
    ints = [1, 0, 0, 1, 2, 0x43] if nints == 6 else [1, 0, 1, 2, 0x43]
    body = struct.pack(f"<{nints}i", *ints)
    body += _s(b"|\x00S\x00")
    body += _tup(consts)
    body += _tup([_z(n) for n in names])
    body += _tup([_z(n) for n in varnames])
    body += _tup([]) + _tup([])
    body += _z("<legacy>") + _z(name) + struct.pack("<i", 1) + _s(b"")
    return bytes([ord("c") | 0x80]) + body


# --- ZIP ------------------------------------------------------------------------------------------


def write_zip(path: Path, members: dict[str, bytes], *, compress: int = zipfile.ZIP_STORED) -> Path:
    with zipfile.ZipFile(path, "w", compression=compress) as zf:
        for name, data in members.items():
            info = zipfile.ZipInfo(name)
            info.compress_type = compress
            info.external_attr = 0o100644 << 16
            zf.writestr(info, data)
    return path


def symlink_zip(path: Path, name: str = "assets/link", target: str = "/etc/passwd") -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("config.json", b"{}")
        info = zipfile.ZipInfo(name)
        info.create_system = 3
        info.external_attr = 0o120777 << 16
        zf.writestr(info, target)
    return path


def duplicate_zip(path: Path) -> Path:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("config.json", b"{}")
            zf.writestr("config.json", b'{"evil": 1}')
    return path


def declared_size_bomb(path: Path, name: str = "model.weights.h5", declared: int = 0xFFFFFFF0) -> Path:
    """A zip whose central directory declares ``declared`` uncompressed bytes for a tiny member."""
    write_zip(path, {"config.json": b"{}", name: b"x" * 64}, compress=zipfile.ZIP_DEFLATED)
    data = bytearray(path.read_bytes())
    encoded = name.encode()
    i = 0
    while True:
        i = data.index(b"PK\x01\x02", i)
        (nlen,) = struct.unpack_from("<H", data, i + 28)
        if bytes(data[i + 46 : i + 46 + nlen]) == encoded:
            struct.pack_into("<I", data, i + 24, declared)
            break
        i += 4
    path.write_bytes(bytes(data))
    return path


def lying_size_zip(path: Path) -> Path:
    """A stored member whose central directory declares fewer bytes than it holds."""
    write_zip(path, {"config.json": b'{"a": "' + b"x" * 1000 + b'"}'})
    data = bytearray(path.read_bytes())
    i = data.index(b"PK\x01\x02")
    struct.pack_into("<I", data, i + 24, 10)
    path.write_bytes(bytes(data))
    return path


def many_members_zip(path: Path, n: int = 10_001) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for i in range(n):
            zf.writestr(f"assets/{i}", b"")
    return path


def keras_zip(
    path: Path,
    config: Any,
    *,
    weights: bytes | None = None,
    npz: bytes | None = None,
    extra: dict[str, bytes] | None = None,
    config_text: str | None = None,
) -> Path:
    members = {
        "metadata.json": json.dumps(
            {"keras_version": "3.15.1", "date_saved": "2026-01-01@00:00:00"}
        ).encode(),
        "config.json": (config_text if config_text is not None else json.dumps(config)).encode(),
    }
    if weights is not None:
        members["model.weights.h5"] = weights
    if npz is not None:
        members["model.weights.npz"] = npz
    members.update(extra or {})
    return write_zip(path, members)


# --- HDF5 -----------------------------------------------------------------------------------------


def plain_weights_h5(path: Path) -> Path:
    with h5py.File(path, "w") as f:
        g = f.create_group("layers/dense/vars")
        g.attrs["name"] = "d"
        g.create_dataset("0", data=np.ones((4, 4), "f4"))
        g.create_dataset("1", data=np.zeros((4,), "f4"))
        f.create_group("vars")
    return path


def h5_bytes(build: Any, tmp: Path) -> bytes:
    p = tmp / "_tmp_weights.h5"
    build(p)
    data = p.read_bytes()
    p.unlink()
    return data


def external_link_h5(path: Path) -> Path:
    plain_weights_h5(path)
    with h5py.File(path, "a") as f:
        f["layers/dense/vars/2"] = h5py.ExternalLink("/etc/passwd", "/x")
    return path


def soft_cycle_h5(path: Path) -> Path:
    plain_weights_h5(path)
    with h5py.File(path, "a") as f:
        f["layers/dense/vars/loop"] = h5py.SoftLink("/layers")
        f["a"] = h5py.SoftLink("/b")
        f["b"] = h5py.SoftLink("/a")
    return path


def soft_link_h5(path: Path) -> Path:
    plain_weights_h5(path)
    with h5py.File(path, "a") as f:
        f["alias"] = h5py.SoftLink("/layers/dense/vars/0")
    return path


def hard_cycle_h5(path: Path) -> Path:
    with h5py.File(path, "w") as f:
        g = f.create_group("a/b")
        g["up"] = f["a"]  # a hard link to an ancestor: a cycle a naive walker never leaves
    return path


def external_dataset_h5(path: Path, target: Path) -> Path:
    target.write_bytes(b"\x00" * 64)
    with h5py.File(path, "w") as f:
        f.create_dataset("layers/dense/vars/0", shape=(4, 4), dtype="f4", external=[(str(target), 0, 64)])
    return path


def virtual_dataset_h5(path: Path) -> Path:
    layout = h5py.VirtualLayout(shape=(4,), dtype="f4")
    layout[:] = h5py.VirtualSource("/etc/other.h5", "x", shape=(4,))
    with h5py.File(path, "w") as f:
        f.create_virtual_dataset("layers/dense/vars/0", layout)
    return path


def shape_bomb_h5(path: Path) -> Path:
    with h5py.File(path, "w") as f:
        f.create_dataset("layers/dense/vars/0", shape=(1_000_000, 1_000_000), dtype="f4", chunks=(64, 64))
    return path


def legacy_h5(path: Path, model_config: Any, training_config: Any = None) -> Path:
    with h5py.File(path, "w") as f:
        f.attrs["model_config"] = json.dumps(model_config)
        f.attrs["keras_version"] = "2.15.0"
        f.attrs["backend"] = "tensorflow"
        if training_config is not None:
            f.attrs["training_config"] = json.dumps(training_config)
        f.create_group("model_weights")
    return path


# --- npz ------------------------------------------------------------------------------------------


def npz_bytes(tmp: Path, arrays: dict[str, np.ndarray]) -> bytes:
    p = tmp / "_tmp_weights.npz"
    np.savez(p, **arrays)
    data = p.read_bytes()
    p.unlink()
    return data


class MkdirOnUnpickle:
    """Unpickling this object calls ``os.mkdir(canary)``: a harmless, observable side effect."""

    def __init__(self, canary: str) -> None:
        self.canary = canary

    def __reduce__(self) -> tuple[Any, ...]:
        import os

        return (os.mkdir, (self.canary,))


def pickled_npz(tmp: Path, canary: str) -> bytes:
    arr = np.empty((), dtype=object)
    arr[()] = {"0": MkdirOnUnpickle(canary)}
    return npz_bytes(tmp, {"layers/dense": arr})
