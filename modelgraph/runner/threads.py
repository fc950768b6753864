"""The thread policy: how many threads a run gives its kernels and BLAS, decided in one place.

A model run has two kinds of parallel work: the runner's own threads (:mod:`modelgraph.runner.parallel`
spreads a kernel's blocks over them, each on single-threaded BLAS) and OpenBLAS's thread pool (one
GEMM split over its workers). Both must fit the cores the process can actually get, or threads wait
for each other: on a 2-core machine beside one busy process, MobileNetV2 at batch 1 took 2.3x longer
with every pool at 2 threads than with 1, NASNetMobile 4.2x.

The policy, applied by :func:`run_threads` at the start of every run:

* **pinned**: :func:`set_threads` (the Python API, ``threads=`` of ``Runner`` and ``modelgraph.run``,
  ``--threads N`` on the command line), else the ``MODELGRAPH_THREADS`` variable
  (``MODELGRAPH_NUM_THREADS``, its older name, too): that many threads, whatever the load.
* **otherwise** the cores the process may use (:func:`usable_cores`: the CPU affinity mask and the
  cgroup CPU quota, v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us``, of this cgroup and its ancestors),
  less the cores other processes are busy on, at least 1. That is measured over the time since the
  last probe (:func:`other_busy_cores`: the machine's busy CPU time from ``/proc/stat`` less this
  process's own, per second, rounded), so a process busy through the window counts and a thread
  that is runnable for a moment does not. The first probe, and one after more than
  :data:`MAX_WINDOW_SECONDS`, has no such window and counts the threads of other processes runnable
  right now instead (:func:`other_runnable`). A probe costs tens to hundreds of microseconds and is
  repeated at most every :data:`PROBE_SECONDS`.

BLAS gets the same count for the run (set through threadpoolctl, the ecosystem's library for BLAS and
OpenMP pools, restored after the run), unless ``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS`` cap it
lower. Parallel regions never nest: while the runner spreads a kernel's blocks, BLAS runs each call
single-threaded (``parallel.for_each``), and a block never spreads further. Small calls stay whole:
a kernel under ``parallel.SPREAD_MIN_WORK`` runs serially on BLAS's threads, and OpenBLAS itself runs
small GEMMs on one thread.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from modelgraph.errors import UsageError

ENV_VAR = "MODELGRAPH_THREADS"
LEGACY_ENV_VAR = "MODELGRAPH_NUM_THREADS"
# Seconds an automatic decision is reused before the load is probed again.
PROBE_SECONDS = 0.25

_LOCK = threading.Lock()
_pinned: int | None = None
_auto: tuple[CpuSample, int] | None = None  # the CPU times read at the last probe, and its threads
_current: int | None = None  # the count of the run in progress


# --- what the process may use -----------------------------------------------------------------------


def affinity_cores() -> int:
    """CPUs in this process's affinity mask (``os.cpu_count()`` where there is no such mask)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _quota_v2(text: str) -> float | None:
    """CPUs allowed by a cgroup v2 ``cpu.max`` line (``"QUOTA PERIOD"`` or ``"max PERIOD"``)."""
    parts = text.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        quota, period = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def _quota_v1(quota_text: str | None, period_text: str | None) -> float | None:
    """CPUs allowed by cgroup v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (-1: unlimited)."""
    try:
        quota, period = int(quota_text or ""), int(period_text or "")
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def _ancestors(root: Path, rel: str) -> Iterator[Path]:
    """``root/rel`` and every directory above it up to ``root`` (those that exist)."""
    parts = [p for p in rel.split("/") if p and p not in (".", "..")]
    for depth in range(len(parts), -1, -1):
        path = root.joinpath(*parts[:depth])
        if path.is_dir():
            yield path


