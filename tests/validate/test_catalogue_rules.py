"""Catalogue rules (CAT): classes and custom activations modelgraph does not know."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _models as M  # noqa: E402

from modelgraph import catalogue, plugins  # noqa: E402
from modelgraph.catalogue.spec import LayerSpec  # noqa: E402
from modelgraph.validate.api import Options, validate_file  # noqa: E402


def _cat(path: Path) -> list[Any]:
    return [i for i in validate_file(str(path), Options()).issues if i.rule == "CAT001"]


def _custom(name: str = "gelu_tanh", module: str = "builtins") -> dict[str, Any]:
    return {"module": module, "class_name": "function", "config": name, "registered_name": "function"}


def test_cat001_unknown_class_and_its_near_miss(tmp_path: Path) -> None:
    cfg = M.model([M.inp(), M.layer("MyCustomLayer", "c", "in"), M.layer("MyCustomLayer", "c2", "c")])
    hits = _cat(M.write_json(tmp_path / "a.json", cfg))
    assert len(hits) == 1 and hits[0].severity == "info"
    assert "class 'MyCustomLayer'" in hits[0].message and "layers 'c', 'c2'" in hits[0].message
    assert "docs/plugins.md" in hits[0].message
    assert not _cat(M.write_json(tmp_path / "b.json", M.simple()))
    with plugins.scratch():  # a plugin that describes the class: nothing to report
        catalogue.register(LayerSpec("MyCustomLayer"))
        assert not _cat(M.write_json(tmp_path / "a.json", cfg))


def test_cat001_custom_activation_and_its_near_misses(tmp_path: Path) -> None:
    cfg = M.simple()
    cfg["config"]["layers"][1]["config"]["activation"] = _custom("plugins>gelu_tanh")
    hits = _cat(M.write_json(tmp_path / "a.json", cfg))
    assert len(hits) == 1 and "custom activation 'plugins>gelu_tanh'" in hits[0].message
    cfg["config"]["layers"][1]["config"]["activation"] = _custom("relu", "keras.activations")
    assert not _cat(M.write_json(tmp_path / "b.json", cfg))
    cfg["config"]["layers"][1]["config"]["activation"] = _custom("plugins>gelu_tanh")
    with plugins.scratch():
        catalogue.register_activation("gelu_tanh", kernel=lambda x: x)
        assert not _cat(M.write_json(tmp_path / "c.json", cfg))


def test_cat001_custom_initializer_and_its_near_misses(tmp_path: Path) -> None:
    cfg = M.simple()
    dense = cfg["config"]["layers"][1]["config"]
    dense["kernel_initializer"] = {
        "module": None,
        "class_name": "Scaled",
        "config": {},
        "registered_name": "mine>Scaled",
    }
    hits = _cat(M.write_json(tmp_path / "a.json", cfg))
    assert len(hits) == 1 and "custom initializer 'mine>Scaled'" in hits[0].message
    dense["kernel_initializer"] = {
        "module": "keras.initializers",
        "class_name": "GlorotUniform",
        "config": {},
    }
    assert not _cat(M.write_json(tmp_path / "b.json", cfg))
    dense["kernel_initializer"] = {
        "module": None,
        "class_name": "Scaled",
        "config": {},
        "registered_name": "mine>Scaled",
    }
    with plugins.scratch():
        catalogue.register_initializer("Scaled")
        assert not _cat(M.write_json(tmp_path / "c.json", cfg))
