"""Path argument types: ``--weights`` (an existing file or folder, or a TensorFlow checkpoint prefix)
and a command's ``MODEL`` (an existing path; a checkpoint prefix there is named as weights only)."""

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


class ModelPath(click.Path):
    """A command's ``MODEL`` argument: an existing file or folder. A missing path that is a TensorFlow
    checkpoint prefix (``ckpt/model`` beside ``ckpt/model.index``) is refused with what it is: weights
    only, to attach to the model's architecture with ``--weights``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(exists=True, path_type=Path, **kwargs)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, Path | str):
            text = os.fspath(value)
            if not os.path.lexists(text) and os.path.lexists(f"{text}.index"):
                self.fail(
                    f"'{text}' is a TensorFlow checkpoint prefix ('{text}.index'): weights only; give "
                    f"the model's architecture (.json, .h5, .keras or SavedModel) and attach it with "
                    f"--weights {text}",
                    param,
                    ctx,
                )
        return super().convert(value, param, ctx)


MODEL = ModelPath()
