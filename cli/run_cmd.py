"""``modelgraph run``: run a model with the NumPy runner, save outputs, compare with a reference.

stdout carries the payload (a text summary, or one JSON document with ``--format json``); the
progress bar and errors go to stderr. Errors propagate to the command group, which maps them to exit
codes; a parity mismatch with ``--expect`` exits 1.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from modelgraph.cli.output import for_display
from modelgraph.cli.progress import progress_bar
from modelgraph.cli.weights_param import MODEL, WEIGHTS
from modelgraph.errors import printable
from modelgraph.schemas.run_report import RunReport

# --- helpers ----------------------------------------------------------------------------------------


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _fmt_num(v: float | None) -> str:
    return "-" if v is None else f"{v:.6g}"


def _table(rows: list[list[str]], header: list[str]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return lines


def _text_report(report: RunReport, failures_only: bool = False) -> str:
    lines: list[str] = [f"model: {report.model}"]
    if report.backend != "numpy":
        lines.append(f"backend: {report.backend}")
    lines.append("outputs:")
    rows = [
        [o.name, str(tuple(o.shape)), o.dtype, _fmt_num(o.min), _fmt_num(o.max), _fmt_num(o.mean)]
        for o in report.outputs
    ]
    lines += ["  " + line for line in _table(rows, ["name", "shape", "dtype", "min", "max", "mean"])]
    bad = [o for o in report.outputs if o.nan or o.inf]
    for o in bad:
        lines.append(f"  warning: output {o.name} has {o.nan} NaN and {o.inf} Inf values")
    if report.intermediates:
        lines.append(f"intermediates: {len(report.intermediates)} kept")
    if report.saved_to:
        lines.append(f"saved: {report.saved_to}")
    if report.stream is not None:
        st = report.stream
        resumed = f", resumed after sample {st.resumed_from}" if st.resumed_from else ""
        lines.append(f"streamed: {st.samples} samples in batches of {st.batch_size}{resumed}")
    comp = report.comparison
    if comp is not None:
        verdict = "PASSED" if comp.passed else "FAILED"
        lines.append(
            f"comparison with {comp.reference} (|a-b| <= {comp.atol:g} + {comp.rtol:g}*|b|): {verdict}"
        )
        rows = []
        shown = [t for t in comp.tensors if not (failures_only and t.passed)]
        passing = len(comp.tensors) - sum(1 for t in comp.tensors if not t.passed)
        for t in shown:
            status = "ok" if t.passed else ("SHAPE" if t.note == "shape mismatch" else "FAIL")
            rows.append(
                [
                    t.name,
                    status,
                    f"{t.max_abs:.3e}",
                    f"{t.mean_abs:.3e}",
                    f"{t.max_rel:.3e}",
                    f"{t.mismatches}/{t.size}",
                    f"{t.nan}/{t.inf}",
                ]
            )
        if rows:
            lines += [
                "  " + line
                for line in _table(
                    rows, ["tensor", "", "max abs", "mean abs", "max rel", "mismatch", "nan/inf"]
                )
            ]
        if failures_only:
            lines.append(
                f"  {passing} of {len(comp.tensors)} tensors within tolerance (not listed: --failures-only)"
            )
        for t in shown:
            if t.note == "shape mismatch":
                lines.append(f"  {t.name}: shape {tuple(t.shape)} vs reference {tuple(t.reference_shape)}")
            if t.kind == "output" and t.histogram:
                from modelgraph.runner.compare import TensorComparison, histogram_lines

                lines.append(f"  abs error histogram of {t.name}:")
                tc = TensorComparison(
                    t.name,
                    t.kind,
                    (),
                    (),
                    t.passed,
                    histogram=[(b.low, b.high, b.count) for b in t.histogram],
                )
                lines += ["  " + h for h in histogram_lines(tc)]
            if not t.passed and t.worst_index is not None:
                lines.append(f"  {t.name}: worst element at {tuple(t.worst_index)}")
        for key in comp.missing:
            lines.append(f"  missing: the run produced nothing for reference key {key!r}")
        if comp.not_compared:
            lines.append(f"  not compared (no reference array): {', '.join(comp.not_compared)}")
        if comp.ignored:
            from modelgraph.runner.compare import key_preview

            lines.append(
                f"  ignored {len(comp.ignored)} reference key(s) naming no output or layer: "
                f"{key_preview(comp.ignored)}"
            )
        if comp.first_divergence:
            lines.append(f"first diverging layer: {comp.first_divergence}")
    prof = report.profile
    if prof is not None:
        runs = f"median of {prof.runs} runs" if prof.runs > 1 else "1 run"
        lines.append(
            f"profile ({runs} after {prof.warmup} warm-up): "
            f"{prof.total_seconds * 1e3:.2f} ms total, {prof.kernel_seconds * 1e3:.2f} ms in kernels, "
            f"peak activations {_fmt_bytes(prof.peak_live_bytes)}, weights {_fmt_bytes(prof.weight_bytes)}"
        )
        setup = [f"{prof.threads} thread{'s' if prof.threads != 1 else ''}"] if prof.threads else []
        for lib in prof.blas:
            text = " ".join(part for part in ("BLAS", lib.library, lib.version) if part)
            if lib.kernels:
                text += f", {lib.kernels} kernels"
            if lib.chosen_by:
                text += f" (chosen by {lib.chosen_by}, not by the library: see docs/runner.md, Which BLAS kernels)"
            setup.append(text)
        if setup:
            lines.append("  " + "; ".join(setup))
        total = prof.kernel_seconds or 1.0
        top = sorted(prof.layers, key=lambda r: -r.seconds)[:25]
        rows = [
            [
                r.node,
                r.class_name,
                f"{r.seconds * 1e3:.3f}",
                f"{100 * r.seconds / total:.1f}",
                _fmt_bytes(r.output_bytes),
                _fmt_bytes(r.live_bytes),
            ]
            for r in top
        ]
        lines += ["  " + line for line in _table(rows, ["node", "class", "ms", "%", "output", "live"])]
        if len(prof.layers) > len(top):
            lines.append(f"  ... {len(prof.layers) - len(top)} more layers (--format json lists all)")
        from modelgraph.runner.fast.fused import FUSED_PREFIX  # loaded already: the model ran

        if any(r.class_name.startswith(FUSED_PREFIX) for r in prof.layers):
            lines.append(
                "  modelgraph/* steps run several Keras layers at once (named after one of them); "
                "--no-fuse times every layer"
            )
    return "\n".join(lines)


# --- the command ---------------------------------------------------------------------------------------


def _tolerance_option(
    name: str, default: float, kind: str
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """One of --expect's two tolerances: a non-negative float."""
    return click.option(
        name,
        type=click.FloatRange(min=0),
        default=default,
        show_default=True,
        help=f"{kind} tolerance for --expect.",
    )


