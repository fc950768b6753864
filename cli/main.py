"""The ``modelgraph`` command group.

Commands are imported only when invoked, so ``modelgraph --version`` and ``--help`` stay fast.
Every command's exception ends here: one line on stderr and the exit code from
:mod:`modelgraph.cli.exit_codes` (a traceback only with ``--traceback``).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Any

import click

from modelgraph._version import __version__

COMMANDS: dict[str, tuple[str, str]] = {
    "inspect": ("modelgraph.cli.inspect_cmd", "Summary table of a model: layers, shapes, params, depths."),
    "validate": ("modelgraph.cli.validate_cmd", "Check model files for every problem at once (CI-friendly)."),
    "rules": ("modelgraph.cli.validate_cmd", "List every validation rule with its id and severity."),
    "report": (
        "modelgraph.cli.report_cmd",
        "Summarise a validate --results file: text, JSON, SARIF or a CycloneDX ML-BOM.",
    ),
    "render": (
        "modelgraph.cli.render_cmd",
        "Draw a model graph (DOT, SVG, PNG, PDF, or an interactive HTML page).",
    ),
    "diff": ("modelgraph.cli.diff_cmd", "Compare two models: structure, config, wiring, weights."),
    "run": ("modelgraph.cli.run_cmd", "Run a model with the NumPy runner; compare with expected outputs."),
    "convert": (
        "modelgraph.cli.convert_cmd",
        "Write any model as a Keras 3 .keras (or legacy .h5) that Keras loads.",
    ),
    "extract": (
        "modelgraph.cli.extract_cmd",
        "Write the sub-model between named layers as a Keras 3 .keras.",
    ),
    "export": ("modelgraph.cli.export_cmd", "Export a model to ONNX (no TensorFlow needed)."),
    "layers": ("modelgraph.cli.layers_cmd", "List the Keras classes modelgraph knows and what it supports."),
}


class LazyGroup(click.Group):
    """A group that imports each command's module on first use and maps errors to exit codes."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in COMMANDS if _available(name)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS or not _available(cmd_name):
            return None
        module = importlib.import_module(COMMANDS[cmd_name][0])
        command = getattr(module, f"{cmd_name}_command")
        if not any(p.name == "plugin" for p in command.params):
            command.params.append(_plugin_option())  # every command takes --plugin after its name too
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = click.utils.make_str(args[0]) if args else ""
        if args and not name.startswith("-") and self.get_command(ctx, name) is None:
            from modelgraph.errors import did_you_mean

            raise click.UsageError(
                f"no such command '{name}'{did_you_mean(name, self.list_commands(ctx))}", ctx
            )
        return super().resolve_command(ctx, args)

    def main(  # type: ignore[override]
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Click's main, with usage errors (bad option, missing file, unknown command) as one line
        ``modelgraph: error: ...`` and exit 2, like every other error, instead of a usage block."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except click.exceptions.ClickException as exc:
            from modelgraph.errors import printable

            message = printable(exc.format_message().strip())
            ctx = getattr(exc, "ctx", None)
            if isinstance(exc, click.UsageError) and ctx is not None:
                message += f" (see '{ctx.command_path} --help')"
            click.echo(f"modelgraph: error: {message}", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except BaseException as exc:  # noqa: BLE001 - every error leaves through one door
            if isinstance(exc, SystemExit):
                raise
            if isinstance(exc, BrokenPipeError):  # `modelgraph ... | head`: the reader left; go quietly
                import os

                from modelgraph.cli.exit_codes import PIPE_CLOSED

                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                ctx.exit(PIPE_CLOSED)
            from modelgraph.cli.exit_codes import INTERNAL, code_for
            from modelgraph.errors import printable

            code = code_for(exc)
            if ctx.params.get("traceback"):
                import traceback

                traceback.print_exception(exc, file=sys.stderr)
            prefix = "internal error: " if code == INTERNAL else ""
            message = printable(str(exc).strip()) or type(exc).__name__
            if code == INTERNAL:
                message = f"{type(exc).__name__}: {message} (rerun with --traceback and report it)"
            elif isinstance(exc, MemoryError):
                message = f"out of memory ({message})"
            click.echo(f"modelgraph: error: {prefix}{message}", err=True)
            ctx.exit(code)


def _load_plugins(ctx: click.Context, param: click.Parameter, refs: tuple[str, ...]) -> None:
    """Load the plugins named by ``--plugin`` (a plugin error is one line, exit 2)."""
    if refs:
        from modelgraph.plugins import load_plugins

        load_plugins(refs)


PLUGIN_HELP = (
    "Load a plugin that teaches modelgraph custom classes: a .py file, a module, or entry:NAME (an "
    "installed modelgraph.plugins entry point); repeatable; also MODELGRAPH_PLUGINS. See docs/plugins.md."
)


def _plugin_option() -> click.Option:
    return click.Option(
        ["--plugin"],
        multiple=True,
        metavar="FILE.py|MODULE|entry:NAME",
        expose_value=False,
        is_eager=True,
        callback=_load_plugins,
        help=PLUGIN_HELP,
    )


def _available(name: str) -> bool:
    return importlib.util.find_spec(COMMANDS[name][0]) is not None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="modelgraph")
@click.option("--traceback", is_flag=True, help="Show the Python traceback of an error.")
@click.option(
    "--keras1-backend",
    type=click.Choice(["tensorflow", "theano"]),
    default="tensorflow",
    show_default=True,
    help="The backend a Keras 1 file was made with (its file does not say): theano applied "
    "convolution kernels reversed.",
)
@click.option("--plugin", "plugins", multiple=True, metavar="FILE.py|MODULE|entry:NAME", help=PLUGIN_HELP)
def cli(traceback: bool, keras1_backend: str, plugins: tuple[str, ...]) -> None:
    """Read, inspect, validate, render, diff and run saved Keras models without Keras.

    \b
    Exit codes: 0 ok, 1 findings/differences/mismatch, 2 usage, 3 cannot load,
    4 unsupported (or Graphviz missing), 5 run failed, 70 internal error.
    """
    from modelgraph.plugins import env_plugins, load_plugins

    load_plugins([*env_plugins(), *plugins])
    if keras1_backend != "tensorflow":
        from modelgraph.loading.keras1 import KERAS1_BACKEND

        KERAS1_BACKEND.set(keras1_backend)


def main() -> None:
    """Console-script entry point."""
    import warnings

    # Non-finite values from a file's weights (an absurd TF.js quantization scale, NaN statistics) are
    # reported by the commands themselves (run's output summary, validate's WGT006); NumPy's
    # floating-point warnings would only add unformatted lines naming modelgraph's source files.
    warnings.filterwarnings(
        "ignore", message=r"(overflow|invalid value|divide by zero|underflow) encountered"
    )
    cli.main(prog_name="modelgraph")


if __name__ == "__main__":  # pragma: no cover
    main()
