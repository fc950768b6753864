"""The progress bar of ``modelgraph run`` (in-memory batched runs and streamed runs alike)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.progress import ProgressColumn, Task
from rich.text import Text


class RateColumn(ProgressColumn):
    """Samples per second."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("-" if speed is None else f"{speed:,.1f} samples/s")


@contextmanager
def progress_bar(enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A ``progress(done, total)`` callback drawing a bar (done/total, samples/s, time left) on
    stderr when ``enabled`` and stderr is a terminal; else None."""
    from rich.console import Console

    console = Console(file=sys.stderr)
    if not enabled or not console.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("running"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("run", total=None)
        first: list[int] = []

        def update(done: int, total: int) -> None:
            if not first:  # a resumed run starts part-way: its rate counts this run's samples only
                first.append(done)
                bar.reset(task, total=total, completed=done)
                return
            bar.update(task, total=total, completed=done)

        yield update
