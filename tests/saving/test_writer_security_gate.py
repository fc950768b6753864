"""Writers never carry what ``validate`` forbids: every error-severity security rule against every writer.

Each hostile file is the real Keras 3.15.1 sample ``samples/k3/cnn.keras`` (or its legacy ``cnn.h5``)
with one payload put in, as an attacker would edit a downloaded model. Every writer (``convert`` to
``.keras`` and ``.h5``, ``extract``, ``export``) must end without writing anything: exit 4 with one
line naming the rule when the model loads (the security gate, :mod:`modelgraph.saving.security_gate`),
or exit 3 when the reader already refuses the container. The expected exit code of each case is
pinned, so a payload that starts loading must meet the gate.
"""

from __future__ import annotations

import json
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import pytest
from click.testing import CliRunner

from modelgraph.cli.main import cli
from modelgraph.validate.security import SECURITY_RULES

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "validate"))
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
    import warnings

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

WRITERS: dict[str, Callable[[Path, Path], list[str]]] = {
    "convert-keras": lambda model, out: ["convert", str(model), "-o", str(out / "out.keras")],
    "convert-h5": lambda model, out: ["convert", str(model), "-o", str(out / "out.h5")],
    "extract": lambda model, out: ["extract", str(model), "--outputs", "gap", "-o", str(out / "sub.keras")],
    "export": lambda model, out: ["export", str(model), "-o", str(out / "model.onnx")],
}


def test_every_error_rule_has_a_writer_case_or_a_reason() -> None:
    errors = {rid for rid, rule in SECURITY_RULES.items() if rule.severity == "error"}
    assert errors == set(CASES) | set(NOT_WRITER_CASES)
    assert not set(CASES) & set(NOT_WRITER_CASES)


@pytest.mark.parametrize("rule", sorted(CASES))
def test_validate_reports_the_rule(tmp_path: Path, rule: str) -> None:
    import modelgraph

    build, _code = CASES[rule]
    report = modelgraph.validate(build(tmp_path))
    assert rule in {i.rule for i in report.issues if i.severity == "error"}, report.issues


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("rule", sorted(CASES))
def test_no_writer_writes_a_hostile_input(tmp_path: Path, rule: str, writer: str) -> None:
    build, code = CASES[rule]
    model = build(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    result = CliRunner().invoke(cli, WRITERS[writer](model, out))
    assert result.exit_code == code, (result.exit_code, result.output)
    assert list(out.iterdir()) == [], "nothing may be written"
    assert not (tmp_path / "canary").exists(), "a pickle was loaded"
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("modelgraph: error: "), result.output
    if code == 4:
        assert f"{rule} at " in lines[0] and f"modelgraph validate {model}" in lines[0], lines[0]


def test_a_graph_with_no_file_behind_it_has_its_configs_checked(tmp_path: Path) -> None:
    from dataclasses import replace

    import modelgraph
    from modelgraph.errors import SecurityRefusedError

    graph = modelgraph.load(CASES["SEC006"][0](tmp_path))
    in_memory = replace(graph, source="")
    with pytest.raises(SecurityRefusedError, match="SEC006") as caught:
        modelgraph.save(in_memory, tmp_path / "out.keras")
    assert [f.rule for f in caught.value.findings] == ["SEC006"]
    assert not (tmp_path / "out.keras").exists()


def test_the_clean_sample_still_converts(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["convert", str(CNN_KERAS), "-o", str(tmp_path / "out.keras")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out.keras").stat().st_size > 0
