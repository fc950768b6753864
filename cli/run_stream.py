"""``modelgraph run`` on inputs read a batch at a time (:mod:`modelgraph.runner.stream`): the options,
the progress bar (:mod:`modelgraph.cli.progress`) and the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from modelgraph.cli.progress import progress_bar
from modelgraph.errors import UsageError

# Samples per batch when streaming to a folder without --batch-size.
DEFAULT_BATCH_SIZE = 32


def wants_stream(
    inputs: tuple[str, ...], out: Path | None, batch_size: int | None, resume: bool, per_run: list[str]
) -> bool:
    """Whether ``run`` streams: ``-o`` a folder, ``--resume``, a folder of shards as an input, or
    ``--input`` with ``--batch-size``. ``per_run`` names the given options that need the whole run
    at once (--expect, --tap, --profile...): with them, streaming to a folder is a usage error and
    ``--batch-size`` keeps the in-memory run."""
    to_folder = out is not None and out.suffix != ".npz"
    folder_input = any(_input_path(v).is_dir() for v in inputs)
    if (to_folder or resume or folder_input) and not inputs:
        raise UsageError("-o FOLDER, --resume and input folders stream --input files; give --input")
    if (to_folder or resume or folder_input) and per_run:
        raise UsageError(
            f"{', '.join(per_run)} need(s) the whole run in memory; it cannot be combined with -o FOLDER, "
            "--resume or a folder of input shards"
        )
    if resume and not to_folder:
        raise UsageError("--resume continues a run writing to -o FOLDER; give that folder")
    return bool(inputs) and not per_run and (to_folder or resume or folder_input or batch_size is not None)


def _input_path(value: str) -> Path:
    """The file or folder of one ``--input FILE`` / ``--input NAME=FILE``."""
    name, sep, file = value.partition("=")
    return Path(file) if sep and name and not Path(value).exists() else Path(value)


def stream(
    runner: Any,
    model: Path,
    inputs: tuple[str, ...],
    out: Path | None,
    batch_size: int | None,
    resume: bool,
) -> tuple[Any, list[str]]:
    """Run the streamed inputs; returns the :class:`~modelgraph.runner.stream.StreamResult` and the
    input-file keys that were ignored."""
    from modelgraph.runner import sources as src
    from modelgraph.runner import stream as st

    ignored: list[str] = []
    found = src.input_sources(list(inputs), runner.input_names, ignored)
    try:
        ordered = st.bind_sources(found, runner.input_names)
        sink: st.FolderSink | st.MemorySink
        if out is not None and out.suffix != ".npz":
            sink = st.FolderSink(out, resume=resume)
        else:
            sink = st.MemorySink()
        size = batch_size or DEFAULT_BATCH_SIZE
        with progress_bar(True) as progress:
            result = st.stream_run(runner, ordered, size, sink, model=str(model.resolve()), progress=progress)
    finally:
        for source in found.values():
            source.close()
    return result, ignored


def stream_report(model: Path, result: Any, runner: Any, saved_to: str | None) -> Any:
    """The run report of a streamed run (inputs summarised over the samples this run read)."""
    from modelgraph._version import __version__
    from modelgraph.schemas.run_report import RunReport, StreamReport, TensorSummary

    def summary(s: Any) -> TensorSummary:
        seen = s.complete and s.count
        return TensorSummary(
            name=s.name,
            shape=list(s.shape),
            dtype=s.dtype,
            min=s.min if seen else None,
            max=s.max if seen else None,
            mean=s.mean if seen else None,
            nan=s.nan,
            inf=s.inf,
        )

    return RunReport(
        tool_version=__version__,
        model=str(model),
        inputs=[summary(s) for s in result.inputs],
        outputs=[summary(s) for s in result.outputs],
        saved_to=saved_to,
        backend=runner.backend,
        stream=StreamReport(
            samples=result.samples,
            batch_size=result.batch_size,
            resumed_from=result.resumed_from,
            folder=result.folder,
        ),
    )
