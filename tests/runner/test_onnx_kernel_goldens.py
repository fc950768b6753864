"""Every ONNX mapping against the per-layer goldens Keras made for the runner's kernels.

samples/kernels/{conv,core,ops,rnn}/*.npz each hold one layer call (config, weights, inputs, Keras's
outputs). Each is exported as a one-node ONNX model (``layer_model``), run by onnxruntime and
compared with Keras's outputs at the kernels' own tolerance. A golden whose class has no mapping,
or whose options the exporter refuses, would be skipped with the reason (the export refuses such
models by name); today every one maps, and every mapped call must match.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from modelgraph.errors import UnsupportedError
from modelgraph.runner.registry import KernelSpec

from . import test_kernels_conv as conv_goldens
from . import test_kernels_core as core_goldens
from . import test_kernels_ops as ops_goldens
from . import test_kernels_rnn as rnn_goldens

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from modelgraph.saving.onnx.export import layer_model  # noqa: E402

KERNELS = Path(__file__).resolve().parents[2] / "samples" / "kernels"


def _conv(path: Path):
    g = conv_goldens.load_golden(path)
    return g["class_name"], conv_goldens.spec_of(g), g["inputs"], g["kwargs"], g["outputs"]


def _core(path: Path):
    spec, inputs, kwargs, call, expected = core_goldens.load(path)
    args = [list(inputs)] if call == "list" else list(inputs)
    return spec.class_name, spec, args, kwargs, [expected]


def _ops(path: Path):
    g = ops_goldens.load(path)
    if g["class_name"] in ("TFOpLambda", "SlicingOpLambda"):
        key = "tf:" + g["config"]["function"]
        args, kwargs = ops_goldens.k2_call(g["node"], g["inputs"])
    else:
        key = "op:" + g["class_name"]
        args, kwargs = ops_goldens.k3_call(g["class_name"], g["node"], g["inputs"])
    spec = KernelSpec(
        name=g["config"]["name"], class_name=g["class_name"], config=g["config"], keras_version=g["version"]
    )
    return key, spec, args, kwargs, g["outputs"]


def _rnn(path: Path):
    spec, args, kwargs, outputs = rnn_goldens._load(path.stem)
    return spec.class_name, spec, args, kwargs, outputs


LOADERS = {"conv": _conv, "core": _core, "ops": _ops, "rnn": _rnn}
CASES = [
    pytest.param(family, path, id=f"{family}/{path.stem}")
    for family in LOADERS
    for path in sorted((KERNELS / family).glob("*.npz"))
]


def _feeds(args, kwargs) -> list[np.ndarray]:
    flat: list[np.ndarray] = []

    def walk(v):
        if isinstance(v, np.ndarray) and v.ndim > 0:
            flat.append(v)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)

    walk(list(args))
    walk(dict(kwargs))
    return flat


@pytest.mark.parametrize(("family", "path"), CASES)
def test_mapping_matches_the_kernel_golden(family, path):
    key, spec, args, kwargs, expected = LOADERS[family](path)
    try:
        model = layer_model(key, spec, args, kwargs, out_shapes=[tuple(np.shape(o)) for o in expected])
    except UnsupportedError as exc:
        pytest.skip(f"refused: {exc}")
    onnx.checker.check_model(model, full_check=True)
    feeds = {f"in_{i}": a for i, a in enumerate(_feeds(args, kwargs))}
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, feeds)
    assert len(got) >= len(expected)
    for g, want in zip(got, expected, strict=False):
        want = np.asarray(want)
        assert g.shape == want.shape
        if want.dtype.kind in "fc":
            np.testing.assert_allclose(
                g.astype(np.float64), want.astype(np.float64), atol=1e-5, rtol=1e-4, equal_nan=True
            )
        else:
            np.testing.assert_array_equal(g, want)
