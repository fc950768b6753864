"""Protobuf messages modelgraph decodes (TensorFlow checkpoints, the SavedModel object graph, Keras
metadata), each from a .proto file here, and their decoding."""

from __future__ import annotations

from typing import Any

from modelgraph.errors import FormatError


def parse_message(message_class: Any, blob: bytes, where: str, what: str = "a valid protobuf message") -> Any:
    """Decode ``blob`` as ``message_class``; a one-line FormatError naming ``where`` (and saying it is
    not ``what``) when the bytes are truncated, malformed or nested past protobuf's recursion limit."""
    from google.protobuf.message import DecodeError

    message = message_class()
    try:
        message.ParseFromString(blob)
    except (DecodeError, RecursionError, ValueError) as exc:
        raise FormatError(f"{where}: not {what} ({exc or 'truncated or malformed'})") from None
    return message
