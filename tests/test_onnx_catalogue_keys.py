"""The ONNX exporter looks mappings up by the catalogue key on each layer (``Layer.key``)."""

from __future__ import annotations

import pytest

from modelgraph import catalogue

pytest.importorskip("onnx")


def test_every_onnx_mapping_key_has_a_catalogue_entry() -> None:
    from modelgraph.saving.onnx.registry import supported

    unknown = [key for key in supported() if catalogue.spec_for(key) is None]
    assert unknown == []


def test_a_layer_key_finds_its_mapping_through_an_alias() -> None:
    from modelgraph.graph import Layer
    from modelgraph.saving.onnx.registry import get_mapping

    old = Layer("c", "Convolution2D", "layer", {"filters": 2, "kernel_size": [1, 1]})
    assert old.key == "Conv2D"
    assert get_mapping(old.key) is not None
    cast = Layer("c", "Cast", "op", {"dtype": "int32"})
    assert cast.key == "op:Cast" and get_mapping(cast.key) is not None
