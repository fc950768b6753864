"""Tell a model file's format from its content, never from its extension."""

from __future__ import annotations

import json
import os
import re
import struct
from pathlib import Path
from typing import Any, Literal

from modelgraph.errors import FormatError, SecurityError, UnsupportedFormatError

Format = Literal[
    "keras_zip",  # Keras 3 / tf.keras 2.13+ .keras zip
    "keras_dir",  # the same three files unzipped in a directory
    "legacy_h5",  # full-model HDF5 with a model_config attribute
    "legacy_weights_h5",  # save_weights('x.h5'): layer_names, no model_config
    "keras3_weights_h5",  # Keras 3 save_weights: layers/ and vars/ groups, no root attributes
    "keras3_sharded_weights",  # <name>.weights.json + shards
    "json_config",  # model.to_json() / get_config()
    "tfjs_layers",  # TF.js layers model.json + shards
    "savedmodel",  # tf.keras SavedModel directory with Keras metadata
    "tf_checkpoint",  # TensorFlow checkpoint (tensor bundle): prefix.index + prefix.data-*
]

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
ZIP_SIGNATURE = b"PK\x03\x04"
_JSON_PROBE = 1 << 16
# Files people mistake for models (a renamed download, an image), told by their first bytes.
_OTHER_FORMATS: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"%PDF-", "a PDF document"),
    (b"\x1f\x8b", "a gzip file"),
    (b"BZh", "a bzip2 file"),
    (b"\xfd7zXZ\x00", "an xz file"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"\x7fELF", "an ELF executable"),
    (b"MZ", "a Windows executable"),
    (b"\x93NUMPY", "a NumPy .npy array"),
    (b"\x80", "a Python pickle (never loaded)"),
    (b"GGUF", "a GGUF model (llama.cpp)"),
    (b"<", "an HTML or XML document"),
)


def detect(path: str | Path) -> Format:
    """The format of a file or directory, by content; FormatError/UnsupportedFormatError otherwise."""
    p = Path(path)
    if not p.exists():
        if os.path.lexists(f"{p}.index"):  # a TensorFlow checkpoint named by its prefix
            return "tf_checkpoint"
        raise FormatError(f"{p}: no such file or directory")
    if p.is_dir():
        return _detect_dir(p)
    shard = re.fullmatch(r"(.+)\.data-\d{5}-of-\d{5}", p.name)
    if shard is not None and os.path.lexists(p.with_name(f"{shard.group(1)}.index")):
        return "tf_checkpoint"  # a data shard of a checkpoint: its index says what it holds
    if p.name in ("saved_model.pb", "keras_metadata.pb") and _has(p.parent, "saved_model.pb"):
        return _detect_dir(p.parent)
    from modelgraph import safe_io

    with safe_io.open_file(p) as fh:
        head = fh.read(8)
        is_zip = head.startswith(ZIP_SIGNATURE) or has_zip_directory(fh)
        if is_zip:
            _refuse_foreign_zip(fh, p)
        is_h5 = is_hdf5(fh, head)
        if is_zip and is_h5 and is_polyglot(fh, head, p):
            raise SecurityError(
                f"{p}: both a zip (.keras) and an HDF5 file: a polyglot Keras reads as one or the "
                "other depending on its extension; refusing it (validate scans both parts)"
            )
        if is_zip:
            return "keras_zip"
        if is_h5:
            return _detect_h5(p)
        if is_leveldb_table(fh):
            return "tf_checkpoint"
        fh.seek(0)
        probe = fh.read(_JSON_PROBE)
    text = probe.lstrip()
    if text.startswith(b"{"):
        return _detect_json(p, probe)
    if not head:
        raise FormatError(f"{p}: the file is empty")
    foreign = foreign_format(probe)
    if foreign is not None:
        raise FormatError(f"{p}: {foreign}, not a Keras model")
    if p.name.endswith(".pb"):
        raise FormatError(
            f"{p}: a protobuf file outside a SavedModel directory (no saved_model.pb beside it); "
            "give the SavedModel's directory"
        )
    raise FormatError(f"{p}: not a Keras model (no zip, HDF5 or JSON signature; starts with {head[:8]!r})")


