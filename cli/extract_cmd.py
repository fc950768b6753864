"""``modelgraph extract``: the sub-model between named layers/tensors, written as a Keras 3 ``.keras``."""

from __future__ import annotations

from pathlib import Path

import click

from modelgraph.cli.weights_param import MODEL, WEIGHTS


def _names(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


@click.command("extract")
@click.argument("model", type=MODEL)
@click.option("--outputs", required=True, help="Comma-separated tensors: LAYER or LAYER[node][tensor].")
@click.option(
    "--inputs", default=None, help="Comma-separated tensors where the graph is cut (new InputLayers)."
)
@click.option("--weights", type=WEIGHTS, help="Weights file for a config-only model.")
@click.option(
    "-o", "--output", "output", required=True, type=click.Path(path_type=Path), help="SUB.keras or SUB.h5."
)
def extract_command(
    model: Path, outputs: str, inputs: str | None, weights: Path | None, output: Path
) -> None:
    """Write the part of MODEL that computes --outputs from --inputs as a model of its own.

    \b
    Nested models are kept whole (name the nested model, not a layer inside it).
    Exit codes: 0 written, 2 unknown or unusable name, 3 cannot read MODEL,
    4 some layer cannot be written faithfully (nothing is written).
    """
    import modelgraph
    from modelgraph.saving import extract, save

    graph = modelgraph.load(model, weights=weights)
    sub = extract(graph, outputs=_names(outputs), inputs=_names(inputs))
    report = save(sub, output)
    for note in report.notes:
        click.echo(f"modelgraph: note: {note}", err=True)
    click.echo(f"wrote {report.path} (sha256 {report.sha256})", err=True)
