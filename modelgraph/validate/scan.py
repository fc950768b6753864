"""A streaming scan: targets in, one JSON record per model out, as each finishes.

The client side of ``validate --results``: targets come lazily from
:func:`~modelgraph.validate.discover.iter_targets`; those already recorded (``--resume``) are passed
over; the rest go to an executor that checks them under bounds (:mod:`modelgraph.validate.bounded`)
and hands back records in the order they finish. Only the client writes the results file, so each
model gets exactly one record whatever happens to the processes or machines doing the checking.

Executors: :class:`LocalExecutor` (``--jobs N`` child processes on this machine) and
:class:`~modelgraph.validate.dask_executor.DaskExecutor` (a Dask cluster). Both keep a bounded number
of models in flight, so the client's memory does not grow with the size of the registry.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from modelgraph.validate.bounded import DEFAULT_MAX_MEMORY_MB, DEFAULT_TIMEOUT, BoundedChecker
from modelgraph.validate.discover import Target


@dataclass(frozen=True)
class Bounds:
    """What each check may use, and where the content-hash cache is."""

    timeout: float = DEFAULT_TIMEOUT
    max_memory_mb: int = DEFAULT_MAX_MEMORY_MB
    cache_dir: str | None = None


class Executor(Protocol):
    def run(
        self, targets: Iterable[Target], options: dict[str, Any], bounds: Bounds
    ) -> Iterator[dict[str, Any]]:
        """Records of ``targets``, in the order they finish; exactly one per target."""
        ...


@dataclass
class ScanStats:
    """Counts of a scan so far."""

    checked: int = 0
    resumed: int = 0
    cached: int = 0
    failed: int = 0
    bytes: int = 0
    findings: dict[str, int] = field(default_factory=lambda: {"error": 0, "warning": 0, "info": 0})

    def add(self, record: dict[str, Any]) -> None:
        self.checked += 1
        self.cached += bool(record.get("cached"))
        self.failed += record["verdict"] != "ok"
        self.bytes += int(record.get("size") or 0)
        for name, key in (("error", "errors"), ("warning", "warnings"), ("info", "infos")):
            self.findings[name] += int(record.get(key) or 0)


def scan(
    targets: Iterable[Target],
    options: dict[str, Any],
    executor: Executor,
    *,
    bounds: Bounds | None = None,
    write: Callable[[dict[str, Any]], None],
    resume: Any = None,
    on_record: Callable[[dict[str, Any], ScanStats], None] | None = None,
    on_resumed: Callable[[Target, ScanStats], None] | None = None,
) -> ScanStats:
    """Check every target not already recorded in ``resume`` (a
    :class:`~modelgraph.validate.records.ResumeIndex`), ``write`` each record as it arrives and return
    the counts. ``options`` is :func:`~modelgraph.validate.records.options_to_json` of the options."""
    from modelgraph.validate.records import options_from_json, ruleset_version

    ruleset = ruleset_version(options_from_json(options))
    stats = ScanStats()

    def pending() -> Iterator[Target]:
        for t in targets:
            if resume is not None and resume.recorded(t, ruleset):
                stats.resumed += 1
                if on_resumed is not None:
                    on_resumed(t, stats)
                continue
            yield t

    for record in executor.run(pending(), options, bounds or Bounds()):
        write(record)
        stats.add(record)
        if on_record is not None:
            on_record(record, stats)
    return stats


class LocalExecutor:
    """``jobs`` child processes on this machine, each fed by its own thread."""

    def __init__(self, jobs: int = 1) -> None:
        self.jobs = max(1, jobs)

    def run(
        self, targets: Iterable[Target], options: dict[str, Any], bounds: Bounds
    ) -> Iterator[dict[str, Any]]:
        source = iter(targets)
        lock = threading.Lock()
        out: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=self.jobs * 2)
        stop = threading.Event()
        checkers: list[BoundedChecker] = []

        def take() -> Target | None:
            with lock:
                return next(source, None)

        def work() -> None:
            checker = BoundedChecker(
                options,
                cache_dir=bounds.cache_dir,
                timeout=bounds.timeout,
                max_memory_mb=bounds.max_memory_mb,
            )
            checkers.append(checker)
            try:
                while not stop.is_set():
                    t = take()
                    if t is None:
                        break
                    out.put(("record", checker.check(t)))
            except BaseException as exc:  # noqa: BLE001 - handed to the client thread, which raises it
                out.put(("error", exc))
            finally:
                checker.close()
                out.put(("done", None))

        threads = [threading.Thread(target=work, daemon=True) for _ in range(self.jobs)]
        for th in threads:
            th.start()
        running = len(threads)
        try:
            while running:
                kind, value = out.get()
                if kind == "done":
                    running -= 1
                elif kind == "error":
                    raise value
                else:
                    yield value
        finally:
            stop.set()
            for checker in list(checkers):  # an interrupted scan stops the children at once
                checker.close()
            while any(th.is_alive() for th in threads):  # let blocked workers put and see the stop
                with contextlib.suppress(queue.Empty):
                    out.get(timeout=0.1)
