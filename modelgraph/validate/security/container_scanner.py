"""The container scanner (``SEC1xx``): zip members, npz pickles, HDF5 links and datasets, JSON bombs,
directory members and polyglots, reported as findings (never raised)."""

from __future__ import annotations

import os
import struct
import zipfile
from typing import Any

from modelgraph import safe_io
from modelgraph.errors import FormatError, SecurityError
from modelgraph.validate.issue import Issue
from modelgraph.validate.security.config_scanner import scan_config
from modelgraph.validate.security.pickle_reader import MAX_PICKLE_SCAN_BYTES, pickle_verdict
from modelgraph.validate.security.rules import issue as _issue
from modelgraph.validate.security.savedmodel_scanner import (
    is_checkpoint_path,
    is_savedmodel_dir,
    scan_savedmodel_dir,
)

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
            status = safe_io.soft_link_status(f.file, path, target)
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


def _is_polyglot(path: str) -> bool:
    from modelgraph.loading.detect import is_polyglot

    try:
        with open(path, "rb") as fh:
            return is_polyglot(fh, fh.read(8), path)
    except OSError:
        return True


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
        if is_checkpoint_path(p):
            return self.issues  # a tensor bundle holds no config; its reader checks every entry
        try:
            if not os.path.isdir(p):
                safe_io.open_file(p, within=self.within).close()  # no FIFO, device or escaping symlink
            is_zip = _is_zip(p) if not os.path.isdir(p) else False
            is_h5 = _is_hdf5(p) if not os.path.isdir(p) else False
            if is_zip and is_h5 and _is_polyglot(p):
                self.add(
                    "SEC119",
                    "the file is both a zip (.keras) and an HDF5 file (a polyglot): Keras reads one part "
                    "or the other depending on the file's extension; both parts are scanned",
                    "",
                    "refuse it: a file Keras writes is one or the other",
                )
            if is_savedmodel_dir(p):
                found, configs = scan_savedmodel_dir(p)
                self.issues.extend(found)
                self.configs.extend(configs)
            elif os.path.isdir(p):
                self._dir(p)
            elif is_zip or is_h5:
                if is_zip:
                    self._zip(p)
                if is_h5 and not (is_zip and not _is_polyglot(p)):
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
                        dset = safe_io.resolve_hard_links(f, entry.path)
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
