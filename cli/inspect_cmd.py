"""``modelgraph inspect``: a summary table like Keras's ``summary()``, or its JSON form."""

from __future__ import annotations

from pathlib import Path

import click

from modelgraph.cli.output import echo_json, fmt_bytes, fmt_count, fmt_shape, for_display, stdout_console


@click.command("inspect")
@click.argument("model", type=click.Path(exists=True, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--expand-nested", is_flag=True, help="Show the layers of nested models as an indented tree.")
@click.option("--weights", type=click.Path(exists=True, path_type=Path), help="Attach a weights file.")
def inspect_command(model: Path, fmt: str, expand_nested: bool, weights: Path | None) -> None:
    """Summarise MODEL: layers, classes, output shapes, params, depths, connections, totals."""
    from modelgraph.loading import load
    from modelgraph.summary import summarize

    report = summarize(load(model, weights=weights), expand_nested=expand_nested)
    if fmt == "json":
        echo_json(report)
    else:
        _print_table(for_display(report), expand_nested)


def _print_table(report, expand_nested: bool) -> None:
    from rich.table import Table
    from rich.text import Text

    console = stdout_console()
    title = Text(f'Model: "{report.name}" ({report.class_name})', style="bold")
    console.print(title)
    console.print(
        Text(
            f"{report.source}  ·  {report.format}  ·  Keras {report.keras_version or 'unknown'}", style="dim"
        )
    )
    table = Table(show_lines=False, header_style="bold")
    for header, justify in (
        ("Layer (type)", "left"),
        ("Output shape", "left"),
        ("Param #", "right"),
        ("MACs", "right"),
        ("Depth", "right"),
        ("Connected to", "left"),
    ):
        table.add_column(header, justify=justify, overflow="fold")
    for layer in report.layers:
        indent = "  " * (len(layer.path) - 1) + ("└ " if len(layer.path) > 1 else "")
        label = Text(f"{indent}{layer.name} ({layer.class_name})")
        if layer.kind == "op":
            label.stylize("italic")
        shapes = ", ".join(fmt_shape(s) for s in layer.output_shapes) or "-"
        inbound = (
            ", ".join(layer.inbound)
            if len(layer.inbound) <= 4
            else ", ".join(layer.inbound[:4]) + f", … (+{len(layer.inbound) - 4})"
        )
        table.add_row(
            label,
            Text(shapes),
            Text(fmt_count(layer.params)),
            Text(fmt_count(layer.macs)),
            Text("-" if layer.depth is None else str(layer.depth)),
            Text(inbound or "-"),
        )
    console.print(table)
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
    if t.macs is not None:
        lines.append(f"MACs per sample: {t.macs:,}")
    lines.append(
        f"Layers: {t.layers:,}  Nodes: {t.nodes:,}  Inputs: {', '.join(i.name for i in report.inputs)}  Outputs: {', '.join(o.ref for o in report.outputs)}"
    )
    if not report.has_weights:
        lines.append("(architecture only: param counts are computed from the config)")
    for line in lines:
        console.print(Text(line))
    for note in report.notes:
        console.print(Text(f"note: {note}", style="yellow"))
