"""Security rules: what a Keras loader would execute, import, fetch or unpickle, found statically.

Nothing here imports a module named by a file, unpickles, calls ``marshal.loads`` or executes code.
Lambda bytecode is previewed by :func:`preview_bytecode`, a small bounded reader of the CPython marshal
format written for this purpose: it extracts names and constants and never builds a code object.

* :func:`scan_config` walks a whole parsed model config (iteratively) and returns every finding
  (rules ``SEC0xx``).
* :func:`scan_container` checks the file container: zip members, npz pickles, HDF5 links and datasets,
  JSON bombs, raw text (rules ``SEC1xx``).
* :func:`scan_path` does both for a model file or an unzipped ``.keras`` directory.

``RULES`` lists every rule id with its severity and meaning.
"""

from __future__ import annotations

import base64
import binascii
import math
import os
import re
import struct
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from modelgraph import safe_io
from modelgraph.errors import FormatError, SecurityError
from modelgraph.validate.issue import Issue, Severity

# --- rule table -----------------------------------------------------------------------------------

RULES: dict[str, tuple[Severity, str]] = {
    "SEC001": ("error", "Lambda layer carries Python bytecode (Keras executes it on load or call)"),
    "SEC002": ("error", "serialized Python function (__lambda__) outside a Lambda layer"),
    "SEC003": ("error", "object module outside the keras/keras_hub/keras_cv/keras_nlp/tf_keras namespaces"),
    "SEC004": ("warning", "custom object or function: needs user Python code to load"),
    "SEC005": ("error", "TorchModuleWrapper: the module is a torch pickle"),
    "SEC006": ("error", "TFSMLayer: loads an external SavedModel"),
    "SEC007": ("error", "safe_mode-bypass gadget (load_model, enable_unsafe_deserialization, get_file, ...)"),
    "SEC008": ("error", "lookup-layer vocabulary given as a file path or URL (read by Keras)"),
    "SEC009": ("error", "legacy Merge layer with a lambda/function mode"),
    "SEC010": ("info", "TFOpLambda/SlicingOpLambda: a TensorFlow op (needs TF; not code execution)"),
    "SEC011": ("warning", "node called with training=True (training behaviour at inference)"),
    "SEC012": ("warning", "NaN/Infinity in the config (non-standard JSON)"),
    "SEC013": ("warning", "config value that looks like a file path or URL"),
    "SEC100": ("error", "container could not be scanned"),
    "SEC101": ("error", "zip member with an absolute path, '..', backslash or NUL"),
    "SEC102": ("error", "zip member that is a symbolic link or special file"),
    "SEC103": ("error", "zip bomb: too many members, declared size over the limit, or ratio too high"),
    "SEC104": ("error", "zip member name appears more than once"),
    "SEC105": ("error", "code or pickle member inside a .keras archive"),
    "SEC106": ("warning", "unexpected member inside a .keras archive"),
    "SEC107": ("error", "npz weights with pickled object arrays (reading them executes code)"),
    "SEC108": ("error", "HDF5 external link"),
    "SEC109": ("warning", "HDF5 soft link"),
    "SEC110": ("error", "HDF5 soft-link cycle"),
    "SEC111": ("error", "HDF5 dataset with external storage (reads another file)"),
    "SEC112": ("error", "HDF5 virtual dataset (maps other files)"),
    "SEC113": ("error", "HDF5 dataset whose declared size is a shape bomb or over the cap"),
    "SEC114": ("error", "JSON nesting or size bomb"),
    "SEC115": ("error", "'enable_unsafe_deserialization' in the raw config text"),
    "SEC116": (
        "warning",
        "npz weights pickled in Keras's own layout (NumPy arrays only); Keras unpickles them",
    ),
    "SEC117": (
        "error",
        "zip member Keras rejects: bytes not matching its CRC-32, or a local-header name that differs "
        "from the central directory's (altered after writing, or two names for one member)",
    ),
    "SEC118": (
        "error",
        "HDF5 structure over the bounds: too many links, groups nested too deep, or weight/layer "
        "names listed more than once",
    ),
    "SEC119": (
        "error",
        "polyglot: the file is both a zip (.keras) and an HDF5 file (Keras reads either part by extension)",
    ),
}


def _issue(rule: str, message: str, where: str, hint: str = "", path: str = "") -> Issue:
    return Issue(rule=rule, severity=RULES[rule][0], message=message, where=where, hint=hint, path=path)


# --- pickle opcodes (read, never run) -------------------------------------------------------------

MAX_PICKLE_SCAN_BYTES = 256 * 1024 * 1024
_NUMPY_GLOBALS = frozenset(
    {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
    }
)
_STRING_OPS = frozenset(
    {"STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8"}
)