def has_zip_directory(fh: Any) -> bool:
    """Whether the file ends with a zip's central directory whose first member's local header is
    where it says: a zip appended to another file (zipfile and so Keras read such a file as a zip)."""
    import zipfile

    try:
        with zipfile.ZipFile(fh) as zf:
            infos = zf.infolist()
            if not infos:
                return False
            fp = zf.fp
            assert fp is not None
            fp.seek(infos[0].header_offset)
            return fp.read(4) == ZIP_SIGNATURE
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, OverflowError, struct.error, AssertionError):
        return False
    finally:
        fh.seek(0)


def is_hdf5(fh: Any, head: bytes) -> bool:
    """Whether an open file is HDF5: the signature at 0, or after a user block (512, 1024, ... 1 MiB)."""
    return hdf5_offset(fh, head) is not None


def hdf5_offset(fh: Any, head: bytes) -> int | None:
    """Where the HDF5 library finds a superblock in an open file: 0, or after a user block (512,
    1024, 2048, ... 1 MiB); None when it finds none."""
    if head == HDF5_SIGNATURE:
        return 0
    offset = 512
    while offset <= 1 << 20:
        fh.seek(offset)
        if fh.read(8) == HDF5_SIGNATURE:
            return offset
        offset *= 2
    return None


def is_polyglot(fh: Any, head: bytes, path: str | Path) -> bool:
    """Whether a file that is a zip and has an HDF5 superblock is a polyglot: one that Keras would
    read as a different model by its extension.

    A genuine ``.keras`` stores ``model.weights.h5`` uncompressed, so its bytes can start at 512,
    1024, ... where the HDF5 library looks for a superblock: read as HDF5 such a file is that weights
    file, which holds no model (no ``model_config``). Anything else (a superblock that is not the
    start of that member, or one whose root names a model) is a polyglot (docs/containers.md).
    """
    offset = hdf5_offset(fh, head)
    try:
        if offset is None or offset != _stored_member_start(fh, "model.weights.h5"):
            return True
        from modelgraph import safe_io

        with safe_io.open_h5(path) as f:
            return "model_config" in f.attrs
    except Exception:  # noqa: BLE001 - whatever fails to read as the weights member is suspect
        return True
    finally:
        fh.seek(0)


def _stored_member_start(fh: Any, name: str) -> int | None:
    """The offset of the data of an uncompressed zip member ``name``, or None."""
    import zipfile

    fh.seek(0)
    with zipfile.ZipFile(fh) as zf:
        try:
            info = zf.getinfo(name)
        except KeyError:
            return None
        if info.compress_type != zipfile.ZIP_STORED:
            return None
        fh.seek(info.header_offset)
        local = fh.read(30)
        if local[:4] != ZIP_SIGNATURE:
            return None
        name_len, extra_len = struct.unpack("<HH", local[26:30])
        return info.header_offset + 30 + name_len + extra_len


def _detect_dir(p: Path) -> Format:
    # By name only (lexists): a member that is a FIFO, a directory or a symlink is refused by the
    # loader, which opens members with safe_io.open_file, instead of making the folder "not a model".
    if _has(p, "config.json") and (_has(p, "model.weights.h5") or _has(p, "metadata.json")):
        return "keras_dir"
    if _has(p, "saved_model.pb"):
        return _detect_savedmodel(p)
    if _has(p, "model.json"):
        return "tfjs_layers"
    if _has(p, "checkpoint") or any(_has(p, n) for n in ("variables.index",)):
        return "tf_checkpoint"
    raise FormatError(
        f"{p}: a directory without config.json (Keras), saved_model.pb (SavedModel), model.json (TF.js) "
        "or a TensorFlow checkpoint file"
    )


def _detect_savedmodel(p: Path) -> Format:
    """A SavedModel directory is a Keras model when it carries Keras metadata: ``keras_metadata.pb``
    (tf.keras 2.4+) or, in older ones, Keras objects with metadata in ``saved_model.pb``'s object
    graph. One whose ``saved_model.pb`` cannot be decoded is still a SavedModel (the loader refuses
    it with the reason, and validate reports it as one model)."""
    if _has(p, "keras_metadata.pb"):
        return "savedmodel"
    from modelgraph.loading.saved_object_graph import (
        NO_KERAS_METADATA,
        has_legacy_metadata,
        read_object_graph,
    )

    try:
        graph = read_object_graph(p)
    except FormatError:
        return "savedmodel"  # saved_model.pb is unreadable: loading it names what is wrong
    if has_legacy_metadata(graph):
        return "savedmodel"
    raise UnsupportedFormatError(NO_KERAS_METADATA.format(folder=p))


