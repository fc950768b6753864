"""Run a plan's independent steps side by side: the cells of NASNet-like models have five branches
that do not read each other, and at batch 8 most of their steps are too small to spread their own
blocks over the cores (:mod:`modelgraph.runner.parallel`), so one core idled while the other worked.

One parallel region at a time, never nested: an *exclusive* step runs alone, as in a serial run
(its blocks spread over the cores, BLAS on all the run's threads); every other step runs beside
others with its blocks serial and BLAS on one thread. BLAS's process-wide thread count is therefore
only changed while no other step runs. Which steps are exclusive is fixed when the schedule is made
(those a simulated run starts with nothing else running or ready), not by the timing of each run,
so every run computes every step the same way and gives the same numbers.

Whether a plan is run this way is decided per input shape by measuring, not by a fixed step length
(:class:`ShapeSchedule`): a few serial runs timed step by step feed a simulated run on the threads;
when it predicts a gain, the next :data:`TRIAL_RUNS` runs go side by side, timed whole, and the
schedule is kept only if the fastest of them took at most :data:`MAX_MEASURED_FRACTION` of the
fastest serial run. Whether side by side pays depends on how long a step's work is next
to its Python, which the GIL serialises, and that moves with the machine: NASNetMobile at batch 8
had median steps of over 0.4 ms on the 2-core machine this was first measured on and has 0.21 ms
on a faster one, and gains on both (434 -> 299 ms; 112 -> 76-87 ms), while at batch 1 (0.035 ms)
it runs 1.3-1.5x slower side by side. The first side-by-side run of a shape also makes each
thread's scratch, so the trial takes the fastest of three. A step beside others may round
differently from the same step spread over the cores in a serial run (its GEMMs split otherwise):
within float32 rounding.
"""

from __future__ import annotations

import heapq
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from modelgraph.runner import parallel

# A plan is tried side by side when a simulated run on the threads finishes in at most this fraction
# of the serial time ...
MAX_PREDICTED_FRACTION = 0.85
# ... for this many runs, timed whole; it keeps the schedule when the fastest of them took at most this
# fraction of the fastest serial run.
TRIAL_RUNS = 3
MAX_MEASURED_FRACTION = 0.95

# Threads of their own: a step's blocks use parallel.py's pool, and sharing it could leave a step
# waiting for a thread that waits for the step.
_STEPS = parallel.ThreadPool("modelgraph-steps")


@dataclass(frozen=True)
class StepGraph:
    """Which steps wait for which: ``waits[i]`` producers step ``i`` reads from, ``consumers[i]`` the
    steps reading step ``i``'s outputs, ``readers[s]`` the steps reading slot ``s``; ``inputs[i]`` and
    ``outputs[i]`` step ``i``'s slots."""

    waits: tuple[int, ...]
    consumers: tuple[tuple[int, ...], ...]
    readers: dict[int, int]
    inputs: tuple[tuple[int, ...], ...]
    outputs: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, inputs: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]]) -> StepGraph:
        """From each step's input slots and output slots (in plan order)."""
        producer: dict[int, int] = {}
        for i, slots in enumerate(outputs):
            for s in slots:
                producer[s] = i
        reads = tuple(tuple(set(slots)) for slots in inputs)
        consumers: list[set[int]] = [set() for _ in reads]
        waits = []
        readers: dict[int, int] = {}
        for i, slots in enumerate(reads):
            before = {producer[s] for s in slots if s in producer and producer[s] != i}
            for p in before:
                consumers[p].add(i)
            waits.append(len(before))
            for s in slots:
                readers[s] = readers.get(s, 0) + 1
        return cls(
            tuple(waits),
            tuple(tuple(sorted(c)) for c in consumers),
            readers,
            reads,
            tuple(tuple(slots) for slots in outputs),
        )


@dataclass(frozen=True)
class SideBySide:
    """A plan's side-by-side schedule: the steps that run alone (``exclusive``: their blocks spread
    over the cores, BLAS on all threads), every other step beside others (serially, BLAS on one)."""

    exclusive: frozenset[int]
    predicted_seconds: float
    serial_seconds: float


def simulate(graph: StepGraph, seconds: Sequence[float], workers: int) -> SideBySide:
    """A run whose steps take ``seconds`` on ``workers`` threads, each free thread taking the ready
    step earliest in plan order: its finishing time, and the steps that started with no other step
    running or ready (they run alone in :func:`run_side_by_side`)."""
    waits = list(graph.waits)
    ready = [i for i, w in enumerate(waits) if w == 0]
    heapq.heapify(ready)
    running: list[tuple[float, int]] = []
    exclusive: set[int] = set()
    now = 0.0
    while ready or running:
        while ready and len(running) < workers:
            i = heapq.heappop(ready)
            if not running and not ready:
                exclusive.add(i)
            heapq.heappush(running, (now + seconds[i], i))
        now, done = heapq.heappop(running)
        for j in graph.consumers[done]:
            waits[j] -= 1
            if waits[j] == 0:
                heapq.heappush(ready, j)
    return SideBySide(frozenset(exclusive), now, float(sum(seconds)))