def pickle_verdict(data: bytes) -> str:
    """``"numpy-only"`` when a pickle's only imports are the NumPy array constructors, else
    ``"unsafe"``. The pickle is parsed with :func:`pickletools.genops` and its stack simulated
    symbolically: nothing is unpickled, imported or called."""
    import pickletools

    stack: list[Any] = []
    memo: dict[int, Any] = {}
    mark = object()
    try:
        for op, arg, _pos in pickletools.genops(data):
            name = op.name
            if name.startswith("EXT"):
                return "unsafe"
            if name in ("MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT"):
                idx = len(memo) if name == "MEMOIZE" else int(arg)
                memo[idx] = stack[-1] if stack else None
                continue
            if name in ("GET", "BINGET", "LONG_BINGET"):
                stack.append(memo.get(int(arg)))
                continue
            if name == "GLOBAL":
                module, _, attr = str(arg).partition(" ")
                if (module, attr) not in _NUMPY_GLOBALS:
                    return "unsafe"
                stack.append(("global", module, attr))
                continue
            if name == "STACK_GLOBAL":
                if len(stack) < 2:
                    return "unsafe"
                attr, module = stack.pop(), stack.pop()
                if (
                    not (isinstance(module, str) and isinstance(attr, str))
                    or (module, attr) not in _NUMPY_GLOBALS
                ):
                    return "unsafe"
                stack.append(("global", module, attr))
                continue
            before = op.stack_before
            if pickletools.markobject in before:
                while stack and stack[-1] is not mark:
                    stack.pop()
                if not stack:
                    return "unsafe"
                stack.pop()
                for _ in range(before.index(pickletools.markobject)):
                    if not stack:
                        return "unsafe"
                    stack.pop()
            else:
                for _ in before:
                    if not stack:
                        return "unsafe"
                    stack.pop()
            for item in op.stack_after:
                if item is pickletools.markobject:
                    stack.append(mark)
                elif name in _STRING_OPS and isinstance(arg, str):
                    stack.append(arg)
                else:
                    stack.append(None)
            if name == "STOP":
                return "numpy-only"
    except Exception:  # noqa: BLE001 - a malformed pickle is not numpy-only
        return "unsafe"
    return "unsafe"


# --- marshal preview ------------------------------------------------------------------------------

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


# --- config rules ---------------------------------------------------------------------------------

ALLOWED_NAMESPACES = ("keras", "keras_hub", "keras_cv", "keras_nlp", "tf_keras")

DANGEROUS_MODULES = frozenset(
    {
        "os", "posix", "nt", "subprocess", "sys", "shutil", "importlib", "pickle", "marshal", "socket",
        "ctypes", "runpy", "code", "pty", "webbrowser", "urllib", "http", "requests", "builtins", "io",
        "pathlib", "tempfile", "multiprocessing", "threading", "signal", "platform", "dill", "cloudpickle",
        "joblib", "torch", "numpy", "tensorflow",
    }
)  # fmt: skip

GADGET_NAMES = frozenset(
    {
        "load_model", "load_weights", "save_model", "save_weights", "enable_unsafe_deserialization",
        "get_file", "load_img", "save_img", "model_from_json", "model_from_yaml", "model_from_config",
        "image_dataset_from_directory", "text_dataset_from_directory", "audio_dataset_from_directory",
        "deserialize_keras_object", "register_keras_serializable", "serialize_keras_object",
        "clear_session",
    }
)  # fmt: skip

DANGEROUS_BUILTINS = frozenset(
    {
        "eval", "exec", "compile", "__import__", "open", "getattr", "setattr", "delattr", "globals",
        "locals", "vars", "input", "breakpoint", "exit", "quit", "help", "memoryview", "__build_class__",
    }
)  # fmt: skip

KNOWN_OPTIMIZERS = frozenset(
    {
        "Adam", "AdamW", "SGD", "RMSprop", "Adagrad", "Adadelta", "Adamax", "Nadam", "Ftrl", "Lion",
        "Adafactor", "LossScaleOptimizer", "Lamb", "Muon",
    }
)  # fmt: skip

LOOKUP_LAYERS = frozenset({"StringLookup", "IntegerLookup", "TextVectorization", "IndexLookup"})
TFOP_LAYERS = frozenset({"TFOpLambda", "SlicingOpLambda"})
_CODE_FIELDS = ("function", "output_shape", "mask")
_NAME_KEYS = frozenset({"name", "class_name", "registered_name", "module", "dtype", "shared_object_id"})

_PATHLIKE = re.compile(
    r"""^(?:
        [A-Za-z][A-Za-z0-9+.\-]{1,15}://        # URL with a scheme (http, https, ftp, gs, s3, hdfs, file)
      | file:                                    # file: URI
      | ~[/\\]                                   # home-relative
      | /(?!/)\S*?/                              # absolute POSIX path with at least two components
      | /(?:etc|tmp|home|root|usr|var|proc|dev|mnt|opt|Users)\b
      | [A-Za-z]:[\\/]                            # Windows drive
      | \\\\                                     # UNC
    )|(?:^|[/\\])\.\.[/\\]                       # '..' traversal anywhere
    """,
    re.X,
)


def looks_like_path(value: str) -> bool:
    """Heuristic: a string Keras (or tf.io.gfile) could treat as a file path or URL."""
    return len(value) < 4096 and bool(_PATHLIKE.search(value))


def _module_allowed(module: str) -> bool:
    return any(module == ns or module.startswith(ns + ".") for ns in ALLOWED_NAMESPACES)


def _module_root(module: str) -> str:
    return module.split(".", 1)[0]


def _bytecode_blob(value: Any) -> str | None:
    """The bytecode string inside a Keras function field, in any of its historical forms."""
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple) and value and isinstance(value[0], str):
        return value[0]
    if isinstance(value, dict):
        cfg = value.get("config")
        if isinstance(cfg, dict):
            if isinstance(cfg.get("code"), str):
                return cfg["code"]
            return _bytecode_blob(cfg.get("value"))
        if isinstance(value.get("code"), str):
            return value["code"]
    return None