# The LevelDB table footer's magic number, last 8 bytes of a tensor bundle's .index file.
LEVELDB_MAGIC = (0xDB4775248B80FB57).to_bytes(8, "little")
_ONNX_MODEL_TAGS = frozenset(b"\x12\x1a\x22\x28\x32\x3a\x42\x72")


def is_leveldb_table(fh: Any) -> bool:
    """Whether an open file ends with a LevelDB table footer (a tensor bundle ``.index``)."""
    try:
        size = fh.seek(0, os.SEEK_END)
        if size < 48:
            return False
        fh.seek(size - 8)
        return bool(fh.read(8) == LEVELDB_MAGIC)
    finally:
        fh.seek(0)


def foreign_format(probe: bytes) -> str | None:
    """What a file of another ML format is (from its first bytes), for a refusal that names it."""
    for magic, what in _OTHER_FORMATS:
        if probe.startswith(magic):
            return what
    if probe[4:8] == b"TFL3":
        return "a TensorFlow Lite flatbuffer"
    if len(probe) >= 10 and probe[8:10] == b'{"':
        return "a SafeTensors file (modelgraph reads Keras files)"
    if len(probe) >= 3 and probe[0] == 0x08:
        if probe[1] == 0x01 and probe[2] == 0x12:
            return (
                "a TensorFlow SavedModel protobuf (saved_model.pb) outside its directory; give the directory"
            )
        if 3 <= probe[1] <= 15 and probe[2] in _ONNX_MODEL_TAGS:
            return "an ONNX model"
    return None


def _refuse_foreign_zip(fh: Any, p: Path) -> None:
    """A zip that is another framework's model (PyTorch, TorchScript, NumPy .npz) is named as such."""
    import zipfile

    try:
        with zipfile.ZipFile(fh) as zf:
            names = zf.namelist()[:100_000]
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, OverflowError, struct.error):
        return
    finally:
        fh.seek(0)
    if "config.json" in names:
        return
    leaves = {n.rsplit("/", 1)[-1] for n in names}
    if "data.pkl" in leaves or "constants.pkl" in leaves:
        raise FormatError(
            f"{p}: a PyTorch checkpoint (a zip with data.pkl; never unpickled), not a Keras model"
        )
    if names and all(n.endswith(".npy") for n in names):
        raise FormatError(f"{p}: a NumPy .npz archive, not a Keras model")


def _has(folder: Path, name: str) -> bool:
    return os.path.lexists(folder / name)


def _detect_h5(p: Path) -> Format:
    from modelgraph import safe_io

    f = safe_io.open_h5(p)
    try:
        attrs = set(f.attrs.keys())
        keys = set(f.keys())
    except safe_io.H5_ERRORS as exc:
        raise FormatError(f"{p}: unreadable HDF5 file ({exc})") from None
    finally:
        f.close()
    if "model_config" in attrs:
        return "legacy_h5"
    if "layer_names" in attrs or any(a.startswith("layer_names") for a in attrs) or "nb_layers" in attrs:
        return "legacy_weights_h5"
    if "layers" in keys or "vars" in keys or "_layer_checkpoint_dependencies" in keys:
        return "keras3_weights_h5"
    raise FormatError(f"{p}: an HDF5 file with neither a model_config nor a Keras weights layout")


def _detect_json(p: Path, probe: bytes) -> Format:
    try:
        head = probe.decode("utf-8", errors="replace")
    except Exception:  # pragma: no cover - decode with errors="replace" cannot fail
        head = ""
    if '"layers-model"' in head or '"modelTopology"' in head or '"weightsManifest"' in head:
        return "tfjs_layers"
    if '"weight_map"' in head:
        return "keras3_sharded_weights"
    if len(probe) < _JSON_PROBE:
        try:
            doc = json.loads(probe)
        except ValueError:
            return "json_config"  # let the reader report the JSON error with its position
        if isinstance(doc, dict) and doc.get("format") == "layers-model":
            return "tfjs_layers"
        if isinstance(doc, dict) and "weight_map" in doc:
            return "keras3_sharded_weights"
    return "json_config"
