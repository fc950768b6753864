"""Hostile model files made from real Keras samples, one per security rule: the payloads of the Keras
advisories, put into ``samples/k3/cnn.keras`` / ``cnn.h5`` (written by Keras 3.15.1) as an attacker
would edit a downloaded model. Shared by the writer-gate tests and the advisory-table tests.

Everything is generated here with the standard library, NumPy and h5py; nothing here is ever loaded
by Keras or executed.
"""

from __future__ import annotations

import json
import sys
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _hostile as H  # noqa: E402

K3 = Path(__file__).resolve().parents[2] / "samples" / "k3"
CNN_KERAS = K3 / "cnn.keras"
CNN_H5 = K3 / "cnn.h5"


# --- building hostile files from the real sample --------------------------------------------------


def _members() -> dict[str, bytes]:
    with zipfile.ZipFile(CNN_KERAS) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def _config() -> dict[str, Any]:
    return json.loads(_members()["config.json"])


def _layer(cfg: dict[str, Any], name: str) -> dict[str, Any]:
    return next(lyr for lyr in cfg["config"]["layers"] if lyr["config"]["name"] == name)


def _keras(
    path: Path, cfg: Any = None, *, text: str | None = None, extra: dict[str, bytes] | None = None
) -> Path:
    members = _members()
    if cfg is not None:
        members["config.json"] = json.dumps(cfg).encode()
    if text is not None:
        members["config.json"] = text.encode()
    members.update(extra or {})
    return H.write_zip(path, members)


