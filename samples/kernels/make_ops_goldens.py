"""Make the golden files for the op kernels (modelgraph/runner/kernels/ops.py).

Each case builds a tiny functional model whose outputs come from exactly one op node fed directly by
the model inputs, saves the node as Keras serializes it (``model.to_json()``), and records the input
and output arrays. Two parts, each run with its own interpreter:

* ``k3``: Keras 3 (``KERAS_BACKEND=tensorflow``), ``keras.ops`` calls on symbolic tensors become
  ``keras.src.ops.*`` operation nodes;
* ``k2``: tf.keras (``tf_keras``), TF functions on KerasTensors become ``TFOpLambda``/``SlicingOpLambda``.

Usage::

    python samples/kernels/make_ops_goldens.py          # both parts, with the venvs below
    /work/venvs/k3/bin/python samples/kernels/make_ops_goldens.py k3
    /work/venvs/k2/bin/python samples/kernels/make_ops_goldens.py k2
    /work/venvs/k3/bin/python samples/kernels/make_ops_goldens.py k3 log2   # only the cases named

One ``.npz`` per case in ``samples/kernels/ops/`` (``k3_<case>.npz`` / ``k2_<case>.npz``) with the keys
``config``, ``class_name``, ``module``, ``node`` (JSON strings), ``keras_version``, ``inputs/<i>``
(the tensors of the node in the order they appear in the serialized node: positional args, then
kwargs) and ``outputs/<i>`` (the node's outputs in tensor-index order).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "ops"
VENVS = {
    "k3": os.environ.get("K3_PYTHON", "/work/venvs/k3/bin/python"),
    "k2": os.environ.get("K2_PYTHON", "/work/venvs/k2/bin/python"),
}

S = (3, 4)  # per-sample shape used by most cases (batch 2 is added)


def spec(shape=S, dtype="float32", kind="normal"):
    return (tuple(shape), dtype, kind)


def make_array(name: str, i: int, shape, dtype: str, kind: str) -> np.ndarray:
    rng = np.random.default_rng(zlib.crc32(f"{name}/{i}".encode()))
    full = (2, *shape)
    if kind == "bool":
        return rng.random(full) > 0.5
    if kind == "int":
        return rng.integers(0, 3, size=full).astype(dtype)
    if kind == "pos":
        return rng.uniform(0.5, 2.0, size=full).astype(dtype)
    if kind == "wide":
        return (rng.standard_normal(full) * 4).astype(dtype)
    return rng.standard_normal(full).astype(dtype)


# ---------------------------------------------------------------------------------------------
# Keras 3


def k3_cases():
    import keras
    from keras import ops

    v = np.array([1.0, -2.0, 0.5, 3.0], "float32")
    P = spec(kind="pos")
    W = spec(kind="wide")
    two = [spec(), spec()]
    return [
        ("add_tt", two, lambda a, b: ops.add(a, b)),
        ("add_tc", [spec()], lambda a: ops.add(a, 3.0)),
        ("add_ct", [spec()], lambda a: ops.add(2.0, a)),
        ("add_broadcast", [spec(), spec((1, 4))], lambda a, b: a + b),
        ("subtract_tt", two, lambda a, b: a - b),
        ("subtract_int_ct", [spec()], lambda a: 1 - a),
        ("subtract_numpy_ct", [spec()], lambda a: ops.subtract(v, a)),
        ("multiply_tc", [spec()], lambda a: a * 2),
        ("multiply_numpy", [spec()], lambda a: ops.multiply(a, v)),
        ("multiply_hard_sigmoid_scale", [spec()], lambda a: a * (1.0 / 6.0)),
        ("divide_tt", [spec(), P], lambda a, b: ops.divide(a, b)),
        ("true_divide_tt", [spec(), P], lambda a, b: a / b),
        ("true_divide_tc", [spec()], lambda a: a / 2),
        ("true_divide_ct", [P], lambda a: ops.true_divide(2.0, a)),
        ("power_int", [spec()], lambda a: a**2),
        ("power_float", [P], lambda a: ops.power(a, 0.5)),
        ("negative", [spec()], lambda a: -a),
        ("absolute", [spec()], lambda a: abs(a)),
        ("square", [spec()], lambda a: ops.square(a)),
        ("sqrt", [P], lambda a: ops.sqrt(a)),
        ("exp", [spec()], lambda a: ops.exp(a)),
        ("log", [P], lambda a: ops.log(a)),
        ("log2", [P], lambda a: ops.log2(a)),
        ("tanh", [W], lambda a: ops.tanh(a)),
        ("floor", [W], lambda a: ops.floor(a)),
        ("rsqrt", [P], lambda a: ops.rsqrt(a)),
        ("erf", [W], lambda a: ops.erf(a)),
        ("maximum_tt", two, lambda a, b: ops.maximum(a, b)),
        ("minimum_tc", [spec()], lambda a: ops.minimum(a, 0.0)),
        ("mean_axis_keepdims", [spec()], lambda a: ops.mean(a, axis=1, keepdims=True)),
        ("sum_all", [spec()], lambda a: ops.sum(a)),
        ("max_axes", [spec()], lambda a: ops.max(a, axis=(1, 2))),
        ("min_last", [spec()], lambda a: ops.min(a, axis=-1)),
        ("std", [spec()], lambda a: ops.std(a, axis=-1)),
        ("var", [spec()], lambda a: ops.var(a, axis=1, keepdims=True)),
        ("logsumexp", [W], lambda a: ops.logsumexp(a, axis=-1)),
        ("argmax", [spec()], lambda a: ops.argmax(a, axis=-1)),
        ("cumsum", [spec()], lambda a: ops.cumsum(a, axis=1)),
        ("matmul", [spec(), spec((4, 5))], lambda a, b: ops.matmul(a, b)),
        ("einsum", [spec(), spec((5, 4))], lambda a, b: ops.einsum("bij,bkj->bik", a, b)),
        ("reshape", [spec()], lambda a: ops.reshape(a, (-1, 12))),
        ("reshape_3d", [spec()], lambda a: ops.reshape(a, (-1, 2, 6))),
        ("transpose", [spec()], lambda a: ops.transpose(a, (0, 2, 1))),
        ("expand_dims", [spec()], lambda a: ops.expand_dims(a, 1)),
        ("squeeze", [spec((3, 1, 4))], lambda a: ops.squeeze(a, axis=2)),
        ("concatenate", [spec(), spec((2, 4))], lambda a, b: ops.concatenate([a, b], axis=1)),
        ("stack", two, lambda a, b: ops.stack([a, b], axis=1)),
        ("split_sections", [spec()], lambda a: ops.split(a, 2, axis=-1)),
        ("split_indices", [spec()], lambda a: ops.split(a, [1, 3], axis=-1)),
        ("getitem_slices", [spec()], lambda a: a[:, 1:, ::2]),
        ("getitem_ellipsis_int", [spec()], lambda a: a[..., 0]),
        ("getitem_newaxis", [spec()], lambda a: a[:, None, 0]),
        ("getitem_negative", [spec()], lambda a: a[:, -1]),
        ("getitem_range", [spec()], lambda a: a[:, :, 1:3]),
        ("where_tt", [spec(dtype="bool", kind="bool"), spec(), spec()], lambda c, a, b: ops.where(c, a, b)),
        ("where_tc", [spec(dtype="bool", kind="bool"), spec()], lambda c, a: ops.where(c, a, 0.0)),
        ("clip", [spec()], lambda a: ops.clip(a, -0.5, 0.5)),
        ("cast_float16", [spec()], lambda a: ops.cast(a, "float16")),
        ("cast_int32", [W], lambda a: ops.cast(a, "int32")),
        ("not_equal_mask", [spec((5,), "int32", "int")], lambda t: ops.not_equal(t, 0)),
        ("equal", [spec((5,), "int32", "int")], lambda t: ops.equal(t, 1)),
        ("greater", [spec()], lambda a: a > 0),
        ("less_tt", two, lambda a, b: ops.less(a, b)),
        ("relu", [spec()], lambda a: ops.relu(a)),
        ("relu6", [W], lambda a: ops.relu6(a)),
        ("sigmoid", [W], lambda a: ops.sigmoid(a)),
        ("softmax_axis1", [spec()], lambda a: ops.softmax(a, axis=1)),
        ("softmax_default", [spec()], lambda a: ops.softmax(a)),
        ("log_softmax", [spec()], lambda a: ops.log_softmax(a)),
        ("gelu_approximate", [W], lambda a: ops.gelu(a)),
        ("gelu_exact", [W], lambda a: ops.gelu(a, approximate=False)),
        ("silu", [W], lambda a: ops.silu(a)),
        ("hard_sigmoid", [W], lambda a: ops.hard_sigmoid(a)),
        ("hard_silu", [W], lambda a: ops.hard_silu(a)),
        ("leaky_relu", [spec()], lambda a: ops.leaky_relu(a, negative_slope=0.1)),
        ("elu", [spec()], lambda a: ops.elu(a)),
        ("selu", [spec()], lambda a: ops.selu(a)),
        ("softplus", [W], lambda a: ops.softplus(a)),
        ("softsign", [W], lambda a: ops.softsign(a)),
        ("pad", [spec()], lambda a: ops.pad(a, [[0, 0], [1, 1], [0, 2]])),
        ("take", [spec()], lambda a: ops.take(a, np.array([0, 2]), axis=1)),
        ("tile", [spec()], lambda a: ops.tile(a, [1, 2, 1])),
        ("flip", [spec()], lambda a: ops.flip(a, axis=1)),
    ], keras


def run_k3(only: list[str] | None = None) -> None:
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    cases, keras = k3_cases()
    for name, specs, build in cases:
        if only and name not in only:
            continue
        inputs = [keras.Input(shape, dtype=dtype, name=f"in{i}") for i, (shape, dtype, _) in enumerate(specs)]
        arrays = {f"in{i}": make_array(name, i, *s) for i, s in enumerate(specs)}
        out = build(*inputs)
        outs = list(out) if isinstance(out, list | tuple) else [out]
        model = keras.Model(inputs, outs)
        config = json.loads(model.to_json())["config"]
        result = model([arrays[f"in{i}"] for i in range(len(specs))])
        result = result if isinstance(result, list | tuple) else [result]
        layer = _target_layer(config)
        node = layer["inbound_nodes"][0]
        names = [leaf["config"]["keras_history"][0] for leaf in _k3_tensor_leaves(node)]
        _save(
            f"k3_{name}",
            layer,
            node,
            keras.__version__,
            [arrays[n] for n in names],
            [np.asarray(r) for r in result],
        )


def _k3_tensor_leaves(obj):
    if isinstance(obj, dict):
        if obj.get("class_name") == "__keras_tensor__":
            yield obj
            return
        for value in obj.values():
            yield from _k3_tensor_leaves(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _k3_tensor_leaves(value)


# ---------------------------------------------------------------------------------------------
# tf.keras


def k2_cases():
    import tensorflow as tf
    import tf_keras as keras

    c = [1.0, -2.0, 0.5, 3.0]
    P = spec(kind="pos")
    W = spec(kind="wide")
    two = [spec(), spec()]
    return [
        ("operators_add_tt", two, lambda a, b: a + b),
        ("operators_add_tc", [spec()], lambda a: a + 3.0),
        ("operators_add_ct", [spec()], lambda a: 2.0 + a),
        ("math_add", two, lambda a, b: tf.math.add(a, b)),
        ("subtract_tt", two, lambda a, b: a - b),
        ("subtract_ct", [spec()], lambda a: 1.0 - a),
        ("subtract_list_ct", [spec()], lambda a: tf.constant(c) - a),
        ("multiply_tc", [spec()], lambda a: a * 2.0),
        ("multiply_ct", [spec()], lambda a: 2.0 * a),
        ("multiply_list", [spec()], lambda a: a * tf.constant(c)),
        ("multiply_tt", two, lambda a, b: tf.math.multiply(a, b)),
        ("truediv_tt", [spec(), P], lambda a, b: a / b),
        ("truediv_tc", [spec()], lambda a: a / 2.0),
        ("truediv_ct", [P], lambda a: 2.0 / a),
        ("divide", [spec(), P], lambda a, b: tf.math.divide(a, b)),
        ("divide_no_nan", two, lambda a, b: tf.math.divide_no_nan(a, b)),
        ("pow_int", [spec()], lambda a: a**2),
        ("pow_float", [P], lambda a: tf.math.pow(a, 0.5)),
        ("negative", [spec()], lambda a: -a),
        ("abs", [spec()], lambda a: abs(a)),
        ("floordiv", [W], lambda a: a // 2.0),
        ("floormod", [W], lambda a: a % 2.0),
        ("greater", [spec()], lambda a: a > 0),
        ("not_equal", [spec()], lambda a: tf.math.not_equal(a, 0.0)),
        ("getitem_slices", [spec()], lambda a: a[:, 1:, ::2]),
        ("getitem_ellipsis_int", [spec()], lambda a: a[..., 0]),
        ("getitem_newaxis", [spec()], lambda a: a[:, tf.newaxis, 0]),
        ("getitem_negative", [spec()], lambda a: a[:, -1]),
        ("getitem_single", [spec()], lambda a: a[1:]),
        ("getitem_mixed", [spec()], lambda a: a[:, 0, 1:3]),
        ("relu", [spec()], lambda a: tf.nn.relu(a)),
        ("relu6", [W], lambda a: tf.nn.relu6(a)),
        ("sigmoid", [W], lambda a: tf.nn.sigmoid(a)),
        ("tanh", [W], lambda a: tf.math.tanh(a)),
        ("softmax_axis1", [spec()], lambda a: tf.nn.softmax(a, axis=1)),
        ("softmax_default", [spec()], lambda a: tf.nn.softmax(a)),
        ("log_softmax", [spec()], lambda a: tf.nn.log_softmax(a)),
        ("reduce_mean", [spec()], lambda a: tf.math.reduce_mean(a, axis=1, keepdims=True)),
        ("reduce_sum_list", [spec()], lambda a: tf.reduce_sum(a, axis=[1, 2])),
        ("reduce_max", [spec()], lambda a: tf.reduce_max(a, -1)),
        ("reduce_min", [spec()], lambda a: tf.math.reduce_min(a, axis=1)),
        ("reduce_std", [spec()], lambda a: tf.math.reduce_std(a, axis=-1)),
        ("reduce_logsumexp", [W], lambda a: tf.math.reduce_logsumexp(a, axis=-1)),
        ("argmax", [spec()], lambda a: tf.math.argmax(a, axis=-1)),
        ("concat", [spec(), spec((3, 2))], lambda a, b: tf.concat([a, b], axis=-1)),
        ("concat_positional", [spec(), spec((2, 4))], lambda a, b: tf.concat([a, b], 1)),
        ("stack", two, lambda a, b: tf.stack([a, b], axis=1)),
        ("unstack", [spec()], lambda a: tf.unstack(a, axis=1)),
        ("reshape", [spec()], lambda a: tf.reshape(a, (-1, 12))),
        ("reshape_list", [spec()], lambda a: tf.reshape(a, [-1, 2, 6])),
        ("transpose", [spec()], lambda a: tf.transpose(a, perm=[0, 2, 1])),
        ("expand_dims", [spec()], lambda a: tf.expand_dims(a, 1)),
        ("squeeze", [spec((3, 1, 4))], lambda a: tf.squeeze(a, axis=2)),
        ("split_num", [spec()], lambda a: tf.split(a, 2, axis=-1)),
        ("split_sizes", [spec()], lambda a: tf.split(a, [1, 3], axis=-1)),
        ("sqrt", [P], lambda a: tf.math.sqrt(a)),
        ("rsqrt", [P], lambda a: tf.math.rsqrt(a)),
        ("square", [spec()], lambda a: tf.math.square(a)),
        ("exp", [spec()], lambda a: tf.math.exp(a)),
        ("log", [P], lambda a: tf.math.log(a)),
        ("erf", [W], lambda a: tf.math.erf(a)),
        ("maximum_tt", two, lambda a, b: tf.math.maximum(a, b)),
        ("minimum_tc", [spec()], lambda a: tf.math.minimum(a, 0.5)),
        ("gelu_exact", [W], lambda a: tf.nn.gelu(a)),
        ("gelu_approximate", [W], lambda a: tf.nn.gelu(a, approximate=True)),
        ("silu", [W], lambda a: tf.nn.silu(a)),
        ("swish_beta", [W], lambda a: tf.nn.swish(a, beta=2.0)),
        ("leaky_relu", [spec()], lambda a: tf.nn.leaky_relu(a)),
        ("elu", [spec()], lambda a: tf.nn.elu(a)),
        ("selu", [spec()], lambda a: tf.nn.selu(a)),
        ("softplus", [W], lambda a: tf.math.softplus(a)),
        ("cast_float16", [spec()], lambda a: tf.cast(a, tf.float16)),
        ("cast_int32", [W], lambda a: tf.cast(a, "int32")),
        ("matmul_transpose_b", [spec(), spec((5, 4))], lambda a, b: tf.linalg.matmul(a, b, transpose_b=True)),
        ("matmul", [spec(), spec((4, 5))], lambda a, b: tf.matmul(a, b)),
        ("where", [spec(dtype="bool", kind="bool"), spec(), spec()], lambda cnd, a, b: tf.where(cnd, a, b)),
        ("clip_by_value", [spec()], lambda a: tf.clip_by_value(a, -0.5, 0.5)),
        ("pad", [spec()], lambda a: tf.pad(a, [[0, 0], [1, 1], [0, 2]])),
        ("pad_reflect", [spec()], lambda a: tf.pad(a, [[0, 0], [1, 1], [0, 2]], mode="REFLECT")),
        ("tile", [spec()], lambda a: tf.tile(a, [1, 2, 1])),
        ("gather", [spec()], lambda a: tf.gather(a, [0, 2], axis=1)),
        ("reverse", [spec()], lambda a: tf.reverse(a, [1])),
        ("cumsum", [spec()], lambda a: tf.math.cumsum(a, axis=1)),
        ("l2_normalize", [spec()], lambda a: tf.math.l2_normalize(a, axis=-1)),
    ], keras


def run_k2() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    cases, keras = k2_cases()
    for name, specs, build in cases:
        inputs = [keras.Input(shape, dtype=dtype, name=f"in{i}") for i, (shape, dtype, _) in enumerate(specs)]
        arrays = {f"in{i}": make_array(name, i, *s) for i, s in enumerate(specs)}
        out = build(*inputs)
        outs = list(out) if isinstance(out, list | tuple) else [out]
        model = keras.Model(inputs, outs)
        config = json.loads(model.to_json())["config"]
        result = model([arrays[f"in{i}"] for i in range(len(specs))], training=False)
        result = result if isinstance(result, list | tuple) else [result]
        layer = _target_layer(config)
        node = layer["inbound_nodes"][0]
        names = [ref[0] for ref in _k2_tensor_refs(node)]
        _save(
            f"k2_{name}",
            layer,
            node,
            keras.__version__,
            [arrays[n] for n in names],
            [r.numpy() for r in result],
        )


def _k2_tensor_refs(node):
    """Tensor references of a tf.keras node: the first argument's refs, then tensors inside kwargs."""
    refs = [node] if isinstance(node[0], str) else list(_k2_first_arg_refs(node))
    for ref in refs:
        if ref[0] != "_CONSTANT_VALUE":
            yield ref
    yield from _k2_kwarg_tensors(refs[0][3] if len(refs[0]) > 3 else {})


