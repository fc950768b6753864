"""``modelgraph layers``: every Keras class modelgraph knows, and what it supports for each."""

from __future__ import annotations

import click

from modelgraph.cli.output import format_option


@click.command("layers")
@click.argument("class_name", metavar="[CLASS]", required=False)
@format_option("text", "json", "markdown", help="markdown prints docs/layers.md.")
def layers_command(class_name: str | None, fmt: str) -> None:
    """List the layer catalogue, or explain one CLASS (a class name, alias, op or TF function).

    For each class: whether modelgraph infers its shapes, knows its weights, counts its MACs, runs
    it and exports it to ONNX, and why not where it does not.
    """
    from modelgraph.catalogue.report import layers_markdown, layers_report

    report = layers_report(class_name)
    if fmt == "json":
        click.echo(report.model_dump_json(indent=2))
    elif fmt == "markdown":
        click.echo(layers_markdown(report), nl=False)
    elif class_name is None:
        _table(report)
    else:
        _details(report)


def _mark(value: bool | str) -> str:
    return "yes" if value is True else "-"


def _table(report) -> None:  # noqa: ANN001 - a LayersReport
    from modelgraph.errors import printable

    width = max(len(e.name) for e in report.classes)
    click.echo(f"{'class':<{width}}  shapes weights macs run  onnx aliases")
    for e in report.classes:
        s = e.support
        marks = f"{_mark(s.shapes):<6} {_mark(s.weights):<7} {_mark(s.macs):<4} {_mark(s.run):<4} {_mark(s.onnx):<4}"
        click.echo(f"{printable(e.name):<{width}}  {marks} {', '.join(e.aliases)}".rstrip())
    runnable = sum(1 for e in report.classes if e.support.run is True)
    exported = sum(1 for e in report.classes if e.support.onnx is True)
    click.echo(
        f"{len(report.classes)} classes, {runnable} run by the NumPy runner, {exported} export to ONNX"
    )


def _details(report) -> None:  # noqa: ANN001 - a LayersReport
    for e in report.classes:
        click.echo(f"{e.name}  ({e.family}; Keras {', '.join(e.keras_versions)})")
        if e.aliases:
            click.echo(f"  aliases: {', '.join(e.aliases)}")
        for concern, value in e.support.model_dump().items():
            click.echo(f"  {concern:<8} {'yes' if value is True else 'no: ' + str(value)}")
        sensitive = "yes" if e.training_sensitive else "no"
        click.echo(f"  behaviour: masks {e.masks}; dtype {e.dtype}; training-sensitive {sensitive}")
        if e.config_defaults is not None:
            defaults = ", ".join(f"{k}={v!r}" for k, v in e.config_defaults.items())
            click.echo(f"  defaults: {defaults}")
