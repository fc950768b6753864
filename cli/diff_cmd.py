"""``modelgraph diff A B``: structure, config, wiring and weight differences; exit 0 identical, 1 different."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from modelgraph.cli.output import echo_json, fmt_shape, for_display, stdout_console
from modelgraph.cli.weights_param import MODEL

_STYLES = {"+": "green", "-": "red", "~": "yellow", "!": "magenta", "~!": "yellow"}


@click.command("diff")
@click.argument("model_a", type=MODEL)
@click.argument("model_b", type=MODEL)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--no-weights", is_flag=True, help="Compare structure and config only, not weights.")
@click.option("--atol", type=float, default=None, help="Absolute tolerance for weights and outputs [1e-6].")
@click.option("--rtol", type=float, default=None, help="Relative tolerance for weights and outputs [1e-5].")
@click.option("--outputs", is_flag=True, help="Also run both models on the same random inputs and compare.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random inputs (--outputs).")
@click.option(
    "--strict-config",
    is_flag=True,
    help="Compare configs as written: no equivalences (axis -1 vs 3, [3] vs 3, a dtype policy vs its name, "
    "float32 rounding, omitted defaults).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Draw both models as one graph (.svg/.png/.pdf with Graphviz, or .dot): added green, removed red, "
    "changed amber; .html is an interactive page with a legend, search and each layer's changes.",
)
@click.pass_context
def diff_command(
    ctx: click.Context,
    model_a: Path,
    model_b: Path,
    fmt: str,
    no_weights: bool,
    atol: float | None,
    rtol: float | None,
    outputs: bool,
    seed: int,
    strict_config: bool,
    output: Path | None,
) -> None:
    """Compare MODEL_A with MODEL_B (any formats): layers added, removed, renamed; config changes per
    key; rewired inputs; weight shape and value changes; a verdict and a similarity score.

    \b
    Layers pair by user-given name, then by graph position and config, so auto-generated names
    (dense_3 vs dense_7) do not matter. Markers: + added, - removed, ~ changed, ! weights changed.
    Exit codes: 0 identical, 1 different, 3 a file cannot be read.
    """
    from modelgraph.diff import DEFAULT_ATOL, DEFAULT_RTOL, diff, render_diff
    from modelgraph.loading import load

    if atol is not None and atol < 0 or rtol is not None and rtol < 0:
        raise click.BadParameter("tolerances must be >= 0")
    graph_a = load(model_a)
    same_file = model_a.resolve() == model_b.resolve() if model_a.exists() and model_b.exists() else False
    graph_b = graph_a if same_file else load(model_b)
    result = diff(
        graph_a,
        graph_b,
        weights=not no_weights,
        atol=DEFAULT_ATOL if atol is None else atol,
        rtol=DEFAULT_RTOL if rtol is None else rtol,
        outputs=outputs,
        seed=seed,
        strict_config=strict_config,
    )
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        if output.suffix.lower() in (".html", ".htm"):
            from modelgraph.html_view import diff_page

            output.write_text(diff_page(result, model_a.name, model_b.name), encoding="utf-8")
        else:
            render_diff(result, output)
    if fmt == "json":
        echo_json(result.report)
    else:
        print_text(for_display(result.report))
    if result:
        ctx.exit(1)


def _fmt(value: Any) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def fmt_change(old: Any, new: Any, width: int = 60) -> tuple[str, str]:
    """Both sides of a config change as short texts that never print the same: when the start of
    two long values is equal, both are shown from a little before their first difference."""
    import json

    a = json.dumps(old, ensure_ascii=False, default=str)
    b = json.dumps(new, ensure_ascii=False, default=str)
    if len(a) <= width and len(b) <= width:
        return a, b
    first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    start = max(0, first - 12) if first > width - 15 else 0

    def cut(text: str) -> str:
        piece = text[start : start + width - 3]
        return ("..." if start else "") + piece + ("..." if start + width - 3 < len(text) else "")

    return cut(a), cut(b)


def _count(n: int | None) -> str:
    return "?" if n is None else f"{n:,}"


def print_text(report: Any) -> None:
    """The report as text; names go through ``rich.text.Text`` (never markup)."""
    from rich.text import Text

    console = stdout_console()
    a, b = report.a, report.b
    console.print(
        Text(f"--- A {a.source}  ({a.format}, Keras {a.keras_version or '?'}, {a.name})", style="red")
    )
    console.print(
        Text(f"+++ B {b.source}  ({b.format}, Keras {b.keras_version or '?'}, {b.name})", style="green")
    )
    m = report.model
    if m is not None:
        if m.rename is not None and not m.rename.auto:
            console.print(Text(f"~ model renamed {m.rename.old} -> {m.rename.new}", style="yellow"))
        if m.old_class_name is not None:
            console.print(Text(f"~ model class {m.old_class_name} -> {m.new_class_name}", style="yellow"))
        if m.old_inputs is not None:
            console.print(Text(f"~ model inputs {m.old_inputs} -> {m.new_inputs}", style="yellow"))
        if m.old_outputs is not None:
            console.print(Text(f"~ model outputs {m.old_outputs} -> {m.new_outputs}", style="yellow"))
    for e in report.layers:
        style = _STYLES.get(e.marker, "yellow")
        head = Text(f"{e.marker:<2} ", style=f"bold {style}")
        head.append("/".join(e.path), style="bold")
        head.append(f" ({e.class_name})")
        if e.status in ("added", "removed"):
            params = e.new_params if e.status == "added" else e.old_params
            head.append(f"  {e.status}" + (f", {params:,} params" if params else ""), style=style)
        elif e.old_params != e.new_params:
            head.append(f"  params {e.old_params:,} -> {e.new_params:,}")
        console.print(head)
        if e.rename is not None:
            kind = "auto-generated name renumbered" if e.rename.auto else "renamed"
            console.print(Text(f"     {kind}: {e.rename.old} -> {e.rename.new}"))
        for c in e.config:
            if c.only_in == "a":
                console.print(Text(f"     {c.key}: {_fmt(c.old)} -> (absent)"))
            elif c.only_in == "b":
                console.print(Text(f"     {c.key}: (absent) -> {_fmt(c.new)}"))
            else:
                old, new = fmt_change(c.old, c.new)
                console.print(Text(f"     {c.key}: {old} -> {new}"))
        for w in e.wiring:
            old = "(no call)" if w.old is None else ", ".join(w.old) or "()"
            new = "(no call)" if w.new is None else ", ".join(w.new) or "()"
            line = f"     call {w.node} inputs: {old} -> {new}"
            if w.old_kwargs is not None or w.new_kwargs is not None:
                line += f"; kwargs {_fmt(w.old_kwargs)} -> {_fmt(w.new_kwargs)}"
            console.print(Text(line))
        for w in e.weights:
            if w.status == "added":
                text = f"     ! {w.name}: added {fmt_shape(w.new_shape)} {w.new_dtype}"
            elif w.status == "removed":
                text = f"     ! {w.name}: removed {fmt_shape(w.old_shape)} {w.old_dtype}"
            elif w.status == "shape":
                text = f"     ! {w.name}: shape {fmt_shape(w.old_shape)} -> {fmt_shape(w.new_shape)}"
            elif w.status == "dtype":
                text = f"     ! {w.name}: dtype {w.old_dtype} -> {w.new_dtype}"
                if w.mismatched:
                    text += f", {w.mismatched}/{w.size} values differ"
            else:
                text = f"     ! {w.name} {fmt_shape(w.new_shape)}: {w.mismatched}/{w.size} values differ"
                if w.max_abs is None:  # not both real numbers (strings, complex): compared for equality
                    text += " (compared for equality)"
                else:
                    text += f"; max abs {w.max_abs:.4g}, rms {w.rms:.4g}, rel {w.rel:.4g}"
                if w.old_dtype != w.new_dtype:
                    text += f" (dtype {w.old_dtype} -> {w.new_dtype})"
            console.print(Text(text, style="magenta"))
    if report.outputs is not None:
        o = report.outputs
        console.print(
            Text(f"outputs on random inputs (seed {o.seed}): {'equal' if o.equal else 'DIFFERENT'}")
        )
        for d in o.outputs:
            if d.shape_b is None or d.shape_a != d.shape_b:
                console.print(
                    Text(
                        f"  ! {d.name_a or d.name_b}: shape {fmt_shape(d.shape_a)} -> {fmt_shape(d.shape_b)}"
                    )
                )
            else:
                mark = " " if d.equal else "!"
                console.print(
                    Text(
                        f"  {mark} {d.name_a}: max abs {d.max_abs:.4g}, rms {d.rms:.4g}, rel {d.rel:.4g}"
                        + ("" if d.equal else f", {d.mismatched} values beyond tolerance")
                    )
                )
    for note in report.notes:
        console.print(Text(f"note: {note}", style="dim"))
    c = report.counts
    console.print(
        Text(
            f"layers {c.layers_a} -> {c.layers_b} ({c.matched} matched, {c.unchanged} unchanged); "
            f"params {_count(report.params_a)} -> {_count(report.params_b)}"
            + ("" if report.params_delta is None else f" ({report.params_delta:+,})")
            + "; "
            f"similarity {report.similarity:.3f}"
        )
    )
    console.print(Text(report.verdict, style="bold green" if report.identical else "bold red"))