@click.command("run")
@click.argument("model", type=MODEL)
@click.option(
    "--input",
    "-i",
    "inputs",
    multiple=True,
    metavar="FILE|NAME=FILE",
    help="Inputs: .npz by input name, or .npy for one input.",
)
@click.option(
    "--random", "use_random", is_flag=True, help="Draw random inputs of the declared shapes and dtypes."
)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed for --random.")
@click.option(
    "--batch", type=click.IntRange(min=1), default=1, show_default=True, help="Batch size for --random."
)
@click.option(
    "--shape",
    "shapes",
    multiple=True,
    metavar="NAME=D1xD2...",
    help="Sizes after the batch of a --random input whose declared shape leaves some unknown.",
)
@click.option(
    "--output",
    "-o",
    "out",
    type=click.Path(path_type=Path),
    help="Save outputs (and taps) to an .npz (missing parent directories are created); a path not "
    "ending in .npz is a folder: each output is written there as OUTPUT.npy a batch at a time.",
)
@click.option(
    "--expect",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Reference .npz to compare with (keys: output names, tap/LAYER...; a .npy for a single-output model).",
)
@_tolerance_option("--atol", 1e-5, "Absolute")
@_tolerance_option("--rtol", 1e-4, "Relative")
@click.option("--tap", "taps", multiple=True, metavar="LAYER", help="Keep this layer's output (repeatable).")
@click.option("--all-intermediates", is_flag=True, help="Keep every layer's output.")
@click.option(
    "--profile",
    is_flag=True,
    help="Time every layer and track activation memory (after one untimed warm-up run).",
)
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="With --profile: time this many runs and report the median of each layer.",
)
@click.option(
    "--failures-only",
    is_flag=True,
    help="With --expect: list only the tensors that differ (useful with --all-intermediates).",
)
@click.option(
    "--no-fuse",
    is_flag=True,
    help="Run every layer as its own step (no BatchNormalization folding, no merged steps): slower; "
    "--profile then times each Keras layer.",
)
@click.option(
    "--reference",
    is_flag=True,
    help="Run every layer's plain reference kernel (no fast kernels, no fusion): slow; to tell a "
    "fast path's fault from a model's.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=None,
    help="Run the inputs in slices of this many samples (read from the input files one slice at a "
    "time; 32 when streaming to -o FOLDER).",
)
@click.option("--weights", type=WEIGHTS, help="Attach a weights file.")
@click.option(
    "--check",
    "check_only",
    is_flag=True,
    help="List every unsupported layer/option without running; exit 4 if any.",
)
@click.option(
    "--backend",
    type=click.Choice(["numpy", "onnxruntime", "auto"]),
    default="numpy",
    show_default=True,
    help="numpy (the reference), onnxruntime (export to ONNX in memory; needs modelgraph[ort]), "
    "or auto (onnxruntime when installed and the model exports).",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Continue a run that was writing to -o FOLDER from its last written batch.",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=None,
    help="Pin the threads of the run (runner and BLAS; onnxruntime's intra-op pool). Default: "
    "MODELGRAPH_THREADS, else the cores this process may use less those busy with other processes.",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_context
def run_command(
    ctx: click.Context,
    model: Path,
    inputs: tuple[str, ...],
    use_random: bool,
    seed: int,
    batch: int,
    shapes: tuple[str, ...],
    out: Path | None,
    expect: Path | None,
    atol: float,
    rtol: float,
    taps: tuple[str, ...],
    all_intermediates: bool,
    profile: bool,
    repeat: int,
    failures_only: bool,
    no_fuse: bool,
    reference: bool,
    batch_size: int | None,
    weights: Path | None,
    check_only: bool,
    backend: str,
    resume: bool,
    threads: int | None,
    fmt: str,
) -> None:
    """Run MODEL with the pure NumPy runner (or onnxruntime: --backend).

    \b
    Examples:
      modelgraph run model.keras --random -o out.npz
      modelgraph run model.keras --input x.npz --expect keras_out.npz --atol 1e-5
      modelgraph run model.h5 --input image=img.npy --tap conv1 --profile --repeat 5
      modelgraph run model.keras --input x.npz --expect ref.npz --all-intermediates --failures-only
      modelgraph run model.keras --check
    """
    from modelgraph.errors import UnsupportedError, UsageError
    from modelgraph.loading import load
    from modelgraph.runner.interpreter import Runner
    from modelgraph.runner.report import check_report, run_report

    graph = load(model, weights=weights)

    if check_only:
        from modelgraph.runner.support import support_problems

        runner, problems = support_problems(graph, fuse=not no_fuse, reference=reference)
        if not graph.has_weights:
            click.echo(
                f"note: {model} holds no weights; layers that need weights were checked by class only "
                "(give --weights FILE for a full check)",
                err=True,
            )
        report = check_report(str(model), problems)
        if fmt == "json":
            click.echo(report.model_dump_json(indent=2))
        elif not problems:
            click.echo(f"{model}: every layer and option is supported ({len(runner.steps)} nodes)")
        else:
            for problem in for_display(report).problems:
                click.echo(f"{problem.layer}: {problem.message}")
        n_unsupported = sum(p.unsupported for p in problems)
        if n_unsupported:
            raise UnsupportedError(f"{n_unsupported} unsupported layer(s) or option(s) in {model.name}")
        if problems:
            raise problems[0].error
        return

    runner = Runner(graph, fuse=not no_fuse, backend=backend, reference=reference, threads=threads)
    import numpy as np

    from modelgraph.runner import compare as cmp
    from modelgraph.runner import feeds as fd

    if inputs and use_random:
        raise UsageError("give either --input or --random, not both")
    if shapes and not use_random:
        raise UsageError("--shape sizes a --random input; give it with --random")
    reference: dict[str, np.ndarray] | None = None
    if expect is not None:
        reference = cmp.read_reference(
            expect, runner.output_keys, runner.output_aliases, runner.output_config_names
        )
    per_run = [
        name
        for name, given in (
            ("--expect", expect is not None),
            ("--tap", bool(taps)),
            ("--all-intermediates", all_intermediates),
            ("--profile", profile),
            ("--random", use_random),
        )
        if given
    ]
    from modelgraph.cli import run_stream

    if run_stream.wants_stream(inputs, out, batch_size, resume, per_run):
        streamed, ignored = run_stream.stream(runner, model, inputs, out, batch_size, resume)
        if ignored:
            shown = ", ".join(printable(k) for k in ignored[:10]) + (" ..." if len(ignored) > 10 else "")
            click.echo(
                f"modelgraph: note: --input ignored {len(ignored)} key(s) that are not inputs: {shown}",
                err=True,
            )
        if out is not None and out.suffix == ".npz":
            out.parent.mkdir(parents=True, exist_ok=True)
            with open(out, "wb") as fh:
                np.savez(fh, **streamed.results)
        report = run_stream.stream_report(model, streamed, runner, None if out is None else str(out))
        if fmt == "json":
            click.echo(json.dumps(report.model_dump(mode="json"), indent=2))
        else:
            click.echo(_text_report(for_display(report)))
        return
    if inputs:
        ignored: list[str] = []
        feeds: dict[str, Any] = fd.parse_input_options(inputs, runner.input_names, ignored)
        if ignored:
            shown = ", ".join(printable(k) for k in ignored[:10]) + (" ..." if len(ignored) > 10 else "")
            click.echo(
                f"modelgraph: note: --input ignored {len(ignored)} key(s) that are not inputs: {shown}",
                err=True,
            )
    elif use_random:
        sizes = fd.parse_shape_options(shapes, runner.input_names)
        feeds = fd.random_feeds(runner.inputs, graph, seed=seed, batch=batch, shapes=sizes)
    elif reference is not None and any(k.startswith(fd.GOLDEN_INPUT_PREFIX) for k in reference):
        feeds = {
            k[len(fd.GOLDEN_INPUT_PREFIX) :]: v
            for k, v in reference.items()
            if k.startswith(fd.GOLDEN_INPUT_PREFIX)
        }
    else:
        raise UsageError(
            f"no inputs: give --input FILE, --input NAME=FILE or --random; model inputs are {runner.input_names}"
        )

    tap_list = list(taps)
    if reference is not None and runner.backend != "numpy":
        # onnxruntime gives the model's outputs only: the reference's intermediates are left out.
        reference = {
            k: v
            for k, v in reference.items()
            if (cmp.reference_id(k, runner.output_keys) or ("",))[0] != "tap"
        }
    if reference is not None and not all_intermediates and runner.backend == "numpy":
        known = set(runner.layer_paths())
        tap_list += [p for p in cmp.reference_taps(reference) if p in known and p not in tap_list]

    if repeat > 1 and not profile:
        raise UsageError("--repeat times the runs of --profile; add --profile")
    if failures_only and expect is None:
        raise UsageError("--failures-only filters the comparison of --expect; add --expect REF.npz")
    prof = None
    if profile:
        from modelgraph.runner.interpreter import Profile

        prof = Profile(steps=[])
        # one untimed run first: the first run builds caches (transformed kernels, thread scratch)
        runner.run(feeds, taps=tap_list, all_intermediates=all_intermediates, batch_size=batch_size)

    n = fd.batch_of(feeds)
    with progress_bar(batch_size is not None and n > batch_size) as progress:
        results = runner.run(
            feeds,
            taps=tap_list,
            all_intermediates=all_intermediates,
            batch_size=batch_size,
            profile=prof,
            progress=progress,
        )
    if prof is not None and repeat > 1:
        from modelgraph.runner.interpreter import Profile, median_profile

        timed = [prof]
        for _ in range(repeat - 1):
            timed.append(Profile(steps=[]))
            runner.run(feeds, batch_size=batch_size, profile=timed[-1])
        prof = median_profile(timed)

    for note in runner.notes:  # e.g. --backend auto running NumPy because onnxruntime could not
        click.echo(f"modelgraph: note: {note}", err=True)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "wb") as fh:
            np.savez(fh, **results)

    comparison = None
    if reference is not None:
        comparison = cmp.compare_run(runner, results, reference, atol=atol, rtol=rtol)
    report = run_report(
        str(model),
        feeds,
        results,
        runner.output_keys,
        saved_to=None if out is None else str(out),
        comparison=comparison,
        reference=str(expect),
        profile=prof,
        backend=runner.backend,
    )
    if report.profile is not None:
        report.profile.runs = repeat
        report.profile.warmup = 1

    if fmt == "json":
        click.echo(json.dumps(report.model_dump(mode="json"), indent=2))
    else:
        click.echo(_text_report(for_display(report), failures_only=failures_only))
    if comparison is not None and not comparison.passed:
        where = (
            f"; first diverging layer: {comparison.first_divergence}" if comparison.first_divergence else ""
        )
        click.echo(f"modelgraph: outputs differ from {expect.name}{where}", err=True)
        ctx.exit(1)
