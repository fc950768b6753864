"""Per-layer timings of the conv / pooling kernels against Keras 3 and against NumPy's matmul peak.

Run with a Python that has Keras 3 + TensorFlow and modelgraph importable::

    KERAS_BACKEND=tensorflow /work/venvs/k3/bin/python bench/bench_kernels.py --threads 1

``--threads N`` pins OpenBLAS (set before NumPy is imported) and TensorFlow's intra/inter-op pools to N
threads; without it both use their defaults. ``--no-keras`` times modelgraph alone (any Python).
Every time is the best of ``--repeat`` calls (the machine may be shared: compare ratios measured in
the same run). For each layer it prints ms, GFLOP/s (multiply-adds count 2; pooling counts one op per
window element), the fraction of the measured sgemm peak, the ratio to Keras (<1 means faster than
Keras), and the largest difference from Keras's output.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=None, help="threads for OpenBLAS and TF (default: theirs)")
    p.add_argument("--batch", type=int, nargs="+", default=[8], help="batch sizes (default 8)")
    p.add_argument("--repeat", type=int, default=7, help="best of this many calls (default 7)")
    p.add_argument("--no-keras", action="store_true", help="time modelgraph only")
    p.add_argument("--only", default=None, help="run only layers whose name contains this")
    return p.parse_args()


ARGS = _args()
if ARGS.threads is not None:
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(ARGS.threads)
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
from _bench_worker import blas_kernels  # noqa: E402  (bench/ is sys.path[0] when run as a script)

from modelgraph.runner import fast  # noqa: E402
from modelgraph.runner.registry import KernelSpec  # noqa: E402

# (name, class, config, input shape without batch): the layers that dominate ResNet50 / MobileNetV2.
LAYERS: list[tuple[str, str, dict, tuple[int, ...]]] = [
    ("conv3x3 56x56x64->64 relu", "Conv2D",
     {"filters": 64, "kernel_size": 3, "padding": "same", "activation": "relu"}, (56, 56, 64)),
    ("conv1x1 56x56x64->256", "Conv2D", {"filters": 256, "kernel_size": 1}, (56, 56, 64)),
    ("conv7x7 s2 224x224x3->64", "Conv2D",
     {"filters": 64, "kernel_size": 7, "strides": 2, "padding": "same"}, (224, 224, 3)),
    ("conv3x3 28x28x128->128", "Conv2D", {"filters": 128, "kernel_size": 3, "padding": "same"}, (28, 28, 128)),
    ("conv3x3 14x14x256->256", "Conv2D", {"filters": 256, "kernel_size": 3, "padding": "same"}, (14, 14, 256)),
    ("conv3x3 7x7x512->512", "Conv2D", {"filters": 512, "kernel_size": 3, "padding": "same"}, (7, 7, 512)),
    ("conv1x1 s2 56x56x256->512", "Conv2D", {"filters": 512, "kernel_size": 1, "strides": 2}, (56, 56, 256)),
    ("conv3x3 s2 224x224x3->32", "Conv2D",
     {"filters": 32, "kernel_size": 3, "strides": 2, "padding": "same", "use_bias": False}, (224, 224, 3)),
    ("dw3x3 s2 112x112x96", "DepthwiseConv2D",
     {"kernel_size": 3, "strides": 2, "padding": "same", "use_bias": False}, (112, 112, 96)),
    ("dw3x3 56x56x144", "DepthwiseConv2D", {"kernel_size": 3, "padding": "same", "use_bias": False}, (56, 56, 144)),
    ("dw3x3 112x112x32", "DepthwiseConv2D", {"kernel_size": 3, "padding": "same", "use_bias": False}, (112, 112, 32)),
    ("dw3x3 14x14x576", "DepthwiseConv2D", {"kernel_size": 3, "padding": "same", "use_bias": False}, (14, 14, 576)),
    ("maxpool3x3 s2 same 112x112x64", "MaxPooling2D",
     {"pool_size": 3, "strides": 2, "padding": "same"}, (112, 112, 64)),
    ("maxpool2x2 56x56x64", "MaxPooling2D", {"pool_size": 2}, (56, 56, 64)),
    ("avgpool3x3 s1 same 28x28x64", "AveragePooling2D",
     {"pool_size": 3, "strides": 1, "padding": "same"}, (28, 28, 64)),
    ("zeropad 3 224x224x3", "ZeroPadding2D", {"padding": 3}, (224, 224, 3)),
]  # fmt: skip


def ops(cls: str, config: dict, shape: tuple[int, ...], out_shape: tuple[int, ...], batch: int) -> float:
    """Operations of one call: 2 per multiply-add for convs, 1 per window element for pooling."""
    out_pixels = batch * out_shape[0] * out_shape[1]
    if cls in ("Conv2D", "DepthwiseConv2D"):
        k = config["kernel_size"]
        per_pixel = k * k * shape[-1] * (config["filters"] if cls == "Conv2D" else 1)
        return 2.0 * out_pixels * per_pixel
    if "Pooling" in cls:
        p = config["pool_size"]
        return float(out_pixels * p * p * shape[-1])
    return float(out_pixels * shape[-1])


def best_of(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def sgemm_peak(repeat: int, n: int = 2048) -> float:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), np.float32)
    t = best_of(lambda: np.matmul(a, b, out=c), max(3, repeat // 2))
    return 2.0 * n**3 / t / 1e9


def keras_layer(cls: str, config: dict, shape: tuple[int, ...], threads: int | None):
    import keras
    import tensorflow as tf

    if threads is not None:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    keras.utils.set_random_seed(0)
    layer = getattr(keras.layers, cls)(**config)
    layer.build((None, *shape))
    # Non-trivial biases so a kernel that dropped the bias would show up in the max difference.
    for w in layer.weights:
        if w.name == "bias":
            w.assign(np.random.default_rng(1).standard_normal(w.shape).astype(np.float32) * 0.1)
    call = tf.function(lambda x: layer(x), reduce_retracing=True)
    weights = {w.name: np.asarray(w.numpy()) for w in layer.weights}
    return (lambda x: call(x).numpy()), weights


def main() -> int:
    print(f"load average: {os.getloadavg()}  threads: {ARGS.threads or 'default'}", flush=True)
    peak = sgemm_peak(ARGS.repeat)
    print(f"NumPy sgemm 2048^3 peak: {peak:.1f} GFLOP/s  (numpy {np.__version__})", flush=True)
    print(f"BLAS: {blas_kernels()}", flush=True)
    header = f"{'layer':34s} {'batch':>5s} {'ms':>8s} {'GFLOP/s':>8s} {'%peak':>6s}"
    if not ARGS.no_keras:
        header += f" {'keras ms':>9s} {'ratio':>6s} {'maxdiff':>9s}"
    print(header)
    rng = np.random.default_rng(0)
    for name, cls, config, shape in LAYERS:
        if ARGS.only and ARGS.only not in name:
            continue
        if ARGS.no_keras:
            weights = _random_weights(cls, config, shape, rng)
            keras_fn = None
        else:
            keras_fn, weights = keras_layer(cls, config, shape, ARGS.threads)
        spec = KernelSpec(name=name, class_name=cls, config=config, weights=weights)
        fn = fast.kernel_for(cls, spec)  # the plan's kernel (the fast one where there is one)
        for batch in ARGS.batch:
            x = rng.standard_normal((batch, *shape), dtype=np.float32)
            y = fn(x)
            t = best_of(lambda x=x, fn=fn: fn(x), ARGS.repeat)
            gflops = ops(cls, config, shape, y.shape[1:], batch) / t / 1e9
            line = f"{name:34s} {batch:5d} {t * 1e3:8.2f} {gflops:8.1f} {gflops / peak:6.1%}"
            if keras_fn is not None:
                ref = keras_fn(x)
                tk = best_of(lambda x=x, f=keras_fn: f(x), ARGS.repeat)
                diff = float(np.max(np.abs(ref - y))) if ref.shape == y.shape else float("nan")
                line += f" {tk * 1e3:9.2f} {t / tk:6.2f} {diff:9.2e}"
            print(line, flush=True)
    print(f"load average: {os.getloadavg()}")
    return 0


def _random_weights(cls: str, config: dict, shape: tuple[int, ...], rng) -> dict:
    k = config.get("kernel_size", 1)
    if cls == "Conv2D":
        w = {"kernel": rng.standard_normal((k, k, shape[-1], config["filters"]), dtype=np.float32) * 0.1}
        if config.get("use_bias", True):
            w["bias"] = rng.standard_normal(config["filters"], dtype=np.float32) * 0.1
        return w
    if cls == "DepthwiseConv2D":
        w = {"kernel": rng.standard_normal((k, k, shape[-1], 1), dtype=np.float32) * 0.1}
        if config.get("use_bias", True):
            w["bias"] = rng.standard_normal(shape[-1], dtype=np.float32) * 0.1
        return w
    return {}


if __name__ == "__main__":
    sys.exit(main())
