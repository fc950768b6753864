"""Array inputs read a slice of samples at a time, so an input larger than memory can be run.

A :class:`Source` knows its shape and dtype from the file's ``.npy`` header and reads samples
``[start, stop)`` on request. Plain ``.npy`` files and the uncompressed members of an ``.npz``
(``np.savez``) are read with positioned reads (``os.preadv``) into a fresh array: unlike a
memory map, the pages read do not stay in the process's resident set, so reading a 4 GB file a
batch at a time keeps the memory of one batch. A compressed member (``np.savez_compressed``) is
decompressed front to back as the samples are asked for, in order. A folder of ``.npy`` shards is
one input: the shards in name order, end to end (their sizes after the first axis and their dtypes
must agree).

Every header is checked against the file before anything is read: no object dtypes (they would
need pickles), C order only, and the data must lie inside the file (or the zip member).
"""

from __future__ import annotations

import math
import os
import struct
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from modelgraph.errors import UsageError

_NPY_MAGIC = b"\x93NUMPY"
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # a zip local file header (30 bytes)
_LOCAL_SIGNATURE = b"PK\x03\x04"
# Bytes a compressed member is skipped by at a time when a resumed run starts past its beginning.
_SKIP_BYTES = 1 << 22


def read_npy_header(fh: IO[bytes], where: str) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of the ``.npy`` header at ``fh``'s position (read front to back, so a
    decompressing stream works too), leaving ``fh`` just after the header. Object dtypes, Fortran
    order and scalars are UsageErrors naming ``where``."""
    try:
        if fh.read(6) != _NPY_MAGIC:
            raise UsageError(f"{where}: not a .npy array (no NumPy magic)")
        version = tuple(fh.read(2))
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
        else:
            raise UsageError(f"{where}: .npy format version {version} is not supported (1.0 or 2.0)")
    except (ValueError, OSError, EOFError) as exc:
        raise UsageError(f"{where}: unreadable .npy header: {exc}") from exc
    if dtype.hasobject:
        raise UsageError(f"{where}: holds Python objects (dtype {dtype}), which would need pickle")
    if fortran and len(shape) > 1:
        raise UsageError(f"{where}: is stored in Fortran order; save it C-ordered (np.ascontiguousarray)")
    if not shape:
        raise UsageError(f"{where}: is a scalar; an input needs a first (sample) axis")
    return tuple(int(d) for d in shape), dtype


class Source:
    """One model input, read a slice of samples at a time."""

    shape: tuple[int, ...]
    dtype: np.dtype
    where: str

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def sample_bytes(self) -> int:
        """Bytes of one sample."""
        return math.prod(self.shape[1:]) * self.dtype.itemsize

    def read(self, start: int, stop: int) -> np.ndarray:
        """Samples ``[start, stop)`` as a new array."""
        raise NotImplementedError

    def identity(self) -> list[dict[str, Any]]:
        """What a resumed run checks is still the same: paths, sizes and modification times."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the file handles."""