def cgroup_quota(
    proc_cgroup: Path = Path("/proc/self/cgroup"), cgroup_root: Path = Path("/sys/fs/cgroup")
) -> float | None:
    """CPUs (possibly fractional) the cgroup CPU quota allows this process, or None when unlimited.

    Reads the process's cgroups from ``proc_cgroup`` and the smallest quota of its cgroup and every
    ancestor: v2 (``0::/path`` and ``cpu.max`` under ``cgroup_root``) and v1 (a ``cpu`` controller line,
    ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` under ``cgroup_root/cpu`` or ``cgroup_root/cpu,cpuacct``).
    A container sees its own cgroup as ``/``: the root of the mount is read then."""
    text = _read(proc_cgroup)
    if text is None:
        return None
    quotas: list[float] = []
    for line in text.splitlines():
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        _, controllers, rel = fields
        if controllers == "":
            for path in _ancestors(cgroup_root, rel):
                value = _read(path / "cpu.max")
                quota = None if value is None else _quota_v2(value)
                if quota is not None:
                    quotas.append(quota)
        elif "cpu" in controllers.split(","):
            for mount in (cgroup_root / "cpu", cgroup_root / "cpu,cpuacct", cgroup_root / controllers):
                if not mount.is_dir():
                    continue
                for path in _ancestors(mount, rel):
                    quota = _quota_v1(_read(path / "cpu.cfs_quota_us"), _read(path / "cpu.cfs_period_us"))
                    if quota is not None:
                        quotas.append(quota)
                break
    return min(quotas) if quotas else None


@cache
def usable_cores() -> int:
    """Cores this process may use: its affinity mask, capped by the cgroup CPU quota (rounded up:
    a quota of 1.5 CPUs still runs two threads at once part of the time). Looked up once."""
    cores = affinity_cores()
    quota = cgroup_quota()
    if quota is not None:
        cores = min(cores, max(1, math.ceil(quota)))
    return max(1, cores)


# --- what other processes are using right now ---------------------------------------------------------


def procs_running(stat: Path = Path("/proc/stat")) -> int | None:
    """Threads runnable on the whole machine right now (``procs_running`` of ``stat``), or None."""
    text = _read(stat)
    if text is None:
        return None
    for line in text.splitlines():
        if line.startswith("procs_running "):
            value = line.split()[1]
            return int(value) if value.isdigit() else None
    return None


def own_running(task_dir: Path = Path("/proc/self/task")) -> int:
    """This process's threads that are running or runnable (state ``R`` in ``task_dir/*/stat``), at
    least 1 (the caller)."""
    running = 0
    try:
        tasks = list(task_dir.iterdir())
    except OSError:
        return 1
    for task in tasks:
        text = _read(task / "stat")
        if text is None:
            continue
        # The state follows the command name, which is in parentheses and may hold spaces.
        after = text.rpartition(")")[2].split()
        if after and after[0] == "R":
            running += 1
    return max(1, running)


# Reads of procs_running per probe, PROBE_GAP_SECONDS apart; the fewest counts. A process that is busy
# is runnable in every read; a thread runnable in only some of them (a kernel thread's moment of work,
# or one of this process's own OpenBLAS workers finishing its spin after the last GEMM) is not
# competing for a core. Back to back (0.1 ms for all three) the reads still caught this machine's
# memory-monitoring kernel thread (about 7% of a core, in short bursts) in 2 of 3 first probes after a
# pause; half a millisecond apart, in none of 6.
PROBE_READS = 3
PROBE_GAP_SECONDS = 0.0005


def other_runnable(stat: Path = Path("/proc/stat"), task_dir: Path = Path("/proc/self/task")) -> int:
    """Runnable threads of other processes right now: the fewest of :data:`PROBE_READS` reads of
    ``procs_running`` less this process's running threads, counted *before* those reads (0 when
    ``stat`` cannot be read).

    The order matters: during the probe this process's threads can only stop running (its OpenBLAS
    workers end their spin after the last GEMM; nothing starts a new one), so counting them first
    can only under-count the others, never count one of our own workers as another process's. (Read
    after the reads, as before, that worker made the policy halve the threads on an idle machine:
    ResNet50 at batch 1 ran on one thread after 7-9 of 16 probes.)"""
    own = own_running(task_dir)
    readings = []
    for read in range(PROBE_READS):
        if read:
            time.sleep(PROBE_GAP_SECONDS)
        value = procs_running(stat)
        if value is not None:
            readings.append(value)
    if not readings:
        return 0
    return max(0, min(readings) - own)


# --- what other processes used over the last moments -------------------------------------------------

