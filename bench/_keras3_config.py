"""Pieces of a Keras 3 Functional config, for the benchmarks that write synthetic models of any size
(``bench_load.py``'s chains and fans, ``bench_view.py``'s residual stacks)."""

from __future__ import annotations

from typing import Any


def keras_tensor(name: str, width: int) -> dict:
    """The first output of layer ``name``, a ``(None, width)`` float32 tensor, as a call argument."""
    return {
        "class_name": "__keras_tensor__",
        "config": {"shape": [None, width], "dtype": "float32", "keras_history": [name, 0, 0]},
    }


def input_layer(width: int, name: str = "x") -> dict:
    """A ``(None, width)`` float32 InputLayer record."""
    return {
        "module": "keras.layers",
        "class_name": "InputLayer",
        "name": name,
        "registered_name": None,
        "config": {"batch_shape": [None, width], "dtype": "float32", "name": name},
        "inbound_nodes": [],
    }


def layer(cls: str, name: str, config: dict, inputs: list[str], width: int, **record: Any) -> dict:
    """A ``keras.layers`` record called once on the first outputs of ``inputs`` (a list when there are
    several); ``record`` adds top-level keys (``build_config``)."""
    args = [keras_tensor(i, width) for i in inputs]
    return {
        "module": "keras.layers",
        "class_name": cls,
        "name": name,
        "registered_name": None,
        "config": {"name": name, "trainable": True, "dtype": "float32", **config},
        **record,
        "inbound_nodes": [{"args": [args] if len(args) > 1 else args, "kwargs": {}}],
    }
