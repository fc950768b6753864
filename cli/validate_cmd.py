"""``modelgraph validate`` (every problem of model files, for CI) and ``modelgraph rules``."""

from __future__ import annotations

import json

import click

from modelgraph.cli.exit_codes import FINDINGS
from modelgraph.cli.output import format_option
from modelgraph.cli.weights_param import WEIGHTS_STR


@click.command("validate")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@format_option(
    "text",
    "json",
    "sarif",
    help="text for people, json (schema-versioned) for scripts, sarif for code scanning.",
)
@click.option("--strict", is_flag=True, default=None, help="Warnings fail too (exit 1).")
@click.option(
    "--check-values/--no-check-values",
    default=None,
    help="Scan the weights for NaN/Inf and all-zero kernels (on by default, streamed in chunks); "
    "--no-check-values skips the scan.",
)
@click.option(
    "--require-runnable",
    is_flag=True,
    default=None,
    help="Layers the NumPy runner cannot execute are errors.",
)
@click.option(
    "--select",
    "select",
    multiple=True,
    metavar="RULES",
    help="Only these rules: ids, prefixes or families, comma-separated (e.g. SEC,STR004,shapes).",
)
@click.option("--ignore", "ignore", multiple=True, metavar="RULES", help="Skip these rules (same syntax).")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    help="A .modelgraph.toml or pyproject.toml; default: found from the current folder upwards.",
)
@click.option(
    "--weights",
    type=WEIGHTS_STR,
    help="Attach a weights file to the one model PATH (e.g. a to_json() config and its save_weights file).",
)
@click.option(
    "--models-only",
    is_flag=True,
    help="Skip (and list) given files that are not models, as a folder walk does: for pre-commit "
    "hooks that pass every .json file.",
)
@click.option(
    "--target-keras",
    "target_keras",
    metavar="VERSION",
    default=None,
    help="Judge security findings for this Keras version (e.g. 3.12): an error when a published "
    "advisory says that version acts on the payload, one step lower when it is past every fix "
    "(docs/security.md).",
)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=0),
    default=1,
    show_default=True,
    help="Processes (0: one per CPU).",
)
@click.option(
    "--results",
    type=click.Path(dir_okay=False),
    help="Stream one JSON record per model to this JSONL file, appended as each model finishes (a "
    "registry scan); summarise it later with `modelgraph report`.",
)
@click.option(
    "--resume",
    is_flag=True,
    help="With --results: skip models already recorded there with the same content and rule set.",
)
@click.option(
    "--cache",
    "cache_dir",
    type=click.Path(file_okay=False),
    help="With --results: reuse records of identical bytes (keyed by content hash and rule set) from this folder.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=300.0,
    show_default=True,
    help="With --results or --jobs > 1: seconds one model's check may take (then STR015).",
)
@click.option(
    "--max-memory",
    "max_memory",
    type=click.IntRange(min=256),
    default=4096,
    show_default=True,
    help="With --results or --jobs > 1: MiB of address space one model's check may use (then STR015).",
)
@click.option(
    "--executor",
    type=click.Choice(["local", "dask"]),
    default="local",
    show_default=True,
    help="With --results: local processes (--jobs) or a Dask cluster (--workers N or --scheduler ADDR).",
)
@click.option(
    "--workers", type=click.IntRange(min=1), help="--executor dask: start a local cluster of N workers."
)
@click.option("--scheduler", metavar="ADDR", help="--executor dask: the address of a running Dask scheduler.")
def validate_command(
    paths: tuple[str, ...],
    fmt: str,
    strict: bool | None,
    check_values: bool | None,
    require_runnable: bool | None,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    config_file: str | None,
    weights: str | None,
    models_only: bool,
    target_keras: str | None,
    jobs: int,
    results: str | None,
    resume: bool,
    cache_dir: str | None,
    timeout: float,
    max_memory: int,
    executor: str,
    workers: int | None,
    scheduler: str | None,
) -> None:
    """Check model files for every problem at once: structure, shapes, weights, security, runtime.

    PATH may be a model file or a folder (walked for .keras, .h5, .hdf5 and Keras JSON files, and
    for unzipped .keras and TF.js folders).

    \b
    Exit codes: 0 no error finding (no warning either with --strict), 1 findings, 2 usage error
    (also: a path that does not exist, or nothing to check).
    Rules: `modelgraph rules`. Settings: [tool.modelgraph] in pyproject.toml or .modelgraph.toml.
    """
    import os
    import sys

    from modelgraph.errors import UsageError, printable
    from modelgraph.validate.api import find_targets, validate
    from modelgraph.validate.config import find_config, read_config_file

    ctx = click.get_current_context()
    cfg = read_config_file(config_file) if config_file else find_config()
    strict_on = bool(strict if strict is not None else cfg.strict)
    if jobs == 0:
        jobs = os.cpu_count() or 1
    if results is not None:
        from modelgraph.validate.api import make_options

        options = make_options(
            check_values=check_values,
            require_runnable=bool(require_runnable),
            select=list(select) or None,
            ignore=list(ignore) or None,
            config=cfg,
            strict=strict_on,
            target_keras=target_keras,
        )
        _scan(
            paths,
            fmt,
            weights,
            options,
            results=results,
            resume=resume,
            cache_dir=cache_dir,
            jobs=jobs,
            timeout=timeout,
            max_memory_mb=max_memory,
            executor_name=executor,
            workers=workers,
            scheduler=scheduler,
            models_only=models_only,
        )
        return
    if resume or cache_dir or executor != "local" or workers or scheduler:
        raise UsageError("--resume, --cache and --executor write records: give --results FILE.jsonl")
    targets = find_targets(paths, models_only=models_only)
    if targets.skipped:
        shown = ", ".join(printable(s) for s in targets.skipped[:10])
        more = f" (+{len(targets.skipped) - 10} more)" if len(targets.skipped) > 10 else ""
        click.echo(
            f"skipped {len(targets.skipped)} file(s) not recognised as models: {shown}{more}", err=True
        )
    if not targets.models:
        if models_only and targets.skipped:  # a hook given only other JSON files: nothing to fail
            return
        raise UsageError(f"nothing to check: no model files in {', '.join(printable(p) for p in paths)}")
    progress = _progress if sys.stderr.isatty() and any(os.path.isdir(p) for p in paths) else None
    results = validate(
        targets.targets,
        check_values=check_values,
        require_runnable=bool(require_runnable),
        select=list(select) or None,
        ignore=list(ignore) or None,
        config=cfg,
        strict=strict_on,
        jobs=jobs,
        weights=weights,
        bounds=(timeout, max_memory),
        progress=progress,
        target_keras=target_keras,
    )
    if progress is not None:
        click.echo("\r\x1b[K", nl=False, err=True)
    if fmt == "json":
        from modelgraph.validate.api import json_report

        click.echo(json_report(results, strict_on).model_dump_json(indent=2))
    elif fmt == "sarif":
        from modelgraph.validate.sarif import sarif_report

        click.echo(json.dumps(sarif_report(results), indent=2))
    else:
        _print_text(results, strict_on)
    if not all(r.ok for r in results):
        ctx.exit(FINDINGS)


