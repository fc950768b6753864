"""The ``--weights`` argument type: an existing file or folder, or a TensorFlow checkpoint prefix."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click


class WeightsPath(click.ParamType):
    """A weights file, a folder (a checkpoint folder, a SavedModel), or a checkpoint prefix such as
    ``ckpt/model`` whose ``ckpt/model.index`` exists (TensorFlow names checkpoints by prefix)."""

    name = "path"

    def __init__(self, as_str: bool = False) -> None:
        self.as_str = as_str

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, Path | str):
            text = os.fspath(value)
            if os.path.lexists(text) or os.path.lexists(f"{text}.index"):
                return text if self.as_str else Path(text)
        self.fail(f"Path '{value}' does not exist (nor a checkpoint '{value}.index').", param, ctx)


WEIGHTS = WeightsPath()
WEIGHTS_STR = WeightsPath(as_str=True)