def _short_name(name: Any) -> str:
    """``get_file`` of ``keras.utils.get_file``, ``Custom>get_file`` or ``get_file``."""
    return name.rsplit(">", 1)[-1].rsplit(".", 1)[-1] if isinstance(name, str) else ""


def _gadget_in(cls: str, registered: Any, module: Any) -> str | None:
    """The safe_mode-bypass gadget a ``{module, class_name, registered_name}`` object names, if any
    (a function object names its function in ``config``, checked by ``_function_ref``)."""
    if cls == "function":
        return None
    for name in (cls, registered):
        if _short_name(name) in GADGET_NAMES:
            return f"{module}.{name}" if isinstance(module, str) and module else str(name)
    return None


def _is_lambda_obj(value: Any) -> bool:
    return isinstance(value, dict) and value.get("class_name") == "__lambda__"


def _layer_label(layer: str | None) -> str:
    return f"layer {layer!r}" if layer else "the model"


@dataclass
class _Frame:
    value: Any
    path: str
    layer: str | None
    in_nodes: bool
    key: str | None


class _ConfigScanner:
    def __init__(self, path: str) -> None:
        self.path = path
        self.issues: list[Issue] = []
        self.handled: set[int] = set()  # ids of subtrees already reported as code blobs
        self.reported: set[str] = set()  # JSON paths of strings already reported by a class rule

    def add(self, rule: str, message: str, where: str, hint: str = "") -> None:
        self.issues.append(_issue(rule, message, where, hint, self.path))

    def run(self, config: Any, root: str) -> list[Issue]:
        stack = [_Frame(config, root, None, False, None)]
        while stack:
            fr = stack.pop()
            v = fr.value
            if isinstance(v, dict):
                if id(v) in self.handled:
                    continue
                layer = fr.layer
                if isinstance(v.get("class_name"), str):
                    layer = self._layer_name(v) or layer
                    self._envelope(v, fr.path, layer)
                children: list[_Frame] = []
                for key, child in v.items():
                    k = str(key)
                    cpath = safe_io.json_path(fr.path, k)
                    in_nodes = fr.in_nodes or k == "inbound_nodes"
                    if k == "training" and child is True and in_nodes:
                        self.add(
                            "SEC011",
                            f"{_layer_label(layer)} is called with training=True: dropout/batch statistics "
                            "behave as in training at inference",
                            cpath,
                            "re-save the model without training=True in the call, or run with training semantics",
                        )
                    if k == "safe_mode" and child is False:
                        self.add(
                            "SEC007",
                            f"{_layer_label(layer)} passes safe_mode=False (CVE-2025-8747 pattern: "
                            "nested load without safe mode)",
                            cpath,
                            "do not load this file with Keras",
                        )
                    if k == "vocabulary" and isinstance(child, str):
                        self.add(
                            "SEC008",
                            f"{_layer_label(layer)} reads its vocabulary from {child[:200]!r} "
                            "(local file read or network fetch in Keras)",
                            cpath,
                            "inline the vocabulary in the config or ship it as a zip asset",
                        )
                        continue
                    if isinstance(child, str):
                        self._string(child, cpath, layer, k)
                    elif isinstance(child, float):
                        self._float(child, cpath, layer)
                    elif isinstance(child, dict | list):
                        children.append(_Frame(child, cpath, layer, in_nodes, k))
                stack.extend(reversed(children))
            elif isinstance(v, list):
                children = []
                for i, child in enumerate(v):
                    cpath = safe_io.json_path(fr.path, i)
                    if isinstance(child, str):
                        self._string(child, cpath, fr.layer, fr.key)
                    elif isinstance(child, float):
                        self._float(child, cpath, fr.layer)
                    elif isinstance(child, dict | list):
                        children.append(_Frame(child, cpath, fr.layer, fr.in_nodes, fr.key))
                stack.extend(reversed(children))
            elif isinstance(v, float):
                self._float(v, fr.path, fr.layer)
            elif isinstance(v, str):
                self._string(v, fr.path, fr.layer, None)
        return self.issues

    @staticmethod
    def _layer_name(d: dict[str, Any]) -> str | None:
        cfg = d.get("config")
        if isinstance(cfg, dict) and isinstance(cfg.get("name"), str):
            return cfg["name"]
        return d["name"] if isinstance(d.get("name"), str) else None

    # leaves

    def _float(self, value: float, where: str, layer: str | None) -> None:
        if not math.isfinite(value):
            self.add(
                "SEC012",
                f"{_layer_label(layer)} has a non-finite number {value!r} (NaN/Infinity are not standard JSON)",
                where,
                "strict JSON parsers reject this file; check the value is intended",
            )

    def _string(self, value: str, where: str, layer: str | None, key: str | None) -> None:
        if where in self.reported:  # already reported by the object that holds it
            return
        if "enable_unsafe_deserialization" in value:
            self.add(
                "SEC007",
                f"{_layer_label(layer)} references 'enable_unsafe_deserialization' (safe_mode bypass gadget)",
                where,
                "do not load this file with Keras",
            )
            return
        if value.startswith(("keras.", "tf_keras.")) and value.rsplit(".", 1)[-1] in GADGET_NAMES:
            self.add(
                "SEC007",
                f"{_layer_label(layer)} references {value!r}, a Keras loading API usable as a safe_mode bypass",
                where,
                "do not load this file with Keras",
            )
            return
        if key not in _NAME_KEYS and where not in self.reported and looks_like_path(value):
            self.add(
                "SEC013",
                f"{_layer_label(layer)} has a path/URL-like value {value[:200]!r}",
                where,
                "a loader or layer may read or fetch it; check it is expected",
            )

    # objects with class_name

    def _envelope(self, d: dict[str, Any], where: str, layer: str | None) -> None:
        cls = d["class_name"]
        cfg = d.get("config")
        module = d.get("module")
        label = _layer_label(layer)
        if cls == "__lambda__":
            self._code_blob("SEC002", d, where, f"{label} has a serialized Python function (__lambda__)")
            return
        gadget = _gadget_in(cls, d.get("registered_name"), module)
        if gadget:
            self.add(
                "SEC007",
                f"{label}: object {gadget!r} (module {module!r}) is a Keras loading/file API usable as a "
                "safe_mode-bypass gadget wherever Keras deserialises an object (initializer, regularizer, "
                "constraint, any nested config)",
                where,
                "do not load this file with Keras",
            )
            self.reported.update(safe_io.json_path(where, k) for k in ("class_name", "registered_name"))
        elif cls == "function":
            self._function_ref(d, where, label)
        elif "module" in d:
            self._module(module, cls, d.get("registered_name"), where, label)
        elif ">" in cls and not self._builtin_custom(cls):
            self.add(
                "SEC004",
                f"{label}: class {cls!r} is a registered custom object; needs its Python code",
                safe_io.json_path(where, "class_name"),
                "modelgraph never imports custom code; provide a schema or treat as opaque",
            )
        if cls == "Lambda" and isinstance(cfg, dict):
            self._lambda_layer(cfg, where, label)
        elif cls == "Merge" and isinstance(cfg, dict):
            self._merge_layer(cfg, where, label)
        elif cls == "TorchModuleWrapper":
            self.add(
                "SEC005",
                f"{label} is a TorchModuleWrapper: its module is a torch pickle (torch.load executes code)",
                where,
                "do not load this file with Keras; modelgraph does not read it",
            )
            if isinstance(cfg, dict):
                self.handled.update(id(x) for x in cfg.values() if isinstance(x, dict | list))
        elif cls == "TFSMLayer":
            fp = cfg.get("filepath") if isinstance(cfg, dict) else None
            self.reported.add(safe_io.json_path(safe_io.json_path(where, "config"), "filepath"))
            self.add(
                "SEC006",
                f"{label} is a TFSMLayer loading the external SavedModel {fp!r}",
                where,
                "the SavedModel is code and data outside this file; it is not followed",
            )
        elif cls in TFOP_LAYERS:
            fn = cfg.get("function") if isinstance(cfg, dict) else None
            self.add(
                "SEC010",
                f"{label} is a {cls} calling TensorFlow op {fn!r} (needs TensorFlow to run)",
                where,
                "informational: a TF op, not arbitrary code",
            )

    @staticmethod
    def _builtin_custom(name: str) -> bool:
        pkg, _, cls = name.partition(">")
        return pkg == "Custom" and cls in KNOWN_OPTIMIZERS

    def _module(self, module: Any, cls: str, registered: Any, where: str, label: str) -> None:
        mwhere = safe_io.json_path(where, "module")
        if isinstance(module, str) and module not in ("__main__", "builtins") and not _module_allowed(module):
            danger = " (a dangerous module)" if _module_root(module) in DANGEROUS_MODULES else ""
            self.add(
                "SEC003",
                f"{label}: class {cls!r} comes from module {module!r}{danger}, outside the Keras namespaces; "
                "Keras <= 3.8 imports it (CVE-2025-1550)",
                mwhere,
                "modelgraph never imports modules named in a file",
            )
            return
        reg = registered if isinstance(registered, str) else ""
        custom_reg = ">" in reg and not self._builtin_custom(reg)
        if module is None or module in ("__main__", "builtins") or custom_reg:
            self.add(
                "SEC004",
                f"{label}: class {cls!r} (registered {reg or None!r}, module {module!r}) is a custom object; "
                "needs its Python code",
                where,
                "modelgraph never imports custom code; provide a schema or treat as opaque",
            )

    def _function_ref(self, d: dict[str, Any], where: str, label: str) -> None:
        module = d.get("module")
        name = d.get("config")
        fname = name if isinstance(name, str) else ""
        short = fname.rsplit(">", 1)[-1].rsplit(".", 1)[-1]
        mod = module if isinstance(module, str) else ""
        if short in GADGET_NAMES or (mod == "builtins" and short in DANGEROUS_BUILTINS):
            self.add(
                "SEC007",
                f"{label} references function {mod + '.' if mod else ''}{fname} "
                "(safe_mode-bypass gadget; CVE-2025-1550/-8747/-9906 pattern)",
                where,
                "do not load this file with Keras",
            )
            return
        if mod and mod not in ("builtins", "__main__") and not _module_allowed(mod):
            danger = " (a dangerous module)" if _module_root(mod) in DANGEROUS_MODULES else ""
            self.add(
                "SEC003",
                f"{label} references function {fname!r} from module {mod!r}{danger}, outside the Keras "
                "namespaces; Keras <= 3.8 imports it (CVE-2025-1550)",
                safe_io.json_path(where, "module"),
                "modelgraph never imports modules named in a file",
            )
            return
        if not mod or mod in ("builtins", "__main__") or ">" in fname:
            self.add(
                "SEC004",
                f"{label} references custom function {fname!r} (module {module!r}); needs its Python code",
                where,
                "modelgraph never imports custom code",
            )

    def _code_blob(self, rule: str, value: Any, where: str, what: str) -> None:
        blob = _bytecode_blob(value)
        if isinstance(value, dict | list):
            self.handled.add(id(value))
        preview = preview_bytecode(blob) if blob else None
        text = preview.summary() if preview else "no bytecode string found"
        self.add(rule, f"{what}: {text}", where, "modelgraph never runs it; rewrite the Lambda as a layer")

    def _lambda_layer(self, cfg: dict[str, Any], where: str, label: str) -> None:
        cwhere = safe_io.json_path(where, "config")
        for fieldname in _CODE_FIELDS:
            if fieldname not in cfg:
                continue
            value = cfg[fieldname]
            ftype = cfg.get(f"{fieldname}_type")
            fwhere = safe_io.json_path(cwhere, fieldname)
            if ftype == "lambda" or _is_lambda_obj(value):
                self._code_blob(
                    "SEC001", value, fwhere, f"{label} (Lambda {fieldname}) carries Python bytecode"
                )
            elif ftype == "function" and isinstance(value, str):
                module = cfg.get("module" if fieldname == "function" else f"{fieldname}_module")
                mod = module if isinstance(module, str) else ""
                if (
                    mod and _module_root(mod) in DANGEROUS_MODULES
                ) or value in DANGEROUS_BUILTINS | GADGET_NAMES:
                    self.add(
                        "SEC007",
                        f"{label} (Lambda {fieldname}) calls {mod + '.' if mod else ''}{value}: tf.keras resolves "
                        "it from the module's globals",
                        fwhere,
                        "do not load this file with Keras",
                    )
                else:
                    self.add(
                        "SEC004",
                        f"{label} (Lambda {fieldname}) calls function {value!r} from module {module!r}; "
                        "needs its Python code",
                        fwhere,
                        "modelgraph never imports custom code",
                    )

    def _merge_layer(self, cfg: dict[str, Any], where: str, label: str) -> None:
        cwhere = safe_io.json_path(where, "config")
        for fieldname, tkey in (("mode", "mode_type"), ("output_shape", "output_shape_type")):
            ftype = cfg.get(tkey)
            if ftype not in ("lambda", "function"):
                continue
            value = cfg.get(fieldname)
            fwhere = safe_io.json_path(cwhere, fieldname)
            if ftype == "lambda":
                self._code_blob(
                    "SEC009", value, fwhere, f"{label} (legacy Merge {fieldname}) carries Python bytecode"
                )
            else:
                self.add(
                    "SEC009",
                    f"{label} (legacy Merge {fieldname}) calls function {value!r}; needs its Python code",
                    fwhere,
                    "modelgraph never imports custom code",
                )


