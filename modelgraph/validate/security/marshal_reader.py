"""A bounded reader of the CPython marshal format: previews Lambda bytecode without loading it.

It extracts names, constants and nested code objects and never builds a code object, imports or
executes anything; every read is bounded (size, nesting depth, object count).
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

MAX_BYTECODE_BYTES = 1024 * 1024
MAX_MARSHAL_DEPTH = 32
MAX_MARSHAL_OBJECTS = 200_000

SUSPICIOUS_NAMES = frozenset(
    {
        "os", "system", "popen", "subprocess", "Popen", "check_output", "check_call", "exec", "eval",
        "compile", "__import__", "open", "builtins", "__builtins__", "getattr", "setattr", "globals",
        "socket", "urlopen", "urllib", "requests", "pickle", "marshal", "ctypes", "shutil", "rmtree",
        "remove", "unlink", "execv", "execve", "spawnv", "fork", "importlib", "import_module",
        "load_model", "enable_unsafe_deserialization", "get_file", "write_text", "write_bytes",
    }
)  # fmt: skip


@dataclass
class CodeSummary:
    """What the preview extracted from one code object (fields filled as they are read)."""

    name: str = ""
    qualname: str = ""
    filename: str = ""
    names: list[str] = field(default_factory=list)
    varnames: list[str] = field(default_factory=list)
    constants: list[Any] = field(default_factory=list)
    nested: list[CodeSummary] = field(default_factory=list)

    def walk(self) -> Iterator[CodeSummary]:
        stack = [self]
        while stack:
            code = stack.pop()
            yield code
            stack.extend(reversed(code.nested))


@dataclass
class BytecodePreview:
    """A safe, partial description of marshalled bytecode. ``complete`` is False when the reader stopped."""

    encoding: str = "unknown"
    python: str = "?"
    size: int = 0
    code: CodeSummary | None = None
    complete: bool = False
    error: str = ""

    def all_names(self) -> list[str]:
        out: list[str] = []
        if self.code is not None:
            for c in self.code.walk():
                out.extend(n for n in c.names if n not in out)
        return out

    def suspicious(self) -> list[str]:
        found: list[str] = []
        if self.code is None:
            return found
        for c in self.code.walk():
            for n in [*c.names, *c.varnames]:
                if n in SUSPICIOUS_NAMES and n not in found:
                    found.append(n)
            for k in c.constants:
                if isinstance(k, str) and k in SUSPICIOUS_NAMES and k not in found:
                    found.append(k)
        return found

    def summary(self, limit: int = 12) -> str:
        """One line: version guess, function name, names, locals, constants, nested code, suspicious."""
        if self.code is None:
            return (
                f"undecodable bytecode ({self.size} bytes, {self.encoding}): {self.error or 'no code object'}"
            )
        top = self.code
        parts = [f"python {self.python} bytecode ({self.size} bytes, {self.encoding}) of {top.name or '?'!r}"]
        if top.filename:
            parts[0] += f" from {top.filename!r}"

        def fmt(items: list[Any]) -> str:
            shown = [_short(x) for x in items[:limit]]
            more = f", +{len(items) - limit} more" if len(items) > limit else ""
            return "[" + ", ".join(shown) + more + "]"

        names = self.all_names()
        if names:
            parts.append(f"names {fmt(names)}")
        if top.varnames:
            parts.append(f"locals {fmt(top.varnames)}")
        consts: list[Any] = []
        for c in top.walk():
            consts.extend(k for k in c.constants if k not in consts)
        if consts:
            parts.append(f"constants {fmt(consts)}")
        nested = [c.qualname or c.name for c in top.walk() if c is not top]
        if nested:
            parts.append(f"nested code {fmt(nested)}")
        sus = self.suspicious()
        if sus:
            parts.append(f"SUSPICIOUS {fmt(sus)}")
        if not self.complete:
            parts.append(f"preview incomplete: {self.error}")
        return "; ".join(parts)


def _short(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


class _Stop(Exception):
    """The marshal reader met something it does not know or a bound; keep what was decoded so far."""


class _Sentinel:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


_NULL = _Sentinel("NULL")
_PENDING = _Sentinel("<ref>")
_ELLIPSIS = _Sentinel("Ellipsis")
_STOPITER = _Sentinel("StopIteration")


class _MarshalReader:
    """Bounded reader of the CPython marshal format (Python 2.7 and 3.x), code objects summarised."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.refs: list[Any] = []
        self.interned: list[Any] = []  # Python 2 'R' string refs
        self.depth = 0
        self.count = 0
        self.python = "?"
        self.root: CodeSummary | None = None
        self._code_parents: list[CodeSummary] = []

    # primitive reads

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise _Stop(f"truncated at offset {self.pos} (wanted {n} bytes)")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def _byte(self) -> int:
        return self._take(1)[0]

    def _i32(self) -> int:
        return struct.unpack("<i", self._take(4))[0]

    def _count(self, n: int) -> int:
        if n < 0 or n > len(self.data) - self.pos:
            raise _Stop(f"truncated or bad element count {n} at offset {self.pos}")
        return n

    def _peek_type(self, offset: int = 0) -> str:
        i = self.pos + offset
        return chr(self.data[i] & 0x7F) if i < len(self.data) else ""

    # objects

    def read(self) -> Any:
        self.depth += 1
        self.count += 1
        try:
            if self.depth > MAX_MARSHAL_DEPTH:
                raise _Stop(f"nesting deeper than {MAX_MARSHAL_DEPTH}")
            if self.count > MAX_MARSHAL_OBJECTS:
                raise _Stop(f"more than {MAX_MARSHAL_OBJECTS} objects")
            start = self.pos
            code = self._byte()
            flag, t = code & 0x80, chr(code & 0x7F)
            idx = None
            if flag:
                idx = len(self.refs)
                self.refs.append(_PENDING)
            value = self._dispatch(t, start)
            if idx is not None:
                self.refs[idx] = value
            return value
        finally:
            self.depth -= 1

    def _dispatch(self, t: str, start: int) -> Any:
        simple = {"0": _NULL, "N": None, "F": False, "T": True, ".": _ELLIPSIS, "S": _STOPITER}
        if t in simple:
            return simple[t]
        if t == "i":
            return self._i32()
        if t == "I":
            return struct.unpack("<q", self._take(8))[0]
        if t == "l":
            n = self._i32()
            ndig = self._count(abs(n) * 2) // 2
            value = 0
            for i, (d,) in enumerate(struct.iter_unpack("<H", self._take(ndig * 2))):
                value |= (d & 0x7FFF) << (15 * i)
            return -value if n < 0 else value
        if t == "g":
            return struct.unpack("<d", self._take(8))[0]
        if t == "y":
            re_, im = struct.unpack("<dd", self._take(16))
            return complex(re_, im)
        if t == "f":
            return self._ascii_float()
        if t == "x":
            return complex(self._ascii_float(), self._ascii_float())
        if t == "s":
            return self._take(self._count(self._i32()))
        if t in "tu":
            text = self._take(self._count(self._i32())).decode("utf-8", "replace")
            if t == "t":
                self.interned.append(text)
            return text
        if t in "aA":
            return self._take(self._count(self._i32())).decode("latin-1")
        if t in "zZ":
            return self._take(self._byte()).decode("latin-1")
        if t == "R":
            i = self._i32()
            if not 0 <= i < len(self.interned):
                raise _Stop(f"bad string ref {i} at offset {start}")
            return self.interned[i]
        if t == "r":
            i = self._i32()
            if not 0 <= i < len(self.refs):
                raise _Stop(f"bad ref {i} at offset {start}")
            return self.refs[i]
        if t in "([<>":
            n = self._count(self._i32())
            return tuple(self.read() for _ in range(n))
        if t == ")":
            n = self._byte()
            return tuple(self.read() for _ in range(n))
        if t == "{":
            items = []
            while True:
                k = self.read()
                if k is _NULL:
                    return tuple(items)
                items.append((k, self.read()))
        if t == "c":
            return self._code(start)
        raise _Stop(f"unknown marshal type {t!r} at offset {start}")

    def _ascii_float(self) -> float:
        text = self._take(self._byte()).decode("latin-1")
        if not re.fullmatch(r"[-+0-9.eEinfatyINFATY]{1,40}", text):
            raise _Stop(f"bad float literal {text!r}")
        try:
            return float(text)
        except ValueError:
            raise _Stop(f"bad float literal {text!r}") from None

    def _layout(self) -> int:
        """Number of int32 header fields: 5 (3.0-3.7, 3.11+), 6 (3.8-3.10) or 4 (2.x)."""
        for k in (5, 6, 4):
            at = self.pos + 4 * k
            if at + 5 > len(self.data) or (self.data[at] & 0x7F) != ord("s"):
                continue
            ints = struct.unpack_from(f"<{k}i", self.data, self.pos)
            if any(not 0 <= v < (1 << 27) for v in ints):
                continue
            (n,) = struct.unpack_from("<i", self.data, at + 1)
            after = at + 5 + n
            if n < 0 or after >= len(self.data) or chr(self.data[after] & 0x7F) not in "()r":
                continue
            return k
        raise _Stop(f"unrecognised code object header at offset {self.pos}")

    def _code(self, start: int) -> CodeSummary:
        summary = CodeSummary()
        if self._code_parents:
            self._code_parents[-1].nested.append(summary)
        elif self.root is None:
            self.root = summary
        self._code_parents.append(summary)
        try:
            k = self._layout()
            self._take(4 * k)
            self.read()  # the bytecode string itself: not interpreted
            self._consts(summary, self.read())
            summary.names = _strs(self.read())
            if k == 6:
                self.python = "3.8-3.10"
                self._classic_tail(summary)
            elif k == 4:
                self.python = "2.x"
                self._classic_tail(summary)
            else:
                locals_ = _strs(self.read())
                if self._peek_type() == "s":  # co_localspluskinds: 3.11+
                    self.python = "3.11+"
                    summary.varnames = locals_
                    self.read()
                    summary.filename = _str(self.read())
                    summary.name = _str(self.read())
                    summary.qualname = _str(self.read())
                    self._i32()
                    self.read()  # linetable
                    self.read()  # exceptiontable
                else:
                    self.python = "3.0-3.7"
                    summary.varnames = locals_
                    summary.varnames += _strs(self.read()) + _strs(self.read())  # freevars, cellvars
                    summary.filename = _str(self.read())
                    summary.name = _str(self.read())
                    self._i32()
                    self.read()  # lnotab
        finally:
            self._code_parents.pop()
        return summary

    def _classic_tail(self, summary: CodeSummary) -> None:
        summary.varnames = _strs(self.read())
        summary.varnames += _strs(self.read()) + _strs(self.read())  # freevars, cellvars
        summary.filename = _str(self.read())
        summary.name = _str(self.read())
        self._i32()
        self.read()  # lnotab / linetable

    @staticmethod
    def _consts(summary: CodeSummary, consts: Any) -> None:
        stack = [consts]
        while stack:
            item = stack.pop()
            if isinstance(item, tuple):
                stack.extend(reversed(item))
            elif isinstance(item, CodeSummary) or item is None or isinstance(item, _Sentinel):
                continue
            elif isinstance(item, bytes):
                summary.constants.append(item[:200])
            elif isinstance(item, str | int | float | complex):
                summary.constants.append(item if not isinstance(item, str) else item[:200])


