"""Run a registry scan on a Dask cluster (``validate --executor dask``; the optional extra ``dask``).

Only paths and plain JSON cross the wire: the client sends batches of ``[path, weights]`` pairs and
the options as a JSON-ready dict; a worker answers with JSON text, one record per line. On the
worker, each batch goes through a :class:`~modelgraph.validate.bounded.BoundedChecker` (one child
process per worker thread, reused across batches), so a file is checked under the same time and
memory bounds as on one machine and a hostile file cannot take the worker down.

Nothing is lost when a worker dies: the scheduler runs its unfinished batches again on another
worker, and since only the client writes records, and it writes a batch's records once, when the
batch's future completes, each model gets exactly one record. A batch whose workers kept dying
(Dask's ``allowed-failures``) gets an STR015 record per model instead.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

from modelgraph.errors import UsageError
from modelgraph.validate.discover import Target

_local = threading.local()
_QUIET_WORKERS = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "500ms",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.admin.system-monitor.gil.enabled": False,
    "distributed.worker.memory.monitor-interval": "1s",
}


def check_batch(items: list[list[str | None]], options: dict[str, Any], bounds: list[Any]) -> str:
    """Worker side: the records of a batch of ``[path, weights]`` pairs, as JSON lines."""
    from modelgraph.validate.bounded import BoundedChecker

    key = json.dumps([options, bounds], sort_keys=True)
    checker = getattr(_local, "checkers", {}).get(key)
    if checker is None:
        timeout, max_memory_mb, cache_dir = bounds
        checker = BoundedChecker(options, cache_dir=cache_dir, timeout=timeout, max_memory_mb=max_memory_mb)
        _local.checkers = {key: checker}  # one child per worker thread (options rarely change)
    lines = [json.dumps(checker.check(Target(str(path), weights))) for path, weights in items]
    return "\n".join(lines)


class DaskExecutor:
    """Checks batches of models on a Dask cluster: a running one (``scheduler``: its address) or a
    local one of ``workers`` single-threaded worker processes started for the scan."""

    def __init__(self, *, workers: int | None = None, scheduler: str | None = None, batch: int = 8) -> None:
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise UsageError(
                "--executor dask needs Dask's distributed scheduler: pip install 'modelgraph[dask]'"
            ) from None
        if (workers is None) == (scheduler is None):
            raise UsageError("--executor dask takes --workers N (a local cluster) or --scheduler ADDR")
        self.workers = workers
        self.scheduler = scheduler
        self.batch = max(1, batch)
        self.client: Any = None
        self._cluster: Any = None

    def start(self) -> Any:
        """Connect (or start the local cluster) once; the Dask client."""
        if self.client is not None:
            return self.client
        from distributed import Client, LocalCluster

        if self.scheduler is not None:
            try:
                self.client = Client(self.scheduler, timeout="30s")
            except OSError as exc:
                raise UsageError(f"--scheduler {self.scheduler}: cannot connect ({exc})") from None
        else:
            import dask

            # The scan's workers only hand paths to their child processes: the sampling profiler
            # (every 10 ms), the 20 ms event-loop tick and the monitors cost CPU the checks need
            # on a small machine.
            dask.config.set(_QUIET_WORKERS)
            self._cluster = LocalCluster(
                n_workers=self.workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=50,
            )
            self.client = Client(self._cluster)
        return self.client

    def run(
        self, targets: Iterable[Target], options: dict[str, Any], bounds: Any
    ) -> Iterator[dict[str, Any]]:
        from distributed import as_completed

        client = self.start()
        slots = max(1, sum(client.nthreads().values()))
        window = 2 * slots
        limits = [bounds.timeout, bounds.max_memory_mb, bounds.cache_dir]
        source = iter(targets)
        batches: dict[Any, list[Target]] = {}

        def submit() -> Any:
            chunk = list(islice(source, self.batch))
            if not chunk:
                return None
            items = [[t.path, t.weights] for t in chunk]
            fut = client.submit(check_batch, items, options, limits, pure=False)
            batches[fut] = chunk
            return fut

        first = [f for f in (submit() for _ in range(window)) if f is not None]
        done = as_completed(first)
        for fut in done:
            chunk = batches.pop(fut)
            try:
                text = fut.result()
            except Exception as exc:  # noqa: BLE001 - the batch's workers kept dying: STR015 each
                yield from _lost(chunk, options, exc)
            else:
                for line in text.splitlines():
                    yield json.loads(line)
            fut.release()
            nxt = submit()
            if nxt is not None:
                done.add(nxt)

    def close(self) -> None:
        """Disconnect, and stop the local cluster when this executor started it."""
        if self.client is not None:
            self.client.close()
            self.client = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


def _lost(chunk: list[Target], options: dict[str, Any], exc: BaseException) -> Iterator[dict[str, Any]]:
    from modelgraph.validate.bounded import stopped_record
    from modelgraph.validate.records import options_from_json, ruleset_version

    opts = options_from_json(options)
    ruleset = ruleset_version(opts)
    why = f"the Dask workers checking it kept failing ({type(exc).__name__}: {exc})"
    for t in chunk:
        yield stopped_record(t, opts, ruleset, why[:500], 0.0)
