"""Golden cases for the core / merge / normalization / preprocessing / applications kernels and the
activation table, made by real Keras.

Run with Keras 3 (TensorFlow backend):
    KERAS_BACKEND=tensorflow /work/venvs/k3/bin/python samples/kernels/make_core_goldens.py
and with tf.keras 2 (writes ``k2_*`` files: the version-specific semantics -- hard_sigmoid, LeakyReLU
``alpha``, BatchNormalization axis lists, Softmax masks, UnitNormalization/Dot epsilons):
    /work/venvs/k2/bin/python samples/kernels/make_core_goldens.py --keras2

Each case builds one layer standalone, calls it once (which builds it), gives it realistic random
weights (BN moving_mean ~ N(0, 0.5), moving_variance ~ U(0.5, 2), non-zero beta/bias, ...), runs it
in inference mode on a deterministic random input and writes ``samples/kernels/core/<case>.npz``:

* ``config``: ``json.dumps(layer.get_config())`` -- exactly what Keras serialises
* ``class_name``, ``keras_version``
* ``weights/<canonical name>`` (kernel, bias, gamma, beta, moving_mean, moving_variance, alpha,
  embeddings, mean, variance, count)
* ``inputs/<i>``: the call's positional inputs; for merge layers and CustomScaleLayer, the elements of
  the one list argument (``call`` is then ``"list"``, else ``"args"``)
* ``kwargs/mask`` when the call passed a mask
* ``outputs/0``
"""

from __future__ import annotations

import json
import os
import sys
import zlib
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")

import numpy as np  # noqa: E402

KERAS2 = "--keras2" in sys.argv
if KERAS2:
    import tf_keras as keras  # noqa: E402
    from tf_keras.src.applications.convnext import LayerScale  # noqa: E402
    from tf_keras.src.applications.inception_resnet_v2 import CustomScaleLayer  # noqa: E402
else:
    import keras  # noqa: E402
    from keras.src.applications.convnext import LayerScale  # noqa: E402
    from keras.src.applications.inception_resnet_v2 import CustomScaleLayer  # noqa: E402

OUT = Path(__file__).resolve().parent / "core"
L = keras.layers

LIST_CALL = {
    "Add",
    "Subtract",
    "Multiply",
    "Average",
    "Maximum",
    "Minimum",
    "Concatenate",
    "Dot",
    "CustomScaleLayer",
}

K3_ACTIVATIONS = [
    "linear",
    "relu",
    "relu6",
    "sigmoid",
    "tanh",
    "softplus",
    "softsign",
    "exponential",
    "elu",
    "selu",
    "softmax",
    "log_softmax",
    "hard_sigmoid",
    "hard_silu",
    "silu",
    "gelu",
    "leaky_relu",
    "mish",
    "celu",
    "glu",
    "squareplus",
    "sparse_plus",
    "soft_shrink",
    "hard_shrink",
    "hard_tanh",
    "tanh_shrink",
    "log_sigmoid",
    "sparse_sigmoid",
    "sparsemax",
]
K2_ACTIVATIONS = [
    "linear",
    "relu",
    "sigmoid",
    "tanh",
    "softplus",
    "softsign",
    "exponential",
    "elu",
    "selu",
    "softmax",
    "hard_sigmoid",
    "swish",
    "gelu",
    "mish",
]


def case(name, make, shapes, *, kind="float", mask=None, scale=1.5, inputs=None):
    if isinstance(shapes, tuple):
        shapes = [shapes]
    return {
        "name": name,
        "make": make,
        "shapes": shapes,
        "kind": kind,
        "mask": mask,
        "scale": scale,
        "inputs": inputs,
    }


def activation_input():
    # dense coverage of [-7, 7] (both hard_sigmoid kinks, the shrink thresholds, ...) plus a few
    # exact breakpoints
    x = np.linspace(-7.0, 7.0, 236, dtype=np.float32)
    extra = np.array([-3, -2.5, -1, -0.5, 0, 0.5, 1, 2.5], dtype=np.float32)
    return [np.concatenate([x, extra]).reshape(4, 61)[:, :60].copy()]


def masked_rows():
    rng = np.random.default_rng(7)
    x = rng.normal(0, 1.5, (2, 6, 4)).astype(np.float32)
    x[0, 1] = 0.0
    x[1, 4:] = 0.0
    return [x]


