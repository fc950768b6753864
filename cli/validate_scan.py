"""``validate --results FILE.jsonl``: the streaming scan's command-line side (progress, text lines).

The scan itself is :func:`modelgraph.validate.scan.scan`; this module picks the executor, opens the
results file, shows a progress bar on a terminal (files/s, bytes/s, findings so far, ETA), prints
each failing model's findings as it finishes, and ends with one summary line.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import click

from modelgraph.validate.discover import Target


def run_scan(
    paths: tuple[str, ...],
    *,
    options: Any,
    results: str,
    resume: bool,
    cache_dir: str | None,
    jobs: int,
    timeout: float,
    max_memory_mb: int,
    executor_name: str,
    workers: int | None,
    scheduler: str | None,
    models_only: bool,
) -> bool:
    """Scan ``paths`` into ``results``; True when every model recorded in this run (and every model
    passed over by ``resume``) is ok."""
    from modelgraph.errors import UsageError, printable
    from modelgraph.validate.discover import iter_targets
    from modelgraph.validate.records import ResultsWriter, ResumeIndex, options_to_json
    from modelgraph.validate.scan import Bounds, LocalExecutor, scan

    skipped: list[int] = [0]

    def count_skip(_: str) -> None:
        skipped[0] += 1

    index = ResumeIndex(results) if resume else None
    if executor_name == "dask":
        from modelgraph.validate.dask_executor import DaskExecutor

        executor: Any = DaskExecutor(workers=workers, scheduler=scheduler)
    else:
        if workers is not None or scheduler is not None:
            raise UsageError("--workers and --scheduler go with --executor dask")
        executor = LocalExecutor(jobs)
    targets = iter_targets(paths, models_only=models_only, skipped=count_skip)
    bar = _Progress(paths, models_only) if sys.stderr.isatty() else None
    failed_before = [0]

    def on_record(record: dict[str, Any], stats: Any) -> None:
        if record["verdict"] != "ok":
            _print_findings(record)
        if bar is not None:
            bar.update(stats)

    def on_resumed(target: Target, stats: Any) -> None:
        if index is not None and not index.ok(target.path):
            failed_before[0] += 1
        if bar is not None:
            bar.update(stats)

    with ResultsWriter(results) as writer:
        try:
            stats = scan(
                targets,
                options_to_json(options),
                executor,
                bounds=Bounds(timeout=timeout, max_memory_mb=max_memory_mb, cache_dir=cache_dir),
                write=writer.write,
                resume=index,
                on_record=on_record,
                on_resumed=on_resumed,
            )
        finally:
            if bar is not None:
                bar.close()
            close = getattr(executor, "close", None)
            if close is not None:
                close()
    if skipped[0]:
        click.echo(f"skipped {skipped[0]} file(s) not recognised as models", err=True)
    if stats.checked + stats.resumed == 0:
        raise UsageError(f"nothing to check: no model files in {', '.join(printable(p) for p in paths)}")
    f = stats.findings
    parts = [f"{stats.checked} model(s) checked"]
    if stats.resumed:
        parts.append(f"{stats.resumed} already recorded")
    if stats.cached:
        parts.append(f"{stats.cached} from the cache")
    failed = stats.failed + failed_before[0]
    click.echo(
        f"{', '.join(parts)}: {f['error']} error(s), {f['warning']} warning(s), {f['info']} info; "
        + ("ok" if failed == 0 else f"{failed} model(s) failed")
        + f"; records in {printable(results)}"
    )
    return failed == 0


def _print_findings(record: dict[str, Any]) -> None:
    from modelgraph.errors import printable

    for i in record["findings"]:
        if i["severity"] == "info":
            continue
        where = f" [{printable(i['where'])}]" if i["where"] else ""
        click.echo(
            f"{printable(i['path'])}: {i['severity']:<7} {i['rule']}{where}: {printable(i['message'])}"
        )


class _Progress:
    """A Rich progress bar on stderr: models, files/s, bytes/s, findings, ETA. The total comes from a
    second, counting walk in a thread (it holds a count, not a list); until it ends there is no ETA."""

    def __init__(self, paths: tuple[str, ...], models_only: bool) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            TextColumn("validate"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TextColumn("{task.fields[findings]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=Console(file=sys.stderr),
            transient=True,
        )
        self._task = self._progress.add_task("scan", total=None, rate="", findings="")
        self._progress.start()
        self._start = _now()
        threading.Thread(target=self._count, args=(paths, models_only), daemon=True).start()

    def _count(self, paths: tuple[str, ...], models_only: bool) -> None:
        from modelgraph.validate.discover import iter_targets

        total = 0
        try:
            for _ in iter_targets(paths, models_only=models_only):
                total += 1
        except Exception:  # noqa: BLE001 - no total: the bar shows no ETA
            return
        self._progress.update(self._task, total=total)

    def update(self, stats: Any) -> None:
        elapsed = max(_now() - self._start, 1e-6)
        done = stats.checked + stats.resumed
        f = stats.findings
        self._progress.update(
            self._task,
            completed=done,
            rate=f"{stats.checked / elapsed:.1f} files/s {_size(stats.bytes / elapsed)}/s",
            findings=f"{f['error']} err {f['warning']} warn",
        )

    def close(self) -> None:
        self._progress.stop()


def _now() -> float:
    import time

    return time.monotonic()


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"
