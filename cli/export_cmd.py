"""``modelgraph export``: a Keras model to an ONNX file, without TensorFlow."""

from __future__ import annotations

import time
from pathlib import Path

import click

from modelgraph._version import __version__
from modelgraph.cli.weights_param import MODEL, WEIGHTS
from modelgraph.schemas.export_report import ExportReport


def _batch(value: str) -> int | str:
    if value == "dynamic":
        return value
    try:
        n = int(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is neither a positive integer nor 'dynamic'") from None
    if n < 1:
        raise click.BadParameter(f"{value!r} is not a positive integer")
    return n


@click.command()
@click.argument("model", type=MODEL)
@click.option(
    "-o", "--output", "out", type=click.Path(dir_okay=False, path_type=Path), required=True,
    help="The ONNX file to write (missing parent directories are created).",
)  # fmt: skip
@click.option("--weights", type=WEIGHTS, help="Attach a weights file.")
@click.option(
    "--opset", type=click.IntRange(17, 21), default=17, show_default=True, help="ONNX opset version."
)
@click.option(
    "--batch", "batch", default="dynamic", show_default=True, metavar="N|dynamic",
    help="Fix the batch dimension of every input and output to N, or leave it symbolic.",
)  # fmt: skip
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def export_command(model: Path, out: Path, weights: Path | None, opset: int, batch: str, fmt: str) -> None:
    """Export MODEL to ONNX (needs the onnx package: pip install 'modelgraph[onnx]').

    Input and output names are the Keras names; channels_last tensors stay NHWC at the model's edges.
    Layers that cannot be mapped are all named and nothing is written (exit 4).

    \b
    Examples:
      modelgraph export model.keras -o model.onnx
      modelgraph export model.h5 -o model.onnx --batch 1 --opset 18
    """
    from modelgraph.loading import load
    from modelgraph.saving.onnx import export_onnx
    from modelgraph.saving.onnx._onnx import require_onnx

    batch_value = _batch(batch)
    require_onnx()
    graph = load(model, weights=weights)
    start = time.perf_counter()
    result = export_onnx(graph, out, opset=opset, batch=batch_value)
    seconds = time.perf_counter() - start
    report = ExportReport(
        tool_version=__version__,
        model=str(model),
        output=str(out),
        opset=opset,
        batch=batch_value,
        inputs=result.input_names,
        outputs=result.output_names,
        nodes=len(result.model.graph.node),
        initializers=len(result.model.graph.initializer),
        bytes=out.stat().st_size,
        dequantized_layers=result.dequantized,
        export_seconds=round(seconds, 4),
    )
    if fmt == "json":
        click.echo(report.model_dump_json(indent=2))
        return
    from modelgraph.errors import printable

    click.echo(
        f"{out}: ONNX opset {opset}, {report.nodes} nodes, {report.initializers} initializers, "
        f"{report.bytes / 1e6:.1f} MB, in {seconds:.2f} s"
    )
    click.echo(f"inputs: {printable(', '.join(report.inputs))}")
    click.echo(f"outputs: {printable(', '.join(report.outputs))}")
    if report.dequantized_layers:
        click.echo(f"dequantized to float32: {printable(', '.join(report.dequantized_layers))}")