def masked_rows_m1():
    x = masked_rows()[0]
    x[x == 0.0] = -1.0
    return [x]


def int_ids():
    rng = np.random.default_rng(3)
    return [rng.integers(0, 10, (3, 5)).astype(np.int32)]


def float_ids():
    rng = np.random.default_rng(4)
    return [(rng.integers(0, 10, (3, 5)) + rng.uniform(0, 0.95, (3, 5))).astype(np.float32)]


def with_zero_row():
    rng = np.random.default_rng(5)
    x = rng.normal(0, 1.5, (3, 4, 6)).astype(np.float32)
    x[1, 2] = 0.0
    return [x]


def softmax_mask():
    rng = np.random.default_rng(6)
    m = rng.uniform(size=(2, 3, 5)) > 0.3
    m[1, 2] = False  # a fully masked row
    return m


def k3_cases():
    c = []
    # --- Dense / EinsumDense -----------------------------------------------------------------
    c += [
        case("dense_relu", lambda: L.Dense(4, activation="relu"), (3, 6)),
        case("dense_nobias", lambda: L.Dense(5, use_bias=False), (3, 6)),
        case("dense_3d_tanh", lambda: L.Dense(4, activation="tanh"), (2, 5, 6)),
        case("dense_4d_softmax", lambda: L.Dense(3, activation="softmax"), (2, 3, 4, 5)),
        case("dense_gelu", lambda: L.Dense(7, activation="gelu"), (3, 6)),
        case("einsum_ab_bc", lambda: L.EinsumDense("ab,bc->ac", output_shape=4, bias_axes="c"), (3, 6)),
        case(
            "einsum_abc_cd_gelu",
            lambda: L.EinsumDense("abc,cd->abd", output_shape=(None, 5), bias_axes="d", activation="gelu"),
            (2, 4, 6),
        ),
        case(
            "einsum_abc_cde",
            lambda: L.EinsumDense("abc,cde->abde", output_shape=(None, 3, 4), bias_axes="de"),
            (2, 4, 6),
        ),
        case(
            "einsum_bias_middle",
            lambda: L.EinsumDense("abc,cd->abd", output_shape=(4, 5), bias_axes="b"),
            (2, 4, 6),
        ),
        case(
            "einsum_ellipsis",
            lambda: L.EinsumDense("...b,bc->...c", output_shape=5, bias_axes="c"),
            (2, 3, 6),
        ),
        case(
            "einsum_mha_style",
            lambda: L.EinsumDense("btd,dnh->btnh", output_shape=(None, 2, 3), bias_axes="nh"),
            (2, 4, 6),
        ),
        case("einsum_nobias", lambda: L.EinsumDense("abc,cd->abd", output_shape=(None, 3)), (2, 4, 6)),
    ]
    # --- activations -----------------------------------------------------------------------------
    for name in K3_ACTIVATIONS:
        c.append(case(f"activation_{name}", lambda n=name: L.Activation(n), (4, 60), inputs=activation_input))
    c += [
        case("relu_default", lambda: L.ReLU(), (3, 8), scale=3),
        case("relu_max6", lambda: L.ReLU(max_value=6.0), (3, 8), scale=5),
        case(
            "relu_all_options",
            lambda: L.ReLU(max_value=4.5, negative_slope=0.1, threshold=0.5),
            (4, 8),
            scale=4,
        ),
        case("relu_slope_only", lambda: L.ReLU(negative_slope=0.2), (3, 8), scale=3),
        case("relu_threshold_only", lambda: L.ReLU(threshold=1.0), (3, 8), scale=3),
        case("relu_slope_threshold", lambda: L.ReLU(negative_slope=0.1, threshold=0.5), (3, 8), scale=3),
        case("relu_max6_slope", lambda: L.ReLU(max_value=6.0, negative_slope=0.1), (3, 8), scale=5),
        case("leaky_relu_default", lambda: L.LeakyReLU(), (3, 8)),
        case("leaky_relu_005", lambda: L.LeakyReLU(negative_slope=0.05), (3, 8)),
        case("prelu", lambda: L.PReLU(), (2, 4, 5)),
        case("prelu_shared1", lambda: L.PReLU(shared_axes=[1]), (2, 4, 5)),
        case("prelu_shared12", lambda: L.PReLU(shared_axes=[1, 2]), (2, 3, 4, 5)),
        case("elu_default", lambda: L.ELU(), (3, 8)),
        case("elu_alpha05", lambda: L.ELU(alpha=0.5), (3, 8)),
        case("softmax_default", lambda: L.Softmax(), (2, 3, 5), scale=3),
        case("softmax_axis1", lambda: L.Softmax(axis=1), (2, 3, 5), scale=3),
        case("softmax_axis12", lambda: L.Softmax(axis=[1, 2]), (2, 3, 5), scale=3),
        case("softmax_mask", lambda: L.Softmax(), (2, 3, 5), mask=softmax_mask, scale=3),
    ]
    # --- identities --------------------------------------------------------------------------------
    c += [
        case("dropout", lambda: L.Dropout(0.5), (3, 6)),
        case("dropout_noise_shape", lambda: L.Dropout(0.3, noise_shape=(None, 1, 1, 4)), (2, 3, 3, 4)),
        case("spatial_dropout1d", lambda: L.SpatialDropout1D(0.3), (2, 4, 5)),
        case("spatial_dropout2d", lambda: L.SpatialDropout2D(0.3), (2, 3, 3, 4)),
        case("spatial_dropout3d", lambda: L.SpatialDropout3D(0.3), (1, 2, 3, 3, 4)),
        case("gaussian_noise", lambda: L.GaussianNoise(0.3), (3, 6)),
        case("gaussian_dropout", lambda: L.GaussianDropout(0.3), (3, 6)),
        case("alpha_dropout", lambda: L.AlphaDropout(0.2), (3, 6)),
        case("activity_regularization", lambda: L.ActivityRegularization(l1=0.01, l2=0.02), (3, 6)),
        case("identity", lambda: L.Identity(), (3, 6)),
    ]
    # --- Embedding / Masking -------------------------------------------------------------------------
    c += [
        case("embedding", lambda: L.Embedding(10, 4), (3, 5), inputs=int_ids),
        case("embedding_mask_zero", lambda: L.Embedding(10, 3, mask_zero=True), (3, 5), inputs=int_ids),
        case("embedding_float_ids", lambda: L.Embedding(10, 4), (3, 5), inputs=float_ids),
        case("masking", lambda: L.Masking(), (2, 6, 4), inputs=masked_rows),
        case("masking_m1", lambda: L.Masking(mask_value=-1.0), (2, 6, 4), inputs=masked_rows_m1),
    ]
    # --- merge --------------------------------------------------------------------------------------
    c += [
        case("add2", lambda: L.Add(), [(2, 3, 4), (2, 3, 4)]),
        case("add3", lambda: L.Add(), [(2, 5), (2, 5), (2, 5)]),
        case("add_rank_broadcast", lambda: L.Add(), [(2, 3, 4, 5), (2, 5)]),
        case("add_size1_broadcast", lambda: L.Add(), [(2, 1, 5), (2, 4, 5)]),
        case("subtract", lambda: L.Subtract(), [(2, 3, 4), (2, 3, 4)]),
        case("multiply3", lambda: L.Multiply(), [(2, 4), (2, 4), (2, 4)]),
        case("multiply_se_broadcast", lambda: L.Multiply(), [(2, 3, 3, 4), (2, 1, 1, 4)]),
        case("average", lambda: L.Average(), [(2, 3, 4), (2, 3, 4), (2, 3, 4)]),
        case("maximum", lambda: L.Maximum(), [(2, 3, 4), (2, 3, 4)]),
        case("minimum", lambda: L.Minimum(), [(2, 3, 4), (2, 3, 4), (2, 3, 4)]),
        case("concatenate_last", lambda: L.Concatenate(), [(2, 3, 4), (2, 3, 2)]),
        case("concatenate_axis1", lambda: L.Concatenate(axis=1), [(2, 3, 4), (2, 1, 4), (2, 2, 4)]),
        case("dot_2d", lambda: L.Dot(axes=1), [(3, 5), (3, 5)]),
        case("dot_3d_axes21", lambda: L.Dot(axes=[2, 1]), [(2, 3, 4), (2, 4, 5)]),
        case("dot_3d_normalize", lambda: L.Dot(axes=-1, normalize=True), [(2, 3, 4), (2, 5, 4)]),
        case("dot_2d_3d", lambda: L.Dot(axes=(1, 1)), [(2, 4), (2, 4, 3)]),
        case("dot_3d_2d", lambda: L.Dot(axes=(2, 1)), [(2, 3, 4), (2, 4)]),
    ]
    # --- normalization ----------------------------------------------------------------------------
    c += [
        case("bn_default", lambda: L.BatchNormalization(), (2, 4, 5, 6)),
        case("bn_axis1", lambda: L.BatchNormalization(axis=1), (2, 4, 5, 3)),
        case("bn_noscale", lambda: L.BatchNormalization(scale=False, epsilon=1e-3), (2, 3, 3, 4)),
        case("bn_nocenter_eps", lambda: L.BatchNormalization(center=False, epsilon=1.001e-5), (2, 3, 3, 4)),
        case("bn_2d", lambda: L.BatchNormalization(momentum=0.9), (4, 6)),
        case("ln_default", lambda: L.LayerNormalization(), (2, 3, 6)),
        case("ln_axis12", lambda: L.LayerNormalization(axis=[1, 2]), (2, 3, 4, 5)),
        case("ln_plain", lambda: L.LayerNormalization(center=False, scale=False, epsilon=1e-6), (2, 3, 6)),
        case("ln_rms", lambda: L.LayerNormalization(rms_scaling=True), (2, 3, 6)),
        case("ln_axis1", lambda: L.LayerNormalization(axis=1), (2, 5, 3)),
        case("gn_groups2", lambda: L.GroupNormalization(groups=2), (2, 4, 4, 8)),
        case("gn_groups_all", lambda: L.GroupNormalization(groups=-1), (2, 5, 6)),
        case("gn_axis1", lambda: L.GroupNormalization(groups=3, axis=1), (2, 6, 4)),
        case(
            "gn_plain",
            lambda: L.GroupNormalization(groups=4, center=False, scale=False, epsilon=1e-5),
            (2, 5, 8),
        ),
        case("unit_norm", lambda: L.UnitNormalization(), (3, 4, 6), inputs=with_zero_row),
        case("unit_norm_axis12", lambda: L.UnitNormalization(axis=[1, 2]), (3, 4, 6)),
    ]
    # --- preprocessing -----------------------------------------------------------------------------
    c += [
        case("rescaling_255_uint8", lambda: L.Rescaling(1 / 255.0), (2, 4, 4, 3), kind="uint8"),
        case("rescaling_offset", lambda: L.Rescaling(1 / 127.5, offset=-1.0), (2, 4, 4, 3), kind="uint8"),
        case(
            "rescaling_list",
            lambda: L.Rescaling([1 / 0.229**0.5, 1 / 0.224**0.5, 1 / 0.225**0.5]),
            (2, 3, 3, 3),
        ),
        case(
            "rescaling_list_offset",
            lambda: L.Rescaling([0.5, 2.0, 1.0], offset=[0.1, -0.2, 0.3]),
            (2, 3, 3, 3),
        ),
        case(
            "normalization_config",
            lambda: L.Normalization(mean=[0.485, 0.456, 0.406], variance=[0.229**2, 0.224**2, 0.225**2]),
            (2, 3, 3, 3),
        ),
        case("normalization_weights", lambda: L.Normalization(), (2, 3, 3, 3)),
        case("normalization_weights_axis12", lambda: L.Normalization(axis=(1, 2)), (2, 3, 4, 2)),
        case(
            "normalization_scalar_axis_none",
            lambda: L.Normalization(mean=2.0, variance=4.0, axis=None),
            (2, 3, 4),
        ),
        case(
            "normalization_invert",
            lambda: L.Normalization(mean=[0.5, -1.0], variance=[2.0, 0.25], invert=True),
            (3, 2),
        ),
        case(
            "normalization_tiny_variance",
            lambda: L.Normalization(mean=[1.0, 0.0], variance=[0.0, 1e-20]),
            (3, 2),
        ),
    ]
    # --- applications ------------------------------------------------------------------------------
    c += [
        case("layer_scale", lambda: LayerScale(1e-6, 8), (2, 3, 3, 8)),
        case("custom_scale", lambda: CustomScaleLayer(0.17), [(2, 3, 3, 4), (2, 3, 3, 4)]),
    ]
    return c


