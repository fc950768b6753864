"""Reading whole JSON files from disk through :func:`modelgraph.safe_io.parse_json`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from modelgraph import safe_io
from modelgraph.errors import FormatError


def read_json_file(path: Path, max_bytes: int = safe_io.MAX_JSON_BYTES) -> Any:
    """Parse a JSON file with safe_io's depth and size limits; the value only."""
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise FormatError(f"{path}: JSON file is {size:,} bytes, over the {max_bytes:,}-byte limit")
        raw = path.read_bytes()
    except OSError as exc:
        raise FormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return safe_io.parse_json(raw, where=str(path), max_bytes=max_bytes).value
