"""Security findings of a tf.keras SavedModel directory: its members and its Keras metadata.

The members must be the ones TensorFlow writes (``saved_model.pb``, ``keras_metadata.pb``,
``fingerprint.pb``, ``variables/variables.index`` and data shards, ``assets/``), each a regular file
inside the folder. Every node's JSON in ``keras_metadata.pb`` (or, in a TF 2.0-2.3 directory, in
``saved_model.pb``'s object graph) is scanned like a ``.keras`` config (a Lambda, a module reference,
a gadget is found there exactly as in ``config.json``); the root node's JSON is returned as the
directory's config for the other rule families. ``saved_model.pb``'s function graphs are never
decoded.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from modelgraph import safe_io
from modelgraph.errors import FormatError, SecurityError
from modelgraph.validate.issue import Issue
from modelgraph.validate.security.config_scanner import scan_config
from modelgraph.validate.security.rules import issue as _issue

SAVEDMODEL_FILES = frozenset({"saved_model.pb", "keras_metadata.pb", "fingerprint.pb"})
_VARIABLES_FILE = re.compile(r"variables/variables\.(index|data-\d{5}-of-\d{5})")
_CODE_SUFFIXES = (".py", ".pyc", ".so", ".dll", ".dylib", ".sh", ".exe")


def is_savedmodel_dir(path: str) -> bool:
    """Whether ``path`` is a directory holding a ``saved_model.pb`` (by name)."""
    return os.path.isdir(path) and os.path.lexists(os.path.join(path, "saved_model.pb"))


def is_checkpoint_path(path: str) -> bool:
    """Whether ``path`` names a TensorFlow checkpoint: a prefix whose ``.index`` exists, or an
    ``.index`` file ending with the LevelDB table footer (a regular file: nothing else is opened)."""
    if not os.path.lexists(path):
        return os.path.lexists(f"{path}.index")
    if not path.endswith(".index") or os.path.isdir(path):
        return False
    from modelgraph.loading.detect import is_leveldb_table

    try:
        with safe_io.open_file(path) as fh:
            return is_leveldb_table(fh)
    except (SecurityError, FormatError, OSError):
        return False


def scan_savedmodel_dir(path: str) -> tuple[list[Issue], list[tuple[Any, str]]]:
    """Findings for the SavedModel directory ``path`` and its root config as ``[(value, "$")]``."""
    issues: list[Issue] = []

    def add(rule: str, message: str, where: str, hint: str = "") -> None:
        issues.append(_issue(rule, message, where, hint, path))

    _members(path, add)
    configs: list[tuple[Any, str]] = []
    from modelgraph.errors import UnsupportedFormatError
    from modelgraph.loading.keras_metadata import decode_keras_json
    from modelgraph.loading.savedmodel import read_metadata_nodes

    try:
        nodes, source = read_metadata_nodes(Path(path))
    except UnsupportedFormatError:
        return issues, configs  # no Keras metadata: nothing to scan (loading refuses the directory)
    except (FormatError, SecurityError, OSError) as exc:
        has_pb = os.path.lexists(os.path.join(path, "keras_metadata.pb"))
        member = "keras_metadata.pb" if has_pb else "saved_model.pb"
        add("SEC100", f"could not scan the Keras metadata: {exc}", member)
        return issues, configs
    source = os.path.basename(source)
    seen: set[tuple[str, str]] = set()
    for node in sorted(nodes, key=lambda n: n.node_path != "root"):
        where = f"{source}:{node.node_path}"
        try:
            value = decode_keras_json(safe_io.parse_json(node.metadata, where=f"{path}/{where}").value)
        except FormatError as exc:
            add("SEC100", str(exc), where)
            continue
        if node.node_path == "root" and isinstance(value, dict):
            # The model envelope is the directory's config (the caller scans it with the "$" root);
            # the rest of the root's JSON (model_config, training_config, ...) is scanned here.
            envelope = {k: value[k] for k in ("class_name", "config") if k in value}
            configs.append((envelope, "$"))
            seen |= {(i.rule, i.message) for i in scan_config(envelope, path=path)}
            value = {k: v for k, v in value.items() if k not in envelope}
        for item in scan_config(value, path=path, root=f"{where}$"):
            # a layer node (or model_config) repeats an entry of the root's config: report it once
            if (item.rule, item.message) not in seen:
                seen.add((item.rule, item.message))
                issues.append(item)
    return issues, configs


def _members(path: str, add: Any) -> None:
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        rel_dir = os.path.relpath(dirpath, path)
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            rel = name if rel_dir == "." else f"{rel_dir}/{name}".replace(os.sep, "/")
            if os.path.islink(full):
                add("SEC102", f"directory entry {rel!r} is a symbolic link; not followed", rel, "refuse it")
                continue
            if name in dirnames:
                if rel not in ("variables", "assets") and not rel.startswith("assets/"):
                    add("SEC106", f"unexpected directory {rel!r} in a SavedModel directory", rel)
                continue
            if (
                rel not in SAVEDMODEL_FILES
                and not _VARIABLES_FILE.fullmatch(rel)
                and not rel.startswith("assets/")
            ):
                rule = "SEC105" if name.lower().endswith(_CODE_SUFFIXES) else "SEC106"
                add(rule, f"unexpected file {rel!r} in a SavedModel directory", rel)
                continue
            try:
                safe_io.open_file(full, within=path).close()
            except (SecurityError, FormatError, OSError) as exc:
                add("SEC102", f"directory entry {rel!r}: {exc}", rel, "replace it with a regular file")
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
