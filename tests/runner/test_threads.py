"""The thread policy (modelgraph.runner.threads): the cores a process may use (affinity, cgroup v1/v2
quotas read from real files laid out like /sys/fs/cgroup), the load probe, and pinning, checked
through the BLAS thread count threadpoolctl reports while a model runs. No timings."""

from __future__ import annotations

import subprocess
import sys
import time
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


def test_the_instant_probe_counts_own_threads_first_and_takes_the_fewest_runnable(tmp_path, monkeypatch):
    # This process's OpenBLAS worker is still spinning when the probe starts (2 of ours running) and
    # stops during it; a kernel thread is runnable in one read. Neither is another busy process.
    order: list[str] = []
    readings = iter([3, 2, 2])

    def procs_running(stat=None):
        order.append("machine")
        return next(readings)

    def own_running(task_dir=None):
        order.append("own")
        return 2

    monkeypatch.setattr(threads, "procs_running", procs_running)
    monkeypatch.setattr(threads, "own_running", own_running)
    assert threads.other_runnable() == 0
    assert order == ["own", "machine", "machine", "machine"]
    readings = iter([4, 4, 4])  # another process busy through every read
    assert threads.other_runnable() == 2


def test_machine_busy_time_is_the_work_fields_of_the_cpu_line(tmp_path):
    ticks = threads._clock_ticks()
    # user nice system idle iowait irq softirq steal guest guest_nice: idle, iowait and steal are not work
    stat = write(tmp_path / "stat", "cpu  100 20 30 4000 500 6 7 800 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 9\n")
    assert threads.machine_busy_seconds(stat) == pytest.approx(163 / ticks)
    assert threads.machine_busy_seconds(write(tmp_path / "bad", "intr 1 2 3\n")) is None
    assert threads.machine_busy_seconds(write(tmp_path / "short", "cpu  1 2\n")) is None
    assert threads.machine_busy_seconds(tmp_path / "none") is None


def test_other_busy_cores_is_the_machine_time_less_our_own_per_second():
    before = threads.CpuSample(wall=10.0, machine=100.0, own=5.0)
    # Over 0.5 s the machine was busy 1.3 s, 0.8 s of it this process's (two threads and a spinning
    # OpenBLAS worker): the others kept one core busy.
    after = threads.CpuSample(wall=10.5, machine=101.3, own=5.8)
    assert threads.other_busy_cores(before, after) == pytest.approx(1.0)
    # Tick rounding can make our own time exceed the machine's: never below zero.
    assert threads.other_busy_cores(before, threads.CpuSample(10.5, 100.5, 5.6)) == 0.0
    # Too short a window (a few clock ticks), too long (old news) or an unreadable /proc/stat: no answer.
    assert threads.other_busy_cores(before, threads.CpuSample(10.05, 100.1, 5.0)) is None
    assert threads.other_busy_cores(before, threads.CpuSample(16.0, 106.0, 5.0)) is None
    assert threads.other_busy_cores(threads.CpuSample(10.0, None, 5.0), after) is None


def test_a_busy_process_shows_in_the_window_and_our_own_work_does_not():
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)  # started and spinning
        before = threads.cpu_sample()
        time.sleep(0.5)
        after = threads.cpu_sample()
    finally:
        spinner.kill()
        spinner.wait()
    busy = threads.other_busy_cores(before, after)
    assert busy is not None and busy >= 0.5
    # This process spinning for 0.4 s of CPU time (however long that takes on a loaded machine):
    # process_time() sees it, and /proc/stat's busy time includes it (within tick rounding), so
    # subtracting the one from the other removes it.
    before = threads.cpu_sample()
    give_up = time.monotonic() + 10.0
    while time.process_time() - before.own < 0.4 and time.monotonic() < give_up:
        pass
    after = threads.cpu_sample()
    own = after.own - before.own
    assert own >= 0.4
    assert after.machine - before.machine >= own - 0.05


def test_decisions_after_the_first_use_the_window_since_the_last_probe(monkeypatch):
    samples = iter(
        [
            threads.CpuSample(wall=1.0, machine=50.0, own=1.0),
            threads.CpuSample(wall=1.5, machine=50.95, own=1.9),  # others: 0.1 core (a kernel thread)
            threads.CpuSample(wall=2.0, machine=51.9, own=2.3),  # others: 1 core (a busy process)
        ]
    )
    instant: list[int] = []

    def other_runnable():
        instant.append(1)
        return 1

    monkeypatch.setattr(threads, "cpu_sample", lambda: next(samples))
    monkeypatch.setattr(threads, "other_runnable", other_runnable)
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(threads, "PROBE_SECONDS", -1.0)  # probe at every decision
    monkeypatch.setattr(threads, "_auto", None)
    assert threads.decide_threads() == 1 and instant == [1]  # no window yet: the instant probe
    assert threads.decide_threads() == 2 and instant == [1]  # 0.1 busy core is not a competitor
    assert threads.decide_threads() == 1 and instant == [1]


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


def test_the_onnxruntime_backend_runs_on_the_runs_thread_count():
    """onnxruntime fixes a session's pool when it is built: the backend builds one per count a run
    asks for (two kept), so a session built while the machine was busy does not keep one thread."""
    pytest.importorskip("onnxruntime")
    golden = _golden()
    x = golden["input/img"]
    threads.set_threads(1)
    runner = modelgraph.Runner(modelgraph.load(CNN), backend="onnxruntime")
    session = runner.backend_session
    assert session.thread_counts == [1]
    for pin, kept in ((2, [1, 2]), (1, [1, 2]), (3, [1, 3]), (2, [1, 2])):
        threads.set_threads(pin)
        out = runner.run(x)
        assert session.thread_counts == kept
        assert session.session_for(pin).get_session_options().intra_op_num_threads == pin
        np.testing.assert_allclose(out["probs"], golden["output/0"], rtol=1e-4, atol=1e-5)
    threads.set_threads(None)
    # Pinned on the Runner: that count, whatever the process-wide pin.
    runner = modelgraph.Runner(modelgraph.load(CNN), backend="onnxruntime", threads=2)
    threads.set_threads(1)
    runner.run(x)
    assert runner.backend_session.thread_counts == [2]
    threads.set_threads(None)


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