def k2_cases():
    c = []
    for name in K2_ACTIVATIONS:
        c.append(
            case(f"k2_activation_{name}", lambda n=name: L.Activation(n), (4, 60), inputs=activation_input)
        )
    c += [
        case("k2_dense_relu", lambda: L.Dense(4, activation="relu"), (2, 3, 6)),
        case("k2_dense_hard_sigmoid", lambda: L.Dense(4, activation="hard_sigmoid"), (3, 6), scale=3),
        case(
            "k2_einsum",
            lambda: L.EinsumDense("abc,cd->abd", output_shape=(None, 5), bias_axes="d"),
            (2, 4, 6),
        ),
        case(
            "k2_relu_all_options",
            lambda: L.ReLU(max_value=4.5, negative_slope=0.1, threshold=0.5),
            (4, 8),
            scale=4,
        ),
        case("k2_leaky_relu_default", lambda: L.LeakyReLU(), (3, 8)),
        case("k2_leaky_relu_alpha01", lambda: L.LeakyReLU(alpha=0.1), (3, 8)),
        case("k2_prelu_shared", lambda: L.PReLU(shared_axes=[1, 2]), (2, 3, 4, 5)),
        case("k2_elu", lambda: L.ELU(alpha=0.7), (3, 8)),
        case("k2_thresholded_relu", lambda: L.ThresholdedReLU(), (3, 8)),
        case("k2_thresholded_relu_05", lambda: L.ThresholdedReLU(theta=0.5), (3, 8)),
        case("k2_softmax_axis12", lambda: L.Softmax(axis=[1, 2]), (2, 3, 5), scale=3),
        case("k2_softmax_mask", lambda: L.Softmax(), (2, 3, 5), mask=softmax_mask, scale=3),
        case("k2_dropout", lambda: L.Dropout(0.5), (3, 6)),
        case("k2_spatial_dropout2d", lambda: L.SpatialDropout2D(0.3), (2, 3, 3, 4)),
        case("k2_gaussian_noise", lambda: L.GaussianNoise(0.3), (3, 6)),
        case("k2_alpha_dropout", lambda: L.AlphaDropout(0.2), (3, 6)),
        case("k2_embedding", lambda: L.Embedding(10, 4, input_length=5), (3, 5), inputs=int_ids),
        case("k2_masking", lambda: L.Masking(), (2, 6, 4), inputs=masked_rows),
        case("k2_add_rank_broadcast", lambda: L.Add(), [(2, 3, 4, 5), (2, 5)]),
        case("k2_average", lambda: L.Average(), [(2, 3, 4), (2, 3, 4)]),
        case("k2_concatenate", lambda: L.Concatenate(axis=1), [(2, 3, 4), (2, 2, 4)]),
        case("k2_dot_2d", lambda: L.Dot(axes=1), [(3, 5), (3, 5)]),
        case("k2_dot_normalize", lambda: L.Dot(axes=-1, normalize=True), [(2, 3, 4), (2, 5, 4)]),
        case("k2_bn_default", lambda: L.BatchNormalization(), (2, 4, 5, 6)),
        case("k2_bn_axis1", lambda: L.BatchNormalization(axis=1), (2, 4, 5, 3)),
        case("k2_bn_multi_axis", lambda: L.BatchNormalization(axis=[1, 3]), (2, 4, 3, 5)),
        case("k2_bn_noscale", lambda: L.BatchNormalization(scale=False, epsilon=1.001e-5), (2, 3, 3, 4)),
        case("k2_ln_default", lambda: L.LayerNormalization(), (2, 3, 6)),
        case("k2_ln_axis12", lambda: L.LayerNormalization(axis=[1, 2], epsilon=1e-6), (2, 3, 4, 5)),
        case("k2_gn", lambda: L.GroupNormalization(groups=2), (2, 4, 4, 8)),
        case("k2_unit_norm", lambda: L.UnitNormalization(), (3, 4, 6), inputs=with_zero_row),
        case("k2_rescaling", lambda: L.Rescaling(1 / 127.5, offset=-1.0), (2, 4, 4, 3), kind="uint8"),
        case(
            "k2_normalization_config",
            lambda: L.Normalization(mean=[0.5, 0.4, 0.3], variance=[0.1, 0.2, 0.3]),
            (2, 3, 3, 3),
        ),
        case("k2_normalization_weights", lambda: L.Normalization(), (2, 3, 3, 3)),
        case("k2_layer_scale", lambda: LayerScale(1e-6, 8), (2, 3, 3, 8)),
        case("k2_custom_scale", lambda: CustomScaleLayer(0.2), [(2, 3, 3, 4), (2, 3, 3, 4)]),
    ]
    return c


