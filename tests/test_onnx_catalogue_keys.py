"""ONNX mappings are the catalogue's ``onnx`` concern: attached like kernels, reported by ``layers``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from modelgraph import catalogue
from modelgraph.catalogue.spec import NO_ONNX_WITHOUT_KERNEL, support


def test_every_runnable_class_has_a_mapping_or_says_why_not() -> None:
    specs = catalogue.all_specs()
    without = {s.key: s.onnx for s in specs if callable(s.kernel) and not callable(s.onnx)}
    assert without == {"op:Cumprod": "ONNX has a cumulative sum (CumSum) but no cumulative product"}
    assert all(isinstance(s.onnx, str) for s in specs if not callable(s.kernel))


def test_a_class_without_a_kernel_has_no_mapping_for_that_reason() -> None:
    assert support(catalogue.spec_for("Lambda", "onnx"))["onnx"] == NO_ONNX_WITHOUT_KERNEL
    assert support(catalogue.spec_for("InputLayer", "onnx"))["onnx"] == "a model input: fed, not computed"
    assert support(catalogue.spec_for("Dense", "onnx"))["onnx"] is True


def test_a_mapping_for_an_undeclared_key_or_a_refused_entry_is_refused() -> None:
    from modelgraph.saving.onnx.registry import register

    with pytest.raises(RuntimeError, match="no entry"):
        register("NotAKerasLayer")(lambda ctx, x: x)
    with pytest.raises(RuntimeError, match="already has onnx"):
        register("op:Cumprod")(lambda ctx, x: x)


def test_a_layer_key_finds_its_mapping_through_an_alias() -> None:
    from modelgraph.graph import Layer
    from modelgraph.saving.onnx.registry import get_mapping

    old = Layer("c", "Convolution2D", "layer", {"filters": 2, "kernel_size": [1, 1]})
    assert old.key == "Conv2D"
    assert get_mapping(old.key) is catalogue.spec_for("Convolution2D").onnx is not None
    cast = Layer("c", "Cast", "op", {"dtype": "int32"})
    assert cast.key == "op:Cast" and get_mapping(cast.key) is not None


def test_layers_reports_onnx_support_without_the_onnx_package() -> None:
    """The mapping modules import without ``onnx``: only building a model needs it."""
    script = (
        "import sys; sys.modules['onnx'] = None\n"
        "from modelgraph.catalogue.report import layers_report\n"
        "from modelgraph.errors import ToolMissingError\n"
        "from modelgraph.loading import load\n"
        "from modelgraph.saving.onnx import to_onnx\n"
        "support = {c.name: c.support.onnx for c in layers_report().classes}\n"
        "assert support['Conv2D'] is True and isinstance(support['op:Cumprod'], str), support\n"
        "try:\n"
        "    to_onnx(load(sys.argv[1]))\n"
        "except ToolMissingError as exc:\n"
        "    print(exc)\n"
    )
    from pathlib import Path

    cnn = Path(__file__).resolve().parent.parent / "samples" / "k3" / "cnn.keras"
    done = subprocess.run(
        [sys.executable, "-c", script, str(cnn)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'modelgraph[onnx]'" in done.stdout