def side_by_side_plan(graph: StepGraph, seconds: Sequence[float], workers: int) -> SideBySide | None:
    """The schedule worth trying for a plan whose steps took ``seconds`` in a serial run on
    ``workers`` threads, or None when a simulated run predicts no gain (see the module docstring)."""
    if workers < 2 or not seconds:
        return None
    plan = simulate(graph, seconds, workers)
    return plan if plan.predicted_seconds <= MAX_PREDICTED_FRACTION * plan.serial_seconds else None


class ShapeSchedule:
    """The side-by-side decision for one input shape of a plan, from its own runs: a warm-up, then
    ``timed_runs`` serial runs timed step by step, then (when :func:`side_by_side_plan` predicts a
    gain) :data:`TRIAL_RUNS` side-by-side runs timed whole. Once decided, :meth:`plan` is fixed."""

    def __init__(self, timed_runs: int) -> None:
        self._timed_runs = timed_runs
        self._serial_runs = 0
        self._fastest_steps: list[float] | None = None
        self._fastest_serial = math.inf
        self._trial: SideBySide | None = None
        self._trial_seconds: list[float] = []
        self.decided = False
        self.kept: SideBySide | None = None

    def plan(self) -> SideBySide | None:
        """The schedule the next run uses: the kept one, the one on trial, or None (serial)."""
        return self.kept if self.decided else self._trial

    def serial_timing(self, steps: int) -> list[float] | None:
        """Per-step seconds to fill in the serial run about to start, or None when it is not timed
        (the warm-up, or after the decision)."""
        if self.decided:
            return None
        self._serial_runs += 1
        return [0.0] * steps if self._serial_runs > 1 else None

    def serial_done(self, step_seconds: list[float], seconds: float, graph: StepGraph, workers: int) -> None:
        """Record a timed serial run (each step's time and the whole run's); after the last one,
        start a trial or decide on serial runs."""
        fastest = self._fastest_steps
        # Each step's fastest of the timed runs (a run slowed by another process says little).
        self._fastest_steps = (
            step_seconds
            if fastest is None
            else [min(a, b) for a, b in zip(fastest, step_seconds, strict=True)]
        )
        self._fastest_serial = min(self._fastest_serial, seconds)
        if self._serial_runs > self._timed_runs:
            self._trial = side_by_side_plan(graph, self._fastest_steps, workers)
            self._fastest_steps = None
            self.decided = self._trial is None

    def trial_done(self, seconds: float) -> None:
        """Record a side-by-side run's time; after the last trial, keep the schedule if it paid."""
        if self.decided:
            return
        self._trial_seconds.append(seconds)
        if len(self._trial_seconds) >= TRIAL_RUNS:
            self.decided = True
            if min(self._trial_seconds) <= MAX_MEASURED_FRACTION * self._fastest_serial:
                self.kept = self._trial


def run_side_by_side(
    graph: StepGraph,
    plan: SideBySide,
    workers: int,
    blas_threads: int,
    run_step: Callable[[int], None],
    release: Callable[[int], None],
) -> None:
    """Run every step (``run_step(i)``) once its producers are done, on ``workers`` threads (the
    caller's and pool threads), ``release(s)`` once every reader of slot ``s`` is done (an output
    nothing reads: once it is written). The plan's exclusive steps start only when no other step
    runs, and none starts while one runs; they get BLAS's ``blas_threads`` and may spread their
    blocks; every other step runs its blocks serially with BLAS on one thread. So each step computes
    the same way in every run (the same numbers run after run), whatever the timing. The first
    exception is re-raised once the running steps are done; no step starts after it."""
    set_blas = parallel.blas_thread_setter()
    waits = list(graph.waits)
    readers = dict(graph.readers)
    ready = [i for i, w in enumerate(waits) if w == 0]
    heapq.heapify(ready)
    total = len(waits)
    cv = threading.Condition()
    state = {"running": 0, "done": 0, "blas": blas_threads, "alone": False}
    errors: list[BaseException] = []

    def startable() -> bool:
        if not ready or state["alone"]:
            return False
        return ready[0] not in plan.exclusive or state["running"] == 0

    def work() -> None:
        while True:
            with cv:
                while not startable() and state["done"] < total and not errors:
                    cv.wait()
                if errors or state["done"] >= total:
                    return
                i = heapq.heappop(ready)
                alone = i in plan.exclusive
                state["running"] += 1
                state["alone"] = alone
                want = blas_threads if alone else 1
                if set_blas is not None and state["blas"] != want:
                    set_blas(want)
                    state["blas"] = want
            try:
                with parallel.serial_kernels(not alone):
                    run_step(i)
            except BaseException as exc:  # noqa: BLE001 - re-raised by the caller's thread
                with cv:
                    errors.append(exc)
                    state["running"] -= 1
                    state["alone"] = False
                    cv.notify_all()
                return
            with cv:
                state["running"] -= 1
                state["alone"] = False
                state["done"] += 1
                for s in graph.inputs[i]:
                    readers[s] -= 1
                    if readers[s] == 0:
                        release(s)
                for s in graph.outputs[i]:
                    if s not in readers:
                        release(s)
                for j in graph.consumers[i]:
                    waits[j] -= 1
                    if waits[j] == 0:
                        heapq.heappush(ready, j)
                cv.notify_all()

    futures = _STEPS.run_each(workers - 1, work)
    try:
        work()
    finally:
        for future in futures:
            future.result()
        if set_blas is not None and state["blas"] != blas_threads:
            set_blas(blas_threads)
    if errors:
        raise errors[0]
