"""Hardened low-level readers for untrusted model files (zip, JSON, HDF5).

Every loader reads bytes through this module, so the limits live in one place. Nothing here imports,
unpickles or executes anything a file carries, follows an HDF5 soft/external link, or allocates more
than a declared, bounded size.

ZIP (``.keras``)
    :func:`open_zip` validates the whole central directory before any member is read
    (:func:`zip_problems`: traversal, symlinks, special files, duplicates, member count, declared sizes,
    compression ratio) and returns a :class:`SafeZip` whose reads are capped.
JSON
    :func:`parse_json` measures the nesting depth with an iterative scan *before* ``json.loads`` and
    returns a :class:`ParsedJSON` that lists where non-standard ``NaN``/``Infinity`` values were seen.
HDF5
    :func:`open_h5`, :func:`safe_group`, :func:`safe_dataset`, :func:`read_dataset`, :func:`read_attr`
    and :func:`walk_h5` refuse soft links, external links, external-storage and virtual datasets, and
    datasets whose declared size is a bomb (:func:`dataset_problems`).

The container facts these checks rely on are in ``docs/containers.md``.

Refusals raise :class:`~modelgraph.errors.SecurityError`; unreadable input raises
:class:`~modelgraph.errors.FormatError`. The ``*_problems`` functions return the same checks as data
so that ``modelgraph.validate.security`` can report every one of them as a finding.
"""

from __future__ import annotations

import contextlib
import io
import json
import lzma
import math
import os
import re
import stat
import struct
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, BinaryIO

import numpy as np

from modelgraph.errors import FormatError, SecurityError

if TYPE_CHECKING:  # h5py is imported lazily: JSON-only users never pay for it
    import h5py

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

# --- limits ---------------------------------------------------------------------------------------

# Everything h5py and zipfile raise on a corrupt or hostile container (h5py raises RuntimeError, not
# only OSError, when its internal structures are damaged); every reader boundary catches these.
H5_ERRORS: tuple[type[BaseException], ...] = (KeyError, OSError, ValueError, RuntimeError, TypeError)
ZIP_ERRORS: tuple[type[BaseException], ...] = (
    zlib.error,  # a member whose method field says deflate/LZMA over bytes that are not
    lzma.LZMAError,
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    EOFError,
    ValueError,
    struct.error,
    RuntimeError,
    NotImplementedError,
)

MAX_JSON_DEPTH = 500
"""Deepest JSON nesting accepted. Real Keras configs stay under ~60; CPython's json recursion needs headroom."""


