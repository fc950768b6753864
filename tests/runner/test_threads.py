"""The thread policy (modelgraph.runner.threads): the cores a process may use (affinity, cgroup v1/v2
quotas read from real files laid out like /sys/fs/cgroup), the load probe, and pinning, checked
through the BLAS thread count threadpoolctl reports while a model runs. No timings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from threadpoolctl import threadpool_info

import modelgraph
from modelgraph.cli.main import cli
from modelgraph.errors import UsageError
from modelgraph.runner import parallel, threads

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
CNN = SAMPLES / "k3" / "cnn.keras"
CNN_GOLDEN = SAMPLES / "goldens" / "k3_cnn.npz"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def blas_threads() -> int | None:
    pools = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    return pools[0] if pools else None


@pytest.fixture(autouse=True)
def _no_pin(monkeypatch):
    monkeypatch.delenv(threads.ENV_VAR, raising=False)
    monkeypatch.delenv(threads.LEGACY_ENV_VAR, raising=False)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    yield
    threads.set_threads(None)


# --- cgroup quotas ----------------------------------------------------------------------------------


def test_cgroup_v2_takes_the_smallest_quota_of_the_cgroup_and_its_ancestors(tmp_path):
    proc = write(tmp_path / "proc_cgroup", "0::/user.slice/job\n")
    root = tmp_path / "cg"
    write(root / "cpu.max", "max 100000\n")
    write(root / "user.slice" / "cpu.max", "250000 100000\n")
    write(root / "user.slice" / "job" / "cpu.max", "max 100000\n")
    assert threads.cgroup_quota(proc, root) == 2.5
    write(root / "user.slice" / "job" / "cpu.max", "150000 100000\n")
    assert threads.cgroup_quota(proc, root) == 1.5


def test_cgroup_v2_unlimited_or_unreadable_is_no_quota(tmp_path):
    proc = write(tmp_path / "proc_cgroup", "0::/a\n")
    root = tmp_path / "cg"
    write(root / "a" / "cpu.max", "max 100000\n")
    assert threads.cgroup_quota(proc, root) is None
    write(root / "a" / "cpu.max", "garbage\n")
    assert threads.cgroup_quota(proc, root) is None
    assert threads.cgroup_quota(tmp_path / "missing", root) is None


def test_cgroup_v1_cfs_quota_under_a_combined_cpu_mount(tmp_path):
    proc = write(
        tmp_path / "proc_cgroup",
        "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n",
    )
    root = tmp_path / "cg"
    write(root / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_quota_us", "50000\n")
    write(root / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_period_us", "100000\n")
    assert threads.cgroup_quota(proc, root) == 0.5
    write(root / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_quota_us", "-1\n")
    assert threads.cgroup_quota(proc, root) is None


def test_a_container_sees_its_own_cgroup_as_the_mount_root(tmp_path):
    """Inside a cgroup namespace the path is '/', and the quota sits at the mount's root."""
    proc = write(tmp_path / "proc_cgroup", "1:cpu:/\n")
    root = tmp_path / "cg"
    write(root / "cpu" / "cpu.cfs_quota_us", "300000\n")
    write(root / "cpu" / "cpu.cfs_period_us", "100000\n")
    assert threads.cgroup_quota(proc, root) == 3.0
    # a path the mount does not show (the host's view) falls back to the directories above it
    write(proc, "1:cpu:/kubepods/pod1/ctr\n")
    assert threads.cgroup_quota(proc, root) == 3.0


def test_usable_cores_are_the_affinity_capped_by_the_quota(monkeypatch):
    threads.usable_cores.cache_clear()
    try:
        monkeypatch.setattr(threads, "affinity_cores", lambda: 8)
        monkeypatch.setattr(threads, "cgroup_quota", lambda: 1.5)
        assert threads.usable_cores() == 2
        threads.usable_cores.cache_clear()
        monkeypatch.setattr(threads, "cgroup_quota", lambda: None)
        assert threads.usable_cores() == 8
        threads.usable_cores.cache_clear()
        monkeypatch.setattr(threads, "cgroup_quota", lambda: 0.2)
        assert threads.usable_cores() == 1
    finally:
        threads.usable_cores.cache_clear()


# --- the load probe ---------------------------------------------------------------------------------


def test_procs_running_and_own_running_threads_read_proc_files(tmp_path):
    stat = write(tmp_path / "stat", "cpu  1 2 3 4\nintr 5\nprocs_running 5\nprocs_blocked 0\n")
    tasks = tmp_path / "task"
    write(tasks / "100" / "stat", "100 (python3) R 1 100 100 0")
    write(tasks / "101" / "stat", "101 (a (b) R c) S 1 100 100 0")  # the name holds ") R "
    write(tasks / "102" / "stat", "102 (OpenBLAS) R 1 100")
    assert threads.procs_running(stat) == 5
    assert threads.own_running(tasks) == 2
    assert threads.other_runnable(stat, tasks) == 3
    assert threads.procs_running(write(tmp_path / "bad", "nothing here\n")) is None
    assert threads.other_runnable(tmp_path / "none", tasks) == 0


