"""TensorFlow tensor bundles (checkpoints) read without TensorFlow.

A checkpoint with prefix ``P`` is ``P.index`` plus data shards ``P.data-0000i-of-0000n``. The index is
a sorted key/value table in LevelDB's format (see docs/formats.md, "TensorFlow checkpoints"); its
empty key holds a ``BundleHeaderProto`` (shard count, byte order), every other key a
``BundleEntryProto`` saying where a tensor's bytes are in which shard, its dtype, shape and CRC-32C.
Tensors are read one at a time, when asked for, and checked against their CRC-32C.

Everything is bounded before it is trusted: the index's size, the number of entries, every block
handle, every entry's shape (against its byte size), offset (against its shard's size) and shard
number; shards are opened inside the checkpoint's folder only, and must be regular files.
"""

from __future__ import annotations

import math
import os
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from modelgraph import safe_io
from modelgraph.errors import FormatError, SecurityError, ToolMissingError, WeightsError

MAX_INDEX_BYTES = 256 * 1024 * 1024
"""Largest ``.index`` file read (a million-variable checkpoint's index is a few tens of MB)."""
MAX_ENTRIES = 2_000_000
"""Most keys accepted in one index."""
MAX_SHARDS = 100_000
MAX_TENSOR_BYTES = safe_io.MAX_DATASET_BYTES
"""Largest single tensor read into memory."""
MAX_STRING_ELEMENTS = 10_000_000
"""Most elements of a string tensor (each costs a Python object)."""
MAX_OBJECT_GRAPH_BYTES = 256 * 1024 * 1024
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"

_TABLE_MAGIC = 0xDB4775248B80FB57
_FOOTER_BYTES = 48
_TRAILER_BYTES = 5
_NO_COMPRESSION, _SNAPPY = 0, 1

# DataType number -> NumPy dtype (little-endian, as TensorFlow writes on every machine it runs on).
_NUMPY_DTYPES: dict[int, str] = {
    1: "<f4", 2: "<f8", 3: "<i4", 4: "u1", 5: "<i2", 6: "i1", 8: "<c8", 9: "<i8", 10: "?",
    17: "<u2", 18: "<c16", 19: "<f2", 22: "<u4", 23: "<u8",
}  # fmt: skip
DT_STRING, DT_BFLOAT16 = 7, 14
DTYPE_NAMES: dict[int, str] = {
    1: "float32", 2: "float64", 3: "int32", 4: "uint8", 5: "int16", 6: "int8", 7: "string",
    8: "complex64", 9: "int64", 10: "bool", 14: "bfloat16", 17: "uint16", 18: "complex128",
    19: "float16", 20: "resource", 21: "variant", 22: "uint32", 23: "uint64",
}  # fmt: skip


def _pb() -> Any:
    from modelgraph.loading.protos import checkpoint_pb2

    return checkpoint_pb2


# --- CRC-32C -------------------------------------------------------------------------------------


def crc32c(data: bytes | memoryview, crc: int = 0) -> int:
    """CRC-32C (Castagnoli) of ``data``, extending ``crc`` (google-crc32c's C implementation)."""
    import google_crc32c

    return google_crc32c.extend(crc, bytes(data)) if crc else google_crc32c.value(bytes(data))


def mask_crc(crc: int) -> int:
    """LevelDB's masked CRC (stored CRCs are masked so a CRC of data holding CRCs stays useful)."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


# --- the LevelDB-format table --------------------------------------------------------------------


def _varint(buf: bytes, pos: int, end: int, where: str) -> tuple[int, int]:
    """A base-128 varint (at most 64 bits) at ``pos``; the value and the position after it."""
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise FormatError(f"{where}: a truncated or over-long varint at byte {pos}")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _block(buf: bytes, offset: int, size: int, where: str) -> bytes:
    """The contents of the block at ``offset``, its trailer's CRC checked and compression undone."""
    if offset < 0 or size < 0 or offset + size + _TRAILER_BYTES > len(buf) - _FOOTER_BYTES + _FOOTER_BYTES:
        raise FormatError(f"{where}: a block at {offset} of {size} bytes runs past the end of the file")
    contents = buf[offset : offset + size]
    kind = buf[offset + size]
    (stored,) = struct.unpack_from("<I", buf, offset + size + 1)
    if mask_crc(crc32c(buf[offset : offset + size + 1])) != stored:
        raise FormatError(f"{where}: the block at byte {offset} fails its CRC-32C check (corrupt index)")
    if kind == _NO_COMPRESSION:
        return contents
    if kind == _SNAPPY:
        return _unsnappy(contents, where)
    raise FormatError(f"{where}: the block at byte {offset} has unknown compression type {kind}")


