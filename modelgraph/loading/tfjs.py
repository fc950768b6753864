"""TensorFlow.js layers models: ``model.json`` plus ``groupN-shardKofM.bin`` weight shards."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from modelgraph import safe_io
from modelgraph.errors import ConfigError, FormatError, SecurityError
from modelgraph.graph import ModelGraph
from modelgraph.loading.envelope import model_envelope
from modelgraph.loading.files import read_json_file
from modelgraph.loading.normalize import build_graph
from modelgraph.loading.weights import StoredArray, bind_named

_DTYPES = {
    "float32": "<f4",
    "int32": "<i4",
    "bool": "|b1",
    "uint8": "|u1",
    "uint16": "<u2",
    "float16": "<f2",
    "int8": "|i1",
}


def load_tfjs(path: Path, problems: list | None = None) -> ModelGraph:
    """Read a TF.js layers model (``path`` is model.json or its directory)."""
    model_json = path / "model.json" if path.is_dir() else path
    doc = read_json_file(model_json, within=path if path.is_dir() else None)
    if not isinstance(doc, Mapping) or not isinstance(doc.get("modelTopology"), Mapping):
        raise ConfigError("a TF.js model.json needs a 'modelTopology' object", "$.modelTopology")
    config, where = model_envelope(doc, "tfjs_layers") or (None, "$.modelTopology")
    graph = build_graph(
        config,
        keras_version=doc["modelTopology"].get("keras_version"),
        format="tfjs_layers",
        source=str(model_json),
        path=where,
        problems=problems,
    )
    manifest = doc.get("weightsManifest") or []
    arrays = list(_manifest_arrays(manifest, model_json.parent))
    graph, notes = bind_named(graph, ((None, a) for a in arrays))
    info = {
        "generatedBy": doc.get("generatedBy"),
        "convertedBy": doc.get("convertedBy"),
        "weight_notes": notes,
        "stored_bytes_by_dtype": _stored_bytes(manifest),
    }
    return replace(graph, metadata=MappingProxyType(info))


def _stored_bytes(manifest: list[Any]) -> dict[str, int]:
    """Bytes the shards hold per stored dtype (uint8/uint16/float16 when quantized), from a manifest
    that :func:`_manifest_arrays` has already checked; ``inspect`` shows it beside the dequantized size."""
    by_dtype: dict[str, int] = {}
    for group in manifest:
        for entry in group.get("weights") or []:
            quant = entry.get("quantization")
            stored = quant["dtype"] if isinstance(quant, Mapping) else entry.get("dtype", "float32")
            size = math.prod(entry["shape"]) * np.dtype(_DTYPES[stored]).itemsize
            by_dtype[stored] = by_dtype.get(stored, 0) + size
    return by_dtype


def _manifest_arrays(manifest: Any, folder: Path) -> list[StoredArray]:
    if not isinstance(manifest, list):
        raise ConfigError("weightsManifest must be a list", "$.weightsManifest")
    result: list[StoredArray] = []
    for g, group in enumerate(manifest):
        where = f"$.weightsManifest[{g}]"
        if not isinstance(group, Mapping) or not isinstance(group.get("paths"), list):
            raise ConfigError("a manifest group needs 'paths' and 'weights'", where)
        shard_paths = []
        for name in group["paths"]:
            shard = (folder / str(name)).resolve()
            if folder.resolve() not in shard.parents:
                raise SecurityError(f"{where}.paths: shard '{name}' points outside the model folder")
            if not os.path.lexists(shard):
                raise FormatError(f"{where}.paths: shard file '{name}' is missing")
            safe_io.open_file(shard, within=folder).close()  # a regular file inside the folder
            shard_paths.append(shard)
        total = sum(p.stat().st_size for p in shard_paths)
        offset = 0
        entries = group.get("weights") or []
        if not isinstance(entries, list):
            raise ConfigError("'weights' must be a list", f"{where}.weights")
        for w, entry in enumerate(entries):
            array, size = _describe(entry, f"{where}.weights[{w}]", shard_paths, offset)
            if offset + size > total:
                raise FormatError(
                    f"{where}.weights[{w}] '{entry.get('name')}': the shards hold {total} bytes, the manifest needs {offset + size}"
                )
            result.append(array)
            offset += size
    return result


def _describe(entry: Any, where: str, shards: list[Path], offset: int) -> tuple[StoredArray, int]:
    if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
        raise ConfigError("a manifest weight needs 'name', 'shape' and 'dtype'", where)
    shape = entry.get("shape")
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        raise ConfigError(f"bad shape {shape!r}", where)
    dtype = _dtype_name(entry.get("dtype", "float32"), _DTYPES, f"{where}.dtype")
    quant = entry.get("quantization")
    if quant is not None:
        quant = _quantization(quant, f"{where}.quantization", dtype)
    stored_dtype = quant["dtype"] if quant else dtype
    out_dtype = quant["original_dtype"] if quant else dtype
    count = math.prod(shape)
    size = count * np.dtype(_DTYPES[stored_dtype]).itemsize

    def reader() -> np.ndarray:
        raw = _read_span(shards, offset, size)
        values = np.frombuffer(raw, dtype=_DTYPES[stored_dtype]).reshape(shape)
        if quant and stored_dtype in ("uint8", "uint16"):
            # An absurd (finite) scale overflows float32 to inf, as TF.js itself would compute it;
            # validate's value scan reports the infinities, so NumPy's warning is not printed.
            with np.errstate(over="ignore", invalid="ignore"):
                return (values.astype(np.float32) * quant["scale"] + quant["min"]).astype(out_dtype)
        if quant and stored_dtype == "float16":
            return values.astype(np.float32)
        return values.copy()

    return StoredArray(
        entry["name"], tuple(shape), str(np.dtype(out_dtype)), f"{shards[0].name}+{offset}", reader
    ), size


def _dtype_name(value: Any, allowed: Mapping[str, str] | frozenset[str], where: str) -> str:
    """``value`` when it names one of the ``allowed`` dtypes, else a :class:`ConfigError`."""
    if not isinstance(value, str) or value not in allowed:
        raise ConfigError(f"unsupported weight dtype {value!r}", where)
    return value


# How TF.js stores a quantized weight: affine uint8/uint16 (value = q * scale + min), or float16.
_QUANTIZED = frozenset({"uint8", "uint16", "float16"})


def _quantization(quant: Any, where: str, dtype: str) -> dict[str, Any]:
    """A manifest entry's ``quantization`` checked: its stored ``dtype``, the ``original_dtype`` it
    decodes to (default: the entry's ``dtype``) and, for uint8/uint16, finite ``scale`` and ``min``."""
    if not isinstance(quant, Mapping):
        raise ConfigError(f"'quantization' must be an object, not {quant!r}", where)
    checked: dict[str, Any] = {
        "dtype": _dtype_name(quant.get("dtype"), _QUANTIZED, f"{where}.dtype"),
        "original_dtype": _dtype_name(quant.get("original_dtype", dtype), _DTYPES, f"{where}.original_dtype"),
    }
    for key, default in (("scale", 1.0), ("min", 0.0)):
        value = quant.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"'{key}' must be a finite number, not {value!r}", where)
        checked[key] = np.float32(value)
    return checked


def _read_span(shards: list[Path], offset: int, size: int) -> bytes:
    """Bytes [offset, offset+size) of the shards concatenated."""
    out = bytearray()
    position = 0
    for shard in shards:
        length = shard.stat().st_size
        if offset < position + length and offset + size > position:
            start = max(offset - position, 0)
            with safe_io.open_file(shard, within=shard.parent) as fh:
                fh.seek(start)
                out += fh.read(min(length - start, offset + size - position - start))
        position += length
    return bytes(out)