def scan_config(config: Any, *, path: str = "", root: str = "$") -> list[Issue]:
    """Every security finding (rules SEC001-SEC013) in a parsed model config, walked iteratively.

    ``config`` is any parsed Keras JSON: a model config, a ``to_json()`` document, a layer config,
    a ``training_config`` or a TF.js ``model.json``. ``path`` is recorded on each issue; ``root`` is
    the JSON-path prefix of ``where``.
    """
    return _ConfigScanner(path).run(config, root)


# --- container rules ------------------------------------------------------------------------------

KERAS_MEMBERS = frozenset({"config.json", "metadata.json", "model.weights.h5", "model.weights.npz"})
CODE_SUFFIXES = (
    ".py", ".pyc", ".pyo", ".pyd", ".so", ".dll", ".dylib", ".exe", ".sh", ".bat", ".cmd", ".ps1", ".jar",
    ".pkl", ".pickle", ".pt", ".pth", ".joblib", ".dill", ".bin.pkl", ".whl", ".egg",
)  # fmt: skip
_ZIP_KIND_RULE = {
    "traversal": "SEC101",
    "symlink": "SEC102",
    "special": "SEC102",
    "duplicate": "SEC104",
    "too_many": "SEC103",
    "too_large": "SEC103",
    "ratio": "SEC103",
    "total": "SEC103",
    "crc": "SEC117",
    "header": "SEC117",
}
_H5_KIND_RULE = {"external": "SEC111", "virtual": "SEC112", "bomb": "SEC113", "too_large": "SEC113"}
_UNSAFE_TEXT = b"enable_unsafe_deserialization"