def _unsnappy(data: bytes, where: str) -> bytes:
    try:
        import cramjam
    except ImportError:
        raise ToolMissingError(
            f"{where}: the index has snappy-compressed blocks, which need the 'cramjam' package, not "
            "installed: pip install 'modelgraph[snappy]'"
        ) from None
    declared, _ = _varint(data, 0, len(data), where)
    if declared > MAX_INDEX_BYTES:
        raise SecurityError(f"{where}: a compressed block claims {declared:,} bytes, over the limit")
    try:
        return bytes(cramjam.snappy.decompress_raw(data))
    except Exception as exc:  # noqa: BLE001 - any decoder failure is a corrupt block
        raise FormatError(f"{where}: a snappy block does not decompress ({exc})") from None


def _block_entries(block: bytes, where: str) -> Iterator[tuple[bytes, bytes]]:
    """The (key, value) pairs of one block: keys share a prefix with the previous key."""
    if len(block) < 4:
        raise FormatError(f"{where}: a block of {len(block)} bytes has no restart count")
    (restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    end = len(block) - 4 - 4 * restarts
    if restarts == 0 or end < 0:
        raise FormatError(f"{where}: a block declares {restarts:,} restart points, impossible for its size")
    pos, key = 0, b""
    while pos < end:
        shared, pos = _varint(block, pos, end, where)
        unshared, pos = _varint(block, pos, end, where)
        value_len, pos = _varint(block, pos, end, where)
        if shared > len(key) or pos + unshared + value_len > end:
            raise FormatError(f"{where}: a block entry at byte {pos} runs past its block")
        key = key[:shared] + block[pos : pos + unshared]
        pos += unshared
        yield key, block[pos : pos + value_len]
        pos += value_len


def read_table(buf: bytes, where: str) -> Iterator[tuple[bytes, bytes]]:
    """Every (key, value) of a LevelDB-format table held in ``buf``, in key order."""
    if len(buf) < _FOOTER_BYTES:
        raise FormatError(f"{where}: {len(buf)} bytes, too short for a checkpoint index")
    footer = len(buf) - _FOOTER_BYTES
    (magic,) = struct.unpack_from("<Q", buf, len(buf) - 8)
    if magic != _TABLE_MAGIC:
        raise FormatError(f"{where}: not a TensorFlow checkpoint index (no table magic number at its end)")
    pos = footer
    _, pos = _varint(buf, pos, len(buf) - 8, where)  # metaindex handle: unused by bundles
    _, pos = _varint(buf, pos, len(buf) - 8, where)
    index_offset, pos = _varint(buf, pos, len(buf) - 8, where)
    index_size, pos = _varint(buf, pos, len(buf) - 8, where)
    if index_offset + index_size + _TRAILER_BYTES > footer:
        raise FormatError(f"{where}: the index block handle points past the end of the file")
    previous = None
    for _, handle in _block_entries(_block(buf, index_offset, index_size, where), where):
        offset, at = _varint(handle, 0, len(handle), where)
        size, _ = _varint(handle, at, len(handle), where)
        if offset + size + _TRAILER_BYTES > footer:
            raise FormatError(f"{where}: a data block handle points past the end of the file")
        for key, value in _block_entries(_block(buf, offset, size, where), where):
            if previous is not None and key <= previous:
                raise FormatError(f"{where}: index keys out of order at {key[:80]!r}")
            previous = key
            yield key, value


# --- the bundle ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BundleEntry:
    """Where one stored tensor is and what it is (a decoded ``BundleEntryProto``)."""

    key: str
    dtype: int
    shape: tuple[int, ...]
    shard_id: int
    offset: int
    size: int
    crc32c: int
    slices: tuple[tuple[tuple[int, int], ...], ...]
    """For a partitioned variable: each saved slice as ``((start, length), ...)``, length -1 = all."""

    @property
    def dtype_name(self) -> str:
        """NumPy-style name of the stored element type (``string`` for byte strings)."""
        return DTYPE_NAMES.get(self.dtype, f"DataType {self.dtype}")


def split_prefix(path: str | os.PathLike[str]) -> Path:
    """The checkpoint prefix named by ``path``: the prefix itself, its ``.index`` or one data shard."""
    text = os.fspath(path)
    if text.endswith(".index"):
        return Path(text[: -len(".index")])
    match = re.fullmatch(r"(.+)\.data-\d{5}-of-\d{5}", text)
    return Path(match.group(1)) if match else Path(text)


def open_bundle(
    path: str | os.PathLike[str], *, within: str | os.PathLike[str] | None = None
) -> TensorBundle:
    """Open the checkpoint named by ``path`` (prefix, ``.index`` or data shard); its files are read
    inside ``within`` (default: the checkpoint's own folder). FormatError/SecurityError when the
    index is not a valid bundle index."""
    prefix = split_prefix(path)
    folder = Path(within) if within is not None else prefix.parent
    return TensorBundle(prefix, folder)


class TensorBundle:
    """An open checkpoint: its header, keys and entries; tensors read on demand."""

    def __init__(self, prefix: Path, folder: Path) -> None:
        self.prefix = prefix
        self.folder = folder
        index = Path(f"{prefix}.index")
        self._where = str(index)
        buf = safe_io.read_file(index, max_bytes=MAX_INDEX_BYTES, within=folder)
        if len(buf) > MAX_INDEX_BYTES:
            raise SecurityError(f"{index}: over the {MAX_INDEX_BYTES:,}-byte index limit")
        pb = _pb()
        self._raw: dict[str, bytes] = {}
        header = None
        for key, value in read_table(buf, self._where):
            if len(self._raw) >= MAX_ENTRIES:
                raise SecurityError(f"{index}: more than {MAX_ENTRIES:,} entries")
            if key == b"":
                header = _parse(pb.BundleHeaderProto, value, f"{index}: the header")
                continue
            self._raw[key.decode("utf-8", errors="surrogateescape")] = value
        if header is None:
            raise FormatError(f"{index}: no bundle header (the empty key is missing)")
        if header.endianness != 0:
            raise WeightsError(f"{index}: a big-endian checkpoint; only little-endian ones are read")
        if not 1 <= header.num_shards <= MAX_SHARDS:
            raise FormatError(f"{index}: the header declares {header.num_shards:,} data shards")
        self.header = header
        self.num_shards = header.num_shards
        self._entries: dict[str, BundleEntry] = {}
        self._shards: dict[int, BinaryIO] = {}

    # -- keys and entries --

    def keys(self) -> list[str]:
        """Every tensor key, sorted as stored (the header's empty key excluded)."""
        return list(self._raw)

    def __contains__(self, key: object) -> bool:
        return key in self._raw

    def entry(self, key: str) -> BundleEntry:
        """The entry of ``key``, checked for consistency; KeyError if absent."""
        cached = self._entries.get(key)
        if cached is not None:
            return cached
        proto = _parse(_pb().BundleEntryProto, self._raw[key], f"{self._where}: entry '{key}'")
        entry = self._check(key, proto)
        self._entries[key] = entry
        return entry

    def _check(self, key: str, proto: Any) -> BundleEntry:
        where = f"{self._where}: '{key}'"
        dims = tuple(int(d.size) for d in proto.shape.dim)
        if any(d < 0 for d in dims) or len(dims) > 64:
            raise FormatError(f"{where}: an invalid shape {dims}")
        slices = tuple(
            tuple((int(e.start), int(e.length) if e.HasField("length") else -1) for e in s.extent)
            for s in proto.slices
        )
        if not 0 <= proto.shard_id < self.num_shards:
            raise FormatError(f"{where}: shard {proto.shard_id} of a {self.num_shards}-shard checkpoint")
        if proto.offset < 0 or proto.size < 0:
            raise FormatError(f"{where}: a negative offset or size")
        count = math.prod(dims)
        if not slices:
            if proto.dtype == DT_STRING:
                if count > MAX_STRING_ELEMENTS or count > proto.size:
                    raise FormatError(
                        f"{where}: a string tensor of {count:,} elements in {proto.size:,} bytes"
                    )
            else:
                itemsize = _itemsize(proto.dtype, where)
                if count * itemsize != proto.size:
                    raise FormatError(
                        f"{where}: shape {dims} of {DTYPE_NAMES.get(proto.dtype, proto.dtype)} needs "
                        f"{count * itemsize:,} bytes, the entry says {proto.size:,}"
                    )
        return BundleEntry(key, int(proto.dtype), dims, int(proto.shard_id), int(proto.offset),
                           int(proto.size), int(proto.crc32c), slices)  # fmt: skip

    # -- tensors --

    def read(self, key: str) -> np.ndarray:
        """The tensor stored under ``key`` (a partitioned variable reassembled from its slices), its
        CRC-32C checked: WeightsError on a mismatch, FormatError on an entry that does not fit its shard."""
        entry = self.entry(key)
        if entry.slices:
            return self._read_sliced(entry)
        raw = self._bytes(entry)
        where = f"{self._where}: '{key}'"
        if entry.dtype == DT_STRING:
            values, crc = _strings(raw, entry.shape, where)
        else:
            values, crc = None, crc32c(raw)
        if mask_crc(crc) != entry.crc32c:
            raise WeightsError(f"{where}: the stored bytes fail their CRC-32C check (corrupt checkpoint)")
        if values is not None:
            return values
        if entry.dtype == DT_BFLOAT16:
            halves = np.frombuffer(raw, "<u2").astype(np.uint32) << 16
            return halves.view(np.float32).reshape(entry.shape)
        return np.frombuffer(raw, _NUMPY_DTYPES[entry.dtype]).reshape(entry.shape).copy()

    def _bytes(self, entry: BundleEntry) -> bytes:
        if entry.size > MAX_TENSOR_BYTES:
            raise SecurityError(f"{self._where}: '{entry.key}' is {entry.size:,} bytes, over the limit")
        fh = self._shard(entry.shard_id)
        end = os.fstat(fh.fileno()).st_size
        if entry.offset + entry.size > end:
            raise FormatError(
                f"{fh.name}: '{entry.key}' at bytes {entry.offset:,}..{entry.offset + entry.size:,} runs "
                f"past the shard's {end:,} bytes"
            )
        fh.seek(entry.offset)
        raw = fh.read(entry.size)
        if len(raw) != entry.size:
            raise FormatError(f"{fh.name}: '{entry.key}' is truncated")
        return raw

    def _shard(self, shard_id: int) -> BinaryIO:
        fh = self._shards.get(shard_id)
        if fh is None:
            name = f"{self.prefix}.data-{shard_id:05d}-of-{self.num_shards:05d}"
            fh = safe_io.open_file(name, within=self.folder)
            self._shards[shard_id] = fh
        return fh

    def _read_sliced(self, entry: BundleEntry) -> np.ndarray:
        """A partitioned variable: each slice is stored under its own encoded key."""
        if entry.dtype in (DT_STRING,) or entry.dtype not in _NUMPY_DTYPES and entry.dtype != DT_BFLOAT16:
            raise WeightsError(f"{self._where}: '{entry.key}' is a partitioned {entry.dtype_name} tensor")
        if math.prod(entry.shape) * 8 > MAX_TENSOR_BYTES:
            raise SecurityError(f"{self._where}: '{entry.key}' of shape {entry.shape} is over the limit")
        dtype = np.float32 if entry.dtype == DT_BFLOAT16 else np.dtype(_NUMPY_DTYPES[entry.dtype])
        out = np.zeros(entry.shape, dtype)
        filled = 0
        for extents in entry.slices:
            if len(extents) != len(entry.shape):
                raise FormatError(f"{self._where}: '{entry.key}' has a slice of rank {len(extents)}")
            index = tuple(
                slice(0, dim) if length < 0 else slice(start, start + length)
                for (start, length), dim in zip(extents, entry.shape, strict=True)
            )
            for (start, length), dim in zip(extents, entry.shape, strict=True):
                if length >= 0 and not (start >= 0 and start + length <= dim):
                    raise FormatError(f"{self._where}: '{entry.key}' has a slice outside its shape")
            part = self.read(slice_key(entry.key, extents))
            target = out[index]
            if part.shape != target.shape:
                raise FormatError(
                    f"{self._where}: '{entry.key}' slice {extents} holds shape {part.shape}, not {target.shape}"
                )
            out[index] = part
            filled += part.size
        if filled != out.size:
            raise WeightsError(f"{self._where}: '{entry.key}' slices cover {filled} of {out.size} elements")
        return out

    # -- the object graph --

    def object_graph(self) -> Any | None:
        """The checkpoint's ``TrackableObjectGraph`` (objects and the keys of their variables), or
        None when the checkpoint has none (a TF1 ``Saver`` checkpoint)."""
        if OBJECT_GRAPH_KEY not in self._raw:
            return None
        entry = self.entry(OBJECT_GRAPH_KEY)
        if entry.dtype != DT_STRING or math.prod(entry.shape) != 1:
            raise FormatError(f"{self._where}: '{OBJECT_GRAPH_KEY}' is not one string")
        if entry.size > MAX_OBJECT_GRAPH_BYTES:
            raise SecurityError(f"{self._where}: an object graph of {entry.size:,} bytes, over the limit")
        blob = self.read(OBJECT_GRAPH_KEY).reshape(-1)[0]
        return _parse(_pb().TrackableObjectGraph, blob, f"{self._where}: the object graph")

    def close(self) -> None:
        """Close the open data shards."""
        for fh in self._shards.values():
            fh.close()
        self._shards.clear()

    def __enter__(self) -> TensorBundle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _itemsize(dtype: int, where: str) -> int:
    if dtype == DT_BFLOAT16:
        return 2
    if dtype not in _NUMPY_DTYPES:
        raise WeightsError(f"{where}: stored type {DTYPE_NAMES.get(dtype, f'DataType {dtype}')} is not read")
    return np.dtype(_NUMPY_DTYPES[dtype]).itemsize


def _parse(message_class: Any, blob: bytes, where: str) -> Any:
    from modelgraph.loading.protos import parse_message

    return parse_message(message_class, blob, where)


def _strings(raw: bytes, shape: tuple[int, ...], where: str) -> tuple[np.ndarray, int]:
    """A string tensor and the CRC-32C TensorFlow computed for it.

    Stored as every element's length (varint), a masked CRC-32C of the lengths, then the elements'
    bytes. The entry's CRC covers the lengths as little-endian uint32 (uint64 past 4 GiB), the
    lengths' checksum, and the bytes.
    """
    count = math.prod(shape)
    pos, lengths = 0, []
    for _ in range(count):
        length, pos = _varint(raw, pos, len(raw), where)
        lengths.append(length)
    if pos + 4 + sum(lengths) != len(raw):
        raise FormatError(
            f"{where}: string lengths add up to {sum(lengths):,} bytes, the entry holds {len(raw) - pos - 4:,}"
        )
    packed = b"".join(struct.pack("<I" if n <= 0xFFFFFFFF else "<Q", n) for n in lengths)
    crc = crc32c(packed)
    (stored,) = struct.unpack_from("<I", raw, pos)
    if mask_crc(crc) != stored:
        raise WeightsError(f"{where}: the string lengths fail their CRC-32C check (corrupt checkpoint)")
    crc = crc32c(raw[pos:], crc)
    pos += 4
    out = np.empty(count, dtype=object)
    for i, length in enumerate(lengths):
        out[i] = raw[pos : pos + length]
        pos += length
    return out.reshape(shape), crc


# --- slice keys ----------------------------------------------------------------------------------


def slice_key(name: str, extents: tuple[tuple[int, int], ...]) -> str:
    """The key under which one slice of partitioned variable ``name`` is stored: an order-preserving
    encoding of (0, name, rank, then each dimension's start and length), as TensorFlow writes it."""
    parts = [_ordered_unsigned(0), _ordered_bytes(name.encode("utf-8", "surrogateescape"))]
    parts.append(_ordered_unsigned(len(extents)))
    for start, length in extents:
        parts += [_ordered_signed(start), _ordered_signed(length)]
    return b"".join(parts).decode("utf-8", "surrogateescape")


def _ordered_unsigned(value: int) -> bytes:
    """A non-negative number: its byte count, then its big-endian bytes."""
    body = value.to_bytes((value.bit_length() + 7) // 8, "big")
    return bytes([len(body)]) + body


def _ordered_bytes(value: bytes) -> bytes:
    """A byte string: 00 written as 00 ff and ff as ff 00, then the terminator 00 01."""
    escaped = bytearray()
    for byte in value:
        escaped += b"\x00\xff" if byte == 0 else b"\xff\x00" if byte == 0xFF else bytes([byte])
    return bytes(escaped) + b"\x00\x01"


# Leading bits marking an n-byte signed number (n = 1..10), xor-ed into its two's complement bytes.
_SIGNED_HEADERS = [b"\x80", b"\xc0", b"\xe0", b"\xf0", b"\xf8", b"\xfc", b"\xfe", b"\xff",
                   b"\xff\x80", b"\xff\xc0"]  # fmt: skip


def _ordered_signed(value: int) -> bytes:
    """A signed number in as few bytes as hold it: n bytes carry 7n - 1 bits (n <= 9), 64 at n = 10;
    the leading bits say n and sort negatives first."""
    magnitude = ~value if value < 0 else value
    n = next((k for k in range(1, 10) if magnitude < 1 << (7 * k - 1)), 10)
    body = bytearray((value & ((1 << (8 * n)) - 1)).to_bytes(n, "big"))
    for i, bits in enumerate(_SIGNED_HEADERS[n - 1]):
        body[i] ^= bits
    return bytes(body)
