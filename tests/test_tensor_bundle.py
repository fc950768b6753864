"""The TensorFlow tensor-bundle reader against checkpoints TensorFlow wrote (samples/gen_bundles.py),
and against hostile bundles built here: every one gets a typed one-line error and bounded work."""

from __future__ import annotations

import json
import os
import shutil
import struct
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from modelgraph.errors import FormatError, LoadError, SecurityError, WeightsError
from modelgraph.loading import tensor_bundle as tb
from modelgraph.loading.protos import checkpoint_pb2 as pb

BUNDLES = Path(__file__).resolve().parent.parent / "samples" / "bundles"
NAMES = ["dtypes", "model_weights", "partitioned"]


def _golden(name: str) -> tuple[dict[str, np.ndarray], dict[str, list]]:
    arrays = dict(np.load(BUNDLES / f"{name}.npz"))
    strings = json.loads((BUNDLES / f"{name}.strings.json").read_text())
    return arrays, strings


@pytest.mark.parametrize("name", NAMES)
def test_every_key_reads_as_tensorflow_reads_it(name: str) -> None:
    arrays, strings = _golden(name)
    bundle = tb.open_bundle(BUNDLES / name)
    plain = [k for k in bundle.keys() if not k.startswith("\x00")]  # slice keys are internal
    assert sorted(plain) == sorted([*arrays, *(k for k in strings if not k.endswith("/shape"))])
    for key in plain:
        value = bundle.read(key)
        if key in arrays:
            assert value.dtype == arrays[key].dtype, key
            np.testing.assert_array_equal(value, arrays[key], err_msg=key)
        elif key != tb.OBJECT_GRAPH_KEY:
            assert [v.hex() for v in value.ravel()] == strings[key], key
            assert list(value.shape) == strings[f"{key}/shape"]
    bundle.close()


@pytest.mark.parametrize("path_form", ["prefix", "index", "shard"])
def test_a_checkpoint_is_named_by_prefix_index_or_shard(path_form: str) -> None:
    path = {
        "prefix": BUNDLES / "model_weights",
        "index": BUNDLES / "model_weights.index",
        "shard": BUNDLES / "model_weights.data-00000-of-00001",
    }[path_form]
    with tb.open_bundle(path) as bundle:
        assert bundle.entry("layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE").shape == (6, 5)


def test_object_graph_names_each_variable_and_its_key() -> None:
    with tb.open_bundle(BUNDLES / "model_weights") as bundle:
        graph = bundle.object_graph()
        pairs = {a.full_name: a.checkpoint_key for n in graph.nodes for a in n.attributes}
        assert (
            pairs["bn/moving_variance"] == "layer_with_weights-1/moving_variance/.ATTRIBUTES/VARIABLE_VALUE"
        )
        assert len(pairs) == 8
    with tb.open_bundle(BUNDLES / "partitioned") as bundle:
        assert bundle.object_graph() is None  # a TF1 Saver checkpoint has none


def test_partitioned_variable_is_reassembled_from_its_slices() -> None:
    with tb.open_bundle(BUNDLES / "partitioned") as bundle:
        entry = bundle.entry("part")
        assert entry.slices == (((0, 4), (0, 4)), ((4, 3), (0, 4)), ((7, 3), (0, 4)))
        assert bundle.read("part").shape == (10, 4)


def test_slice_key_encoding_matches_tensorflow() -> None:
    with tb.open_bundle(BUNDLES / "partitioned") as bundle:
        internal = sorted(k for k in bundle.keys() if k.startswith("\x00"))
        ours = sorted(
            tb.slice_key("part", tuple((s, n) for s, n in ext)) for ext in bundle.entry("part").slices
        )
        assert ours == internal