def _edit(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        cfg = _config()
        change(cfg)
        return _keras(tmp / "hostile.keras", cfg)

    return build


def _swap_dropout(class_name: str, **config: Any) -> Callable[[dict[str, Any]], None]:
    """Turn the sample's Dropout layer 'drop' into ``class_name`` (same name and wiring)."""

    def change(cfg: dict[str, Any]) -> None:
        drop = _layer(cfg, "drop")
        drop["class_name"] = class_name
        drop["config"].update(config)

    return change


def _probs(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(cfg: dict[str, Any]) -> None:
        _layer(cfg, "probs")["config"][key] = value

    return change


def _lambda_bytecode(cfg: dict[str, Any]) -> None:
    lam = H.keras3_lambda("drop", H.lambda_code("lambda x: x"))
    drop = _layer(cfg, "drop")
    drop.update({k: v for k, v in lam.items() if k not in ("inbound_nodes", "name")})


def _renamed(old: str, new: str) -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        text = _members()["config.json"].decode().replace(json.dumps(old), json.dumps(new))
        return _keras(tmp / "hostile.keras", text=text)

    return build


def _with_member(name: str, data: bytes) -> Callable[[Path], Path]:
    return lambda tmp: _keras(tmp / "hostile.keras", extra={name: data})


def _weights_h5(change: Callable[[h5py.File, Path], None]) -> Callable[[Path], Path]:
    """The sample with its ``model.weights.h5`` changed by ``change(file, tmp)``."""

    def build(tmp: Path) -> Path:
        weights = tmp / "w.h5"
        weights.write_bytes(_members()["model.weights.h5"])
        with h5py.File(weights, "a") as f:
            change(f, tmp)
        return _keras(tmp / "hostile.keras", extra={"model.weights.h5": weights.read_bytes()})

    return build


def _legacy(change: Callable[[h5py.File, Path], None]) -> Callable[[Path], Path]:
    """The legacy ``cnn.h5`` sample changed by ``change(file, tmp)``."""

    def build(tmp: Path) -> Path:
        path = tmp / "hostile.h5"
        path.write_bytes(CNN_H5.read_bytes())
        with h5py.File(path, "a") as f:
            change(f, tmp)
        return path

    return build


def _external_dataset(f: h5py.File, tmp: Path) -> None:
    (tmp / "secret.bin").write_bytes(b"\x00" * 64)
    f.create_dataset("extra", shape=(4, 4), dtype="f4", external=[(str(tmp / "secret.bin"), 0, 64)])


def _virtual_dataset(f: h5py.File, tmp: Path) -> None:
    layout = h5py.VirtualLayout(shape=(4,), dtype="f4")
    layout[:] = h5py.VirtualSource(str(tmp / "other.h5"), "x", shape=(4,))
    f.create_virtual_dataset("extra", layout)


def _soft_cycle(f: h5py.File, tmp: Path) -> None:
    f["a"] = h5py.SoftLink("/b")
    f["b"] = h5py.SoftLink("/a")


def _crc_mismatch(tmp: Path) -> Path:
    path = _keras(tmp / "hostile.keras")
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("metadata.json")
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[start + 2] ^= 0x01  # one byte of the stored metadata.json; its CRC-32 no longer matches
    path.write_bytes(bytes(data))
    return path


def _duplicate_config(tmp: Path) -> Path:
    path = _keras(tmp / "hostile.keras")
    with warnings.catch_warnings(), zipfile.ZipFile(path, "a") as zf:
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate name it is asked to write
        zf.writestr("config.json", b"{}")
    return path


def _polyglot(tmp: Path) -> Path:
    path = tmp / "hostile.keras"
    path.write_bytes(CNN_H5.read_bytes() + _keras(tmp / "inner.keras").read_bytes())
    return path


# rule -> (builder, exit code every writer ends with). 4: the model loads and the gate refuses it;
# 3: the reader refuses the container first. Either way nothing is written.
CASES: dict[str, tuple[Callable[[Path], Path], int]] = {
    "SEC001": (_edit(_lambda_bytecode), 4),
    "SEC002": (
        _edit(_probs("activation", {"class_name": "__lambda__", "config": {"code": "AAAA"}})),
        4,
    ),
    "SEC003": (
        _edit(
            _probs(
                "kernel_initializer",
                {"module": "os", "class_name": "function", "config": "system", "registered_name": None},
            )
        ),
        4,
    ),
    "SEC005": (_edit(_swap_dropout("TorchModuleWrapper", module="gASVAAAAAAAAAACMAm9zlC4=")), 4),
    "SEC006": (_edit(_swap_dropout("TFSMLayer", filepath="/tmp/attacker_savedmodel")), 4),
    "SEC007": (
        _edit(
            _probs(
                "kernel_regularizer",
                {
                    "module": "keras.utils",
                    "class_name": "function",
                    "config": "get_file",
                    "registered_name": None,
                },
            )
        ),
        4,
    ),
    "SEC008": (_edit(_swap_dropout("StringLookup", vocabulary="/etc/passwd")), 4),
    "SEC014": (_renamed("drop", "../../../../tmp/x"), 4),
    "SEC101": (_with_member("../../evil.txt", b"x"), 3),
    "SEC104": (_duplicate_config, 3),
    "SEC105": (_with_member("evil.py", b"import os"), 4),
    "SEC107": (
        lambda tmp: _keras(
            tmp / "hostile.keras", extra={"model.weights.npz": H.pickled_npz(tmp, str(tmp / "canary"))}
        ),
        4,
    ),
    "SEC108": (_legacy(lambda f, tmp: f.__setitem__("extra", h5py.ExternalLink("/etc/passwd", "/x"))), 4),
    "SEC110": (_legacy(_soft_cycle), 4),
    "SEC111": (_weights_h5(_external_dataset), 3),
    "SEC112": (_weights_h5(_virtual_dataset), 3),
    "SEC113": (
        _weights_h5(
            lambda f, tmp: f.create_dataset("extra", shape=(10**6, 10**6), dtype="f4", chunks=(64, 64))
        ),
        3,
    ),
    "SEC114": (lambda tmp: _keras(tmp / "hostile.keras", text=H.deep_json(100_000)), 3),
    "SEC115": (_renamed("drop", "enable_unsafe_deserialization"), 4),
    "SEC117": (_crc_mismatch, 3),
    "SEC119": (_polyglot, 3),
}

# Error-severity rules with no case above, and why a writer cannot meet them after a load.
NOT_WRITER_CASES = {
    "SEC009": "legacy Merge layers are Keras 1 only; the Keras 1 reader refuses a lambda mode (test_keras1.py)",
    "SEC100": "the container cannot be scanned at all: the reader cannot read it either (exit 3)",
    "SEC102": "zip symlinks and special files: covered for every command in test_hostile_files.py",
    "SEC103": "zip bombs are refused by the reader before anything is built (test_safe_io.py)",
    "SEC118": "HDF5 link/nesting bounds are refused by the reader (test_hostile_files.py)",
}


# --- the same payloads in the legacy .h5 sample (model_config attribute) ---------------------------


def _h5_config(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], Path]:
    def edit(f: h5py.File, tmp: Path) -> None:
        cfg = json.loads(f.attrs["model_config"])
        change(cfg)
        f.attrs["model_config"] = json.dumps(cfg)

    return _legacy(edit)


def _legacy_merge(cfg: dict[str, Any]) -> None:
    drop = _layer(cfg, "drop")
    drop["class_name"] = "Merge"
    drop["config"].update(
        {"mode": H.b64_bytecode(H.lambda_code("lambda xs: xs[0]")), "mode_type": "lambda", "concat_axis": -1}
    )


def _symlink_member(tmp: Path) -> Path:
    path = _keras(tmp / "hostile.keras")
    with zipfile.ZipFile(path, "a") as zf:
        info = zipfile.ZipInfo("assets/link")
        info.create_system = 3
        info.external_attr = 0o120777 << 16
        zf.writestr(info, "/etc/passwd")
    return path


H5_CASES: dict[str, Callable[[Path], Path]] = {
    "SEC001": _h5_config(_lambda_bytecode),
    "SEC002": _h5_config(_probs("activation", {"class_name": "__lambda__", "config": {"code": "AAAA"}})),
    "SEC009": _h5_config(_legacy_merge),
}
"""Payloads that also matter in a legacy ``.h5`` (where Keras loaders treat Lambdas differently)."""

EXTRA_CASES: dict[str, Callable[[Path], Path]] = {
    "SEC009": _edit(_legacy_merge),
    "SEC102": _symlink_member,
}
"""Payloads with no writer case (the reader refuses them, or they are Keras 1 only), for validate."""


def payload(rule: str, fmt: str) -> Callable[[Path], Path] | None:
    """A builder of a hostile file for ``rule`` in container ``fmt`` (``keras`` or ``h5``), or None."""
    if fmt == "h5":
        if rule in H5_CASES:
            return H5_CASES[rule]
        if rule in ("SEC108", "SEC110"):  # these CASES are legacy .h5 files already
            return CASES[rule][0]
        return None
    if rule in ("SEC108", "SEC110"):
        return None
    if rule in CASES:
        return CASES[rule][0]
    return EXTRA_CASES.get(rule)
