"""Check models in a child process under a time and a memory bound.

A hostile file must not take the scan down: each :class:`BoundedChecker` keeps one child Python
process (``python -m modelgraph.validate.bounded``) that limits its own address space
(``RLIMIT_AS``) before importing anything heavy and then checks the targets it is sent, one JSON line
in, one JSON record out. The parent waits for each answer at most ``timeout`` seconds; a child that
runs past it is killed, one that dies (out of memory, a crash in a native library) is noticed, and in
both cases the model gets a record with an STR015 finding and the next model gets a fresh child.
Only paths and plain JSON cross the pipe. The same checker runs under ``--jobs`` and on Dask workers.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import time
from typing import Any

from modelgraph.validate.discover import Target

DEFAULT_TIMEOUT = 300.0
DEFAULT_MAX_MEMORY_MB = 4096
_START_TIMEOUT = 120.0
# The child checks one model at a time: BLAS and OpenMP thread pools would only compete with the
# other children (and each thread's stack counts against the address-space bound).
_CHILD_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def check_target(target: Target, opts: Any, ruleset: str, cache: Any = None) -> dict[str, Any]:
    """The record of one model, checked in this process (through ``cache`` when given)."""
    from dataclasses import replace

    from modelgraph.validate.check import validate_file
    from modelgraph.validate.records import content_hash, make_record, moved

    t0 = time.perf_counter()
    try:
        sha256, size = content_hash(target)
    except Exception:  # noqa: BLE001 - unreadable: the check says why; the hash is left empty
        sha256, size = "", 0
    t1 = time.perf_counter()
    if cache is not None and sha256:
        hit = cache.get(sha256)
        if hit is not None:
            rec = moved(hit, target)
            rec["cached"] = True
            rec["timings"] = {"hash_s": round(t1 - t0, 6), "check_s": 0.0}
            return rec
    o = opts if target.weights is None else replace(opts, weights=target.weights)
    result = validate_file(target.path, o)
    rec = make_record(
        target,
        result,
        sha256=sha256,
        size=size,
        ruleset=ruleset,
        hash_s=t1 - t0,
        check_s=time.perf_counter() - t1,
    )
    if cache is not None and sha256:
        cache.put(rec)
    return rec


def stopped_record(target: Target, opts: Any, ruleset: str, why: str, seconds: float) -> dict[str, Any]:
    """The record of a model whose check was stopped at a bound (an STR015 finding)."""
    from modelgraph.validate.check import FileResult
    from modelgraph.validate.records import content_hash, make_record
    from modelgraph.validate.registry import make_issue

    try:
        sha256, size = content_hash(target)
    except Exception:  # noqa: BLE001
        sha256, size = "", 0
    issue = make_issue("STR015", why, "", path=target.path)
    kept = tuple(opts.config.apply([issue], target.path))
    result = FileResult(target.path, "unknown", kept, opts.strict)
    return make_record(target, result, sha256=sha256, size=size, ruleset=ruleset, hash_s=0.0, check_s=seconds)


class BoundedChecker:
    """One child process checking models one at a time under ``timeout`` seconds and
    ``max_memory_mb`` of address space each (see the module docstring)."""

    def __init__(
        self,
        options: dict[str, Any],
        *,
        cache_dir: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_memory_mb: int = DEFAULT_MAX_MEMORY_MB,
    ) -> None:
        from modelgraph.validate.records import options_from_json, ruleset_version

        self.options = options
        self.opts = options_from_json(options)
        self.ruleset = ruleset_version(self.opts)
        self.cache_dir = cache_dir
        self.timeout = timeout
        self.max_memory_mb = max_memory_mb
        self._proc: subprocess.Popen[bytes] | None = None
        self._buf = b""

    def _start(self) -> subprocess.Popen[bytes]:
        env = {**os.environ, **_CHILD_ENV}
        proc = subprocess.Popen(
            [sys.executable, "-m", "modelgraph.validate.bounded", str(self.max_memory_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self._proc = proc
        self._buf = b""
        hello = {"options": self.options, "cache_dir": self.cache_dir}
        assert proc.stdin is not None
        proc.stdin.write((json.dumps(hello) + "\n").encode())
        proc.stdin.flush()
        if self._read_line(_START_TIMEOUT) != b"ready":
            self.close()
            from modelgraph.errors import ModelGraphError

            raise ModelGraphError("the validate child process did not start")
        return proc

    def _read_line(self, timeout: float) -> bytes | None:
        """One line from the child, or None when it died or ``timeout`` passed."""
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def check(self, target: Target) -> dict[str, Any]:
        """The record of ``target`` (an STR015 record when the child was stopped or died)."""
        proc = self._proc if self._proc is not None and self._proc.poll() is None else self._start()
        request = json.dumps({"path": target.path, "weights": target.weights}) + "\n"
        t0 = time.monotonic()
        try:
            assert proc.stdin is not None
            proc.stdin.write(request.encode())
            proc.stdin.flush()
            line = self._read_line(self.timeout)
        except (BrokenPipeError, OSError):
            line = None
        if line is not None:
            try:
                return json.loads(line)
            except ValueError:
                pass
        elapsed = time.monotonic() - t0
        timed_out = proc.poll() is None and elapsed >= self.timeout
        self.close()
        if timed_out:
            why = f"the check ran past its {self.timeout:g} s time limit and was stopped"
        else:
            code = proc.returncode
            how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            why = (
                f"the check process died ({how}) after {elapsed:.1f} s; over the "
                f"{self.max_memory_mb} MiB memory limit or a crash in a native library"
            )
        return stopped_record(target, self.opts, self.ruleset, why, elapsed)

    def close(self) -> None:
        """Stop the child process (a new one starts with the next check)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def _limit_memory(megabytes: int) -> None:
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX: the time bound still applies
        return
    limit = megabytes * 1024 * 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _child(argv: list[str]) -> int:
    """The child's loop: bound memory, read the options, then answer one record per request line."""
    _limit_memory(int(argv[0]))
    import warnings

    warnings.filterwarnings("ignore")
    from modelgraph.validate.records import RecordCache, options_from_json, ruleset_version

    out = sys.stdout.buffer
    hello = json.loads(sys.stdin.buffer.readline())
    from modelgraph.plugins import load_plugins

    load_plugins(hello["options"].get("plugins") or [])
    opts = options_from_json(hello["options"])
    ruleset = ruleset_version(opts)
    cache = RecordCache(hello["cache_dir"], ruleset) if hello.get("cache_dir") else None
    out.write(b"ready\n")
    out.flush()
    for line in sys.stdin.buffer:
        req = json.loads(line)
        target = Target(req["path"], req.get("weights"))
        try:
            rec = check_target(target, opts, ruleset, cache)
        except MemoryError:
            rec = stopped_record(target, opts, ruleset, "the check ran out of memory", 0.0)
        out.write((json.dumps(rec, separators=(",", ":")) + "\n").encode("ascii"))
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
