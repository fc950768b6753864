"""``modelgraph render``: draw a model with Graphviz (DOT always; SVG/PNG/PDF through ``dot``)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from modelgraph.cli.weights_param import MODEL, WEIGHTS

PROGRESS_NODES = 200
"""Above this many drawn nodes, progress lines go to stderr."""


@click.command("render")
@click.argument("model", type=MODEL)
@click.option(
    "-o",
    "--output",
    default="-",
    show_default=True,
    help="Output file (.svg, .png, .pdf, .dot, or .html: an interactive page with search and a layer panel); "
    "'-' writes to stdout (DOT unless --format says otherwise). Missing folders are created.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["svg", "png", "pdf", "dot", "html"], case_sensitive=False),
    help="Output format (default: from the -o extension; DOT for stdout).",
)
@click.option(
    "--rankdir",
    type=click.Choice(["TB", "LR", "BT", "RL"], case_sensitive=False),
    default="TB",
    show_default=True,
    help="Layout direction: top-bottom, left-right, bottom-top, right-left.",
)
@click.option("--show-shapes", is_flag=True, help="Input and output shapes on each node.")
@click.option("--show-dtype", is_flag=True, help="The dtype of each layer.")
@click.option(
    "--show-layer-names/--hide-layer-names", default=True, show_default=True, help="Layer names on nodes."
)
@click.option("--show-activations", is_flag=True, help="The activation of layers that have one.")
@click.option("--show-trainable", is_flag=True, help="Whether each layer is trainable.")
@click.option("--show-params", is_flag=True, help="Parameter count and MACs on each node.")
@click.option("--expand-nested", is_flag=True, help="Draw nested models as clusters (one per call).")
@click.option(
    "--max-depth",
    type=click.IntRange(min=0),
    help="Expand nested models only this many levels deep (implies --expand-nested; 0 expands none).",
)
@click.option(
    "--collapse-repeats", is_flag=True, help="Fold consecutive repeated blocks into one, marked × N."
)
@click.option(
    "--highlight-issues",
    is_flag=True,
    help="Run validation and colour the layers with findings (error red, warning amber).",
)
@click.option("--dpi", type=click.IntRange(min=1, max=2400), help="Resolution of PNG output.")
@click.option(
    "--weights",
    type=WEIGHTS,
    help="Attach a weights file (param counts).",
)
@click.option(
    "--overlay",
    "overlays",
    multiple=True,
    metavar="NAME",
    help="HTML only: colour the layers by params, macs, bytes (output bytes per sample), profile "
    "(per-layer time of a run), stats (activation statistics of a run) or expect=REF.npz (per-layer "
    "error against a reference; the first diverging layer marked). Repeat to choose among several in the page.",
)
@click.option(
    "--input",
    "inputs",
    multiple=True,
    metavar="FILE|NAME=FILE",
    help="With --overlay profile/stats/expect: the arrays to run the model on (.npz by input name or .npy).",
)
def render_command(
    model: Path,
    output: str,
    fmt: str | None,
    rankdir: str,
    show_shapes: bool,
    show_dtype: bool,
    show_layer_names: bool,
    show_activations: bool,
    show_trainable: bool,
    show_params: bool,
    expand_nested: bool,
    max_depth: int | None,
    collapse_repeats: bool,
    highlight_issues: bool,
    dpi: int | None,
    weights: Path | None,
    overlays: tuple[str, ...],
    inputs: tuple[str, ...],
) -> None:
    """Draw MODEL as a graph: Graphviz DOT always, SVG/PNG/PDF when Graphviz `dot` is installed.

    \b
    Examples:
      modelgraph render model.keras -o model.svg --show-shapes
      modelgraph render model.keras -o model.png --expand-nested --dpi 150
      modelgraph render model.keras --collapse-repeats | dot -Tpdf > model.pdf
      modelgraph render model.keras -o model.html --highlight-issues
      modelgraph render model.keras -o model.html --overlay macs --overlay expect=ref.npz --input in.npz
    """
    import importlib

    core = importlib.import_module("modelgraph.render")
    from modelgraph.errors import UsageError
    from modelgraph.loading import load
    from modelgraph.overlays import parse_overlay

    out_format = core.format_for(output, fmt)
    specs = [parse_overlay(v) for v in overlays]
    if specs and out_format != "html":
        raise UsageError("--overlay colours the HTML view; write it with -o FILE.html")
    if inputs and not any(s.kind in ("profile", "stats", "expect") for s in specs):
        raise UsageError("--input feeds --overlay profile, stats or expect=REF.npz; add one of them")
    if out_format not in ("dot", "html"):
        core.dot_binary()  # exit 4 with the install hint before loading anything (the page needs no dot)
    started = time.perf_counter()
    # --highlight-issues draws a broken graph too (dangling references dropped, cycles drawn as they
    # are), its broken parts marked by the findings; without it a broken file is refused (exit 3).
    problems: list | None = [] if highlight_issues else None
    graph = load(model, weights=weights, problems=problems)
    html = out_format == "html"
    if html and sys.stderr.isatty():
        click.echo(f"modelgraph: validating {model.name} for the page's findings...", err=True)
    issues = _validation_issues(model, weights) if highlight_issues or html else None
    options = core.RenderOptions(
        rankdir=rankdir,
        show_shapes=show_shapes,
        show_dtype=show_dtype,
        show_layer_names=show_layer_names,
        show_activations=show_activations,
        show_trainable=show_trainable,
        show_params=show_params,
        expand_nested=expand_nested or max_depth is not None,
        max_depth=max_depth,
        collapse_repeats=collapse_repeats,
        dpi=dpi,
    )
    if html:
        _write_html(graph, options, issues or [], model, output, started, specs, list(inputs))
        return
    drawing = core.to_dot(graph, options, issues=issues)
    if out_format != "dot":
        core.check_layout_size(drawing.nodes)
    big = drawing.nodes > PROGRESS_NODES
    if big and out_format != "dot":
        click.echo(
            f"modelgraph: laying out {drawing.nodes:,} nodes and {drawing.edges:,} edges with Graphviz dot...",
            err=True,
        )
    payload = core.run_dot(drawing.source, out_format)
    if output == "-":
        sys.stdout.flush()
        sys.stdout.buffer.write(payload)
        sys.stdout.buffer.flush()
    else:
        write_output(Path(output), payload)
    if big:
        where = "stdout" if output == "-" else output
        click.echo(
            f"modelgraph: wrote {out_format} to {where} in {time.perf_counter() - started:.1f}s", err=True
        )
    sys.stderr.flush()


def write_output(path: Path, payload: bytes) -> None:
    """Write ``payload`` to ``path``, creating missing parent folders (as ``run -o`` does)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(payload)


