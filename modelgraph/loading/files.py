"""Reading whole JSON files from disk through :func:`modelgraph.safe_io.parse_json`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from modelgraph import safe_io
from modelgraph.errors import FormatError


def read_json_file(path: Path, max_bytes: int = safe_io.MAX_JSON_BYTES, within: Path | None = None) -> Any:
    """Parse a JSON file with safe_io's depth and size limits; the value only. ``within``: the file
    is a member of that model folder (:func:`modelgraph.safe_io.open_file` keeps the read inside it)."""
    raw = safe_io.read_file(path, max_bytes=max_bytes, within=within)
    if len(raw) > max_bytes:
        raise FormatError(f"{path}: JSON file is over the {max_bytes:,}-byte limit")
    return safe_io.parse_json(raw, where=str(path), max_bytes=max_bytes).value
