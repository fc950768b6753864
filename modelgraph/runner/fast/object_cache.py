"""A disk cache of machine code compiled by llvmlite (:mod:`modelgraph.runner.fast.depthwise_ir`), so
a process loads its loops in about a millisecond instead of compiling them for 60-120 ms each.

An entry is named by the SHA-256 of the IR, the CPU name and features, and llvmlite's version, and
holds the SHA-256 of its code before the code: an entry that does not match (a torn write, a full
disk) is ignored and rewritten. The directory is ``$MODELGRAPH_CACHE_DIR`` when set, else
``modelgraph/llvm`` under the user's cache directory (``$XDG_CACHE_HOME``, ``~/.cache``, or
``%LOCALAPPDATA%`` on Windows); ``MODELGRAPH_CACHE_DIR=""`` turns the cache off. When the directory
cannot be written, code is compiled in each process, as without a cache. Like Numba's cache and
Python's ``__pycache__``, it holds code this package compiled for this user from its own source,
never anything read from a model file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import tempfile
from pathlib import Path

ENV = "MODELGRAPH_CACHE_DIR"
_DIGEST = 32


def directory() -> Path | None:
    """Where entries are kept (None: caching is off)."""
    chosen = os.environ.get(ENV)
    if chosen is not None:
        return Path(chosen).expanduser() if chosen.strip() else None
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        base = Path(os.environ["LOCALAPPDATA"])
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "modelgraph" / "llvm"


class ObjectCache:
    """The cache entry of one module, with the two callbacks llvmlite's ``set_object_cache`` takes."""

    def __init__(self, source: str, cpu: str, features: str) -> None:
        import llvmlite

        key = hashlib.sha256("\0".join((source, cpu, features, llvmlite.__version__)).encode()).hexdigest()
        where = directory()
        self.path = None if where is None else where / f"{key}.o"
        self._code: bytes | None = None

    def hit(self) -> bool:
        """Whether a valid entry exists (read now, handed to llvmlite by :meth:`load`)."""
        if self.path is None:
            return False
        try:
            data = self.path.read_bytes()
        except OSError:
            return False
        digest, code = data[:_DIGEST], data[_DIGEST:]
        if code and hashlib.sha256(code).digest() == digest:
            self._code = code
        return self._code is not None

    def load(self, module: object) -> bytes | None:
        """llvmlite's ``getbuffer`` callback: the cached code, or None to compile."""
        return self._code

    def store(self, module: object, code: bytes) -> None:
        """llvmlite's ``notify`` callback: write a freshly compiled module's code (atomically; a
        failure only means the next process compiles again)."""
        if self.path is None or self._code is not None:
            return
        temporary = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self.path.parent, suffix=".tmp")
            with os.fdopen(handle, "wb") as out:
                out.write(hashlib.sha256(code).digest() + bytes(code))
            os.replace(temporary, self.path)
        except OSError:
            if temporary is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
