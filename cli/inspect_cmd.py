"""``modelgraph inspect``: a summary table like Keras's ``summary()``, or its JSON form."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from modelgraph.cli.output import echo_json, fmt_bytes, fmt_count, fmt_shape, for_display, stdout_console
from modelgraph.cli.weights_param import MODEL, WEIGHTS

COLUMNS: dict[str, tuple[str, str]] = {
    "layer": ("Layer (type)", "left"),
    "type": ("Type", "left"),
    "output": ("Output shape", "left"),
    "dtype": ("Dtype", "left"),
    "params": ("Param #", "right"),
    "trainable": ("Trainable", "left"),
    "bytes": ("Output bytes", "right"),
    "macs": ("MACs", "right"),
    "depth": ("Depth", "right"),
    "connected": ("Connected to", "left"),
}
"""``--columns`` names -> (header, justification); ``type`` given separately takes the class out of ``layer``."""

DEFAULT_COLUMNS = ("layer", "output", "params", "macs", "depth", "connected")
MIN_NAME_WIDTH = 16


def parse_columns(value: str | None) -> list[str]:
    """The ``--columns`` list (comma-separated, in the order given); a usage error names the valid ones."""
    if not value:
        return list(DEFAULT_COLUMNS)
    names = [v.strip().lower() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in COLUMNS]
    if unknown or not names:
        raise click.BadParameter(
            f"unknown column(s) {', '.join(repr(u) for u in unknown) or '(none given)'}; "
            f"valid: {', '.join(COLUMNS)} (default: {','.join(DEFAULT_COLUMNS)})",
            param_hint="'--columns'",
        )
    return list(dict.fromkeys(names))


@click.command("inspect")
@click.argument("model", type=MODEL)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--expand-nested", is_flag=True, help="Show the layers of nested models as an indented tree.")
@click.option(
    "--max-depth",
    type=click.IntRange(min=0),
    help="Open nested models only this many levels deep (implies --expand-nested; 0 lists the top-level "
    "layers only), as render --max-depth draws them.",
)
@click.option(
    "--depth",
    type=click.IntRange(min=1),
    hidden=True,
    help="Old spelling: --depth N is --max-depth N-1.",
)
@click.option(
    "--filter",
    "pattern",
    metavar="PATTERN",
    help="Only layers whose name, path or class matches: a glob (conv*, *BatchNorm*) or a substring; "
    "case-insensitive; nested layers included.",
)
@click.option(
    "--totals", "totals_only", is_flag=True, help="Only the totals (params, bytes, MACs), no table."
)
@click.option(
    "--columns",
    metavar="NAMES",
    help=f"Columns to show, in order, comma-separated: {', '.join(COLUMNS)} (default: {','.join(DEFAULT_COLUMNS)}).",
)
@click.option(
    "--wide",
    is_flag=True,
    help="One line per layer with full names (copyable); the table is as wide as it needs.",
)
@click.option("--weights", type=WEIGHTS, help="Attach a weights file.")
def inspect_command(
    model: Path,
    fmt: str,
    expand_nested: bool,
    max_depth: int | None,
    depth: int | None,
    pattern: str | None,
    totals_only: bool,
    columns: str | None,
    wide: bool,
    weights: Path | None,
) -> None:
    """Summarise MODEL: layers, classes, output shapes, params, depths, connections, totals.

    \b
    Examples:
      modelgraph inspect model.keras
      modelgraph inspect model.keras --max-depth 0 --totals
      modelgraph inspect model.keras --wide > layers.txt
      modelgraph inspect model.keras --filter '*conv*' --columns layer,output,dtype,bytes,params,trainable
    """
    from modelgraph.loading import load
    from modelgraph.summary import summarize

    chosen = parse_columns(columns)
    if max_depth is not None and depth is not None and depth != max_depth + 1:
        raise click.BadParameter(
            f"--depth {depth} (old spelling) and --max-depth {max_depth} disagree; give --max-depth only",
            param_hint="'--max-depth'",
        )
    if max_depth is not None:
        depth = max_depth + 1
    report = summarize(
        load(model, weights=weights),
        expand_nested=expand_nested,
        depth=depth,
        pattern=pattern,
        totals_only=totals_only,
    )
    if fmt == "json":
        echo_json(report)
    else:
        _print_report(for_display(report), chosen, totals_only, pattern, wide)


def shorten(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters with an ellipsis in the middle (a name's start and end are
    what tell layers apart: ``separable_co…_reduce_4``)."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    tail = (width - 1) // 2
    head = width - 1 - tail
    return text[:head] + "…" + text[len(text) - tail :]


def _label(layer: Any, with_class: bool, budget: int) -> str:
    indent = "  " * (len(layer.path) - 1) + ("└ " if len(layer.path) > 1 else "")
    room = max(budget - len(indent), 4)
    if not with_class:
        return indent + shorten(layer.name, room)
    cls = f" ({layer.class_name})"
    if len(layer.name) + len(cls) <= room:
        return indent + layer.name + cls
    if room - len(cls) < 10:  # too narrow for the whole class name too: both give up room
        cls = f" ({shorten(layer.class_name, max(room // 2 - 3, 4))})"
    return indent + shorten(layer.name, max(room - len(cls), 4)) + cls


def _trainable(layer: Any) -> str:
    if layer.kind in ("input", "op") or not layer.params:
        return "-"
    if layer.trainable_params and layer.non_trainable_params:
        return "partly"
    return "yes" if layer.trainable_params else "no"


def _cells(layer: Any, with_class: bool) -> dict[str, str]:
    inbound = (
        ", ".join(layer.inbound)
        if len(layer.inbound) <= 4
        else ", ".join(layer.inbound[:4]) + f", … (+{len(layer.inbound) - 4})"
    )
    return {
        "type": layer.class_name,
        "output": ", ".join(fmt_shape(s) for s in layer.output_shapes) or "-",
        "dtype": layer.dtype or "-",
        "params": fmt_count(layer.params),
        "trainable": _trainable(layer),
        "bytes": "-" if layer.output_bytes is None else fmt_bytes(layer.output_bytes),
        "macs": fmt_count(layer.macs),
        "depth": "-" if layer.depth is None else str(layer.depth),
        "connected": inbound or "-",
    }


def _print_report(
    report: Any, columns: list[str], totals_only: bool, pattern: str | None, wide: bool = False
) -> None:
    from rich.text import Text

    console = stdout_console()
    console.print(Text(f'Model: "{report.name}" ({report.class_name})', style="bold"))
    console.print(
        Text(
            f"{report.source}  ·  {report.format}  ·  Keras {report.keras_version or 'unknown'}", style="dim"
        )
    )
    if not totals_only:
        _print_table(console, report, columns, wide)
        if report.shown_layers is not None:
            what = f" matching {pattern!r}" if pattern else ""
            console.print(
                Text(f"{report.shown_layers:,} layer(s){what} shown; the totals cover the whole model")
            )
    _print_totals(console, report)


NUMERIC = ("params", "bytes", "macs", "depth", "trainable")
"""Columns whose cells are never broken: a number stays on one line with its unit."""

MIN_WRAP_WIDTH = 10
"""Narrowest a wrapping column (names, shapes, connections) gets before numbers are written short."""


def _compact(count: str) -> str:
    """``1,234,567`` -> ``1.2M`` (for narrow tables)."""
    try:
        n = int(count.replace(",", ""))
    except ValueError:
        return count
    for unit, size in (("T", 10**12), ("G", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def _print_table(console: Any, report: Any, columns: list[str], wide: bool = False) -> None:
    """The layer table. Like Keras's summary, long cells wrap inside their column instead of being
    cut (a name without spaces folds at the column edge); number cells never break, so a count
    keeps its digits and a size its unit. ``wide`` keeps every cell on one line (full, copyable names)
    and lets the table be as wide as it needs."""
    from rich.table import Table
    from rich.text import Text

    with_class = "type" not in columns
    rows = [_cells(layer, with_class) for layer in report.layers]
    labels = [_label(layer, with_class, 10**6) for layer in report.layers]

    def natural(name: str) -> int:
        cells = labels if name == "layer" else [r[name] for r in rows]
        header = "Layer" if name == "layer" and not with_class else COLUMNS[name][0]
        return max([len(c) for c in cells] + [len(header)])

    def unbreakable(name: str) -> int:
        """The longest word of an output-shape cell: a dimension never splits (names and connections
        without spaces fold at the column edge)."""
        if name != "output":
            return 0
        return max((len(w) for r in rows for w in str(r[name]).split()), default=0)

    widths = {name: natural(name) for name in columns}
    floor = {name: max(min(widths[name], MIN_WRAP_WIDTH), unbreakable(name)) for name in columns}
    if wide:
        console.width = max(console.width, 1 + sum(w + 3 for w in widths.values()))
    else:
        # numbers written short (830.3K) when the wrapping columns would be squeezed below their floor
        wrapping = [n for n in columns if n not in NUMERIC]
        for name in ("macs", "params"):
            fixed = sum(widths[n] + 3 for n in columns if n in NUMERIC)
            floors = sum(floor[n] + 3 for n in wrapping)
            if name in columns and 1 + fixed + floors > console.width:
                for r in rows:
                    r[name] = _compact(r[name])
                widths[name] = natural(name)
    table = Table(show_lines=False, header_style="bold")
    for name in columns:
        header, justify = COLUMNS[name]
        if name == "layer" and not with_class:
            header = "Layer"
        if wide or name in NUMERIC:
            table.add_column(header, justify=justify, no_wrap=True, min_width=widths[name])
        else:
            table.add_column(header, justify=justify, overflow="fold", min_width=floor[name])
    for layer, label, cells in zip(report.layers, labels, rows, strict=True):
        row = []
        for name in columns:
            if name == "layer":
                text = Text(label)
                if layer.kind == "op":
                    text.stylize("italic")
                row.append(text)
            else:
                row.append(Text(cells[name]))
        table.add_row(*row)
    console.print(table, crop=False)


def _print_totals(console: Any, report: Any) -> None:
    from rich.text import Text

    t = report.totals
    lines = [
        f"Total params: {t.total_params:,} ({fmt_bytes(t.weight_bytes)})",
        f"Trainable params: {t.trainable_params:,}",
        f"Non-trainable params: {t.non_trainable_params:,}",
    ]
    if t.weight_bytes_by_dtype:
        lines.append(
            "Weights by dtype: "
            + ", ".join(f"{k} {fmt_bytes(v)}" for k, v in sorted(t.weight_bytes_by_dtype.items()))
        )
    if t.stored_bytes_by_dtype:
        lines.append(
            "Stored on disk: "
            + ", ".join(f"{k} {fmt_bytes(v)}" for k, v in sorted(t.stored_bytes_by_dtype.items()))
            + f" (dequantized to {fmt_bytes(t.weight_bytes)} when read)"
        )
    if t.macs is not None:
        lines.append(f"MACs per sample: {t.macs:,}")
    if t.activation_bytes is not None:
        lines.append(
            f"Activations per sample (every layer output, batch of 1): {fmt_bytes(t.activation_bytes)}"
        )
    lines.append(
        f"Layers: {t.layers:,}  Nodes: {t.nodes:,}  Inputs: {', '.join(i.name for i in report.inputs)}  Outputs: {', '.join(o.ref for o in report.outputs)}"
    )
    if not report.has_weights:
        lines.append("(architecture only: param counts are computed from the config)")
    for line in lines:
        console.print(Text(line))
    for note in report.notes:
        console.print(Text(f"note: {note}", style="yellow"))
