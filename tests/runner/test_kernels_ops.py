"""Op kernels (Keras 3 ``op:*`` and tf.keras ``tf:*``) against goldens made by real Keras.

The goldens (samples/kernels/make_ops_goldens.py) hold the serialized node exactly as Keras wrote it;
the small decoder below turns it into the call the interpreter makes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from modelgraph.errors import UnsupportedConfigError, UnsupportedLayerError
from modelgraph.runner.registry import KernelSpec, get_kernel, supported

GOLDENS = Path(__file__).resolve().parents[2] / "samples" / "kernels" / "ops"
FILES = sorted(GOLDENS.glob("*.npz"))


# ---------------------------------------------------------------------------------------------
# node decoders (the same call structure the loader/interpreter produce)


def _k3_decode(obj: Any, tensors: list[np.ndarray]) -> Any:
    if isinstance(obj, dict):
        cls = obj.get("class_name")
        if cls == "__keras_tensor__":
            return tensors.pop(0)
        if cls == "__slice__":
            c = obj["config"]
            return slice(c["start"], c["stop"], c["step"])
        if cls == "__ellipsis__":
            return Ellipsis
        if cls == "__numpy__":
            return np.asarray(obj["config"]["value"], dtype=obj["config"]["dtype"])
        return {k: _k3_decode(v, tensors) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_k3_decode(v, tensors) for v in obj]
    return obj


def k3_call(class_name: str, node: dict, inputs: list[np.ndarray]) -> tuple[list, dict]:
    tensors = list(inputs)
    args = _k3_decode(node["args"], tensors)
    kwargs = _k3_decode(node["kwargs"], tensors)
    assert not tensors
    if class_name == "GetItem" and isinstance(args[1], list):
        args[1] = tuple(args[1])
    return args, kwargs


def _is_ref(obj: Any) -> bool:
    return isinstance(obj, list) and len(obj) in (3, 4) and isinstance(obj[0], str)


def k2_call(node: list, inputs: list[np.ndarray]) -> tuple[list, dict]:
    tensors = list(inputs)
    leaves: list[list] = []

    def first(obj: Any) -> Any:
        if _is_ref(obj):
            leaves.append(obj)
            return obj[2] if obj[0] == "_CONSTANT_VALUE" else tensors.pop(0)
        if isinstance(obj, list):
            return [first(v) for v in obj]
        if isinstance(obj, dict):
            return {k: first(v) for k, v in obj.items()}
        return obj

    def kwarg(obj: Any) -> Any:
        if isinstance(obj, list) and len(obj) == 3 and isinstance(obj[0], str):
            return tensors.pop(0)
        if isinstance(obj, list):
            return [kwarg(v) for v in obj]
        if isinstance(obj, dict):
            return {k: kwarg(v) for k, v in obj.items()}
        return obj

    first_arg = first(node)
    kwargs = kwarg(leaves[0][3] if len(leaves[0]) > 3 else {})
    assert not tensors
    return [first_arg], kwargs


def load(path: Path) -> dict[str, Any]:
    with np.load(path, allow_pickle=False) as data:
        d = {k: data[k] for k in data.files}
    n_in = sum(k.startswith("inputs/") for k in d)
    n_out = sum(k.startswith("outputs/") for k in d)
    return {
        "config": json.loads(str(d["config"])),
        "class_name": str(d["class_name"]),
        "module": str(d["module"]),
        "node": json.loads(str(d["node"])),
        "version": tuple(int(p) for p in str(d["keras_version"]).split(".")[:3]),
        "inputs": [d[f"inputs/{i}"] for i in range(n_in)],
        "outputs": [d[f"outputs/{i}"] for i in range(n_out)],
    }


def kernel_for(g: dict[str, Any]):
    if g["class_name"] in ("TFOpLambda", "SlicingOpLambda"):
        key = "tf:" + g["config"]["function"]
    else:
        assert g["module"].startswith("keras.src.ops.")
        key = "op:" + g["class_name"]
    spec = KernelSpec(
        name=g["config"]["name"], class_name=g["class_name"], config=g["config"], keras_version=g["version"]
    )
    return get_kernel(key, g["config"]["name"])(spec)


def call_golden(g: dict[str, Any]) -> list[np.ndarray]:
    fn = kernel_for(g)
    if g["class_name"] in ("TFOpLambda", "SlicingOpLambda"):
        args, kwargs = k2_call(g["node"], g["inputs"])
    else:
        args, kwargs = k3_call(g["class_name"], g["node"], g["inputs"])
    out = fn(*args, **kwargs)
    return list(out) if isinstance(out, tuple) else [out]


def assert_matches(got: list[Any], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert isinstance(g, np.ndarray)
        assert g.shape == w.shape
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, atol=1e-5, rtol=1e-4)
        else:
            np.testing.assert_array_equal(g, w)


# ---------------------------------------------------------------------------------------------
# goldens


def test_goldens_present() -> None:
    assert len([f for f in FILES if f.name.startswith("k3_")]) >= 80
    assert len([f for f in FILES if f.name.startswith("k2_")]) >= 80
    assert sum(f.stat().st_size for f in FILES) < 2_000_000


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_golden(path: Path) -> None:
    g = load(path)
    assert_matches(call_golden(g), g["outputs"])


def test_getitem_key_as_list_and_decoded_tf_forms() -> None:
    """The GetItem key may come as a list; tf.keras slice specs as plain dicts or decoded objects."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    op = get_kernel("op:GetItem")(KernelSpec("get_item", "GetItem", {"name": "get_item"}))
    np.testing.assert_array_equal(op(x, [slice(None), slice(1, None), slice(None, None, 2)]), x[:, 1:, ::2])
    np.testing.assert_array_equal(op(x, [Ellipsis, 0]), x[..., 0])
    np.testing.assert_array_equal(op(x, (slice(None), None, 0)), x[:, None, 0])
    raw = [{"class_name": "__slice__", "config": {"start": 1, "stop": None, "step": None}}]
    np.testing.assert_array_equal(op(x, raw), x[1:])
    tf = get_kernel("tf:__operators__.getitem")(
        KernelSpec("tf.__operators__.getitem", "SlicingOpLambda", {"function": "__operators__.getitem"})
    )
    np.testing.assert_array_equal(tf(x, slice_spec=[Ellipsis, slice(1, 3)]), x[..., 1:3])
    np.testing.assert_array_equal(tf(x, slice_spec=[{"class_name": "__ellipsis__"}, 1]), x[..., 1])
    np.testing.assert_array_equal(tf(x, slice_spec={"start": 1, "stop": None, "step": None}), x[1:])
    np.testing.assert_array_equal(tf(x, slice_spec=[slice(None), np.array(2)]), x[:, 2])


