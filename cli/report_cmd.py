"""``modelgraph report RESULTS.jsonl``: reports built from a ``validate --results`` file, streamed."""

from __future__ import annotations

import click

from modelgraph.cli.exit_codes import FINDINGS
from modelgraph.cli.output import format_option


@click.command("report")
@click.argument("results", type=click.Path(dir_okay=False), metavar="RESULTS.jsonl")
@format_option(
    "text",
    "json",
    "sarif",
    "cyclonedx",
    help="text for people, json (totals by rule), sarif for code scanning, cyclonedx for an ML-BOM.",
)
def report_command(results: str, fmt: str) -> None:
    """Summarise the records of a `validate --results` scan (the last record of each model counts).

    \b
    Exit codes: 0 every model ok, 1 a model failed, 2 usage error (the file does not exist).
    """
    import os

    from modelgraph.errors import UsageError, printable
    from modelgraph.validate import scan_report

    if not os.path.isfile(results):
        raise UsageError(f"no such results file: {printable(results)}")
    if fmt == "json":
        report = scan_report.json_report(results)
        click.echo(report.model_dump_json(indent=2))
        failed = report.failed
    else:
        chunks = {
            "text": scan_report.text_report,
            "sarif": scan_report.sarif_report,
            "cyclonedx": scan_report.cyclonedx_report,
        }[fmt](results)
        for chunk in chunks:
            click.echo(chunk, nl=False)
        failed = sum(1 for rec in scan_report.records(results) if rec["verdict"] != "ok")
    if failed:
        click.get_current_context().exit(FINDINGS)