def _limit_from_env(name: str, default: int) -> int:
    """A byte limit from the environment (a positive integer), else ``default``."""
    value = os.environ.get(name, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else default


MAX_JSON_BYTES = _limit_from_env("MODELGRAPH_MAX_JSON_BYTES", 512 * MiB)
"""Largest JSON document accepted. It scales with what Keras writes: about 1 KB per layer (a
100,000-layer Keras 3 chain's to_json() is 96 MB, NASNet's config.json 0.8 MB), so the default
takes models of about half a million layers; parsing costs roughly ten times the document in memory.
``MODELGRAPH_MAX_JSON_BYTES`` raises (or lowers) it. Nesting stays bounded by MAX_JSON_DEPTH."""
MAX_DATASET_BYTES = 16 * GiB
"""Absolute cap on the declared size of one HDF5 dataset."""
H5_BOMB_BYTES = 1 * MiB
"""A dataset declaring more than this ..."""
H5_BOMB_RATIO = 1000
"""... and more than this many times the bytes it stores is a shape bomb (Keras writes every value,
uncompressed; an unwritten dataset stores none and reads as its fill value)."""
MAX_H5_LINKS = 250_000
"""Most links one HDF5 file may hold (NASNetLarge's Keras 3 weights have ~12,000); h5_links and
walk_h5 stop (and report) past it, so a file of hard links costs bounded time and memory."""
MAX_H5_DEPTH = 64
"""Deepest HDF5 path accepted, in components (a Keras 3 tree nests ~6 per nested model level):
resolving a path costs its depth, so thousands of nested groups would cost quadratic time."""


@dataclass(frozen=True, slots=True)
class ZipLimits:
    """Limits applied to a zip's central directory before anything is read."""

    max_members: int = 10_000
    max_member_bytes: int = 4 * GiB
    max_total_bytes: int = 16 * GiB
    max_ratio: float = 100.0
    ratio_min_bytes: int = 16 * MiB
    """The ratio check applies only to members declaring more than this (small text compresses well)."""


DEFAULT_ZIP_LIMITS = ZipLimits()


# --- files on disk --------------------------------------------------------------------------------


def open_file(path: str | os.PathLike[str], *, within: str | os.PathLike[str] | None = None) -> BinaryIO:
    """Open a regular file for reading without blocking and, for a member of a directory-form model
    (``within`` = the model's folder), without leaving the folder.

    The file is opened with ``O_NONBLOCK`` (a FIFO cannot block) and checked with ``fstat`` on the open
    descriptor (no check-then-open race): a FIFO, device, socket or directory is a FormatError. With
    ``within``, the path is resolved first and must stay inside the folder (a symlink to
    ``/etc/passwd`` or another model is a SecurityError); the resolved path is then opened one
    component at a time from the folder's descriptor with ``O_NOFOLLOW``, so a component swapped for
    a symlink after the check makes the open fail instead of leaving the folder.
    """
    spath = os.fspath(path)
    nonblock = getattr(os, "O_NONBLOCK", 0)
    try:
        if within is None:
            fd = os.open(spath, os.O_RDONLY | nonblock)
        else:
            fd = _open_within(spath, os.fspath(within), nonblock)
    except OSError as exc:
        raise FormatError(f"{spath}: cannot open: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise FormatError(f"{spath}: {_file_kind(mode)}, not a regular file; not read")
        if nonblock:
            os.set_blocking(fd, True)
        raw = io.FileIO(fd, "rb")
        raw.name = spath  # type: ignore[misc] - messages (and h5py's file name) show the path
        return io.BufferedReader(raw)
    except BaseException:
        os.close(fd)
        raise


def _file_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


def _open_within(path: str, root: str, extra_flags: int) -> int:
    """A descriptor for ``path``, which must resolve inside ``root``; every component of the resolved
    path is opened relative to its parent's descriptor without following symlinks."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
        raise SecurityError(f"{path}: a symbolic link to {real!r}, outside the model folder; not followed")
    parts = [p for p in os.path.relpath(real, real_root).split(os.sep) if p not in ("", ".")]
    if not parts:
        raise FormatError(f"{path}: is the model folder itself, not a file")
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    directory = getattr(os, "O_DIRECTORY", 0)
    fd = os.open(real_root, os.O_RDONLY | directory)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, os.O_RDONLY | directory | nofollow, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return os.open(parts[-1], os.O_RDONLY | nofollow | extra_flags, dir_fd=fd)
    finally:
        os.close(fd)


def read_file(
    path: str | os.PathLike[str], *, max_bytes: int, within: str | os.PathLike[str] | None = None
) -> bytes:
    """The whole content of a regular file opened with :func:`open_file`, at most ``max_bytes + 1``
    bytes (a caller tells an over-long file by its length)."""
    with open_file(path, within=within) as fh:
        try:
            return fh.read(max_bytes + 1)
        except OSError as exc:
            raise FormatError(f"{os.fspath(path)}: cannot read: {exc.strerror or exc}") from None


# --- JSON -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ParsedJSON:
    """A parsed JSON document plus what a validator must know about how it was written.

    ``nonfinite`` lists the JSON paths (``$.config.layers[2].config.epsilon``) of ``NaN``/``Infinity``
    values: not standard JSON, accepted because Keras writes them, flagged by validate (SEC012).
    """

    value: Any
    nonfinite: tuple[str, ...] = ()
    depth: int = 0
    size: int = 0


# NaN / Infinity / -Infinity outside strings: only then is the parsed value walked for their paths.
_NONFINITE_LITERAL = re.compile(rb"(?:^|[\[,:\s])-?(?:NaN|Infinity)(?=[\s,\]}]|$)")
_JSON_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}"]', re.S)


def json_depth(data: str | bytes, *, stop_after: int | None = None) -> tuple[int, int]:
    """Maximum nesting depth of a JSON text and the byte offset where it was reached.

    Iterative (strings are skipped by a regular expression, brackets counted), so it is safe on
    100,000-deep input. With ``stop_after`` the scan stops as soon as the depth exceeds it.
    Malformed text is not an error here; ``json.loads`` reports it afterwards.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    fast = _json_depth_fast(raw, stop_after)
    if fast is not None:
        return fast
    return _json_depth_scan(raw, stop_after)


def _json_depth_scan(raw: bytes, stop_after: int | None) -> tuple[int, int]:
    """The token-by-token scan; also handles an unterminated string (it stops there)."""
    depth = best = 0
    where = 0
    for m in _JSON_TOKENS.finditer(raw):
        tok = m.group()
        c = tok[0]
        if c in b"[{":
            depth += 1
            if depth > best:
                best, where = depth, m.start()
                if stop_after is not None and best > stop_after:
                    break
        elif c in b"]}":
            depth -= 1
        elif len(tok) == 1:  # an unterminated string: the rest cannot be scanned
            break
    return best, where


def _json_depth_fast(raw: bytes, stop_after: int | None = None) -> tuple[int, int] | None:
    """Maximum nesting depth and where it is first reached, computed with NumPy at C speed.

    Quotes preceded by an odd run of backslashes are escaped; brackets between unescaped quote
    pairs are inside strings. Returns None for an unterminated string (the careful scan decides).
    """
    import numpy as np

    codes = np.frombuffer(raw, dtype=np.uint8)
    if not codes.size:
        return 0, 0
    quotes = np.flatnonzero(codes == 0x22)
    if quotes.size and (codes == 0x5C).any():  # escapes only matter when there is a backslash
        positions = np.arange(codes.size, dtype=np.int64)
        last_plain = np.maximum.accumulate(np.where(codes != 0x5C, positions, -1))
        before = quotes - 1
        run = np.where(before >= 0, before - last_plain[np.maximum(before, 0)], 0)
        quotes = quotes[run % 2 == 0]
    if quotes.size % 2:
        return None
    boundary = np.zeros(codes.size + 1, dtype=np.int8)
    boundary[quotes[0::2] + 1] = 1  # quote positions are distinct: no index repeats
    boundary[quotes[1::2]] -= 1  # an empty string "" opens and closes at one index
    inside = np.cumsum(boundary[:-1], dtype=np.int8).astype(bool)
    opens = ((codes == 0x5B) | (codes == 0x7B)) & ~inside
    closes = ((codes == 0x5D) | (codes == 0x7D)) & ~inside
    depth = np.cumsum(opens.astype(np.int32) - closes.astype(np.int32))
    if stop_after is not None:
        over = depth > stop_after
        if over.any():
            return stop_after + 1, int(np.argmax(over))
    where = int(np.argmax(depth))
    best = int(depth[where])
    return (best, where) if best > 0 else (0, 0)


def _long_integer(raw: bytes) -> str:
    """The message for a number json.loads refused for its length: where it is and how long."""
    import sys

    limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 4300
    found = re.search(rb"\d{%d,}" % (limit + 1), raw)
    if found is None:
        return f"a number in the JSON is longer than {limit:,} digits; refusing to parse"
    line, col = _line_col(raw, found.start())
    return (
        f"integer of {len(found.group()):,} digits at line {line} column {col}, over the "
        f"{limit:,}-digit limit; refusing to parse"
    )


def _line_col(raw: bytes, offset: int) -> tuple[int, int]:
    line = raw.count(b"\n", 0, offset) + 1
    col = offset - (raw.rfind(b"\n", 0, offset) + 1) + 1
    return line, col


def _json_key(key: str) -> str:
    if key.isidentifier():
        return f".{key}"
    return "[" + json.dumps(key) + "]"


def json_path(parent: str, key: str | int) -> str:
    """Extend a JSON path: ``json_path("$", "config")`` -> ``$.config``; ints become ``[i]``."""
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return parent + _json_key(key)


def _nonfinite_paths(value: Any, limit: int = 1000) -> tuple[str, ...]:
    found: list[str] = []
    stack: list[tuple[Any, str]] = [(value, "$")]
    while stack and len(found) < limit:
        node, path = stack.pop()
        if isinstance(node, float):
            if not math.isfinite(node):
                found.append(path)
        elif isinstance(node, dict):
            for k, v in reversed(list(node.items())):
                if isinstance(v, dict | list | float):
                    stack.append((v, json_path(path, str(k))))
        elif isinstance(node, list):
            for i in range(len(node) - 1, -1, -1):
                v = node[i]
                if isinstance(v, dict | list | float):
                    stack.append((v, json_path(path, i)))
    return tuple(found)


def parse_json(
    data: str | bytes | bytearray,
    *,
    where: str,
    max_depth: int = MAX_JSON_DEPTH,
    max_bytes: int = MAX_JSON_BYTES,
) -> ParsedJSON:
    """Parse untrusted JSON text without recursion-limit crashes or unbounded work.

    ``where`` names the source in messages (``model.keras:config.json``). Raises
    :class:`FormatError` for documents over ``max_bytes``, nesting deeper than ``max_depth``
    (measured iteratively before parsing), invalid UTF-8, or invalid JSON (with line and column).
    ``NaN``/``Infinity``/``-Infinity`` are accepted and their paths returned in ``nonfinite``.
    """
    if isinstance(data, bytes | bytearray):
        raw = bytes(data)
        if len(raw) > max_bytes:
            raise FormatError(
                f"{where}: JSON document is {len(raw):,} bytes, over the {max_bytes:,}-byte limit"
            )
        if raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line, col = _line_col(raw, exc.start)
            raise FormatError(f"{where}: JSON is not valid UTF-8 at line {line} column {col}") from None
    else:
        text = data
        if len(text) > max_bytes:
            raise FormatError(
                f"{where}: JSON document is {len(text):,} characters, over the {max_bytes:,}-byte limit"
            )
        raw = text.encode("utf-8", "surrogatepass")
    depth, offset = json_depth(raw, stop_after=max_depth)
    if depth > max_depth:
        line, col = _line_col(raw, offset)
        raise FormatError(
            f"{where}: JSON nesting deeper than {max_depth} levels (line {line} column {col}); refusing to parse"
        )
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(
            f"{where}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except ValueError:  # an integer past Python's int-str digit limit (4,300 by default)
        raise FormatError(f"{where}: {_long_integer(raw)}") from None
    except RecursionError:  # defensive: only reachable with a very low recursion limit
        raise FormatError(f"{where}: JSON nesting too deep to parse") from None
    maybe = b"NaN" in raw or b"Infinity" in raw
    nonfinite = _nonfinite_paths(value) if maybe and _NONFINITE_LITERAL.search(raw) else ()
    return ParsedJSON(value=value, nonfinite=nonfinite, depth=depth, size=len(raw))


# --- ZIP ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ZipProblem:
    """One central-directory check that failed; ``kind`` is a short stable key."""

    kind: str  # traversal | symlink | special | duplicate | too_many | too_large | ratio | total
    member: str
    message: str


_DRIVE = re.compile(r"^[A-Za-z]:")


def member_name_problem(name: str) -> str | None:
    """Why a zip member name is unsafe to map to a path, or ``None`` when it is fine."""
    if not name:
        return "empty member name"
    if "\x00" in name:
        return "NUL byte in member name"
    if "\\" in name:
        return "backslash in member name"
    if name.startswith("/") or _DRIVE.match(name):
        return "absolute member path"
    if any(part == ".." for part in name.split("/")):
        return "'..' in member path"
    return None


def _member_mode(info: zipfile.ZipInfo) -> int:
    return (info.external_attr >> 16) & 0xFFFF


def zip_problems(zf: zipfile.ZipFile, limits: ZipLimits = DEFAULT_ZIP_LIMITS) -> list[ZipProblem]:
    """Every central-directory problem of an open zip (nothing is decompressed)."""
    problems: list[ZipProblem] = []
    infos = zf.infolist()
    if len(infos) > limits.max_members:
        problems.append(
            ZipProblem(
                "too_many", "", f"zip has {len(infos):,} members, over the limit of {limits.max_members:,}"
            )
        )
    seen: set[str] = set()
    total = 0
    for info in infos[: limits.max_members + 1]:
        name = info.filename
        why = member_name_problem(name)
        if why:
            problems.append(ZipProblem("traversal", name, f"zip member {name!r}: {why}"))
        mode = _member_mode(info)
        if mode and stat.S_ISLNK(mode):
            problems.append(ZipProblem("symlink", name, f"zip member {name!r} is a symbolic link"))
        elif mode and stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):
            problems.append(ZipProblem("special", name, f"zip member {name!r} is a special file"))
        if name in seen:
            problems.append(ZipProblem("duplicate", name, f"zip member {name!r} appears more than once"))
        seen.add(name)
        size = info.file_size
        total += size
        if size > limits.max_member_bytes:
            problems.append(
                ZipProblem(
                    "too_large",
                    name,
                    f"zip member {name!r} declares {size:,} bytes, over the limit of {limits.max_member_bytes:,}",
                )
            )
        elif size > limits.ratio_min_bytes and size > limits.max_ratio * max(info.compress_size, 1):
            problems.append(
                ZipProblem(
                    "ratio",
                    name,
                    f"zip member {name!r} expands {size:,} bytes from {info.compress_size:,} "
                    f"(ratio over {limits.max_ratio:g}): zip bomb",
                )
            )
    if total > limits.max_total_bytes:
        problems.append(
            ZipProblem(
                "total",
                "",
                f"zip declares {total:,} uncompressed bytes, over the limit of {limits.max_total_bytes:,}",
            )
        )
    return problems


def _local_header(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple[int, str]:
    """``(data offset, name)`` from a member's local header; FormatError when it is unreadable."""
    fp = zf.fp
    if fp is None:
        raise FormatError("zip is closed")
    try:
        fp.seek(info.header_offset)
        header = fp.read(_LOCAL_HEADER.size)
        if len(header) != _LOCAL_HEADER.size:
            raise FormatError(f"zip member {info.filename!r}: truncated local header")
        fields = _LOCAL_HEADER.unpack(header)
        if fields[0] != b"PK\x03\x04":
            raise FormatError(f"zip member {info.filename!r}: bad local header signature")
        raw_name = fp.read(fields[9])
    except (OSError, ValueError, OverflowError) as exc:
        raise FormatError(f"zip member {info.filename!r}: unreadable local header: {exc}") from None
    name = raw_name.decode("utf-8" if fields[2] & 0x800 else "cp437", "replace")
    return info.header_offset + _LOCAL_HEADER.size + fields[9] + fields[10], name


def _raw_chunks(zf: zipfile.ZipFile, start: int, size: int) -> Iterator[bytes]:
    fp = zf.fp
    assert fp is not None
    try:
        fp.seek(start)
    except (OSError, ValueError, OverflowError) as exc:
        raise FormatError(f"cannot seek to a zip member's data: {exc}") from None
    left = size
    while left > 0:
        chunk = fp.read(min(_CHUNK, left))
        if not chunk:
            return
        left -= len(chunk)
        yield chunk


def _stored_crc(zf: zipfile.ZipFile, start: int, size: int) -> int:
    crc = 0
    for chunk in _raw_chunks(zf, start, size):
        crc = zlib.crc32(chunk, crc)
    return crc


def _deflated_crc(zf: zipfile.ZipFile, info: zipfile.ZipInfo, start: int) -> int:
    """CRC-32 of a deflated member's content, inflated in bounded steps (never more than the declared
    size; zip_problems has checked that size)."""
    inflate = zlib.decompressobj(-15)
    crc = 0
    produced = 0
    for chunk in _raw_chunks(zf, start, info.compress_size):
        data = chunk
        while data:
            out = inflate.decompress(data, _CHUNK)
            produced += len(out)
            if produced > info.file_size:
                raise FormatError(f"zip member {info.filename!r} holds more than its declared size")
            crc = zlib.crc32(out, crc)
            data = inflate.unconsumed_tail
    return crc


def zip_integrity_problems(zf: zipfile.ZipFile) -> list[ZipProblem]:
    """Members that Keras's own reader (Python's zipfile) rejects: a local-header name that differs
    from the central directory's (two tools would read different names), or bytes that do not match
    the member's CRC-32 (altered after writing). Reads every member once, in chunks; run it after
    :func:`zip_problems` found nothing about the sizes."""
    problems: list[ZipProblem] = []
    for info in zf.infolist():
        name = info.filename
        if name.endswith("/"):
            continue
        try:
            start, local = _local_header(zf, info)
        except FormatError as exc:
            problems.append(ZipProblem("header", name, str(exc)))
            continue
        if local != name:
            problems.append(
                ZipProblem(
                    "header",
                    name,
                    f"zip member {name!r} is named {local!r} in its local header; Keras refuses the archive",
                )
            )
            continue
        try:
            if info.compress_type == zipfile.ZIP_STORED:
                crc = _stored_crc(zf, start, info.compress_size)
            elif info.compress_type == zipfile.ZIP_DEFLATED:
                crc = _deflated_crc(zf, info, start)
            else:
                with zf.open(info) as fh:
                    while fh.read(_CHUNK):
                        pass
                crc = info.CRC
        except (*ZIP_ERRORS, OSError, zlib.error, FormatError) as exc:
            problems.append(ZipProblem("crc", name, f"zip member {name!r} is corrupt: {exc}"))
            continue
        if crc != info.CRC:
            problems.append(ZipProblem("crc", name, _crc_message(name, info.CRC, crc)))
    return problems


def _crc_message(name: str, declared: int, actual: int) -> str:
    return (
        f"zip member {name!r} fails its CRC-32 check (recorded {declared:08x}, computed {actual:08x}): "
        "altered or corrupt after writing; Keras refuses it"
    )


def _open_zipfile(path: str | os.PathLike[str]) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        if "not a zip file" in str(exc):  # starts like a zip, but its central directory is missing
            raise FormatError(
                f"{os.fspath(path)}: a truncated or corrupt zip (no end-of-central-directory record; "
                "an incomplete download or copy?)"
            ) from None
        raise FormatError(f"{os.fspath(path)}: not a readable zip file: {exc}") from None
    except ZIP_ERRORS as exc:
        raise FormatError(f"{os.fspath(path)}: not a readable zip file: {exc}") from None
    except OSError as exc:
        raise FormatError(f"{os.fspath(path)}: cannot open: {exc.strerror or exc}") from None


_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
_CHUNK = 1 * MiB


class _StoredMember(io.RawIOBase):
    """A seekable read-only view of a stored (uncompressed) member's byte range in the archive."""

    def __init__(self, path: str, start: int, size: int, name: str = "") -> None:
        super().__init__()
        self._fh = open(path, "rb")  # noqa: SIM115 - closed in close()
        self._start = start
        self._size = size
        self._pos = 0
        # ``archive.keras:member``: h5py names a file object by its repr, which shows this name, so
        # errors about the member name the user's file instead of "<_io.BufferedReader>".
        self.name = name or path

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self._size + offset
        else:
            raise ValueError(f"invalid whence {whence}")
        if pos < 0:
            raise ValueError("negative seek position")
        self._pos = pos
        return pos

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        n = min(len(view), max(self._size - self._pos, 0))
        if n <= 0:
            return 0
        self._fh.seek(self._start + self._pos)
        got = self._fh.readinto(view[:n]) or 0
        self._pos += got
        return got

    def close(self) -> None:
        if not self.closed:
            self._fh.close()
        super().close()


class SafeZip:
    """A zip archive whose central directory passed :func:`zip_problems`; every read is capped.

    Use as a context manager. Member names are the archive's own (validated) names.
    """

    def __init__(self, zf: zipfile.ZipFile, path: str, limits: ZipLimits) -> None:
        self._zf = zf
        self.path = path
        self.limits = limits
        self._infos = {i.filename: i for i in zf.infolist()}

    def __enter__(self) -> SafeZip:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._zf.close()

    def names(self) -> list[str]:
        """Member names in archive order."""
        return [i.filename for i in self._zf.infolist()]

    def __contains__(self, name: object) -> bool:
        return name in self._infos

    def info(self, name: str) -> zipfile.ZipInfo:
        """The member's ZipInfo; :class:`FormatError` naming the existing members when absent."""
        try:
            return self._infos[name]
        except KeyError:
            raise FormatError(
                f"{self.path}: no member {name!r} in zip; members are {self.names()[:20]}"
            ) from None

    def read(self, name: str, max_bytes: int | None = None) -> bytes:
        """Read a whole member, refusing (SecurityError) one that declares more than ``max_bytes``.

        Reads in chunks and never accepts more than the declared size, so a lying header cannot make
        this allocate more than ``min(declared, max_bytes)``.
        """
        info = self.info(name)
        cap = self.limits.max_member_bytes if max_bytes is None else max_bytes
        if info.file_size > cap:
            raise SecurityError(
                f"{self.path}: zip member {name!r} declares {info.file_size:,} bytes, over the {cap:,}-byte limit"
            )
        out = io.BytesIO()
        with self._open_raw(info) as fh:
            self._copy(fh, out, info)
        return out.getvalue()

    def read_json(
        self, name: str, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH
    ) -> ParsedJSON:
        """Read and :func:`parse_json` a member (``where`` is ``<zip>:<member>``)."""
        return parse_json(self.read(name, max_bytes), where=f"{self.path}:{name}", max_depth=max_depth)

    def open_member(self, name: str, max_bytes: int | None = None) -> BinaryIO:
        """A seekable binary file object for a member (for ``h5py.File``). The caller closes it.

        Stored members are served straight from the archive's byte range (fast random access);
        compressed members are first decompressed, capped, into a temporary file. Either way the
        member's local-header name and CRC-32 are checked first (SecurityError naming both CRCs).
        """
        info = self.info(name)
        cap = self.limits.max_member_bytes if max_bytes is None else max_bytes
        if info.file_size > cap:
            raise SecurityError(
                f"{self.path}: zip member {name!r} declares {info.file_size:,} bytes, over the {cap:,}-byte limit"
            )
        if info.flag_bits & 0x1:
            raise FormatError(f"{self.path}: zip member {name!r} is encrypted")
        if info.compress_type == zipfile.ZIP_STORED:
            start = self._data_offset(info)
            member = _StoredMember(self.path, start, info.file_size, f"{self.path}:{name}")
            return io.BufferedReader(member, buffer_size=256 * KiB)
        tmp = tempfile.TemporaryFile()  # noqa: SIM115 - returned to the caller
        tmp.raw.name = f"{self.path}:{name}"  # type: ignore[attr-defined] # named in h5py's messages
        try:
            with self._open_raw(info) as fh:
                self._copy(fh, tmp, info)
            tmp.seek(0)
        except BaseException:
            tmp.close()
            raise
        return tmp  # type: ignore[return-value]

    # internals

    def _open_raw(self, info: zipfile.ZipInfo) -> IO[bytes]:
        self._local_start(info)
        try:
            return self._zf.open(info)
        except (*ZIP_ERRORS, OSError) as exc:
            raise FormatError(f"{self.path}: cannot read zip member {info.filename!r}: {exc}") from None

    def _copy(self, src: IO[bytes], dst: IO[bytes], info: zipfile.ZipInfo) -> None:
        declared = info.file_size
        total = 0
        try:
            while True:
                chunk = src.read(min(_CHUNK, declared - total + 1))
                if not chunk:
                    break
                total += len(chunk)
                if total > declared:
                    raise SecurityError(
                        f"{self.path}: zip member {info.filename!r} holds more than its declared {declared:,} bytes"
                    )
                dst.write(chunk)
        except (*ZIP_ERRORS, OSError) as exc:
            if "CRC" in str(exc):  # zipfile checks the CRC when it reaches the end
                raise SecurityError(
                    f"{self.path}: zip member {info.filename!r} fails its CRC-32 check (recorded "
                    f"{info.CRC:08x}): altered or corrupt after writing; Keras refuses it"
                ) from None
            raise FormatError(
                f"{self.path}: zip member {info.filename!r} is corrupt or truncated: {exc}"
            ) from None
        if total != declared:
            raise FormatError(
                f"{self.path}: zip member {info.filename!r} is truncated ({total:,} of {declared:,} bytes)"
            )

    def _local_start(self, info: zipfile.ZipInfo) -> int:
        """Where a member's data starts, after checking its local header names it as the central
        directory does (a zip whose two names differ shows one thing to one reader, another to the next)."""
        try:
            start, local = _local_header(self._zf, info)
        except FormatError as exc:
            raise FormatError(f"{self.path}: {exc}") from None
        if local != info.filename:
            raise SecurityError(
                f"{self.path}: zip member {info.filename!r} is named {local!r} in its local header"
            )
        return start

    def _data_offset(self, info: zipfile.ZipInfo) -> int:
        """Where a stored member's bytes start, after checking its local header names it as the
        central directory does and its bytes match its CRC-32 (one streamed pass), as zipfile
        checks for the members it reads itself."""
        start = self._local_start(info)
        end = start + info.compress_size
        fp = self._zf.fp
        assert fp is not None
        archive_size = fp.seek(0, io.SEEK_END)
        if end > archive_size:
            raise FormatError(f"{self.path}: zip member {info.filename!r} runs past the end of the archive")
        crc = _stored_crc(self._zf, start, info.compress_size)
        if crc != info.CRC:
            raise SecurityError(f"{self.path}: {_crc_message(info.filename, info.CRC, crc)}")
        return start


def open_zip(path: str | os.PathLike[str], limits: ZipLimits = DEFAULT_ZIP_LIMITS) -> SafeZip:
    """Open a zip for reading after validating its whole central directory.

    Raises :class:`SecurityError` (one line, naming the member; ``(+N more)`` when several) for
    traversal, absolute or backslash names, symlinks/special files, duplicate names, too many members,
    declared sizes over the limits, or a bomb-like compression ratio; :class:`FormatError` for a file
    that is not a readable zip.
    """
    spath = os.fspath(path)
    zf = _open_zipfile(spath)
    problems = zip_problems(zf, limits)
    if problems:
        zf.close()
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        raise SecurityError(f"{spath}: {problems[0].message}{more}")
    return SafeZip(zf, spath, limits)


# --- HDF5 -----------------------------------------------------------------------------------------


def open_h5(source: str | os.PathLike[str] | BinaryIO) -> h5py.File:
    """Open an HDF5 file (path or seekable binary file object) read-only; FormatError if unreadable."""
    import h5py

    if isinstance(source, str | os.PathLike):
        label, kwargs = os.fspath(source), {"locking": False}
    else:
        label, kwargs = str(getattr(source, "name", "<file object>")), {}
    try:
        return h5py.File(source, "r", **kwargs)
    except H5_ERRORS as exc:
        raise FormatError(f"{label}: not a readable HDF5 file: {exc}") from None


def _link_kind(link: object) -> str:
    import h5py

    if isinstance(link, h5py.HardLink):
        return "hard"
    if isinstance(link, h5py.SoftLink):
        return "soft"
    if isinstance(link, h5py.ExternalLink):
        return "external"
    return "other"


def _describe_link(link: object) -> str:
    import h5py

    if isinstance(link, h5py.SoftLink):
        return f"soft link to {link.path!r}"
    if isinstance(link, h5py.ExternalLink):
        return f"external link to {link.filename!r}:{link.path!r}"
    return "user-defined link"


_FILE_OBJECT_NAME = re.compile(r"^<_io\.\w+ name='(.*)'>$")


def _h5_name(obj: Any) -> str:
    try:
        name = obj.file.filename
    except Exception:  # noqa: BLE001 - only for messages
        return "<hdf5>"
    found = _FILE_OBJECT_NAME.match(name)  # h5py names a file object by its repr
    return found.group(1) if found else name


def resolve_hard_links(parent: Any, path: str) -> Any | None:
    """Follow ``path`` one component at a time through hard links only; ``None`` when absent."""
    import h5py

    obj = parent
    walked = parent.name if parent.name != "/" else ""
    for part in (p for p in path.split("/") if p):
        if not isinstance(obj, h5py.Group):
            raise FormatError(f"{_h5_name(parent)}: {walked or '/'} is not a group (looking up {path!r})")
        try:
            link = obj.get(part, getlink=True)
        except H5_ERRORS as exc:
            raise FormatError(f"{_h5_name(parent)}: cannot read link {walked}/{part}: {exc}") from None
        walked = f"{walked}/{part}"
        if link is None:
            return None
        if _link_kind(link) != "hard":
            raise SecurityError(f"{_h5_name(parent)}: {walked} is a {_describe_link(link)}; not followed")
        try:
            obj = obj[part]
        except H5_ERRORS as exc:
            raise FormatError(f"{_h5_name(parent)}: cannot open {walked}: {exc}") from None
    return obj


def safe_group(parent: Any, path: str, *, required: bool = True) -> h5py.Group | None:
    """The group at ``path`` under ``parent``, reached through hard links only.

    SecurityError when any component is a soft/external/user-defined link; FormatError when the
    object is not a group, or is absent and ``required``; ``None`` when absent and not required.
    """
    import h5py

    return _resolve_as(parent, path, h5py.Group, "group", required)


def _resolve_as(parent: Any, path: str, kind: type, what: str, required: bool) -> Any | None:
    """:func:`resolve_hard_links`, then insist on ``kind``: FormatError if absent (when required) or of another kind."""
    obj = resolve_hard_links(parent, path)
    if obj is None:
        if required:
            raise FormatError(f"{_h5_name(parent)}: no {what} {path!r} under {parent.name}")
        return None
    if not isinstance(obj, kind):
        raise FormatError(f"{_h5_name(parent)}: {obj.name} is not a {what}")
    return obj


def _refuse_unsafe(dset: Any, label: str, max_bytes: int) -> None:
    """SecurityError naming the first of :func:`dataset_problems` (and how many more there are)."""
    problems = dataset_problems(dset, max_bytes=max_bytes)
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        raise SecurityError(f"{label}: {problems[0][1]}{more}")


def dataset_problems(
    dset: Any,
    *,
    max_bytes: int = MAX_DATASET_BYTES,
    bomb_bytes: int = H5_BOMB_BYTES,
    bomb_ratio: float = H5_BOMB_RATIO,
) -> list[tuple[str, str]]:
    """Why a dataset must not be read, as ``(kind, message)`` pairs; kinds: external, virtual, bomb, too_large."""
    out: list[tuple[str, str]] = []
    name = dset.name
    try:
        external = dset.external
    except Exception:  # noqa: BLE001 - unreadable property list counts as external
        external = [("?", 0, 0)]
    if external:
        files = sorted({str(e[0]) for e in external})
        out.append(("external", f"dataset {name} stores its data in external file(s) {files}"))
    try:
        virtual = bool(dset.is_virtual)
    except Exception:  # noqa: BLE001
        virtual = True
    if virtual:
        out.append(("virtual", f"dataset {name} is a virtual dataset (maps other files)"))
    declared = declared_nbytes(dset)
    if declared > max_bytes:
        out.append(
            ("too_large", f"dataset {name} declares {declared:,} bytes, over the limit of {max_bytes:,}")
        )
    elif declared > bomb_bytes:
        try:
            stored = int(dset.id.get_storage_size())
        except Exception:  # noqa: BLE001
            stored = 0
        if declared > bomb_ratio * max(stored, 1):
            out.append(
                ("bomb", f"dataset {name} declares {declared:,} bytes but stores {stored:,}: shape bomb")
            )
    return out


def available_memory() -> int | None:
    """Bytes the kernel says can be allocated without swapping (``MemAvailable`` of /proc/meminfo),
    or None where that is not known."""
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * KiB
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_allocation(nbytes: int, what: str) -> None:
    """FormatError when ``nbytes`` for ``what`` is more than the memory available now: a one-line
    refusal before NumPy would raise MemoryError (or the system would start swapping)."""
    available = available_memory()
    if available is not None and nbytes > available:
        raise FormatError(
            f"{what} needs {nbytes:,} bytes, more than the {available:,} bytes of memory available"
        )


def declared_nbytes(dset: Any) -> int:
    """Declared size in bytes (shape product x item size) computed with Python ints (no overflow);
    FormatError when the file's shape or datatype message cannot be decoded (a corrupt float type
    makes h5py raise ValueError)."""
    try:
        shape = dset.shape or ()
        itemsize = int(dset.dtype.itemsize)
    except H5_ERRORS as exc:
        raise FormatError(f"dataset {dset.name}: unreadable shape or datatype: {exc}") from None
    return math.prod(int(d) for d in shape) * itemsize


def safe_dataset(parent: Any, path: str, *, required: bool = True, max_bytes: int = MAX_DATASET_BYTES) -> Any:
    """The dataset at ``path`` reached through hard links only and passing :func:`dataset_problems`.

    SecurityError for links, external/virtual storage and shape bombs; FormatError when it is not a
    dataset, or is absent and ``required``; ``None`` when absent and not required.
    """
    import h5py

    obj = _resolve_as(parent, path, h5py.Dataset, "dataset", required)
    if obj is not None:
        _refuse_unsafe(obj, _h5_name(parent), max_bytes)
    return obj


def h5_links(
    root: Any, *, max_links: int = MAX_H5_LINKS, max_depth: int = MAX_H5_DEPTH
) -> list[tuple[bytes, int, int]]:
    """Every link under ``root`` as ``(path relative to root, h5l link type, object address)``, in one
    C-level pass. The address identifies the object a hard link points to (-1 for other links): a
    second hard link to one object has the same address, so callers open each object once.

    HDF5's own recursive link iteration follows hard links only and enters each group once; more
    than ``max_links`` links, or a path deeper than ``max_depth`` components, raise FormatError.
    """
    import h5py

    links: list[tuple[bytes, int, int]] = []
    too_deep: list[bytes] = []
    hard = h5py.h5l.TYPE_HARD

    def visit(name: bytes, info: Any) -> int | None:
        if name.count(b"/") >= max_depth:
            too_deep.append(name)
            return 1
        links.append((name, info.type, int(info.u) if info.type == hard else -1))
        return 1 if len(links) > max_links else None

    try:
        root.id.links.visit(visit, info=True)
    except H5_ERRORS as exc:
        raise FormatError(f"{_h5_name(root)}: cannot list its links: {exc}") from None
    if too_deep:
        shown = too_deep[0].decode("utf-8", "surrogateescape")[:120]
        raise FormatError(
            f"{_h5_name(root)}: groups nested deeper than {max_depth} levels ({shown}...); refusing to index"
        )
    if len(links) > max_links:
        raise FormatError(f"{_h5_name(root)}: more than {max_links:,} links; refusing to index")
    return links


def safe_tree(
    root: Any, *, max_links: int = MAX_H5_LINKS, max_bytes: int = MAX_DATASET_BYTES
) -> dict[str, dict[str, Any]]:
    """Every group under ``root`` with its datasets (``{"layers/dense/vars": {"0": dset}}``).

    Built from :func:`h5_links` with the guarantees of :func:`safe_group`/:func:`safe_dataset`,
    checked once per link: a soft, external or user-defined link, an external or virtual dataset,
    or a shape bomb raises SecurityError. Group paths are relative to ``root`` ("" for root itself).
    """
    import h5py

    index: dict[str, dict[str, Any]] = {"": {}}
    opened: dict[int, Any] = {}  # object address -> its Dataset (None for a group), opened once
    for raw, kind, address in h5_links(root, max_links=max_links):
        name = raw.decode("utf-8", "surrogateescape")
        if kind != h5py.h5l.TYPE_HARD:
            what = {h5py.h5l.TYPE_SOFT: "soft link", h5py.h5l.TYPE_EXTERNAL: "external link"}.get(
                kind, "user-defined link"
            )
            raise SecurityError(f"{_h5_name(root)}: {name} is a {what}; not followed")
        parent, _, leaf = name.rpartition("/")
        if address in opened:  # another hard link to an object already indexed
            if opened[address] is None:
                index.setdefault(name, {})
            else:
                index.setdefault(parent, {})[leaf] = opened[address]
            continue
        try:
            otype = h5py.h5o.get_info(root.id, raw).type
            if otype == h5py.h5o.TYPE_GROUP:
                opened[address] = None
                index.setdefault(name, {})
                continue
            if otype != h5py.h5o.TYPE_DATASET:
                continue
            dset = h5py.Dataset(h5py.h5d.open(root.id, raw))
        except H5_ERRORS as exc:
            raise FormatError(f"{_h5_name(root)}: cannot open {name}: {exc}") from None
        _refuse_unsafe(dset, _h5_name(root), max_bytes)
        opened[address] = dset
        index.setdefault(parent, {})[leaf] = dset
    return index


def read_dataset(
    dset: Any, max_bytes: int = MAX_DATASET_BYTES, untagged_v2_is_bfloat16: bool = False
) -> np.ndarray:
    """Read a whole dataset as a NumPy array after the :func:`dataset_problems` checks.

    Numeric, bool and fixed-length byte-string dtypes only; bfloat16 (opaque ``|V2`` with attribute
    ``dtype="bfloat16"``, as Keras writes it) is returned as float32. Legacy ``.h5`` writers store
    bfloat16 as ``|V2`` without the attribute: callers reading a Keras weights layout say so with
    ``untagged_v2_is_bfloat16``.
    """
    _refuse_unsafe(dset, _h5_name(dset), max_bytes)
    check_allocation(declared_nbytes(dset), f"{_h5_name(dset)}: dataset {dset.name}")
    dt = dset.dtype
    try:
        if dt.kind == "V" and dt.itemsize == 2 and dt.fields is None:
            tag = read_attr(dset, "dtype", None)
            if tag != "bfloat16" and not (tag is None and untagged_v2_is_bfloat16):
                raise FormatError(
                    f"{_h5_name(dset)}: dataset {dset.name} has opaque dtype {dt} without dtype='bfloat16'"
                )
            raw = np.asarray(dset[()])
            bits = np.frombuffer(raw.tobytes(), dtype="<u2").astype("<u4") << 16
            return bits.view("<f4").reshape(raw.shape)
        if dt.kind not in "biufcS" or dt.fields is not None:
            raise FormatError(f"{_h5_name(dset)}: dataset {dset.name} has unsupported dtype {dt}")
        return np.asarray(dset[()])
    except H5_ERRORS as exc:
        raise FormatError(f"{_h5_name(dset)}: cannot read dataset {dset.name}: {exc}") from None


def _decode(value: Any) -> Any:
    if isinstance(value, bytes | np.bytes_):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "SOU":
            return [_decode(v) for v in value.reshape(-1).tolist()]
        if value.size == 0:
            return []
        return value
    if isinstance(value, np.generic):
        return value.item()
    return value


_MISSING = object()


def read_attr(obj: Any, name: str, default: Any = _MISSING) -> Any:
    """An HDF5 attribute decoded to Python: str for (byte) strings, list[str] for string arrays.

    When ``name`` is absent, the chunked form ``name0, name1, ...`` (Keras splits attributes over
    the 64 KiB object-header limit) is concatenated. Empty arrays (Keras' empty ``weight_names`` is
    float64) become ``[]``. Absent everywhere: ``default`` if given, else FormatError.
    """
    try:
        attrs = obj.attrs
        if name in attrs:
            return _decode(attrs[name])
        chunks: list[Any] = []
        i = 0
        while f"{name}{i}" in attrs:
            part = _decode(attrs[f"{name}{i}"])
            chunks.extend(part if isinstance(part, list) else [part])
            i += 1
    except H5_ERRORS as exc:
        raise FormatError(f"{_h5_name(obj)}: cannot read attribute {name!r} of {obj.name}: {exc}") from None
    if i:
        return chunks
    if default is _MISSING:
        raise FormatError(f"{_h5_name(obj)}: {obj.name} has no attribute {name!r}")
    return default


@dataclass(frozen=True, slots=True)
class H5Entry:
    """One link met by :func:`walk_h5`.

    ``kind``: ``group``, ``dataset``, ``soft_link``, ``external_link``, ``other_link``, ``repeat`` (a
    hard link to an object already visited; not descended), ``error`` (unreadable link), or ``limit``
    (the walk stopped at ``MAX_H5_LINKS``). ``target`` is the link target (soft/external) and
    ``detail`` extra words (``cycle``, ``dangling``).
    """

    path: str
    kind: str
    target: str = ""
    detail: str = ""


def soft_link_status(root: Any, link_path: str, target: str, max_hops: int = 40) -> str:
    """``cycle``, ``dangling``, ``external`` or ``ok`` for a soft link, resolved without following it in h5py."""
    import h5py

    parent = link_path.rsplit("/", 1)[0] or "/"
    current = target if target.startswith("/") else f"{parent.rstrip('/')}/{target}"
    seen = {link_path}
    hops = 0
    while True:
        parts = [p for p in current.split("/") if p and p != "."]
        absolute = "/" + "/".join(parts)
        if absolute == link_path or link_path.startswith(absolute.rstrip("/") + "/"):
            return "cycle"  # the target is the link itself or one of its ancestors
        obj = root
        walked = ""
        redirected = False
        for i, part in enumerate(parts):
            if not isinstance(obj, h5py.Group):
                return "dangling"
            try:
                link = obj.get(part, getlink=True)
            except Exception:  # noqa: BLE001
                return "dangling"
            walked = f"{walked}/{part}"
            if link is None:
                return "dangling"
            kind = _link_kind(link)
            if kind == "hard":
                obj = obj[part]
                continue
            if kind != "soft":
                return "external"
            if walked in seen:
                return "cycle"
            seen.add(walked)
            hops += 1
            if hops > max_hops:
                return "cycle"
            base = walked.rsplit("/", 1)[0] or "/"
            nxt = link.path if link.path.startswith("/") else f"{base.rstrip('/')}/{link.path}"
            rest = "/".join(parts[i + 1 :])
            current = f"{nxt.rstrip('/')}/{rest}" if rest else nxt
            redirected = True
            break
        if not redirected:
            return "ok"


def walk_h5(root: Any, *, max_links: int = MAX_H5_LINKS) -> Iterator[H5Entry]:
    """Every link under ``root``, group by group in name order, iteratively, without following soft or
    external links (they are reported, soft links with ``detail`` = cycle/dangling/ok). Objects reachable
    through several hard links are descended once (later paths are reported as ``repeat``)."""
    import h5py

    visited: set[Any] = set()
    stack: list[tuple[str, Any]] = [(root.name, root)]
    count = 0
    with contextlib.suppress(Exception):
        visited.add(h5py.h5o.get_info(root.id).addr)
    while stack:
        gpath, group = stack.pop()
        if gpath.count("/") >= MAX_H5_DEPTH:
            yield H5Entry(gpath, "limit", detail=f"groups nested deeper than {MAX_H5_DEPTH} levels")
            return
        try:
            names = sorted(group.keys())
        except Exception as exc:  # noqa: BLE001
            yield H5Entry(gpath, "error", detail=f"cannot list group: {exc}")
            continue
        children: list[tuple[str, Any]] = []
        for name in names:
            count += 1
            if count > max_links:
                yield H5Entry(gpath, "limit", detail=f"more than {max_links:,} links; walk stopped")
                return
            path = f"{gpath.rstrip('/')}/{name}"
            try:
                link = group.get(name, getlink=True)
            except Exception as exc:  # noqa: BLE001
                yield H5Entry(path, "error", detail=f"cannot read link: {exc}")
                continue
            kind = _link_kind(link)
            if kind == "soft":
                yield H5Entry(
                    path,
                    "soft_link",
                    target=link.path,
                    detail=soft_link_status(root.file, path, link.path),
                )
                continue
            if kind == "external":
                yield H5Entry(path, "external_link", target=f"{link.filename}:{link.path}")
                continue
            if kind != "hard":
                yield H5Entry(path, "other_link")
                continue
            try:
                obj = group[name]
                addr = h5py.h5o.get_info(obj.id).addr
            except Exception as exc:  # noqa: BLE001
                yield H5Entry(path, "error", detail=f"cannot open: {exc}")
                continue
            if addr in visited:
                yield H5Entry(path, "repeat")
                continue
            visited.add(addr)
            if isinstance(obj, h5py.Group):
                yield H5Entry(path, "group")
                children.append((path, obj))
            elif isinstance(obj, h5py.Dataset):
                yield H5Entry(path, "dataset")
            else:
                yield H5Entry(path, "other_link", detail="named datatype")
        stack.extend(reversed(children))