# ---------------------------------------------------------------------------------------------
# dtypes and constants


def _op(class_name: str, **config: Any):
    return get_kernel(f"op:{class_name}")(KernelSpec("n", class_name, {"name": "n", **config}))


def _tf(function: str):
    return get_kernel(f"tf:{function}")(KernelSpec(f"tf.{function}", "TFOpLambda", {"function": function}))


def test_float32_stays_float32() -> None:
    x = np.ones((2, 3), np.float32)
    assert _op("Add")(x, 3.0).dtype == np.float32
    assert _op("Multiply")(0.16666666666666666, x).dtype == np.float32
    assert _op("TrueDivide")(x, 2).dtype == np.float32
    assert _op("Power")(x, 2).dtype == np.float32
    assert _op("Mean", axis=1, keepdims=False)(x).dtype == np.float32
    assert _op("Multiply")(x, np.float64(2.0)).dtype == np.float32
    # int tensors promoted by a float constant end up in floatx, as in Keras 3
    assert _op("Multiply")(np.ones(3, np.int32), 2.5).dtype == np.float32
    assert _op("Sqrt")(np.ones(3, np.int32)).dtype == np.float32
    assert _op("NotEqual")(np.array([0, 1], np.int32), 0).dtype == bool
    # tf.keras list constants take the tensor dtype, in either operand position
    assert _tf("math.multiply")(x, y=[1.0, 2.0, 3.0], name=None).dtype == np.float32
    out = _tf("math.subtract")([1.0, 2.0, 3.0], y=x, name=None)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.array([[0.0, 1.0, 2.0]] * 2, np.float32))
    assert _tf("__operators__.add")(2.0, y=x).dtype == np.float32
    assert _tf("concat")([x, [[5.0, 5.0, 5.0]]], axis=0).dtype == np.float32


def test_swapped_operands() -> None:
    x = np.array([1.0, 2.0, 4.0], np.float32)
    np.testing.assert_allclose(_op("Subtract")(1, x), 1 - x)
    np.testing.assert_allclose(_op("TrueDivide")(2.0, x), 2.0 / x)
    np.testing.assert_allclose(_tf("math.truediv")(2.0, y=x, name=None), 2.0 / x)
    np.testing.assert_allclose(_tf("math.pow")(2.0, y=x), 2.0**x)