@pytest.mark.parametrize(
    "value", [0, 1, -1, 63, -64, 64, -65, 8191, -8192, 8192, 2**40, -(2**40), 2**63 - 1, -(2**63)]
)
def test_signed_ordered_encoding_sorts_like_the_numbers(value: int) -> None:
    neighbours = [value - 1, value, value + 1]
    neighbours = [v for v in neighbours if -(2**63) <= v < 2**63]
    encoded = [tb._ordered_signed(v) for v in neighbours]
    assert encoded == sorted(encoded)


# --- hostile bundles ----------------------------------------------------------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _block(entries: list[tuple[bytes, bytes]]) -> bytes:
    body = b"".join(_varint(0) + _varint(len(k)) + _varint(len(v)) + k + v for k, v in entries)
    return body + struct.pack("<II", 0, 1)


def _with_trailer(contents: bytes, compress=None) -> bytes:
    """A block as stored: its bytes (compressed by ``compress`` when given, type 1 = snappy), the
    compression type and the masked CRC-32C of both."""
    kind = b"\x00" if compress is None else b"\x01"
    stored = contents if compress is None else compress(contents)
    return stored + kind + struct.pack("<I", tb.mask_crc(tb.crc32c(stored + kind)))


def write_index(path: Path, entries: list[tuple[bytes, bytes]], per_block: int = 1000, compress=None) -> None:
    """A LevelDB-format table of sorted ``entries`` (a real footer; the data and index blocks
    compressed by ``compress`` when given: a snappy encoder)."""
    out = bytearray()
    index_entries = []
    for start in range(0, max(len(entries), 1), per_block):
        chunk = entries[start : start + per_block]
        if not chunk:
            break
        stored = _with_trailer(_block(chunk), compress)
        handle = _varint(len(out)) + _varint(len(stored) - 5)
        out += stored
        index_entries.append((chunk[-1][0], handle))
    meta = struct.pack("<II", 0, 1)  # an empty metaindex block: one restart, no entries
    meta_handle = _varint(len(out)) + _varint(len(meta))
    out += _with_trailer(meta)
    stored = _with_trailer(_block(index_entries), compress)
    index_handle = _varint(len(out)) + _varint(len(stored) - 5)
    out += stored
    footer = (meta_handle + index_handle).ljust(40, b"\x00") + struct.pack("<Q", 0xDB4775248B80FB57)
    path.write_bytes(bytes(out + footer))


def snappy_literals(data: bytes) -> bytes:
    """``data`` in the raw snappy format using literal elements only (valid snappy any decoder
    reads; written here so the tests need no compressor): the length, then literals of <= 65,536
    bytes, each tagged with its length - 1 in one (< 60) or two or three following bytes."""
    out = bytearray(_varint(len(data)))
    for start in range(0, len(data), 65536):
        chunk = data[start : start + 65536]
        n = len(chunk) - 1
        if n < 60:
            out.append(n << 2)
        elif n < 256:
            out += bytes([60 << 2, n])
        else:
            out += bytes([61 << 2]) + n.to_bytes(2, "little")
        out += chunk
    return bytes(out)


def _header(shards: int = 1) -> bytes:
    return pb.BundleHeaderProto(num_shards=shards).SerializeToString()


def _entry(shape: tuple[int, ...], *, dtype: int = 1, offset: int = 0, size: int | None = None,
           shard: int = 0, data: bytes = b"") -> bytes:  # fmt: skip
    proto = pb.BundleEntryProto(dtype=dtype, shard_id=shard, offset=offset)
    for dim in shape:
        proto.shape.dim.add(size=dim)
    proto.size = len(data) if size is None else size
    proto.crc32c = tb.mask_crc(tb.crc32c(data))
    return proto.SerializeToString()


def _bundle(tmp_path: Path, entries: dict[bytes, bytes], data: bytes = b"", shards: int = 1) -> Path:
    prefix = tmp_path / "ckpt"
    write_index(Path(f"{prefix}.index"), sorted({b"": _header(shards), **entries}.items()))
    Path(f"{prefix}.data-00000-of-{shards:05d}").write_bytes(data)
    return prefix