def _k2_first_arg_refs(obj):
    if isinstance(obj, list) and obj and isinstance(obj[0], str):
        yield obj
    elif isinstance(obj, list):
        for value in obj:
            yield from _k2_first_arg_refs(value)
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _k2_first_arg_refs(value)


def _k2_kwarg_tensors(obj):
    if isinstance(obj, list) and len(obj) == 3 and isinstance(obj[0], str):
        yield obj
    elif isinstance(obj, list):
        for value in obj:
            yield from _k2_kwarg_tensors(value)
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _k2_kwarg_tensors(value)


# ---------------------------------------------------------------------------------------------


def _target_layer(config: dict) -> dict:
    producers = {ref[0] for ref in config["output_layers"]}
    if len(producers) != 1:
        raise RuntimeError(f"outputs come from several layers: {producers}")
    (producer,) = producers
    return next(layer for layer in config["layers"] if layer["name"] == producer)


def _save(name: str, layer: dict, node, version: str, inputs, outputs) -> None:
    arrays = {
        "config": np.array(json.dumps(layer["config"])),
        "class_name": np.array(layer["class_name"]),
        "module": np.array(layer.get("module") or ""),
        "node": np.array(json.dumps(node)),
        "keras_version": np.array(version),
    }
    for i, a in enumerate(inputs):
        arrays[f"inputs/{i}"] = np.asarray(a)
    for i, a in enumerate(outputs):
        arrays[f"outputs/{i}"] = np.asarray(a)
    OUT.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT / f"{name}.npz", **arrays)
    print(f"{name}: {layer['class_name']} {layer['config'].get('function', '')}".rstrip())


def main(argv: list[str]) -> None:
    part = argv[0] if argv else "all"
    if part == "k3":
        run_k3(argv[1:])
    elif part == "k2":
        run_k2()
    elif part == "all":
        for key in ("k3", "k2"):
            subprocess.run([VENVS[key], __file__, key], check=True)
    else:
        raise SystemExit("usage: make_ops_goldens.py [k3 [CASE...]|k2|all]")


if __name__ == "__main__":
    main(sys.argv[1:])