def _str(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return value if isinstance(value, str) else ""


def _strs(value: Any) -> list[str]:
    if isinstance(value, tuple):
        return [_str(v) for v in value if isinstance(v, str | bytes)]
    return []


_B64 = re.compile(r"[A-Za-z0-9+/=\s]+")


def decode_bytecode_blob(blob: str) -> tuple[bytes, str]:
    """The raw marshal bytes of a Keras function string and the encoding used.

    Keras 2 >= 2.1.2 / tf.keras / Keras 3: base64 (with newlines); Keras 1: ``raw_unicode_escape``.
    """
    if _B64.fullmatch(blob):
        compact = re.sub(r"\s+", "", blob)
        try:
            raw = base64.b64decode(compact + "=" * (-len(compact) % 4), validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if raw and (raw[0] & 0x7F) == ord("c"):
            return raw, "base64"
    try:
        raw = blob.encode("raw_unicode_escape")
    except UnicodeEncodeError:
        raw = blob.encode("utf-8", "replace")
    return raw, "raw_unicode_escape"


def preview_bytecode(blob: str | bytes) -> BytecodePreview:
    """Describe marshalled bytecode without loading it: bounded, never executes, never raises."""
    if isinstance(blob, str):
        raw, encoding = decode_bytecode_blob(blob)
    else:
        raw, encoding = bytes(blob), "bytes"
    preview = BytecodePreview(encoding=encoding, size=len(raw))
    if len(raw) > MAX_BYTECODE_BYTES:
        preview.error = f"over {MAX_BYTECODE_BYTES} bytes; previewing the start only"
        raw = raw[:MAX_BYTECODE_BYTES]
    reader = _MarshalReader(raw)
    try:
        if not raw or (raw[0] & 0x7F) != ord("c"):
            raise _Stop("not a marshalled code object")
        reader.read()
        preview.complete = not preview.error
    except _Stop as stop:
        preview.error = preview.error or str(stop)
    except (RecursionError, MemoryError, struct.error, ValueError, OverflowError) as exc:
        preview.error = f"{type(exc).__name__}: {exc}"
    preview.code = reader.root
    preview.python = reader.python
    return preview
