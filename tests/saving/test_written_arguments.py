"""Every layer config ``convert`` writes uses only keys Keras 3's constructor for that class accepts.

The accepted keys were read from Keras 3.15.1 itself (``samples/gen_keras3_arguments.py``); a key
outside them makes Keras 3 refuse the file ("Unrecognized keyword arguments passed to ...").
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from modelgraph import load
from modelgraph.errors import NotConvertibleError
from modelgraph.saving.api import keras_bytes

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
ACCEPTED = json.loads((SAMPLES / "goldens" / "keras3_constructor_arguments.json").read_text())["classes"]
KERAS2 = sorted(p.name for p in (SAMPLES / "k2").glob("*.h5") if not p.name.endswith("_weights.h5"))


def layer_records(node: Any) -> Iterator[dict[str, Any]]:
    """Every serialized ``keras.layers`` object in a Keras 3 config, nested ones included."""
    if isinstance(node, dict):
        module = node.get("module")
        if (
            isinstance(module, str)
            and module.startswith("keras.layers")
            and isinstance(node.get("config"), dict)
        ):
            yield node
        for value in node.values():
            yield from layer_records(value)
    elif isinstance(node, list):
        for value in node:
            yield from layer_records(value)


def written_config(path: Path) -> dict[str, Any] | None:
    import io
    import zipfile

    try:
        data, _ = keras_bytes(load(path))
    except NotConvertibleError:
        return None
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return json.loads(archive.read("config.json"))


@pytest.mark.parametrize("name", KERAS2)
def test_written_keys_are_keras3_constructor_arguments(name: str) -> None:
    config = written_config(SAMPLES / "k2" / name)
    if config is None:
        pytest.skip("convert refuses this sample (its refusal is tested elsewhere)")
    problems = [
        f"{rec['class_name']}: {sorted(set(rec['config']) - set(ACCEPTED[rec['class_name']]))}"
        for rec in layer_records(config)
        if rec["class_name"] in ACCEPTED and set(rec["config"]) - set(ACCEPTED[rec["class_name"]])
    ]
    assert not problems


def test_the_transposed_convolutions_from_tf_keras_drop_groups() -> None:
    config = written_config(SAMPLES / "k2" / "transposed.h5")
    classes = {rec["class_name"]: rec["config"] for rec in layer_records(config)}
    for name in ("Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose"):
        assert "groups" not in classes[name]
    assert "groups" not in ACCEPTED["Conv2DTranspose"]  # what Keras 3.15.1 said
