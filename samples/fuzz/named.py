"""Named cases in the fuzzer's case format: the layout and convolution fixes, each made by real Keras.

Dev-time only (needs TensorFlow); writes ``samples/fuzz/named/<flavour>_<name>/`` (every format the
flavour saves, ``io.npz``, ``case.json``; see ``fuzz.py``), then packs every named case into
``samples/fuzz/named.tar.xz`` (committed; checked by ``tests/test_fuzz_cases.py``)::

    /work/venvs/k3/bin/python samples/fuzz/named.py --flavour k3
    /work/venvs/k2/bin/python samples/fuzz/named.py --flavour k2   # the second run packs both

Every ``channels_first`` layer is checked against its ``channels_last`` twin (``fuzz.twin_check``)
before the case is written, so the goldens state the layer's definition, not a TensorFlow CPU kernel.
"""

from __future__ import annotations

import argparse
import sys
import zlib
from pathlib import Path

import fuzz
import numpy as np

OUT = Path(__file__).resolve().parent / "named"


def _image(shape):
    return lambda rng: rng.normal(size=(2, *shape)).astype("float32")


def models(K):
    """``name -> (build() -> (model, arrays), tags)`` for the flavour's Keras ``K``."""
    L = K.layers
    rng = np.random.default_rng(7)

    def single(shape, *make):
        def build():
            x = K.Input(shape, name="x")
            h = x
            for m in make:
                h = m()(h)
            return K.Model(x, h), {"x": _image(shape)(rng)}

        return build

    cf = {"data_format": "channels_first"}
    named = {
        # Keras applies a conv's activation to its output as laid out: softmax over the last axis,
        # which is spatial in channels_first.
        "conv1d_cf_softmax": (single((3, 7), lambda: L.Conv1D(4, 2, activation="softmax", **cf)), ["softmax"]),
        "conv2d_cf_log_softmax": (
            single((3, 6, 5), lambda: L.Conv2D(4, 3, padding="same", activation="log_softmax", **cf)),
            ["log_softmax"],
        ),
        "conv3d_cf_softmax": (single((2, 4, 4, 3), lambda: L.Conv3D(3, 2, activation="softmax", **cf)), ["softmax"]),
        # (Shapes avoid a last spatial axis as long as the filters: there Keras 3's TensorFlow backend
        # adds the bias along that axis, see fuzz.twin_check and docs/runner.md.)
        "separable1d_cf_softmax": (
            single((3, 9), lambda: L.SeparableConv1D(4, 3, depth_multiplier=2, activation="softmax", **cf)),
            ["softmax"],
        ),
        "separable2d_cf_softmax": (
            single((3, 6, 7), lambda: L.SeparableConv2D(4, 3, depth_multiplier=2, activation="softmax", **cf)),
            ["softmax"],
        ),
        "depthwise2d_cf_softmax": (
            single((3, 5, 6), lambda: L.DepthwiseConv2D(3, padding="same", activation="softmax", **cf)),
            ["softmax"],
        ),
        "conv2d_transpose_cf_softmax": (
            single((3, 4, 5), lambda: L.Conv2DTranspose(2, 3, strides=2, activation="softmax", **cf)),
            ["softmax", "strided"],
        ),
        "conv1d_transpose_cf_softmax": (
            single((3, 5), lambda: L.Conv1DTranspose(2, 3, strides=2, padding="same", activation="softmax", **cf)),
            ["softmax", "strided"],
        ),
        # Strided 1x1 convs on a channels_first input and after a Permute (non-contiguous arrays).
        "conv1d_1x1_strided_cf": (single((3, 8), lambda: L.Conv1D(5, 1, strides=2, **cf)), ["strided"]),
        "conv2d_1x1_strided_cf": (single((3, 8, 7), lambda: L.Conv2D(5, 1, strides=2, **cf)), ["strided"]),
        "conv3d_1x1_strided_cf": (single((3, 4, 5, 4), lambda: L.Conv3D(4, 1, strides=2, **cf)), ["strided"]),
        "conv2d_1x1_strided_after_permute": (
            single((8, 7, 3), lambda: L.Permute((2, 1, 3)), lambda: L.Conv2D(4, 1, strides=2, padding="same")),
            ["strided", "Permute"],
        ),
        # One channel, channels_first: moved to channels-last, NumPy calls the array C-contiguous with
        # the last axis's stride a whole image (row_patches refused it).
        "conv1d_cf_one_channel": (single((1, 9), lambda: L.Conv1D(3, 2, **cf)), ["one_channel"]),
        "conv2d_cf_one_channel": (single((1, 6, 7), lambda: L.Conv2D(4, 3, strides=2, **cf)), ["one_channel"]),
        "conv3d_cf_one_channel": (single((1, 5, 4, 3), lambda: L.Conv3D(2, (2, 2, 1), **cf)), ["one_channel"]),
        # The same moved array into the depthwise slab's strided view ("strides is incompatible with
        # shape of requested array and size of buffer").
        "separable1d_cf_one_channel": (
            single((1, 9), lambda: L.SeparableConv1D(3, 3, depth_multiplier=2, **cf)),
            ["one_channel"],
        ),
        "depthwise1d_cf_one_channel": (single((1, 8), lambda: L.DepthwiseConv1D(3, **cf)), ["one_channel"]),
        "separable1d_strided": (
            single((9, 3), lambda: L.SeparableConv1D(4, 3, strides=2, depth_multiplier=2, activation="relu")),
            ["strided"],
        ),
    }

    def cf_chain():
        # A channels_first residual block with BatchNormalization on axis 1, a ReLU and a transposed
        # conv, inside one graph (no fusion may assume channels_last).
        x = K.Input((3, 8, 8), name="x")
        h = L.Conv2D(4, 3, padding="same", **cf)(x)
        h = L.BatchNormalization(axis=1)(h)
        h = L.ReLU()(h)
        h2 = L.Conv2D(4, 1, **cf)(h)
        h = L.Add()([h, h2])
        h = L.ReLU()(h)
        h = L.ZeroPadding2D(1, **cf)(h)
        h = L.DepthwiseConv2D(3, activation="softmax", **cf)(h)
        h = L.Conv2DTranspose(2, 3, strides=2, **cf)(h)
        return K.Model(x, h), {"x": _image((3, 8, 8))(rng)}

    named["cf_chain"] = (cf_chain, ["softmax", "BatchNormalization", "Add"])
    return named


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flavour", choices=("k3", "k2"), required=True)
    ap.add_argument("--only", default="")
    args = ap.parse_args(argv)
    gen = fuzz.Generator(args.flavour)
    K = gen.K
    for name, (build, tags) in models(K).items():
        if args.only and name != args.only:
            continue
        K.backend.clear_session()
        model, arrays = build()
        seed = zlib.crc32(name.encode()) % 100_000
        golden = fuzz.save_case(
            args.flavour, K, gen, model, arrays, seed, ["channels_first", *tags], False, OUT / f"{args.flavour}_{name}"
        )
        if golden["tf_twin_disagrees"]:
            raise SystemExit(f"{name}: TensorFlow differs from the channels_last twin: {golden['tf_twin_disagrees']}")
        print(name)
    fuzz.pack([p for p in OUT.iterdir() if (p / "case.json").is_file()], OUT.parent / "named.tar.xz")
    return 0


if __name__ == "__main__":
    sys.exit(main())