# Busy fields of /proc/stat's "cpu" line: user, nice, system, irq, softirq (guest time is already in
# user; idle, iowait and steal are not work of this machine's processes).
_BUSY_FIELDS = (0, 1, 2, 5, 6)
# A window shorter than this holds too few clock ticks (10 ms each at USER_HZ 100) to measure. One
# longer than MAX_WINDOW_SECONDS mostly describes the past: a run after a pause would be decided by
# whatever ran during the pause (bench/bench_runner.py's workers take turns: with 5 s, modelgraph's
# first runs of each round went to one thread because Keras had kept both cores busy 1-4 s before).
# Outside them the instant probe decides.
MIN_WINDOW_SECONDS = 0.1
MAX_WINDOW_SECONDS = 1.0


@dataclass(frozen=True)
class CpuSample:
    """One reading of the CPU time spent: ``wall`` (``time.monotonic()``), ``machine`` (seconds all
    processes of the machine were busy, from ``/proc/stat``; None when it cannot be read) and ``own``
    (seconds this process's threads used, ``time.process_time()``)."""

    wall: float
    machine: float | None
    own: float


def machine_busy_seconds(stat: Path = Path("/proc/stat")) -> float | None:
    """Seconds of CPU time all the machine's processes have spent busy since boot (the ``cpu`` line of
    ``stat``), or None when it cannot be read."""
    text = _read(stat)
    if text is None:
        return None
    fields = text.partition("\n")[0].split()
    if len(fields) < 8 or fields[0] != "cpu" or not all(f.isdigit() for f in fields[1:8]):
        return None
    ticks = sum(int(fields[1 + i]) for i in _BUSY_FIELDS)
    return ticks / _clock_ticks()


@cache
def _clock_ticks() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK")) or 100
    except (AttributeError, OSError, ValueError):  # pragma: no cover - not POSIX
        return 100


def cpu_sample(stat: Path = Path("/proc/stat")) -> CpuSample:
    """The CPU time spent so far, by the machine and by this process."""
    return CpuSample(time.monotonic(), machine_busy_seconds(stat), time.process_time())


def other_busy_cores(before: CpuSample, after: CpuSample) -> float | None:
    """Cores other processes kept busy on average between two samples (the machine's busy time less
    this process's, per second), or None when the machine's time was not readable or the window is
    outside ``[MIN_WINDOW_SECONDS, MAX_WINDOW_SECONDS]``.

    Unlike a count of runnable threads at one moment, this sees what competed for the cores over the
    window: a busy process counts as about one core, a kernel thread that wakes now and then as a few
    hundredths, and this process's own threads (OpenBLAS's spinning workers too) not at all."""
    span = after.wall - before.wall
    if (
        before.machine is None
        or after.machine is None
        or not MIN_WINDOW_SECONDS <= span <= MAX_WINDOW_SECONDS
    ):
        return None
    return max(0.0, (after.machine - before.machine) - (after.own - before.own)) / span


def auto_threads(cores: int, others: int, machine: int | None = None) -> int:
    """Threads for a run when nothing is pinned: the ``cores`` the process may use less the
    ``others`` threads of other processes that want a core now, at least 1. When the process may
    use only some of the ``machine``'s CPUs, its share of the others is counted (they spread over
    every CPU)."""
    machine = max(cores, machine or cores)
    busy = others * cores / machine
    return max(1, min(cores, cores - math.ceil(busy - 1e-9)))


# --- pinning and the count of a run ---------------------------------------------------------------


def positive_threads(value: Any, where: str = "threads") -> int:
    """``value`` as a thread count (a positive int, or text of one); a UsageError naming ``where`` else."""
    if isinstance(value, bool) or not isinstance(value, int):
        text = str(value).strip()
        if not text.isdigit():
            raise UsageError(f"{where} must be a positive whole number of threads, got {value!r}")
        value = int(text)
    if value < 1:
        raise UsageError(f"{where} must be a positive whole number of threads, got {value}")
    return value


def set_threads(count: int | None) -> None:
    """Pin every later run of this process to ``count`` threads (runner and BLAS), or with None go
    back to the automatic policy (or ``MODELGRAPH_THREADS``)."""
    global _pinned
    _pinned = None if count is None else positive_threads(count, "the thread count")


