"""``modelgraph convert``: write any model modelgraph reads as a Keras 3 ``.keras`` (or a legacy ``.h5``)."""

from __future__ import annotations

from pathlib import Path

import click

from modelgraph.cli.weights_param import MODEL, WEIGHTS


@click.command("convert")
@click.argument("model", type=MODEL)
@click.option("--weights", type=WEIGHTS, help="Weights file for a config-only model.")
@click.option(
    "-o",
    "--output",
    "output",
    required=True,
    type=click.Path(path_type=Path),
    help="OUT.keras (Keras 3) or OUT.h5 (legacy, for tf_keras and Keras 3).",
)
@click.option("--strip", is_flag=True, help="Drop the training config (optimizer state is never carried).")
@click.option(
    "--keep-unknown",
    is_flag=True,
    help="Write classes modelgraph does not know as they are (class, module, registered name, config), "
    "for loading with your own custom_objects; see docs/plugins.md.",
)
def convert_command(model: Path, weights: Path | None, output: Path, strip: bool, keep_unknown: bool) -> None:
    """Convert MODEL (any format modelgraph reads) to a file Keras 3 loads in safe mode.

    \b
    Exit codes: 0 written, 2 usage, 3 cannot read MODEL, 4 some layer cannot be written
    faithfully (every such layer is named; nothing is written).
    """
    import modelgraph
    from modelgraph.saving import save

    graph = modelgraph.load(model, weights=weights)
    report = save(graph, output, strip=strip, keep_unknown=keep_unknown)
    for note in report.notes:
        click.echo(f"modelgraph: note: {note}", err=True)
    click.echo(f"wrote {report.path} (sha256 {report.sha256})", err=True)