def test_the_test_writer_makes_bundles_the_reader_accepts(tmp_path: Path) -> None:
    data = np.arange(6, dtype="<f4").tobytes()
    prefix = _bundle(tmp_path, {b"w": _entry((2, 3), data=data)}, data)
    np.testing.assert_array_equal(tb.open_bundle(prefix).read("w"), np.arange(6, dtype="f4").reshape(2, 3))


def _copy(tmp_path: Path, name: str = "model_weights") -> Path:
    for path in BUNDLES.glob(f"{name}.*"):
        shutil.copy(path, tmp_path / path.name)
    return tmp_path / name


HOSTILE = {
    "shape disagrees with size": ({b"w": _entry((2, 3), size=8)}, FormatError, "needs 24 bytes"),
    "2**40-element shape": ({b"w": _entry((2**20, 2**20), size=8)}, FormatError, "needs"),
    "huge string shape": ({b"w": _entry((2**40,), dtype=7, size=10)}, FormatError, "string tensor"),
    "offset past shard end": ({b"w": _entry((4,), offset=1 << 40, size=16)}, FormatError, "runs past"),
    "shard out of range": ({b"w": _entry((1,), shard=7, size=4)}, FormatError, "shard 7"),
    "negative dimension": ({b"w": _entry((-1,), size=4)}, FormatError, "invalid shape"),
    "entry is not a protobuf": ({b"w": b"\xff\xff\xff\xff"}, FormatError, "not a valid protobuf"),
    "length-bombed entry": ({b"w": b"\x12\xff\xff\xff\xff\x0f"}, FormatError, "not a valid protobuf"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_entries_get_one_line_errors(tmp_path: Path, case: str) -> None:
    entries, error, words = HOSTILE[case]
    prefix = _bundle(tmp_path, entries, b"\x00" * 16)
    with pytest.raises(error, match=words) as info, tb.open_bundle(prefix) as bundle:
        bundle.read("w")
    assert "\n" not in str(info.value)


def test_missing_shard_is_named(tmp_path: Path) -> None:
    prefix = _copy(tmp_path)
    Path(f"{prefix}.data-00000-of-00001").unlink()
    with pytest.raises(FormatError, match=r"data-00000-of-00001: cannot open"):
        tb.open_bundle(prefix).read("layer_with_weights-0/bias/.ATTRIBUTES/VARIABLE_VALUE")


def test_corrupt_tensor_bytes_fail_their_crc(tmp_path: Path) -> None:
    prefix = _copy(tmp_path)
    shard = Path(f"{prefix}.data-00000-of-00001")
    bundle = tb.open_bundle(prefix)
    entry = bundle.entry("layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE")
    raw = bytearray(shard.read_bytes())
    raw[entry.offset + 5] ^= 0x10
    shard.write_bytes(bytes(raw))
    with pytest.raises(WeightsError, match="CRC-32C"):
        tb.open_bundle(prefix).read(entry.key)
    # the other tensors still read
    tb.open_bundle(prefix).read("layer_with_weights-0/bias/.ATTRIBUTES/VARIABLE_VALUE")


def test_corrupt_string_lengths_fail_their_crc(tmp_path: Path) -> None:
    prefix = _copy(tmp_path, "dtypes")
    shard = Path(f"{prefix}.data-00000-of-00001")
    entry = tb.open_bundle(prefix).entry("words/.ATTRIBUTES/VARIABLE_VALUE")
    raw = bytearray(shard.read_bytes())
    raw[entry.offset + entry.size - 1] ^= 0x01  # last byte of the last string
    shard.write_bytes(bytes(raw))
    with pytest.raises(WeightsError, match="CRC-32C"):
        tb.open_bundle(prefix).read(entry.key)


@pytest.mark.parametrize("cut", [0, 10, 47, -1, -49])
def test_truncated_index_is_refused(tmp_path: Path, cut: int) -> None:
    prefix = _copy(tmp_path)
    index = Path(f"{prefix}.index")
    raw = index.read_bytes()
    index.write_bytes(raw[:cut] if cut >= 0 else raw[:cut])
    with pytest.raises(FormatError):
        tb.open_bundle(prefix)


def test_flipped_index_byte_fails_the_block_crc(tmp_path: Path) -> None:
    prefix = _copy(tmp_path)
    index = Path(f"{prefix}.index")
    raw = bytearray(index.read_bytes())
    raw[20] ^= 0x01
    index.write_bytes(bytes(raw))
    with pytest.raises(FormatError, match="CRC-32C"):
        tb.open_bundle(prefix)


def test_absurd_shard_count_and_missing_header(tmp_path: Path) -> None:
    prefix = tmp_path / "ckpt"
    write_index(Path(f"{prefix}.index"), [(b"", _header(10**9))])
    with pytest.raises(FormatError, match="data shards"):
        tb.open_bundle(prefix)
    write_index(Path(f"{prefix}.index"), [(b"w", _entry((1,), size=4))])
    with pytest.raises(FormatError, match="no bundle header"):
        tb.open_bundle(prefix)


def test_200000_entries_open_in_bounded_time(tmp_path: Path) -> None:
    data = np.zeros(1, "<f4").tobytes()
    value = _entry((1,), data=data)
    entries = [(b"", _header())] + [(f"v{i:07d}".encode(), value) for i in range(200_000)]
    prefix = tmp_path / "ckpt"
    write_index(Path(f"{prefix}.index"), entries)
    Path(f"{prefix}.data-00000-of-00001").write_bytes(data)
    start = time.process_time()
    bundle = tb.open_bundle(prefix)
    assert len(bundle.keys()) == 200_000
    assert bundle.read("v0199999").tolist() == [0.0]
    assert time.process_time() - start < 60  # a generous bound against quadratic work, not a benchmark


def test_unsorted_keys_are_refused(tmp_path: Path) -> None:
    prefix = tmp_path / "ckpt"
    write_index(Path(f"{prefix}.index"), [(b"", _header()), (b"b", _entry((0,))), (b"a", _entry((0,)))])
    with pytest.raises(FormatError, match="out of order"):
        tb.open_bundle(prefix)


def test_a_shard_symlinked_outside_the_folder_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    model = tmp_path / "model"
    model.mkdir()
    prefix = _copy(model)
    shard = Path(f"{prefix}.data-00000-of-00001")
    target = outside / shard.name
    shard.rename(target)
    shard.symlink_to(target)
    with pytest.raises(SecurityError, match="outside the model folder"):
        tb.open_bundle(prefix).read("layer_with_weights-0/bias/.ATTRIBUTES/VARIABLE_VALUE")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_shard_is_refused_without_blocking(tmp_path: Path) -> None:
    prefix = _copy(tmp_path)
    shard = Path(f"{prefix}.data-00000-of-00001")
    shard.unlink()
    os.mkfifo(shard)
    with pytest.raises(FormatError, match="FIFO"):
        tb.open_bundle(prefix).read("layer_with_weights-0/bias/.ATTRIBUTES/VARIABLE_VALUE")


def test_every_error_is_a_load_error() -> None:
    assert all(issubclass(e, LoadError) for _, e, _ in HOSTILE.values())


# --- snappy-compressed blocks -------------------------------------------------------------------
# TensorFlow writes bundle indexes uncompressed, but the table format allows snappy blocks (type 1);
# these copies of TF-written checkpoints have their index rewritten with compressed blocks.

SAVEDMODEL_SAMPLES = BUNDLES.parent / "savedmodel"
NEEDS_CRAMJAM = "reading snappy blocks needs cramjam (pip install 'modelgraph[snappy]')"


def _snappy_copy(folder: Path, source: Path, compress=snappy_literals) -> Path:
    """``source``'s checkpoint copied into ``folder``, its index rewritten with compressed blocks."""
    for path in source.parent.glob(f"{source.name}.*"):
        shutil.copy(path, folder / path.name)
    entries = list(tb.read_table(Path(f"{source}.index").read_bytes(), str(source)))
    prefix = folder / source.name
    write_index(Path(f"{prefix}.index"), entries, per_block=3, compress=compress)
    return prefix


def _cramjam_compress(data: bytes) -> bytes:
    import cramjam

    return bytes(cramjam.snappy.compress_raw(data))


@pytest.mark.parametrize("compress", [snappy_literals, _cramjam_compress], ids=["literals", "cramjam"])
def test_snappy_compressed_index_reads_like_the_uncompressed_one(tmp_path: Path, compress) -> None:
    pytest.importorskip("cramjam", reason=NEEDS_CRAMJAM)
    prefix = _snappy_copy(tmp_path, BUNDLES / "model_weights", compress)
    with tb.open_bundle(BUNDLES / "model_weights") as want, tb.open_bundle(prefix) as got:
        assert got.keys() == want.keys() and len(want.keys()) > 3  # more than one data block
        for key in want.keys():
            np.testing.assert_array_equal(got.read(key), want.read(key), err_msg=key)


def test_snappy_block_without_cramjam_names_the_extra(tmp_path: Path, monkeypatch) -> None:
    from click.testing import CliRunner

    from modelgraph.cli.main import cli
    from modelgraph.errors import ToolMissingError

    prefix = _snappy_copy(tmp_path, SAVEDMODEL_SAMPLES / "ckpt" / "seq_mlp")
    monkeypatch.setitem(sys.modules, "cramjam", None)  # import cramjam raises ImportError
    with pytest.raises(
        ToolMissingError, match=r"snappy-compressed blocks.*pip install 'modelgraph\[snappy\]'"
    ):
        tb.open_bundle(prefix)
    weights = ["--weights", str(prefix)]
    for command in ("inspect", "run"):
        result = CliRunner().invoke(cli, [command, str(SAVEDMODEL_SAMPLES / "seq_mlp.json"), *weights])
        assert result.exit_code == 4, (command, result.output)
        assert len(result.output.strip().splitlines()) == 1 and "modelgraph[snappy]" in result.output
    # validate reports it as an unreadable-weights finding and checks the rest
    result = CliRunner().invoke(cli, ["validate", str(SAVEDMODEL_SAMPLES / "seq_mlp.json"), *weights])
    assert result.exit_code == 1 and "WGT009" in result.output and "modelgraph[snappy]" in result.output
    assert "bug" not in result.output and "Traceback" not in result.output


def test_snappy_weights_attach_and_run_like_tensorflows(tmp_path: Path) -> None:
    pytest.importorskip("cramjam", reason=NEEDS_CRAMJAM)
    import modelgraph

    prefix = _snappy_copy(tmp_path, SAVEDMODEL_SAMPLES / "ckpt" / "seq_mlp", _cramjam_compress)
    graph = modelgraph.load(SAVEDMODEL_SAMPLES / "seq_mlp.json", weights=prefix)
    golden = np.load(SAVEDMODEL_SAMPLES / "goldens" / "seq_mlp.npz")
    (out,) = modelgraph.Runner(graph).run({"x": golden["input/x"]}).values()
    np.testing.assert_allclose(out, golden["output/0"], atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize(
    "stored, error, message",
    [
        (_varint(2**40) + b"\x00", SecurityError, "claims 1,099,511,627,776 bytes"),
        (_varint(50) + b"\x04abc", FormatError, "does not decompress"),
        (b"\xff" * 12, FormatError, "varint"),
    ],
    ids=["length-bomb", "short-literal", "bad-length"],
)
def test_hostile_snappy_blocks_get_one_line_errors(tmp_path: Path, stored: bytes, error, message) -> None:
    pytest.importorskip("cramjam", reason=NEEDS_CRAMJAM)
    prefix = tmp_path / "ckpt"
    write_index(Path(f"{prefix}.index"), [(b"", _header())], compress=lambda _: stored)
    with pytest.raises(error, match=message):
        tb.open_bundle(prefix)
