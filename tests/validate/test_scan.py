"""Registry scans: discovery by content, ``--results`` JSONL, ``--resume``, ``--cache``, bounds (STR015).

The models are copies of the Keras-made samples (samples/k2, samples/k3, samples/tfjs) laid out the
way registries and packages hold them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from modelgraph.cli.main import cli
from modelgraph.validate.api import Options, find_targets, validate
from modelgraph.validate.bounded import BoundedChecker
from modelgraph.validate.discover import Target
from modelgraph.validate.records import ResultsWriter, iter_records, options_to_json

REPO = Path(__file__).resolve().parents[2]
K2 = REPO / "samples" / "k2"
K3 = REPO / "samples" / "k3"
SCHEMAS = REPO / "schemas"


@pytest.fixture()
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small registry: a package folder as the issue describes (a to_json model.json beside a full
    model.h5 and another .hdf5), a config paired with its weights, a .keras, a TF.js folder, a Keras 3
    sharded index with its shards, a README."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()  # no stray config from the checkout
    reg = tmp_path / "reg"
    pkg = reg / "pkg"
    pkg.mkdir(parents=True)
    shutil.copy(K2 / "cnn.json", pkg / "model.json")
    shutil.copy(K2 / "cnn.h5", pkg / "model.h5")
    shutil.copy(K2 / "mha.h5", pkg / "other.hdf5")
    pair = reg / "pair"
    pair.mkdir()
    shutil.copy(K2 / "mha.json", pair / "model.json")
    shutil.copy(K2 / "mha_weights.h5", pair / "model_weights.h5")
    shutil.copy(K3 / "mha.keras", reg / "mha.keras")
    shutil.copytree(REPO / "samples" / "tfjs" / "mha", reg / "tfjs_mha")
    for f in K3.glob("multi_io_list_sharded*"):
        shutil.copy(f, reg / f.name)
    (reg / "README.md").write_text("# models\n")
    return reg


def rel(reg: Path, paths: list[str]) -> list[str]:
    return sorted(Path(p).relative_to(reg).as_posix() for p in paths)


def test_discovery_is_by_content_and_pairs_configs_with_their_weights(registry: Path) -> None:
    found = find_targets([registry])
    assert rel(registry, found.models) == [
        "mha.keras",
        "multi_io_list_sharded.weights.json",
        "pair/model.json",
        "pkg/model.h5",
        "pkg/model.json",
        "pkg/other.hdf5",
        "tfjs_mha",
    ]
    assert rel(registry, found.skipped) == ["README.md"]
    pairs = {t.path: t.weights for t in found.targets if t.weights}
    assert pairs == {str(registry / "pair" / "model.json"): str(registry / "pair" / "model_weights.h5")}
    report = {Path(r.path).relative_to(registry).as_posix(): r for r in validate([registry])}
    # the to_json model.json is a model of its own, not a TF.js folder (no false STR003)
    assert report["pkg/model.json"].format == "json_config" and report["pkg/model.json"].ok
    assert report["pkg/model.h5"].format == "legacy_h5" and report["pkg/other.hdf5"].format == "legacy_h5"
    paired = report["pair/model.json"]
    assert paired.ok and not any(i.rule == "STR013" for i in paired.issues)
    assert paired.model is not None and paired.model.params == report["pkg/other.hdf5"].model.params > 0


SAVEDMODEL = REPO / "samples" / "savedmodel"


def test_configs_pair_with_tensorflow_checkpoints_and_shards_go_with_their_index(tmp_path: Path) -> None:
    """``m.json`` beside the checkpoint tf_keras's ``save_weights`` wrote (``m.index`` + data shards +
    TensorFlow's ``checkpoint`` file) is one model with weights; a folder's only config and only
    checkpoint pair whatever their names; a checkpoint alone is a weights-only target; nothing of a
    checkpoint is listed as unrecognised."""
    named, single, alone = tmp_path / "named", tmp_path / "single", tmp_path / "alone"
    for folder in (named, single, alone):
        folder.mkdir()
    for name in ("cnn_bn", "seq_mlp"):
        shutil.copy(SAVEDMODEL / f"{name}.json", named / f"{name}.json")
        for f in (SAVEDMODEL / "ckpt").glob(f"{name}.*"):
            shutil.copy(f, named / f.name)
    shutil.copy(SAVEDMODEL / "ckpt" / "checkpoint", named / "checkpoint")
    shutil.copy(SAVEDMODEL / "mha.json", single / "architecture.json")
    for f in (SAVEDMODEL / "ckpt").glob("mha.*"):
        shutil.copy(f, single / f.name.replace("mha", "ckpt-7"))
    for f in (SAVEDMODEL / "ckpt").glob("frozen.*"):
        shutil.copy(f, alone / f.name)
    found = find_targets([tmp_path])
    assert found.skipped == []
    pairs = {Path(t.path).relative_to(tmp_path).as_posix(): t.weights for t in found.targets}
    assert pairs == {
        "named/cnn_bn.json": str(named / "cnn_bn.index"),
        "named/seq_mlp.json": str(named / "seq_mlp.index"),
        "single/architecture.json": str(single / "ckpt-7.index"),
        "alone/frozen.index": None,
    }
    report = {Path(r.path).relative_to(tmp_path).as_posix(): r for r in validate([tmp_path])}
    for name in ("named/cnn_bn.json", "named/seq_mlp.json", "single/architecture.json"):
        result = report[name]
        assert result.ok and not any(i.rule in ("STR013", "WGT008") for i in result.issues), result.issues
        assert result.model is not None and result.model.params > 0
    assert [i.rule for i in report["alone/frozen.index"].issues] == ["STR013"]


def test_a_model_file_with_another_name_is_found_by_its_content(tmp_path: Path) -> None:
    shutil.copy(K3 / "mha.keras", tmp_path / "blob.bin")
    shutil.copy(K2 / "mha.h5", tmp_path / "weights.dat")
    (tmp_path / "data.npz").write_bytes(b"PK\x03\x04not a keras zip")
    assert sorted(Path(p).name for p in find_targets([tmp_path]).models) == ["blob.bin", "weights.dat"]


def scan(*args: object) -> object:
    return CliRunner().invoke(cli, ["validate", *map(str, args)])


def test_results_resume_and_cache(registry: Path, tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    results = tmp_path / "out.jsonl"
    out = scan(registry, "--results", results, "--jobs", "2", "--cache", tmp_path / "cache")
    assert out.exit_code == 0, out.output
    records = [r for _, r in iter_records(results)]
    assert sorted(r["path"] for r in records) == sorted(find_targets([registry]).models)
    schema = json.loads((SCHEMAS / "validate_record.schema.json").read_text())
    for r in records:
        jsonschema.validate(r, schema)
    by_path = {Path(r["path"]).relative_to(registry).as_posix(): r for r in records}
    assert by_path["pkg/model.h5"]["model"]["params"] > 0 and by_path["pkg/model.h5"]["keras_version"]
    assert by_path["pair/model.json"]["weights"].endswith("model_weights.h5")
    assert by_path["multi_io_list_sharded.weights.json"]["findings"][0]["rule"] == "STR013"

    # --resume: nothing recorded again
    out = scan(registry, "--results", results, "--resume")
    assert out.exit_code == 0 and "0 model(s) checked, 7 already recorded" in out.stdout
    assert len(list(iter_records(results))) == 7

    # a changed file is checked again; the same bytes under a new name come from the cache
    shutil.copy(K3 / "mha.h5", registry / "pkg" / "other.hdf5")
    shutil.copy(K3 / "mha.keras", registry / "mha_copy.keras")
    out = scan(registry, "--results", results, "--resume", "--cache", tmp_path / "cache")
    assert out.exit_code == 0 and "2 model(s) checked, 6 already recorded, 1 from the cache" in out.stdout
    new = [r for _, r in iter_records(results)][7:]
    assert {Path(r["path"]).name: r["cached"] for r in new} == {"other.hdf5": False, "mha_copy.keras": True}
    copy = next(r for r in new if r["cached"])
    assert copy["sha256"] == by_path["mha.keras"]["sha256"]
    assert all(f["path"] == copy["path"] for f in copy["findings"])


def test_findings_are_streamed_and_fail_the_scan(tmp_path: Path) -> None:
    bad = tmp_path / "bad.keras"
    bad.write_bytes((K3 / "mha.keras").read_bytes()[:5000])  # truncated
    shutil.copy(K3 / "mha.keras", tmp_path / "good.keras")
    out = scan(tmp_path, "--results", tmp_path / "r.jsonl")
    assert out.exit_code == 1
    assert str(bad) in out.stdout and "1 model(s) failed" in out.stdout
    verdicts = {Path(r["path"]).name: r["verdict"] for _, r in iter_records(tmp_path / "r.jsonl")}
    assert verdicts == {"bad.keras": "failed", "good.keras": "ok"}


@pytest.mark.parametrize(
    "args",
    [
        ["--format", "json"],
        ["--format", "sarif"],
        ["--weights", str(K2 / "mha_weights.h5")],
    ],
)
def test_results_refuse_whole_document_formats(tmp_path: Path, args: list[str]) -> None:
    out = scan(K2 / "mha.json", "--results", tmp_path / "r.jsonl", *args)
    assert out.exit_code == 2


def test_resume_needs_results(tmp_path: Path) -> None:
    assert scan(K2 / "mha.h5", "--resume").exit_code == 2


def test_a_killed_scan_leaves_whole_records_and_resume_finishes_it(tmp_path: Path) -> None:
    reg = tmp_path / "reg"
    reg.mkdir()
    for i in range(12):
        shutil.copy(K2 / ("mha.h5" if i % 2 else "cnn.h5"), reg / f"m{i:02d}.h5")
    results = tmp_path / "r.jsonl"
    cmd = [sys.executable, "-m", "modelgraph", "validate", str(reg), "--results", str(results)]
    proc = subprocess.Popen(cmd, cwd=tmp_path, start_new_session=True, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not results.exists() or results.read_bytes().count(b"\n") < 3):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    with open(results, "ab") as fh:  # as if the kill had landed in the middle of a write
        fh.write(b'{"schema_version":"1.0","path":')
    whole = [r["path"] for _, r in iter_records(results)]
    assert 3 <= len(whole) < 12
    out = subprocess.run([*cmd, "--resume"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"{12 - len(whole)} model(s) checked, {len(whole)} already recorded" in out.stdout
    lines = results.read_bytes().splitlines()
    assert all(json.loads(line) for line in lines)  # the partial line was cut before appending
    assert sorted(json.loads(line)["path"] for line in lines) == sorted(str(p) for p in reg.iterdir())


def test_results_writer_cuts_a_partial_last_line(tmp_path: Path) -> None:
    f = tmp_path / "r.jsonl"
    f.write_bytes(b'{"path":"a","sha256":"1"}\n{"path":"b","sha')
    assert [r["path"] for _, r in iter_records(f)] == ["a"]
    with ResultsWriter(f) as w:
        w.write({"path": "c", "sha256": "2"})
    assert [r["path"] for _, r in iter_records(f)] == ["a", "c"]


def test_str015_a_check_past_its_time_limit_is_stopped_and_the_next_one_runs() -> None:
    checker = BoundedChecker(options_to_json(Options()), timeout=0.02)
    try:
        rec = checker.check(Target(str(K2 / "cnn.h5")))
        assert [f["rule"] for f in rec["findings"]] == ["STR015"] and rec["verdict"] == "failed"
        assert "time limit" in rec["findings"][0]["message"] and rec["sha256"]
        checker.timeout = 120
        assert checker.check(Target(str(K2 / "mha.h5")))["verdict"] == "ok"
    finally:
        checker.close()


def test_str015_a_check_process_that_dies_is_reported_and_replaced() -> None:
    checker = BoundedChecker(options_to_json(Options()), timeout=120)
    try:
        assert checker.check(Target(str(K2 / "mha.h5")))["verdict"] == "ok"
        pid = checker._proc.pid
        # the OOM killer (or a crash in a native library) takes the child down mid-check
        threading.Timer(0.01, os.kill, (pid, signal.SIGKILL)).start()
        rec = checker.check(Target(str(K2 / "cnn.h5")))
        assert [f["rule"] for f in rec["findings"]] == ["STR015"]
        assert "died (signal 9)" in rec["findings"][0]["message"]
        assert checker.check(Target(str(K2 / "mha.h5")))["verdict"] == "ok"
    finally:
        checker.close()


def test_str015_near_miss_a_check_within_its_limits_has_no_str015() -> None:
    checker = BoundedChecker(options_to_json(Options()), timeout=120, max_memory_mb=2048)
    try:
        rec = checker.check(Target(str(K2 / "cnn.h5")))
        assert rec["verdict"] == "ok" and not rec["findings"]
    finally:
        checker.close()


def test_a_directory_detect_recognises_is_one_model_and_is_not_walked(tmp_path: Path) -> None:
    """The hook for directory formats: whatever loading.detect says about a directory (here a
    TensorFlow SavedModel, refused or read depending on the loaders) makes it one target; the
    files inside it (variables/, assets/) are not targets of their own."""
    sm = tmp_path / "exported"
    (sm / "variables").mkdir(parents=True)
    (sm / "saved_model.pb").write_bytes(b"\x08\x01\x12\x00")
    (sm / "variables" / "variables.index").write_bytes(b"\0" * 64)
    shutil.copy(K2 / "mha.h5", sm / "variables" / "stray.h5")
    shutil.copy(K2 / "mha.h5", tmp_path / "model.h5")
    found = find_targets([tmp_path])
    assert sorted(Path(p).name for p in found.models) == ["exported", "model.h5"]
    assert not found.skipped
