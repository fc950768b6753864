"""Output helpers: payload on stdout, progress and errors on stderr, colour only on a TTY."""

from __future__ import annotations

import sys
from typing import Any

import click


def format_option(*choices: str, help: str) -> Any:
    """The ``--format`` option of a command: ``fmt``, one of ``choices`` (the first is the default)."""
    return click.option(
        "--format", "fmt", type=click.Choice(list(choices)), default=choices[0], show_default=True, help=help
    )


def stdout_console() -> Any:
    """A Rich console on stdout (plain text when stdout is not a terminal)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # Rich would exit 1 ("findings"); the command group maps a closed pipe to its own code.
            raise BrokenPipeError

    return _Console(
        file=sys.stdout,
        highlight=False,
        soft_wrap=False,
        width=None if sys.stdout.isatty() else piped_width(),
    )


def piped_width() -> int:
    """The width of text written to a pipe or file: ``COLUMNS`` when set (40 at least), else 120."""
    import os

    try:
        return max(int(os.environ.get("COLUMNS", "")), 40)
    except ValueError:
        return 120


def stderr_console() -> Any:
    from rich.console import Console

    return Console(file=sys.stderr, highlight=False)


def for_display(value: Any) -> Any:
    """A copy of a report (Pydantic models, lists, tuples, dicts) for text output, with every string
    made :func:`~modelgraph.errors.printable`: names from a file cannot write terminal escapes or
    line breaks into a table. JSON output needs none of this (JSON escapes control characters)."""
    from pydantic import BaseModel

    from modelgraph.errors import printable

    if isinstance(value, str):
        return printable(value)
    if isinstance(value, BaseModel):
        return value.model_copy(
            update={name: for_display(getattr(value, name)) for name in type(value).model_fields}
        )
    if isinstance(value, (list, tuple)):
        return type(value)(for_display(v) for v in value)
    if isinstance(value, dict):
        return {for_display(k): for_display(v) for k, v in value.items()}
    return value


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