def _file_identity(path: Path) -> dict[str, Any]:
    st = path.stat()
    return {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


class FileSource(Source):
    """An array stored uncompressed at ``offset`` in a file (a ``.npy``, or an ``.npz`` member)."""

    def __init__(self, path: Path, offset: int, shape: tuple[int, ...], dtype: np.dtype, where: str) -> None:
        self.path, self.offset, self.shape, self.dtype, self.where = path, offset, shape, dtype, where
        self._fd = os.open(path, os.O_RDONLY)

    def read(self, start: int, stop: int) -> np.ndarray:
        out = np.empty((stop - start, *self.shape[1:]), dtype=self.dtype)
        view = memoryview(out.reshape(-1).view(np.uint8))
        position, done = self.offset + start * self.sample_bytes, 0
        while done < len(view):
            n = os.preadv(self._fd, [view[done:]], position + done)
            if n <= 0:
                raise UsageError(f"{self.where}: the file ended early (was it truncated while running?)")
            done += n
        return out

    def identity(self) -> list[dict[str, Any]]:
        return [_file_identity(self.path)]

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class CompressedSource(Source):
    """A deflated ``.npz`` member, decompressed front to back as its samples are read in order."""

    def __init__(self, path: Path, member: str, where: str) -> None:
        self.path, self.member, self.where = path, member, where
        self._zip = zipfile.ZipFile(path)
        self._open()

    def _open(self) -> None:
        self._fh = self._zip.open(self.member)
        self.shape, self.dtype = read_npy_header(self._fh, self.where)
        self._position = 0

    def read(self, start: int, stop: int) -> np.ndarray:
        if start < self._position:
            self._fh.close()
            self._open()
        skip = (start - self._position) * self.sample_bytes
        while skip > 0:
            got = len(self._fh.read(min(skip, _SKIP_BYTES)))
            if got == 0:
                raise UsageError(f"{self.where}: the member ended early")
            skip -= got
        want = (stop - start) * self.sample_bytes
        data = self._fh.read(want)
        if len(data) != want:
            raise UsageError(f"{self.where}: the member ended early (truncated archive?)")
        self._position = stop
        return np.frombuffer(data, dtype=self.dtype).reshape(stop - start, *self.shape[1:]).copy()

    def identity(self) -> list[dict[str, Any]]:
        return [{**_file_identity(self.path), "member": self.member}]

    def close(self) -> None:
        self._fh.close()
        self._zip.close()


class ShardSource(Source):
    """Several sources end to end along the sample axis (a folder of ``.npy`` shards)."""

    def __init__(self, parts: Sequence[Source], where: str) -> None:
        first = parts[0]
        for part in parts[1:]:
            if part.shape[1:] != first.shape[1:] or part.dtype != first.dtype:
                raise UsageError(
                    f"{where}: shard {part.where} has samples of shape {part.shape[1:]} {part.dtype}, "
                    f"but {first.where} has {first.shape[1:]} {first.dtype}"
                )
        self.parts, self.where = list(parts), where
        self.dtype = first.dtype
        self._starts = np.cumsum([0, *(len(p) for p in parts)]).tolist()
        self.shape = (self._starts[-1], *first.shape[1:])

    def read(self, start: int, stop: int) -> np.ndarray:
        pieces = []
        for part, lo, hi in zip(self.parts, self._starts, self._starts[1:], strict=False):
            a, b = max(start, lo), min(stop, hi)
            if a < b:
                pieces.append(part.read(a - lo, b - lo))
        if len(pieces) == 1:
            return pieces[0]
        if not pieces:
            return np.empty((0, *self.shape[1:]), dtype=self.dtype)
        return np.concatenate(pieces, axis=0)

    def identity(self) -> list[dict[str, Any]]:
        return [i for part in self.parts for i in part.identity()]

    def close(self) -> None:
        for part in self.parts:
            part.close()


def _check_fits(where: str, offset: int, shape: tuple[int, ...], dtype: np.dtype, end: int) -> None:
    need = math.prod(shape) * dtype.itemsize
    if offset + need > end:
        raise UsageError(
            f"{where}: its header declares {shape} {dtype} ({need} bytes), but only {max(0, end - offset)} "
            "bytes follow (truncated?)"
        )


def npy_source(path: Path) -> FileSource:
    """A ``.npy`` file as a source (its header checked against its size)."""
    try:
        with path.open("rb") as fh:
            shape, dtype = read_npy_header(fh, str(path))
            offset = fh.tell()
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from exc
    _check_fits(str(path), offset, shape, dtype, path.stat().st_size)
    return FileSource(path, offset, shape, dtype, str(path))


def npz_sources(path: Path) -> dict[str, Source]:
    """Every member of an ``.npz`` as a source, keyed as ``np.load`` keys them (without ``.npy``)."""
    where = str(path)
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise UsageError(f"{where}: not a readable .npz archive: {exc}") from exc
    sources: dict[str, Source] = {}
    with archive, path.open("rb") as fh:
        for info in archive.infolist():
            if info.is_dir():
                continue
            key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            member = f"{where}[{key}]"
            if info.compress_type == zipfile.ZIP_STORED:
                fh.seek(info.header_offset)
                raw = fh.read(_LOCAL_HEADER.size)
                if len(raw) != _LOCAL_HEADER.size or raw[:4] != _LOCAL_SIGNATURE:
                    raise UsageError(f"{member}: bad zip local header")
                fields = _LOCAL_HEADER.unpack(raw)
                start = info.header_offset + _LOCAL_HEADER.size + fields[-2] + fields[-1]
                fh.seek(start)
                shape, dtype = read_npy_header(fh, member)
                offset = fh.tell()
                _check_fits(member, offset, shape, dtype, start + info.file_size)
                sources[key] = FileSource(path, offset, shape, dtype, member)
            elif info.compress_type == zipfile.ZIP_DEFLATED:
                sources[key] = CompressedSource(path, info.filename, member)
            else:
                raise UsageError(f"{member}: zip compression method {info.compress_type} is not supported")
    return sources


def folder_source(path: Path) -> ShardSource:
    """A folder of ``.npy`` shards, in name order, as one source."""
    shards = sorted(p for p in path.iterdir() if p.suffix == ".npy" and p.is_file())
    if not shards:
        raise UsageError(f"{path}: the folder holds no .npy shards")
    return ShardSource([npy_source(p) for p in shards], str(path))


def input_sources(
    values: list[str], input_names: list[str], ignored: list[str] | None = None
) -> dict[str, Source]:
    """``--input FILE|FOLDER`` / ``--input NAME=FILE|FOLDER`` options as sources by input name,
    keyed as :func:`modelgraph.runner.feeds.parse_input_options` keys the arrays it loads: a ``.npy``
    or a folder of shards feeds a single-input model, an ``.npz`` its members by input name (or by the
    goldens' ``input/NAME``; other members are listed in ``ignored``)."""
    from modelgraph.runner.feeds import GOLDEN_INPUT_PREFIX

    found: dict[str, Source] = {}
    for value in values:
        name, sep, file = value.partition("=")
        named = bool(sep and name and not Path(value).exists())
        path = Path(file if named else value)
        if named and name not in input_names:
            raise UsageError(f"unknown input {name!r}; model inputs are {input_names}")
        if not path.exists():
            raise UsageError(f"input file '{path}' does not exist")
        if path.is_dir() or path.suffix != ".npz":
            source = folder_source(path) if path.is_dir() else npy_source(path)
            if not named and len(input_names) != 1:
                raise UsageError(
                    f"{path.name}: one array feeds a single-input model; model inputs are {input_names}; "
                    "use --input NAME=PATH"
                )
            found[name if named else input_names[0]] = source
            continue
        members = npz_sources(path)
        if named:
            if name in members:
                found[name] = members.pop(name)
            elif len(members) == 1:
                found[name] = members.popitem()[1]
            else:
                raise UsageError(f"{path.name} has {sorted(members)}; which one is input {name!r}?")
        else:
            golden = any(k.startswith(GOLDEN_INPUT_PREFIX) for k in members)
            for key in list(members):
                input_name = key[len(GOLDEN_INPUT_PREFIX) :] if golden else key
                if golden and not key.startswith(GOLDEN_INPUT_PREFIX):
                    continue
                if input_name in input_names:
                    found[input_name] = members.pop(key)
                elif not golden:
                    raise UsageError(
                        f"unknown input {key!r}; model inputs are {input_names} (in {path.name})"
                    )
            if ignored is not None:
                ignored.extend(sorted(members))
        for source in members.values():
            source.close()
    return found