def _fast_h5_entries(f: Any) -> tuple[list[safe_io.H5Entry], dict[str, Any]]:
    """The entries :func:`safe_io.walk_h5` would report, from HDF5's own link iteration (one C-level
    pass, hard links only, each object once) instead of one Python lookup per link; plus the opened
    datasets by path. Raises on anything unusual so that the caller falls back to ``walk_h5``."""
    import h5py

    entries: list[safe_io.H5Entry] = []
    datasets: dict[str, Any] = {}
    seen: set[int] = set()
    for raw, kind, address in safe_io.h5_links(f):
        path = "/" + raw.decode("utf-8", "surrogateescape")
        if address >= 0:
            if address in seen:  # another hard link to an object already checked: not opened again
                entries.append(safe_io.H5Entry(path, "repeat"))
                continue
            seen.add(address)
        if kind == h5py.h5l.TYPE_SOFT:
            target = f.id.links.get_val(raw).decode("utf-8", "replace")
            status = safe_io._soft_target_status(f.file, path, target)
            entries.append(safe_io.H5Entry(path, "soft_link", target=target, detail=status))
        elif kind == h5py.h5l.TYPE_EXTERNAL:
            file_name, obj = f.id.links.get_val(raw)
            target = f"{file_name.decode('utf-8', 'replace')}:{obj.decode('utf-8', 'replace')}"
            entries.append(safe_io.H5Entry(path, "external_link", target=target))
        elif kind == h5py.h5l.TYPE_HARD:
            otype = h5py.h5o.get_info(f.id, raw).type
            if otype == h5py.h5o.TYPE_DATASET:
                datasets[path] = h5py.Dataset(h5py.h5d.open(f.id, raw))
                entries.append(safe_io.H5Entry(path, "dataset"))
            else:
                entries.append(safe_io.H5Entry(path, "group"))
        else:
            entries.append(safe_io.H5Entry(path, "other_link", detail="(user-defined link type)"))
    return entries, datasets


