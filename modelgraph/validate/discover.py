"""Find the models under some paths, lazily and by content.

A folder walk yields :class:`Target` objects one at a time (a generator: a registry of a million files
is never listed in memory; only one folder's entries are held while it is looked at). What is a
model is decided by each file's bytes, not its name:

- a zip whose central directory names ``config.json`` (a ``.keras``), any HDF5 file, a JSON file that
  looks like a Keras config, a TF.js ``model.json`` or a sharded-weights index;
- ``.keras``/``.h5``/``.hdf5`` files are checked whatever their content (a corrupt one is a finding);
- a directory that :func:`modelgraph.loading.detect.detect` recognises as one model (an unzipped
  ``.keras``, a TF.js folder, and any directory format the loaders learn later) is one target and is
  not walked further; a folder holding a ``model.json`` that is a ``to_json()`` config, not TF.js, is
  an ordinary folder;
- a config-only JSON (``to_json()``) and a weights-only file of the same folder are one target when
  their names belong together (``m.json`` with ``m.h5``, ``m_weights.h5``, ``m.weights.h5``, or the
  folder's only config and only weights file); a TensorFlow checkpoint (``m.index`` with its
  ``m.data-*`` shards, as ``save_weights`` wrote it in the TensorFlow format) pairs the same way
  (``m.json`` with ``m.index``, ``m.ckpt.index``, ``m_weights.index``, ``m.weights.index``), and its
  data shards go with its index rather than being listed as unrecognised;
- shards named by a sharded-weights index are checked through the index.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from modelgraph.errors import UsageError

SUFFIXES = (".keras", ".h5", ".hdf5")
_JSON_MARKERS = (b'"class_name"', b'"modelTopology"', b'"weight_map"', b'"layers"')
_HEAD = 1 << 16
_WEIGHTS_ONLY = ("legacy_weights_h5", "keras3_weights_h5")
# Directory formats that hold weights only (a TensorFlow checkpoint folder, once detect knows it).
_WEIGHTS_ONLY_DIRS = ("tf_checkpoint",)
_MAX_UNNAMED = 8  # HDF5 files opened to find the weights of a folder's only config


@dataclass(frozen=True)
class Target:
    """One model to check: a file or a model directory, and the weights file that goes with it."""

    path: str
    weights: str | None = None


def model_dir_format(p: Path) -> str | None:
    """The format of directory ``p`` when it is one model (the loaders' own detection decides, so a
    directory format added to ``detect`` is picked up here), else None. A format detect knows but
    cannot read (out of scope) still makes the directory one model: its finding says why."""
    from modelgraph.errors import FormatError, ModelGraphError
    from modelgraph.loading.detect import detect

    try:
        fmt = detect(p)
    except FormatError:
        return None
    except ModelGraphError:  # recognised, unsupported or refused: one model with a finding
        return "unsupported"
    except OSError:
        return None
    if fmt == "tfjs_layers" and not _is_tfjs_json(p / "model.json"):
        return None  # a folder that holds a to_json() config named model.json: walk it
    if fmt in _WEIGHTS_ONLY_DIRS:
        return None  # a folder of checkpoint files may hold models too: walk it
    return fmt


def _is_tfjs_json(p: Path) -> bool:
    if not p.is_file():
        return os.path.lexists(p)  # a FIFO or a dangling link: the loader refuses it as a finding
    head = _head(p)
    if head is None:
        return True
    return any(m in head for m in (b'"modelTopology"', b'"weightsManifest"', b'"layers-model"'))


def _head(p: Path) -> bytes | None:
    from modelgraph import safe_io
    from modelgraph.errors import LoadError

    try:
        with safe_io.open_file(p) as fh:  # a FIFO in the folder must not block the walk
            return fh.read(_HEAD)
    except (OSError, LoadError):
        return None


def file_kind(p: Path) -> str | None:
    """What a regular file is by its content: ``zip``, ``hdf5``, ``json`` (a Keras config), ``tfjs``
    (a TF.js ``model.json``), ``index`` (a sharded-weights index), ``checkpoint`` (a TensorFlow
    checkpoint's ``.index``), ``checkpoint_data`` (a data shard of a checkpoint whose ``.index`` is
    beside it, or TensorFlow's ``checkpoint`` state file), ``other`` (a ``.keras``/``.h5``/``.hdf5`` whose content is none of these: still
    checked), or None when it is not a model."""
    from modelgraph.loading.detect import HDF5_SIGNATURE, ZIP_SIGNATURE

    if _CHECKPOINT_SHARD.fullmatch(p.name) and (p.parent / f"{checkpoint_prefix_of(p)}.index").is_file():
        return "checkpoint_data"
    head = _head(p)
    if p.name == "checkpoint" and head is not None and head.startswith(b"model_checkpoint_path"):
        return "checkpoint_data"  # TensorFlow's note of the latest checkpoint in this folder
    by_name = p.suffix.lower() in SUFFIXES
    if head is None:
        return "other" if by_name else None
    if head.startswith(ZIP_SIGNATURE):
        return "zip" if by_name or _zip_has_config(p) else None
    if head.startswith(HDF5_SIGNATURE) or _hdf5_user_block(p):
        return "hdf5"
    if p.suffix == ".index" and _is_tensor_bundle_index(p):
        return "checkpoint"
    if head.lstrip().startswith(b"{") and any(m in head for m in _JSON_MARKERS):
        if any(m in head for m in (b'"modelTopology"', b'"weightsManifest"', b'"layers-model"')):
            return "tfjs"
        return "index" if b'"weight_map"' in head else "json"
    return "other" if by_name else None


_CHECKPOINT_SHARD = re.compile(r"(.+)\.data-\d{5}-of-\d{5}")


def checkpoint_prefix_of(p: Path) -> str:
    """The checkpoint prefix (a name, no folder) of a ``.index`` file or of one of its data shards."""
    shard = _CHECKPOINT_SHARD.fullmatch(p.name)
    if shard is not None:
        return shard.group(1)
    return p.name[: -len(".index")] if p.name.endswith(".index") else p.name


def _is_tensor_bundle_index(p: Path) -> bool:
    from modelgraph import safe_io
    from modelgraph.errors import LoadError
    from modelgraph.loading.detect import is_leveldb_table

    try:
        with safe_io.open_file(p) as fh:
            return is_leveldb_table(fh)
    except (OSError, LoadError):
        return False


def _zip_has_config(p: Path) -> bool:
    import zipfile

    try:
        with zipfile.ZipFile(p) as zf:
            return "config.json" in zf.namelist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, OverflowError):
        return False


def _hdf5_user_block(p: Path) -> bool:
    from modelgraph import safe_io
    from modelgraph.errors import LoadError
    from modelgraph.loading.detect import hdf5_offset

    try:
        with safe_io.open_file(p) as fh:
            return hdf5_offset(fh, fh.read(8)) not in (None, 0)
    except (OSError, LoadError):
        return False


def iter_targets(
    paths: Iterable[str | os.PathLike[str]],
    *,
    models_only: bool = False,
    skipped: Callable[[str], None] | None = None,
) -> Iterator[Target]:
    """The models under ``paths``, one at a time (see the module docstring). A file given by name is
    a target as given (``models_only``: unless it is not a model); a folder is walked in sorted order,
    without following symlinks, skipping hidden entries and ``__pycache__``. Each file of a walked
    folder (or, with ``models_only``, each given file) that is not a model is passed to ``skipped``.
    ``UsageError`` for a path that does not exist."""
    for raw in paths:
        p = Path(raw)
        if not p.exists() and not p.is_symlink():
            raise UsageError(f"no such file or directory: {raw}")
        if not p.is_dir():
            if models_only and file_kind(p) is None:
                if skipped is not None:
                    skipped(str(p))
                continue
            yield Target(str(p))
        elif model_dir_format(p) is not None:
            yield Target(str(p))
        else:
            yield from _walk(p, skipped)


def _walk(top: Path, skipped: Callable[[str], None] | None) -> Iterator[Target]:
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue  # unreadable folder: nothing to check in it
        subdirs: list[Path] = []
        files: list[Path] = []
        for e in entries:
            if e.name.startswith(".") or e.is_symlink():
                continue
            if e.is_dir(follow_symlinks=False):
                if e.name != "__pycache__":
                    subdirs.append(Path(e.path))
            else:
                files.append(Path(e.path))
        walk: list[Path] = []
        for sub in subdirs:
            if model_dir_format(sub) is not None:
                yield Target(str(sub))
            else:
                walk.append(sub)
        yield from _folder_targets(files, skipped)
        # depth-first in sorted order: push in reverse so the first name is walked first
        stack.extend(reversed(walk))


def _folder_targets(files: list[Path], skipped: Callable[[str], None] | None) -> Iterator[Target]:
    """The targets among one folder's files: JSON configs paired with their weights files, shards
    of an index left to the index, everything else on its own. Each file's first bytes decide what
    it is; an HDF5 file is opened only when it may be a config's weights file."""
    kinds: dict[Path, str] = {}
    for f in files:
        kind = file_kind(f)
        if kind is None:
            if skipped is not None:
                skipped(str(f))
        else:
            kinds[f] = kind
    shards: set[Path] = set()
    for f, kind in kinds.items():
        if kind == "index":
            shards |= {Path(s) for s in index_shards(f)}
    configs = [f for f, kind in kinds.items() if kind == "json"]
    hdf5 = [f for f, kind in kinds.items() if kind == "hdf5" and f not in shards]
    # A full model (``model_config``) is never taken as a config's weights.
    pairs = _pairs(configs, hdf5, _HDF5_WEIGHTS_NAMES, _weights_only) if configs and hdf5 else {}
    checkpoints = [f for f, kind in kinds.items() if kind == "checkpoint"]
    unpaired = [c for c in configs if c not in pairs]
    if unpaired and checkpoints:
        pairs.update(_pairs(unpaired, checkpoints, _CHECKPOINT_NAMES, lambda _: True))
    attached = set(pairs.values())
    for f, kind in kinds.items():
        if f in shards or f in attached or kind == "checkpoint_data":
            continue
        w = pairs.get(f)
        yield Target(str(f), None if w is None else str(w))