@pytest.mark.parametrize(
    "cores, others, machine, expected",
    [
        (2, 0, 2, 2),  # idle
        (2, 1, 2, 1),  # one busy process on a 2-core machine
        (2, 2, 2, 1),  # never below one
        (4, 1, 4, 3),
        (2, 16, 64, 1),  # 2 of 64 CPUs, 16 busy elsewhere: half a core of ours is taken
        (2, 8, 64, 1),
        (2, 0, 64, 2),
    ],
)
def test_auto_threads_leave_the_cores_other_processes_need(cores, others, machine, expected):
    assert threads.auto_threads(cores, others, machine) == expected


def test_the_live_probe_answers_within_the_usable_cores():
    assert 1 <= threads.decide_threads() <= threads.usable_cores()


# --- pinning ------------------------------------------------------------------------------------------


def test_pin_order_api_then_variable_then_old_variable(monkeypatch):
    assert threads.pinned_threads() is None
    monkeypatch.setenv(threads.LEGACY_ENV_VAR, "3")
    assert threads.pinned_threads() == 3
    monkeypatch.setenv(threads.ENV_VAR, "2")
    assert threads.pinned_threads() == 2
    threads.set_threads(1)
    assert threads.pinned_threads() == 1 and threads.decide_threads() == 1
    threads.set_threads(None)
    assert threads.pinned_threads() == 2


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5"])
def test_a_bad_thread_variable_is_a_usage_error_naming_it(monkeypatch, value):
    monkeypatch.setenv(threads.ENV_VAR, value)
    with pytest.raises(UsageError, match=threads.ENV_VAR):
        threads.pinned_threads()
    with pytest.raises(UsageError):
        threads.set_threads(0)


def test_a_run_sets_blas_to_its_count_and_restores_it():
    before = blas_threads()
    if before is None:
        pytest.skip("no BLAS threadpoolctl can control")
    with threads.run_threads(1) as n:
        assert n == 1 and threads.thread_count() == 1 and blas_threads() == 1
        assert parallel.thread_count() == 1
        with threads.run_threads() as inner:  # a nested run keeps the outer count
            assert inner == 1 and blas_threads() == 1
    assert blas_threads() == before


def test_openblas_num_threads_caps_blas_but_not_the_runner(monkeypatch):
    if blas_threads() is None:
        pytest.skip("no BLAS threadpoolctl can control")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    with threads.run_threads(2):
        assert threads.thread_count() == 2 and blas_threads() == 1


def _golden():
    with np.load(CNN_GOLDEN, allow_pickle=False) as g:
        return {k: g[k] for k in g.files}


@pytest.mark.parametrize("how", ["runner", "api", "set_threads", "env"])
def test_a_pinned_count_is_what_blas_runs_with_during_a_model_run(how, monkeypatch):
    """Seen from inside the run (the progress callback fires within it): BLAS has the pinned count,
    and the outputs are Keras's whatever the count."""
    if blas_threads() is None:
        pytest.skip("no BLAS threadpoolctl can control")
    golden = _golden()
    x = golden["input/img"]
    seen: list[tuple[int | None, int]] = []

    def progress(done: int, total: int) -> None:
        seen.append((blas_threads(), threads.thread_count()))

    for pin in (1, 2):
        runner = modelgraph.Runner(modelgraph.load(CNN), threads=pin if how == "runner" else None)
        if how == "set_threads":
            threads.set_threads(pin)
        if how == "env":
            monkeypatch.setenv(threads.ENV_VAR, str(pin))
        if how == "api":
            with threads.run_threads(pin):
                out = runner.run(x, progress=progress)
            assert modelgraph.run(runner, x, threads=pin).keys() == out.keys()
        else:
            out = runner.run(x, progress=progress)
        assert seen[-1] == (pin, pin)
        np.testing.assert_allclose(out["probs"], golden["output/0"], rtol=1e-4, atol=1e-5)
    threads.set_threads(None)


def test_cli_threads_option_and_a_bad_variable():
    res = CliRunner().invoke(cli, ["run", str(CNN), "--random", "--threads", "1"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["run", str(CNN), "--random", "--threads", "0"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    res = CliRunner().invoke(cli, ["run", str(CNN), "--random"], env={threads.ENV_VAR: "many"})
    assert res.exit_code == 2, res.output
    assert threads.ENV_VAR in res.output and "Traceback" not in res.output