def _is_zip(path: str) -> bool:
    """A zip by its first bytes or by a central directory at its end (a zip appended to a file)."""
    from modelgraph.loading.detect import ZIP_SIGNATURE, has_zip_directory

    try:
        with open(path, "rb") as fh:
            return fh.read(4) == ZIP_SIGNATURE or has_zip_directory(fh)
    except OSError:
        return False


def _is_hdf5(path: str) -> bool:
    from modelgraph.loading.detect import is_hdf5

    try:
        with open(path, "rb") as fh:
            return is_hdf5(fh, fh.read(8))
    except OSError:
        return False


class _ContainerScanner:
    def __init__(self, path: str, within: str | None = None) -> None:
        self.path = path
        self.within = within  # the model folder a member path must stay in (TF.js model.json)
        self.issues: list[Issue] = []
        self.configs: list[tuple[Any, str]] = []  # parsed configs for scan_path: (value, root)

    def add(self, rule: str, message: str, where: str, hint: str = "") -> None:
        self.issues.append(_issue(rule, message, where, hint, self.path))

    def run(self) -> list[Issue]:
        p = self.path
        try:
            if not os.path.isdir(p):
                safe_io.open_file(p, within=self.within).close()  # no FIFO, device or escaping symlink
            is_zip = _is_zip(p) if not os.path.isdir(p) else False
            is_h5 = _is_hdf5(p) if not os.path.isdir(p) else False
            if is_zip and is_h5:
                self.add(
                    "SEC119",
                    "the file is both a zip (.keras) and an HDF5 file (a polyglot): Keras reads one part "
                    "or the other depending on the file's extension; both parts are scanned",
                    "",
                    "refuse it: a file Keras writes is one or the other",
                )
            if os.path.isdir(p):
                self._dir(p)
            elif is_zip or is_h5:
                if is_zip:
                    self._zip(p)
                if is_h5:
                    try:
                        with safe_io.open_h5(p) as f:
                            self._h5(f, "hdf5:" if is_zip else "")
                    except FormatError as exc:
                        self.add("SEC100", f"could not scan the HDF5 part: {exc}", "hdf5:")
            else:
                self._json(
                    safe_io.read_file(p, max_bytes=safe_io.MAX_JSON_BYTES, within=self.within), "", "$"
                )
        except (FormatError, SecurityError, OSError, ValueError, zipfile.BadZipFile) as exc:
            self.add("SEC100", f"could not scan: {exc}", "", "the file is corrupt or not a model")
        return self.issues

    # zip

    def _zip(self, p: str, prefix: str = "", fileobj: Any = None) -> None:
        try:
            zf = zipfile.ZipFile(fileobj if fileobj is not None else p)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, struct.error) as exc:
            self.add("SEC100", f"could not read zip: {exc}", prefix)
            return
        with zf:
            problems = safe_io.zip_problems(zf)
            bad = {pr.member for pr in problems}
            for pr in problems:
                self.add(_ZIP_KIND_RULE[pr.kind], pr.message, f"{prefix}{pr.member}", "refuse this archive")
            if any(pr.kind in ("too_many", "total") for pr in problems):
                return
            if not problems:  # sizes are sane: read every member once for its CRC and local name
                for pr in safe_io.zip_integrity_problems(zf):
                    bad.add(pr.member)
                    self.add(
                        _ZIP_KIND_RULE[pr.kind],
                        pr.message,
                        f"{prefix}{pr.member}",
                        "re-download or re-save the model: the archive changed after Keras wrote it",
                    )
            is_npz = fileobj is not None
            sz = safe_io.SafeZip(
                zf, f"{self.path}{':' + prefix.rstrip(':') if prefix else ''}", safe_io.ZipLimits()
            )
            for info in zf.infolist():
                name = info.filename
                where = f"{prefix}{name}"
                if is_npz:
                    if name not in bad and name.endswith(".npy"):
                        self._npy_header(zf, info, where)
                    continue
                if name not in KERAS_MEMBERS and not name.startswith("assets/"):
                    if name.lower().endswith(CODE_SUFFIXES):
                        self.add(
                            "SEC105", f"archive contains code or pickle member {name!r}", where, "refuse it"
                        )
                    else:
                        self.add("SEC106", f"unexpected member {name!r} in a .keras archive", where)
                    continue
                if name.startswith("assets/") and name.lower().endswith(CODE_SUFFIXES):
                    self.add("SEC105", f"archive contains code or pickle asset {name!r}", where, "refuse it")
                    continue
                if name in bad:
                    continue
                try:
                    if name in ("config.json", "metadata.json"):
                        data = sz.read(name, safe_io.MAX_JSON_BYTES + 1)
                        self._json(data, where, "$", keep=name == "config.json")
                    elif name == "model.weights.h5":
                        with sz.open_member(name) as fh, safe_io.open_h5(fh) as f:
                            self._h5(f, f"{where}:")
                    elif name == "model.weights.npz":
                        with sz.open_member(name) as fh:
                            self._zip(p, f"{where}:", fileobj=fh)
                except (FormatError, SecurityError) as exc:
                    self.add("SEC100", f"could not scan member {name!r}: {exc}", where)

    def _npy_header(self, zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> None:
        import numpy as np

        try:
            with zf.open(info) as fh:
                version = np.lib.format.read_magic(fh)
                if version == (1, 0):
                    _, _, dtype = np.lib.format.read_array_header_1_0(fh, max_header_size=10_000)
                else:
                    _, _, dtype = np.lib.format.read_array_header_2_0(fh, max_header_size=10_000)
        except (ValueError, OSError, zipfile.BadZipFile, EOFError, SyntaxError) as exc:
            self.add("SEC100", f"unreadable .npy header: {exc}", where)
            return
        if dtype.hasobject:
            verdict = ""
            if info.file_size <= MAX_PICKLE_SCAN_BYTES:
                try:
                    with zf.open(info) as fh:
                        version = np.lib.format.read_magic(fh)
                        if version == (1, 0):
                            np.lib.format.read_array_header_1_0(fh, max_header_size=10_000)
                        else:
                            np.lib.format.read_array_header_2_0(fh, max_header_size=10_000)
                        verdict = pickle_verdict(fh.read(MAX_PICKLE_SCAN_BYTES + 1))
                except (ValueError, OSError, zipfile.BadZipFile, EOFError, SyntaxError):
                    verdict = ""
            if verdict == "numpy-only":
                self.add(
                    "SEC116",
                    f"npz array {info.filename!r} is pickled, but its pickle (read as opcodes, never run) only "
                    "rebuilds NumPy arrays, as Keras's npz weights store writes them; Keras reads it with "
                    "allow_pickle=True, modelgraph does not read it",
                    where,
                    "re-save the weights as HDF5 (.weights.h5) to avoid pickles altogether",
                )
                return
            self.add(
                "SEC107",
                f"npz array {info.filename!r} has dtype {dtype} (pickled Python objects); reading it needs "
                "allow_pickle=True, which executes code",
                where,
                "re-save the weights as HDF5 (.weights.h5); modelgraph refuses pickled arrays",
            )

    # json

    def _json(self, data: bytes, where: str, root: str, keep: bool = True) -> None:
        if _UNSAFE_TEXT in data:
            self.add(
                "SEC115",
                "config text mentions 'enable_unsafe_deserialization' (safe_mode bypass gadget)",
                where or root,
                "do not load this file with Keras",
            )
        if len(data) > safe_io.MAX_JSON_BYTES:
            self.add("SEC114", f"JSON is over {safe_io.MAX_JSON_BYTES:,} bytes", where or root, "refuse it")
            return
        depth, _ = safe_io.json_depth(data, stop_after=safe_io.MAX_JSON_DEPTH)
        if depth > safe_io.MAX_JSON_DEPTH:
            self.add(
                "SEC114",
                f"JSON nesting deeper than {safe_io.MAX_JSON_DEPTH} levels",
                where or root,
                "refuse it",
            )
            return
        if keep:
            try:
                parsed = safe_io.parse_json(data, where=f"{self.path}{':' + where if where else ''}")
            except FormatError as exc:
                self.add("SEC100", str(exc), where or root)
                return
            self.configs.append((parsed.value, root))

    # hdf5

    def _h5(self, f: Any, prefix: str) -> None:
        attrs_cfg: dict[str, Any] = {}
        for attr in ("model_config", "training_config"):
            try:
                value = safe_io.read_attr(f, attr, None)
            except FormatError as exc:
                self.add("SEC100", str(exc), f"{prefix}/@{attr}")
                continue
            if isinstance(value, str):
                before = len(self.configs)
                self._json(value.encode("utf-8", "surrogatepass"), f"{prefix}/@{attr}", "$")
                if len(self.configs) > before:
                    attrs_cfg[attr] = self.configs.pop()[0]
        if attrs_cfg:
            self.configs.append((attrs_cfg, "$"))
        self._legacy_names(f, prefix)
        try:
            entries, datasets = _fast_h5_entries(f)
        except FormatError as exc:  # over the link-count or depth bound: the walk would be too
            self.add("SEC118", str(exc), prefix or "/", "refuse it: Keras files are far smaller")
            return
        except Exception:  # noqa: BLE001 - anything unusual: the careful walk below decides
            entries, datasets = None, {}
        for entry in entries if entries is not None else safe_io.walk_h5(f):
            where = f"{prefix}{entry.path}"
            if entry.kind == "external_link":
                self.add(
                    "SEC108", f"HDF5 external link to {entry.target!r}; not followed", where, "refuse it"
                )
            elif entry.kind == "soft_link":
                if entry.detail == "cycle":
                    self.add(
                        "SEC110", f"HDF5 soft link to {entry.target!r} forms a cycle", where, "refuse it"
                    )
                else:
                    self.add(
                        "SEC109",
                        f"HDF5 soft link to {entry.target!r} ({entry.detail}); not followed",
                        where,
                        "Keras files never contain soft links",
                    )
            elif entry.kind in ("other_link", "error", "limit"):
                self.add("SEC100", f"HDF5 {entry.kind.replace('_', ' ')} {entry.detail}".strip(), where)
            elif entry.kind == "dataset":
                try:
                    dset = datasets.get(entry.path) if entries is not None else None
                    if dset is None:
                        dset = safe_io._resolve(f, entry.path)
                    problems = safe_io.dataset_problems(dset)
                except (FormatError, SecurityError) as exc:
                    self.add("SEC100", str(exc), where)
                    continue
                for kind, message in problems:
                    self.add(_H5_KIND_RULE[kind], message, where, "refuse it; not read")

    def _legacy_names(self, f: Any, prefix: str) -> None:
        """SEC118 for a legacy layout whose layer_names / weight_names repeat a name."""
        from modelgraph.loading.legacy_h5 import legacy_layout

        try:
            root = safe_io.safe_group(f, "model_weights", required=False) or f
            if "layer_names" in root.attrs or "layer_names0" in root.attrs:
                legacy_layout(root, self.path)
        except SecurityError as exc:
            self.add("SEC118", str(exc), f"{prefix}{root.name}", "refuse it: Keras writes each name once")
        except (FormatError, *safe_io.H5_ERRORS):
            pass  # the loader reports a layout it cannot read

    # unzipped .keras directory

    def _dir_member(self, full: str, rel: str, root: str) -> None:
        """Scan one member of a directory-form model, opened inside ``root`` as a regular file only."""
        if rel in ("config.json", "metadata.json"):
            data = safe_io.read_file(full, max_bytes=safe_io.MAX_JSON_BYTES, within=root)
            self._json(data, rel, "$", keep=rel == "config.json")
        elif rel == "model.weights.h5":
            with safe_io.open_file(full, within=root) as fh, safe_io.open_h5(fh) as f:
                self._h5(f, f"{rel}:")
        elif rel == "model.weights.npz":
            with safe_io.open_file(full, within=root) as fh:
                self._zip(full, f"{rel}:", fileobj=fh)
        elif not rel.startswith("assets/"):
            return
        else:
            safe_io.open_file(full, within=root).close()

    def _dir(self, p: str) -> None:
        for dirpath, dirnames, filenames in os.walk(p, followlinks=False):
            rel_dir = os.path.relpath(dirpath, p)
            for name in sorted(dirnames + filenames):
                full = os.path.join(dirpath, name)
                rel = name if rel_dir == "." else f"{rel_dir}/{name}".replace(os.sep, "/")
                if os.path.islink(full) and rel not in KERAS_MEMBERS:
                    self.add(
                        "SEC102",
                        f"directory entry {rel!r} is a symbolic link; not followed",
                        rel,
                        "refuse it",
                    )
                    continue
                if name in dirnames:
                    if rel != "assets" and not rel.startswith("assets/"):
                        self.add("SEC106", f"unexpected directory {rel!r} in a .keras directory", rel)
                    continue
                if rel not in KERAS_MEMBERS and not rel.startswith("assets/"):
                    rule = "SEC105" if name.lower().endswith(CODE_SUFFIXES) else "SEC106"
                    self.add(rule, f"unexpected file {rel!r} in a .keras directory", rel)
                    continue
                try:
                    self._dir_member(full, rel, p)
                except (SecurityError, FormatError) as exc:
                    self.add(
                        "SEC102", f"directory entry {rel!r}: {exc}", rel, "replace it with a regular file"
                    )
            dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]


