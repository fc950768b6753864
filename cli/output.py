"""Output helpers: payload on stdout, progress and errors on stderr, colour only on a TTY."""

from __future__ import annotations

import sys
from typing import Any

import click


def stdout_console() -> Any:
    """A Rich console on stdout (plain text when stdout is not a terminal)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # Rich would exit 1 ("findings"); the command group maps a closed pipe to its own code.
            raise BrokenPipeError

    return _Console(
        file=sys.stdout, highlight=False, soft_wrap=False, width=None if sys.stdout.isatty() else 200
    )


def stderr_console() -> Any:
    from rich.console import Console

    return Console(file=sys.stderr, highlight=False)


def echo_json(model: Any) -> None:
    """Print one JSON document from a Pydantic report model."""
    click.echo(model.model_dump_json(indent=2))


def fmt_shape(shape: Any) -> str:
    """``(None, 8)``; unknown -> ``?``."""
    from modelgraph.graph import format_shape

    return format_shape(shape)


def fmt_count(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def fmt_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.2f} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1024
    return f"{n} B"
