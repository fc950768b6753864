"""``validate --executor dask``: a real LocalCluster of two worker processes; one worker is killed
(SIGKILL) in the middle of the scan and the results file still ends with exactly one record per
model. dask[distributed] is a test dependency (the ``dask`` extra)."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner

distributed = pytest.importorskip("distributed")

from modelgraph.cli.main import cli  # noqa: E402
from modelgraph.validate.api import Options, find_targets  # noqa: E402
from modelgraph.validate.dask_executor import DaskExecutor  # noqa: E402
from modelgraph.validate.records import ResultsWriter, iter_records, options_to_json  # noqa: E402
from modelgraph.validate.scan import scan  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
K2 = REPO / "samples" / "k2"


@pytest.fixture(scope="module")
def cluster() -> object:
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=50
    ) as c:
        yield c


def make_registry(folder: Path, n: int) -> Path:
    folder.mkdir()
    for i in range(n):
        shutil.copy(
            K2 / ("mha.h5" if i % 2 else "cnn.json"), folder / f"m{i:02d}{'.h5' if i % 2 else '.json'}"
        )
    (folder / "bad.keras").write_bytes(b"PK\x03\x04 truncated")
    return folder


def test_a_worker_killed_mid_scan_loses_nothing_and_duplicates_nothing(
    cluster: object, tmp_path: Path
) -> None:
    reg = make_registry(tmp_path / "reg", 24)
    results = tmp_path / "r.jsonl"
    executor = DaskExecutor(scheduler=cluster.scheduler_address, batch=2)
    client = executor.start()
    pids = client.run(os.getpid)
    assert len(pids) == 2
    killed: list[int] = []

    def kill_one(record: dict, stats: object) -> None:
        if stats.checked == 4 and not killed:  # halfway through the first batches
            pid = next(iter(pids.values()))
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    try:
        with ResultsWriter(results) as w:
            stats = scan(
                find_targets([reg]).targets,
                options_to_json(Options()),
                executor,
                write=w.write,
                on_record=kill_one,
            )
    finally:
        executor.close()
    assert killed
    paths = [r["path"] for _, r in iter_records(results)]
    assert sorted(paths) == sorted(str(p) for p in reg.iterdir())  # exactly one record per model
    assert stats.checked == 25 and stats.failed == 1
    verdicts = {Path(r["path"]).name: r["verdict"] for _, r in iter_records(results)}
    assert verdicts.pop("bad.keras") == "failed" and set(verdicts.values()) == {"ok"}


def test_cli_scan_on_an_existing_cluster_then_resume(cluster: object, tmp_path: Path) -> None:
    reg = make_registry(tmp_path / "reg", 4)
    results = tmp_path / "r.jsonl"
    args = ["validate", str(reg), "--results", str(results), "--executor", "dask"]
    out = CliRunner().invoke(cli, [*args, "--scheduler", cluster.scheduler_address])
    assert out.exit_code == 1 and "5 model(s) checked" in out.stdout, out.output
    out = CliRunner().invoke(cli, [*args, "--scheduler", cluster.scheduler_address, "--resume"])
    assert "0 model(s) checked, 5 already recorded" in out.stdout and out.exit_code == 1
    assert len(list(iter_records(results))) == 5


def test_dask_needs_workers_or_a_scheduler(tmp_path: Path) -> None:
    out = CliRunner().invoke(
        cli, ["validate", str(K2 / "mha.h5"), "--results", str(tmp_path / "r.jsonl"), "--executor", "dask"]
    )
    assert out.exit_code == 2 and "--workers N" in out.output