def scan_container(path: str | os.PathLike[str]) -> list[Issue]:
    """Container-level findings (SEC100-SEC115) for a ``.keras`` zip or directory, an HDF5 file, or a JSON file.

    Never raises for a hostile or corrupt file: every problem becomes a finding. Nothing is extracted,
    unpickled, imported or executed; HDF5 links are reported, not followed.
    """
    return _ContainerScanner(os.fspath(path)).run()


def scan_path(path: str | os.PathLike[str]) -> list[Issue]:
    """:func:`scan_container` plus :func:`scan_config` on every config the container holds
    (``config.json``, HDF5 ``model_config``/``training_config``, a bare or TF.js JSON file)."""
    scanner = _ContainerScanner(os.fspath(path))
    issues = scanner.run()
    for value, root in scanner.configs:
        issues.extend(scan_config(value, path=scanner.path, root=root))
    return issues


def scan_path_with_configs(
    path: str | os.PathLike[str], within: str | os.PathLike[str] | None = None
) -> tuple[list[Issue], list[tuple[Any, str]]]:
    """:func:`scan_path`, plus the parsed configs it scanned as ``(value, JSON root)`` pairs, so that
    other rule families can check them without parsing the file again (HDF5 configs arrive as
    ``{"model_config": ..., "training_config": ...}``). ``within``: ``path`` is a member of that
    model folder (a TF.js ``model.json``) and must stay inside it."""
    scanner = _ContainerScanner(os.fspath(path), None if within is None else os.fspath(within))
    issues = scanner.run()
    for value, root in scanner.configs:
        issues.extend(scan_config(value, path=scanner.path, root=root))
    return issues, list(scanner.configs)
