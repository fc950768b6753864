"""Conv, pooling and reshaping kernels against goldens made by real Keras.

The goldens live in samples/kernels/conv/ (made by samples/kernels/make_conv_goldens.py with Keras 3.15.1
and, for the ``k2_*`` files, tf.keras 2.21). Each one is a standalone layer with random weights.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from modelgraph.errors import UnsupportedConfigError
from modelgraph.runner import fast
from modelgraph.runner.registry import KernelSpec, get_kernel

GOLDEN_DIR = Path(__file__).resolve().parents[2] / "samples" / "kernels" / "conv"
GOLDENS = sorted(GOLDEN_DIR.glob("*.npz"))
ATOL, RTOL = 1e-5, 1e-4


def load_golden(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as data:
        version = tuple(int(v) for v in str(data["keras_version"]).split(".")[:3])
        return {
            "class_name": str(data["class_name"]),
            "config": json.loads(str(data["config"])),
            "keras_version": version,
            "weights": {k.split("/", 1)[1]: data[k] for k in data.files if k.startswith("weights/")},
            "inputs": [data[f"inputs/{i}"] for i in range(sum(k.startswith("inputs/") for k in data.files))],
            "kwargs": {k.split("/", 1)[1]: data[k] for k in data.files if k.startswith("kwargs/")},
            "outputs": [
                data[f"outputs/{i}"] for i in range(sum(k.startswith("outputs/") for k in data.files))
            ],
        }


def spec_of(
    golden: dict, class_name: str | None = None, config: dict | None = None, weights=None
) -> KernelSpec:
    return KernelSpec(
        name=golden["config"].get("name", "layer"),
        class_name=class_name or golden["class_name"],
        config=golden["config"] if config is None else config,
        weights=golden["weights"] if weights is None else weights,
        keras_version=golden["keras_version"],
    )


def run(golden: dict, reference: bool = False, **overrides) -> np.ndarray:
    """The golden's layer run by the plan's kernel (the fast one where there is one), or by its
    reference kernel."""
    key = overrides.get("class_name") or golden["class_name"]
    fn = fast.kernel_for(key, spec_of(golden, **overrides), reference=reference)
    return fn(*golden["inputs"], **golden["kwargs"])


def close(actual: np.ndarray, expected: np.ndarray) -> bool:
    return actual.shape == expected.shape and np.allclose(actual, expected, atol=ATOL, rtol=RTOL)


def test_goldens_present():
    assert len(GOLDENS) >= 100, "run samples/kernels/make_conv_goldens.py"
    classes = {load_golden(p)["class_name"] for p in GOLDENS}
    expected = {
        "Conv1D", "Conv2D", "Conv3D", "Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose",
        "DepthwiseConv1D", "DepthwiseConv2D", "SeparableConv1D", "SeparableConv2D",
        "MaxPooling1D", "MaxPooling2D", "MaxPooling3D", "AveragePooling1D", "AveragePooling2D", "AveragePooling3D",
        "GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalAveragePooling3D",
        "GlobalMaxPooling1D", "GlobalMaxPooling2D", "GlobalMaxPooling3D",
        "Flatten", "Reshape", "Permute", "RepeatVector", "ZeroPadding1D", "ZeroPadding2D", "ZeroPadding3D",
        "Cropping1D", "Cropping2D", "Cropping3D", "UpSampling1D", "UpSampling2D", "UpSampling3D",
        "Resizing", "CenterCrop",
    }  # fmt: skip
    assert expected <= classes, expected - classes


@pytest.mark.parametrize("reference", [False, True], ids=["plan", "reference"])
@pytest.mark.parametrize("path", GOLDENS, ids=[p.stem for p in GOLDENS])
def test_golden(path: Path, reference: bool):
    """Keras's output, from the plan's kernel and from the reference kernel."""
    golden = load_golden(path)
    out = run(golden, reference=reference)
    expected = golden["outputs"][0]
    assert out.shape == expected.shape
    assert out.dtype == expected.dtype
    np.testing.assert_allclose(out, expected, atol=ATOL, rtol=RTOL)


# --- the comparison can fail: a kernel that ignored bias, padding or strides would be caught ----------


WITH_BIAS = [p for p in GOLDENS if "weights/bias" in np.load(p).files]


@pytest.mark.parametrize("path", WITH_BIAS, ids=[p.stem for p in WITH_BIAS])
def test_golden_detects_missing_bias(path: Path):
    golden = load_golden(path)
    weights = dict(golden["weights"], bias=np.zeros_like(golden["weights"]["bias"]))
    assert not close(run(golden, weights=weights), golden["outputs"][0])


# Cases where "same" and "valid" coincide by construction: a 1x1 kernel, or a transposed conv whose
# stride exceeds its kernel (both paddings give length n*s with no crop).
SAME_IS_VALID = {"conv2d_1x1_s2_same", "conv1dt_same_s3_k2"}
PADDED = [
    p
    for p in GOLDENS
    if json.loads(str(np.load(p)["config"])).get("padding") in ("same", "causal")
    and p.stem.removeprefix("k2_") not in SAME_IS_VALID
]


@pytest.mark.parametrize("path", PADDED, ids=[p.stem for p in PADDED])
def test_golden_detects_wrong_padding(path: Path):
    golden = load_golden(path)
    expected = golden["outputs"][0]
    # valid instead of same/causal, and "same" with the extra pixel on the wrong side.
    config = dict(golden["config"], padding="valid")
    assert not close(run(golden, config=config), expected)


def test_same_padding_puts_extra_pixel_after():
    from modelgraph.runner.kernels.conv_utils import same_pads

    assert same_pads(8, 3, 2) == (0, 1)
    assert same_pads(7, 3, 2) == (1, 1)
    assert same_pads(7, 4, 2) == (1, 2)
    assert same_pads(9, 3, 1, 2) == (2, 2)


def test_aliases_match_their_class():
    for stem, alias in [
        ("conv2d_same_odd_relu", "Convolution2D"),
        ("maxpool2d_same_p3_s2", "MaxPool2D"),
        ("avgpool2d_same_p3_s2_odd", "AvgPool2D"),
        ("gap2d_keepdims", "GlobalAvgPool2D"),
        ("gmp1d", "GlobalMaxPool1D"),
        ("conv2dt_same_s2", "Deconvolution2D"),
    ]:
        golden = load_golden(GOLDEN_DIR / f"{stem}.npz")
        np.testing.assert_allclose(run(golden, class_name=alias), golden["outputs"][0], atol=ATOL, rtol=RTOL)


def test_depthwise_accepts_tf_keras_weight_name():
    golden = load_golden(GOLDEN_DIR / "dw2d_same.npz")
    weights = dict(golden["weights"])
    weights["depthwise_kernel"] = weights.pop("kernel")
    np.testing.assert_allclose(run(golden, weights=weights), golden["outputs"][0], atol=ATOL, rtol=RTOL)


def test_float32_stays_float32():
    golden = load_golden(GOLDEN_DIR / "avgpool2d_same_p3_s2_odd.npz")
    assert run(golden).dtype == np.float32
    golden = load_golden(GOLDEN_DIR / "upsample2d_bilinear.npz")
    assert run(golden).dtype == np.float32


# --- refusals ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stem", "key", "value"),
    [
        ("upsample2d_bilinear", "interpolation", "cubic_spline"),
        ("upsample2d_bilinear", "interpolation", "lanczos7"),
        ("resizing_bilinear_down", "interpolation", "box"),
        ("resizing_bilinear_down", "antialias", "yes"),
        ("resizing_bilinear_down", "fill_mode", "reflect"),
        ("conv2d_same_odd_relu", "padding", "causal"),
        ("conv2d_same_odd_relu", "padding", "full"),
        ("conv2d_same_odd_relu", "data_format", "channels_middle"),
        ("conv2d_same_odd_relu", "activation", "no_such_activation"),
        ("conv2d_same_odd_relu", "some_future_key", 3),
        ("conv2dt_same_s2", "groups", 2),
        ("dw2d_same", "depth_multiplier", 0),
        ("maxpool2d_same_p3_s2", "padding", "causal"),
        ("gap2d", "keepdims", "yes"),
        ("flatten", "data_format", "th"),
    ],
)
def test_unsupported_config_raises(stem, key, value):
    golden = load_golden(GOLDEN_DIR / f"{stem}.npz")
    config = dict(golden["config"], **{key: value})
    with pytest.raises(UnsupportedConfigError) as info:
        get_kernel(golden["class_name"])(spec_of(golden, config=config))
    assert info.value.key == key


def test_keras1_convolution_config_is_refused():
    config = {
        "name": "c",
        "nb_filter": 4,
        "nb_row": 3,
        "nb_col": 3,
        "border_mode": "same",
        "subsample": [1, 1],
    }
    spec = KernelSpec("c", "Convolution2D", config, {"kernel": np.zeros((3, 3, 2, 4), np.float32)}, (1, 2, 2))
    with pytest.raises(UnsupportedConfigError):
        get_kernel("Convolution2D")(spec)


# --- resampling methods: every tf.image.resize method Keras 2 or 3 can write ---------------------------

RESAMPLED = [
    p
    for p in GOLDENS
    if load_golden(p)["class_name"] in ("Resizing", "UpSampling2D")
    and load_golden(p)["config"].get("interpolation", "nearest") not in ("nearest", "bilinear")
    or load_golden(p)["config"].get("antialias")
]


def test_every_resize_method_has_goldens():
    methods = {
        (load_golden(p)["config"]["interpolation"], bool(load_golden(p)["config"].get("antialias")))
        for p in RESAMPLED
    }
    expected = {
        ("bicubic", False), ("bicubic", True), ("area", False), ("lanczos3", False), ("lanczos3", True),
        ("lanczos5", False), ("bilinear", True), ("gaussian", False), ("mitchellcubic", False),
    }  # fmt: skip
    assert expected <= methods, expected - methods


@pytest.mark.parametrize("path", RESAMPLED, ids=[p.stem for p in RESAMPLED])
def test_resize_golden_detects_wrong_method(path: Path):
    """Each golden tells its method (and antialiasing) apart from plain bilinear resizing."""
    golden = load_golden(path)
    config = dict(golden["config"], interpolation="bilinear")
    if "antialias" in config:
        config["antialias"] = False
    assert not close(run(golden, config=config), golden["outputs"][0])