def pinned_threads() -> int | None:
    """The pinned count: :func:`set_threads`, else ``MODELGRAPH_THREADS`` (or its older name), else
    None. A variable that is set but not a positive whole number is a UsageError."""
    if _pinned is not None:
        return _pinned
    for var in (ENV_VAR, LEGACY_ENV_VAR):
        value = os.environ.get(var, "").strip()
        if value:
            return positive_threads(value, var)
    return None


def decide_threads() -> int:
    """The thread count a run starting now gets (see the module docstring)."""
    global _auto
    pinned = pinned_threads()
    if pinned is not None:
        return pinned
    now = time.monotonic()
    with _LOCK:
        if _auto is None or now - _auto[0].wall > PROBE_SECONDS:
            sample = cpu_sample()
            busy = None if _auto is None else other_busy_cores(_auto[0], sample)
            others = other_runnable() if busy is None else int(busy + 0.5)
            _auto = (sample, auto_threads(usable_cores(), others, os.cpu_count()))
        return _auto[1]


def thread_count() -> int:
    """Threads a kernel may use: the count of the run in progress; outside a run the pinned count,
    else every usable core."""
    if _current is not None:
        return _current
    pinned = pinned_threads()
    return pinned if pinned is not None else usable_cores()


def blas_cap() -> int | None:
    """The BLAS thread count the user set with ``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS``, if any."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(var, "").split(",")[0].strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return None


@cache
def _controller() -> Any:
    """threadpoolctl's view of the BLAS libraries loaded (NumPy's OpenBLAS), built once."""
    import numpy  # noqa: F401 - loads the BLAS the controller must find
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _blas_pools() -> list[Any]:
    """threadpoolctl's controllers of the BLAS libraries loaded (read and set directly: building
    its ``info()`` dicts or a ``limit()`` context on every run costs 60-150 us)."""
    return [c for c in _controller().lib_controllers if c.user_api == "blas"]


@dataclass(frozen=True)
class BlasLibrary:
    """A BLAS library NumPy runs, as threadpoolctl reports it: ``kernels`` is the kernel set it picked
    for this CPU (OpenBLAS's core type), ``chosen_by`` the environment variable that chose it instead
    (``OPENBLAS_CORETYPE=...``), if one is set."""

    library: str
    version: str | None
    kernels: str | None
    chosen_by: str | None


def blas_libraries() -> list[BlasLibrary]:
    """The BLAS libraries loaded (NumPy's OpenBLAS), for ``run --profile``: OpenBLAS's kernel set
    decides GEMM speed (on an AVX-512 machine Haswell's kernels, pinned by ``OPENBLAS_CORETYPE``,
    ran sgemm at about half the speed of the SkylakeX ones it picks itself)."""
    found = []
    for pool in _blas_pools():
        api = str(pool.internal_api)
        coretype = os.environ.get("OPENBLAS_CORETYPE", "").strip() if api == "openblas" else ""
        found.append(
            BlasLibrary(
                library=api,
                version=getattr(pool, "version", None),
                kernels=getattr(pool, "architecture", None),
                chosen_by=f"OPENBLAS_CORETYPE={coretype}" if coretype else None,
            )
        )
    return found


def blas_threads_now() -> int | None:
    """Threads of the first BLAS pool threadpoolctl finds (None: no BLAS it can control)."""
    pools = _blas_pools()
    return int(pools[0].get_num_threads()) if pools else None


@contextmanager
def run_threads(count: int | None = None) -> Iterator[int]:
    """Run the block as one model run: decide its thread count (``count`` pins it for this run),
    make it what :func:`thread_count` answers, and set BLAS to it (capped by the user's
    ``OPENBLAS_NUM_THREADS``), restoring BLAS and the previous count afterwards. Yields the count.
    Runs nest (an unfused plan run inside a fused one): the inner keeps the outer's count."""
    global _current
    if _current is not None and count is None:
        yield _current
        return
    threads = positive_threads(count, "threads") if count is not None else decide_threads()
    cap = blas_cap()
    blas = threads if cap is None else min(threads, cap)
    previous = _current
    _current = threads
    changed: list[tuple[Any, int]] = []
    try:
        for pool in _blas_pools():
            before = pool.get_num_threads()
            if before != blas:
                pool.set_num_threads(blas)
                changed.append((pool, before))
        yield threads
    finally:
        for pool, before in changed:
            pool.set_num_threads(before)
        _current = previous