def _scan(paths: tuple[str, ...], fmt: str, weights: str | None, options: object, **kw: object) -> None:
    """``validate --results``: the streaming scan (cli/validate_scan.py)."""
    from modelgraph.cli.validate_scan import run_scan
    from modelgraph.errors import UsageError

    if fmt != "text":
        raise UsageError(
            f"--results streams records; build the {fmt} report from them: "
            f"modelgraph report {kw['results']} --format {fmt}"
        )
    if weights is not None:
        raise UsageError(
            "--weights checks one model; a --results scan pairs configs with weights files itself"
        )
    if not run_scan(paths, options=options, **kw):  # type: ignore[arg-type]
        click.get_current_context().exit(FINDINGS)


_COLOURS = {"error": "red", "warning": "yellow", "info": "blue"}


def _progress(done: int, total: int, path: str) -> None:
    """``validate: 3/10 files`` on one stderr line (only shown on a terminal)."""
    click.echo(f"\rvalidate: {done}/{total} files", nl=False, err=True)


def _colour() -> bool | None:
    """False when NO_COLOR is set (https://no-color.org), else click's default (colour on a TTY)."""
    import os

    return False if os.environ.get("NO_COLOR") else None


def _print_text(results: list, strict: bool) -> None:
    counts = {"error": 0, "warning": 0, "info": 0}
    failed = 0
    for r in results:
        failed += 0 if r.ok else 1
        for i in r.issues:
            counts[i.severity] += 1
            where = f" [{i.where}]" if i.where else ""
            sev = click.style(f"{i.severity:<7}", fg=_COLOURS[i.severity], bold=i.severity == "error")
            click.echo(f"{i.path or r.path}: {sev} {i.rule}{where}: {i.message}", color=_colour())
            if i.hint and i.severity != "info":
                click.echo(f"    hint: {i.hint}")
    verdict = "ok" if failed == 0 else f"{failed} file(s) failed"
    click.echo(
        f"{len(results)} file(s) checked: {counts['error']} error(s), {counts['warning']} warning(s), "
        f"{counts['info']} info; {verdict}" + (" (strict)" if strict else "")
    )


@click.command("rules")
@format_option("text", "json", "markdown", help="markdown prints docs/rules.md.")
def rules_command(fmt: str) -> None:
    """List every validation rule: id, family, default severity, title and meaning."""
    from modelgraph.validate.registry import RULES, rules_markdown

    if fmt == "markdown":
        click.echo(rules_markdown(), nl=False)
        return
    if fmt == "json":
        from modelgraph._version import __version__
        from modelgraph.schemas.validate_report import RuleInfo, RulesReport

        report = RulesReport(
            tool_version=__version__,
            rules=[
                RuleInfo(
                    id=r.id,
                    family=r.family,
                    severity=r.severity,
                    title=r.title,
                    meaning=r.meaning,
                    hint=r.hint,
                )
                for r in RULES.values()
            ],
        )
        click.echo(report.model_dump_json(indent=2))
        return
    for r in RULES.values():
        click.echo(f"{r.id}  {r.severity:<7}  {r.family:<9}  {r.title}")
        click.echo(f"        {r.meaning}")
