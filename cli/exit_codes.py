"""Exit codes, decided in one place.

====  ==========================================================================
code  meaning
====  ==========================================================================
0     success: no findings, models identical, outputs match
1     findings (validate), differences (diff), parity mismatch (run --expect)
2     usage error: bad option, unknown input/layer name
3     the file cannot be read as a Keras model (corrupt, hostile, out of scope)
4     unsupported: a layer or option the runner lacks, Graphviz ``dot`` missing
5     the run failed while executing (also: Graphviz ``dot`` failed or timed out)
70    internal error (a bug in modelgraph: please report it with --traceback)
130   interrupted
141   the reader of stdout closed the pipe (``| head``): stopped quietly
====  ==========================================================================
"""

from __future__ import annotations

from modelgraph.errors import LoadError, ModelGraphError, RunError, UnsupportedError, UsageError

OK = 0
FINDINGS = 1
USAGE = 2
CANNOT_LOAD = 3
UNSUPPORTED = 4
RUN_FAILED = 5
INTERNAL = 70
INTERRUPTED = 130
PIPE_CLOSED = 141

TABLE: list[tuple[int, str]] = [
    (OK, "success: no findings, models identical, outputs match"),
    (FINDINGS, "findings (validate), differences (diff), parity mismatch (run --expect)"),
    (USAGE, "usage error: bad option, unknown input or layer name"),
    (CANNOT_LOAD, "the file cannot be read as a Keras model (corrupt, hostile, out of scope)"),
    (UNSUPPORTED, "unsupported layer or option, or Graphviz dot missing"),
    (RUN_FAILED, "the run failed while executing (or Graphviz dot failed or timed out)"),
    (INTERNAL, "internal error (a bug: rerun with --traceback and report it)"),
]


def code_for(error: BaseException) -> int:
    """The exit code for an exception that ended a command."""
    if isinstance(error, UsageError):
        return USAGE
    if isinstance(error, LoadError):
        return CANNOT_LOAD
    if isinstance(error, UnsupportedError):
        return UNSUPPORTED
    if isinstance(error, RunError):
        return RUN_FAILED
    if isinstance(error, KeyboardInterrupt):
        return INTERRUPTED
    if isinstance(error, MemoryError):  # an allocation the checks before it did not foresee
        return RUN_FAILED
    if isinstance(error, ModelGraphError):
        return CANNOT_LOAD
    return INTERNAL
