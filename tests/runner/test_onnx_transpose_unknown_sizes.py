"""A transposed convolution exports over inputs of unknown length: its pads and output padding do not
depend on the length (Keras's output length is ``(n - 1) * stride`` plus a constant, as is ONNX
ConvTranspose's full output). Each transposed-convolution kernel golden (``samples/kernels/conv``, made
by Keras) is exported with every input size but the batch hidden from the mapping, and onnxruntime must
reproduce Keras's outputs at the golden's sizes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from . import test_kernels_conv as conv_goldens

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from modelgraph.saving.onnx import export  # noqa: E402

KERNELS = Path(__file__).resolve().parents[2] / "samples" / "kernels" / "conv"
CASES = [p for p in sorted(KERNELS.glob("*.npz")) if "Transpose" in conv_goldens.load_golden(p)["class_name"]]


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_transposed_convolutions_export_without_known_sizes(path: Path, monkeypatch) -> None:
    golden = conv_goldens.load_golden(path)

    class SizesUnknown(export.MapContext):
        """The mapping's view of its input: the batch only (as for a sequence of any length)."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.in_shapes = [(s[0],) + (None,) * (len(s) - 1) for s in self.in_shapes]

    monkeypatch.setattr(export, "MapContext", SizesUnknown)
    spec = conv_goldens.spec_of(golden)
    inputs, expected = golden["inputs"], golden["outputs"]
    model = export.layer_model(
        golden["class_name"], spec, inputs, golden["kwargs"], out_shapes=[o.shape for o in expected]
    )
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {f"in_{i}": a for i, a in enumerate(inputs)})
    for g, w in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, w, atol=1e-4, rtol=1e-4, err_msg=path.stem)


def test_there_are_transposed_convolution_goldens() -> None:
    assert len(CASES) >= 10