def canonical(layer, var) -> str:
    name = (getattr(var, "path", None) or var.name).split("/")[-1].split(":")[0]
    if type(layer).__name__ == "LayerScale":
        return "gamma"  # Keras 3 auto-names it "variable"
    return name


def realistic(name, shape, rng, class_name):
    shape = tuple(int(s) for s in shape)
    if name == "moving_mean" or name == "mean":
        return rng.normal(0, 0.5, shape)
    if name == "moving_variance" or name == "variance":
        return rng.uniform(0.5, 2.0, shape)
    if name == "count":
        return np.array(1000)
    if name == "gamma":
        return rng.uniform(0.05, 0.5, shape) if class_name == "LayerScale" else rng.uniform(0.5, 1.5, shape)
    if name in ("beta", "bias"):
        return rng.normal(0, 0.2, shape)
    if name == "alpha":
        return rng.uniform(0.05, 0.4, shape)
    if name == "embeddings":
        return rng.normal(0, 1.0, shape)
    if name == "kernel":
        fan_in = shape[0] if class_name != "EinsumDense" else max(1, int(np.prod(shape)) // shape[-1])
        return rng.normal(0, 1.0 / np.sqrt(fan_in), shape)
    raise ValueError(f"no recipe for weight {name!r} of {class_name}")


def make_inputs(c, rng):
    if c["inputs"] is not None:
        return c["inputs"]()
    xs = []
    for shape in c["shapes"]:
        if c["kind"] == "uint8":
            xs.append(rng.integers(0, 256, shape).astype(np.uint8))
        else:
            xs.append((rng.normal(0, 1, shape) * c["scale"]).astype(np.float32))
    return xs


def _json_default(obj):
    # what Keras's own JSON encoders do with NumPy values (tf_keras json_utils.get_json_type)
    if isinstance(obj, (np.ndarray, np.generic)):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def run_case(c):
    rng = np.random.default_rng(zlib.crc32(c["name"].encode()))
    layer = c["make"]()
    class_name = type(layer).__name__
    xs = make_inputs(c, rng)
    call_list = class_name in LIST_CALL
    mask = c["mask"]() if c["mask"] is not None else None

    def call():
        args = [keras.ops.convert_to_tensor(x) if not KERAS2 else x for x in xs]
        if call_list:
            return layer(args)
        if mask is not None:
            return layer(*args, mask=mask)
        return layer(*args)

    call()  # builds the layer
    weights = {}
    for var in layer.weights:
        name = canonical(layer, var)
        value = realistic(name, var.shape, rng, class_name).astype(
            np.dtype(var.dtype.as_numpy_dtype if KERAS2 else var.dtype)
        )
        var.assign(value)
        weights[name] = np.asarray(var.numpy())
    if class_name == "Normalization":
        layer.finalize_state()  # recomputes the broadcast mean/variance from the adapted weights
    y = np.asarray(call())
    config = layer.get_config()
    record = {
        "config": np.array(json.dumps(config, default=_json_default)),
        "class_name": np.array(class_name),
        "keras_version": np.array(keras.__version__),
        "call": np.array("list" if call_list else "args"),
        "outputs/0": y,
    }
    for i, x in enumerate(xs):
        record[f"inputs/{i}"] = np.asarray(x)
    for name, value in weights.items():
        record[f"weights/{name}"] = value
    if mask is not None:
        record["kwargs/mask"] = np.asarray(mask)
    OUT.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT / f"{c['name']}.npz", **record)
    return class_name


def main():
    only = [a for a in sys.argv[1:] if not a.startswith("--")]
    classes = set()
    cases = k2_cases() if KERAS2 else k3_cases()
    for c in cases:
        if only and not any(o in c["name"] for o in only):
            continue
        classes.add(run_case(c))
    print(f"wrote {len(cases)} cases ({len(classes)} classes) to {OUT} with keras {keras.__version__}")


if __name__ == "__main__":
    main()