# Names a config ``m.json``'s weights go by, after its stem: weights-only HDF5 files, and the
# ``.index`` of a TensorFlow checkpoint (tf.keras's ``save_weights`` in the TensorFlow format).
_HDF5_WEIGHTS_NAMES = (".weights.h5", "_weights.h5", "_weights.hdf5", ".h5", ".hdf5")
_CHECKPOINT_NAMES = (".index", ".ckpt.index", "_weights.index", ".weights.index")


def _pairs(
    configs: list[Path], candidates: list[Path], endings: tuple[str, ...], is_weights: Callable[[Path], bool]
) -> dict[Path, Path]:
    """config -> the weights of the same folder that go with it: by name (the config's stem followed
    by one of ``endings``, in order), else the folder's only unpaired config with its only remaining
    candidate that ``is_weights`` (looked at only when there are at most :data:`_MAX_UNNAMED`)."""
    by_name = {w.name: w for w in candidates}
    out: dict[Path, Path] = {}
    for c in configs:
        stem = c.name[: -len(c.suffix)] if c.suffix else c.name
        for ending in endings:
            w = by_name.get(stem + ending)
            if w is not None and w not in out.values() and is_weights(w):
                out[c] = w
                break
    rest = [c for c in configs if c not in out]
    free = [w for w in candidates if w not in out.values()]
    if len(rest) == 1 and 0 < len(free) <= _MAX_UNNAMED:
        weights = [w for w in free if is_weights(w)]
        if len(weights) == 1:
            out[rest[0]] = weights[0]
    return out


def _weights_only(p: Path) -> bool:
    from modelgraph.loading.detect import detect

    try:
        return detect(p) in _WEIGHTS_ONLY
    except Exception:  # noqa: BLE001 - unreadable: checked on its own, and the check says why
        return False


def index_shards(index: Path) -> set[str]:
    """Shard files named by a sharded-weights index (``weight_map``), as paths; empty otherwise."""
    from modelgraph import safe_io

    try:
        raw = safe_io.read_file(index, max_bytes=16 * 1024 * 1024)
        if len(raw) > 16 * 1024 * 1024:
            return set()
        doc = safe_io.parse_json(raw, where=str(index)).value
    except Exception:  # noqa: BLE001 - not an index: nothing to exclude
        return set()
    wm = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(wm, dict):
        return set()
    out: set[str] = set()
    for value in wm.values():
        for name in value if isinstance(value, list) else [value]:
            if isinstance(name, str) and "/" not in name and "\\" not in name:
                out.add(str(index.parent / name))
    return out
