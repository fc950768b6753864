"""Keras 3 ops without a Keras golden in samples/kernels/ops: each ONNX mapping against the runner's
reference kernel on seeded random inputs (the kernels are the reference for Keras's semantics)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from modelgraph.runner.registry import KernelSpec, get_kernel

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from modelgraph.saving.onnx.export import layer_model  # noqa: E402

RNG = np.random.default_rng(7)
X = RNG.standard_normal((2, 3, 4, 6)).astype(np.float32) * 3
Y = RNG.standard_normal((6, 5)).astype(np.float32)

CASES: list[tuple[str, dict[str, Any], tuple[Any, ...]]] = [
    ("Celu", {"alpha": 0.7}, (X,)),
    ("Glu", {"axis": -1}, (X,)),
    ("Glu", {"axis": 1}, (RNG.standard_normal((2, 4, 3)).astype(np.float32),)),
    ("SoftShrink", {"threshold": 0.8}, (X,)),
    ("HardShrink", {}, (X,)),
    ("Squareplus", {"b": 2}, (X,)),
    ("Normalize", {"axis": 1}, (X,)),
    ("Moveaxis", {"source": 1, "destination": -1}, (X,)),
    ("Moveaxis", {"source": [0, 3], "destination": [2, 1]}, (X,)),
    ("Swapaxes", {"axis1": 1, "axis2": 3}, (X,)),
    ("Triu", {"k": 1}, (X,)),
    ("Tril", {"k": -1}, (X,)),
    ("ZerosLike", {}, (X,)),
    ("OnesLike", {"dtype": "int32"}, (X,)),
    ("StopGradient", {}, (X,)),
    ("Round", {}, (X,)),
    ("Round", {"decimals": 2}, (X,)),
    ("Unstack", {"axis": 1}, (X,)),
    ("Repeat", {"repeats": 3, "axis": 2}, (X,)),
    ("Repeat", {"repeats": 2, "axis": 0}, (X,)),
    ("Tensordot", {"axes": 1}, (X, Y)),
    ("Tensordot", {"axes": [[1], [0]]}, (RNG.standard_normal((2, 6, 3)).astype(np.float32), Y)),
    ("SaturateCast", {"dtype": "int8"}, (X * 100,)),
]


@pytest.mark.parametrize(
    ("class_name", "config", "args"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)]
)
def test_op_mapping_matches_the_reference_kernel(class_name, config, args):
    spec = KernelSpec(name=class_name.lower(), class_name=class_name, config={"name": "op", **config})
    want = get_kernel(f"op:{class_name}")(spec)(*args)
    want = list(want) if isinstance(want, tuple) else [want]
    model = layer_model(f"op:{class_name}", spec, args, out_shapes=[w.shape for w in want])
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {f"in_{i}": a for i, a in enumerate(args)})
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, atol=1e-5, rtol=1e-5)


def test_matrix_transpose_tf_function():
    spec = KernelSpec(
        name="t", class_name="TFOpLambda", config={"name": "t", "function": "linalg.matrix_transpose"}
    )
    want = get_kernel("tf:linalg.matrix_transpose")(spec)(X)
    model = layer_model("tf:linalg.matrix_transpose", spec, (X,), out_shapes=[want.shape])
    got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"in_0": X}
    )
    np.testing.assert_array_equal(got[0], want)