def test_gelu_flag_and_defaults() -> None:
    x = np.linspace(-4, 4, 33, dtype=np.float32)
    exact = _op("Gelu", approximate=False)(x)
    approx = _op("Gelu", approximate=True)(x)
    assert np.max(np.abs(exact - approx)) > 1e-4
    np.testing.assert_allclose(_op("Gelu")(x), approx)  # the op defaults to approximate=True
    np.testing.assert_allclose(_tf("nn.gelu")(x), exact)  # tf.nn.gelu defaults to approximate=False


def test_split_returns_tuple() -> None:
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    parts = _op("Split", indices_or_sections=3, axis=-1)(x)
    assert isinstance(parts, tuple) and len(parts) == 3
    sizes = _tf("split")(x, num_or_size_splits=[1, -1, 2], axis=1)
    assert [p.shape[1] for p in sizes] == [1, 3, 2]


# ---------------------------------------------------------------------------------------------
# registry and refusals

REQUIRED_OPS = [
    "Add",
    "Subtract",
    "Multiply",
    "Divide",
    "TrueDivide",
    "Power",
    "Negative",
    "Absolute",
    "Abs",
    "Square",
    "Sqrt",
    "Exp",
    "Log",
    "Maximum",
    "Minimum",
    "Mean",
    "Sum",
    "Max",
    "Min",
    "Matmul",
    "Reshape",
    "Transpose",
    "ExpandDims",
    "Squeeze",
    "Concatenate",
    "Stack",
    "Split",
    "GetItem",
    "Where",
    "Clip",
    "Cast",
    "NotEqual",
    "Equal",
    "Greater",
    "Less",
    "Tanh",
    "Relu",
    "Relu6",
    "Sigmoid",
    "Softmax",
    "Gelu",
    "Silu",
    "HardSigmoid",
    "HardSilu",
    "LogSoftmax",
    "Rsqrt",
    "Erf",
    "Logsumexp",
]

REQUIRED_TF = [
    "__operators__.add",
    "math.add",
    "math.subtract",
    "math.multiply",
    "math.truediv",
    "math.divide",
    "nn.relu",
    "nn.relu6",
    "nn.sigmoid",
    "math.sigmoid",
    "math.tanh",
    "nn.softmax",
    "math.reduce_mean",
    "math.reduce_sum",
    "math.reduce_max",
    "concat",
    "reshape",
    "transpose",
    "compat.v1.transpose",
    "expand_dims",
    "squeeze",
    "compat.v1.squeeze",
    "split",
    "__operators__.getitem",
    "math.sqrt",
    "math.square",
    "math.exp",
    "math.log",
    "math.maximum",
    "math.minimum",
    "nn.gelu",
    "math.pow",
    "cast",
    "linalg.matmul",
]


def test_required_keys_registered() -> None:
    keys = set(supported())
    missing = [f"op:{c}" for c in REQUIRED_OPS if f"op:{c}" not in keys]
    missing += [f"tf:{f}" for f in REQUIRED_TF if f"tf:{f}" not in keys]
    assert not missing


def test_unknown_op_is_unsupported_layer() -> None:
    with pytest.raises(UnsupportedLayerError):
        get_kernel("op:Fft2")
    with pytest.raises(UnsupportedLayerError):
        get_kernel("tf:einsum")


@pytest.mark.parametrize(
    ("class_name", "config"),
    [
        ("Pad", {"pad_width": [[0, 1]], "mode": "linear_ramp"}),
        ("Normalize", {"axis": -1, "order": 1}),
        ("Cast", {"dtype": "bfloat16"}),
        ("Mean", {"axis": 1, "keepdims": False, "where": [True]}),
        ("Reshape", {}),
    ],
)
def test_unsupported_op_config(class_name: str, config: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedConfigError):
        _op(class_name, **config)


def test_unsupported_tf_call_arguments() -> None:
    x = np.ones((2, 3), np.float32)
    with pytest.raises(UnsupportedConfigError):
        _tf("compat.v1.gather")(x, indices=[0], axis=1, batch_dims=1)
    with pytest.raises(UnsupportedConfigError):
        _tf("compat.v1.pad")(x, paddings=[[0, 0], [1, 1]], mode="WRAP")
    with pytest.raises(UnsupportedConfigError):
        _tf("math.multiply")(x, y=2.0, unknown_option=3)
    with pytest.raises(UnsupportedConfigError):
        _tf("where")(x > 0)
    with pytest.raises(UnsupportedConfigError):
        _op("Where")(x > 0)