def _write_html(
    graph: object,
    options: object,
    issues: list,
    model: Path,
    output: str,
    started: float,
    overlays: list | None = None,
    inputs: list[str] | None = None,
) -> None:
    """The interactive HTML view (findings from ``modelgraph.validate`` on the same file in its panel)."""
    from modelgraph.html_view import model_page

    def progress(text: str) -> None:
        click.echo(f"modelgraph: {text} ({time.perf_counter() - started:.1f}s)", err=True)

    text = model_page(
        graph,  # type: ignore[arg-type]
        options,
        issues=issues,
        source=model.name,
        progress=progress if sys.stderr.isatty() else None,
        overlays=overlays or (),
        inputs=inputs or (),
    )
    payload = text.encode("utf-8")
    if output == "-":
        sys.stdout.flush()
        sys.stdout.buffer.write(payload)
        sys.stdout.buffer.flush()
        return
    write_output(Path(output), payload)
    click.echo(
        f"modelgraph: wrote {output} ({len(payload) / 1e6:.2f} MB) in {time.perf_counter() - started:.1f}s",
        err=True,
    )


def _validation_issues(model: Path, weights: Path | None = None) -> list | None:
    """Findings from ``modelgraph.validate`` when that module is available (else none)."""
    import importlib

    try:
        api = importlib.import_module("modelgraph.validate.api")
    except ImportError:
        click.echo("modelgraph: validation is not available; drawing without findings", err=True)
        return None
    validate = getattr(api, "validate", None)
    if validate is None:
        return None
    results = validate(str(model), weights=None if weights is None else str(weights))
    if not isinstance(results, list | tuple):
        results = [results]
    issues: list = []
    for result in results:
        issues.extend(getattr(result, "issues", ()) or ())
    return issues
