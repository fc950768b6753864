"""Hand-made "Keras 2.0.8" legacy .h5 (Keras 2.0 cannot be installed any more), written with h5py only.

    python samples/gen_wild.py        # any venv with numpy + h5py; tf_keras is used only to check loading

Follows the legacy layout (docs/formats.md, "Legacy HDF5 weight names"; Keras 2.0.x ``save_model``): root attributes
``keras_version``/``backend``/``model_config`` as utf-8 bytes, ``model_weights`` group with a
``layer_names`` bytes array, one group per layer with ``weight_names`` (``dense_1/kernel:0``) and the
datasets at ``model_weights/<layer>/<weight name>``; the top-level class is ``"Model"``, inputs carry
``batch_input_shape`` and ``inbound_nodes`` entries are 3-element ``[layer, node, tensor]`` lists without
a kwargs element. Expected outputs are computed with plain NumPy here.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import h5py
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _common as C  # noqa: E402

WILD = HERE / "wild"
NAME = "keras208_handmade"


def glorot_cfg():
    return {"class_name": "VarianceScaling",
            "config": {"scale": 1.0, "mode": "fan_avg", "distribution": "uniform", "seed": None}}


def dense_cfg(name, units, activation):
    return {"name": name, "trainable": True, "units": units, "activation": activation, "use_bias": True,
            "kernel_initializer": glorot_cfg(), "bias_initializer": {"class_name": "Zeros", "config": {}},
            "kernel_regularizer": None, "bias_regularizer": None, "activity_regularizer": None,
            "kernel_constraint": None, "bias_constraint": None}


def model_config():
    layers = [
        {"name": "input_1", "class_name": "InputLayer",
         "config": {"batch_input_shape": [None, 4], "dtype": "float32", "sparse": False, "name": "input_1"},
         "inbound_nodes": []},
        {"name": "input_2", "class_name": "InputLayer",
         "config": {"batch_input_shape": [None, 3], "dtype": "float32", "sparse": False, "name": "input_2"},
         "inbound_nodes": []},
        {"name": "dense_1", "class_name": "Dense", "config": dense_cfg("dense_1", 5, "relu"),
         "inbound_nodes": [[["input_1", 0, 0]]]},
        {"name": "concatenate_1", "class_name": "Concatenate",
         "config": {"name": "concatenate_1", "trainable": True, "axis": -1},
         "inbound_nodes": [[["dense_1", 0, 0], ["input_2", 0, 0]]]},
        {"name": "dense_2", "class_name": "Dense", "config": dense_cfg("dense_2", 3, "softmax"),
         "inbound_nodes": [[["concatenate_1", 0, 0]]]},
        {"name": "dense_3", "class_name": "Dense", "config": dense_cfg("dense_3", 2, "linear"),
         "inbound_nodes": [[["dense_1", 0, 0]]]},
    ]
    return {"class_name": "Model",
            "config": {"name": "model_1", "layers": layers,
                       "input_layers": [["input_1", 0, 0], ["input_2", 0, 0]],
                       "output_layers": [["dense_2", 0, 0], ["dense_3", 0, 0]]}}


def known_weights():
    # simple, exactly representable values so a reader can check them by eye
    k1 = (np.arange(20, dtype=np.float32).reshape(4, 5) - 9.5) / 8.0
    b1 = np.array([0.1, -0.2, 0.3, -0.4, 0.5], np.float32)
    k2 = (np.arange(24, dtype=np.float32).reshape(8, 3) % 7 - 3.0) / 4.0
    b2 = np.array([0.25, -0.5, 0.125], np.float32)
    k3 = (np.arange(10, dtype=np.float32).reshape(5, 2) - 4.5) / 2.0
    b3 = np.array([1.0, -1.0], np.float32)
    return {"dense_1": [("dense_1/kernel:0", k1), ("dense_1/bias:0", b1)],
            "dense_2": [("dense_2/kernel:0", k2), ("dense_2/bias:0", b2)],
            "dense_3": [("dense_3/kernel:0", k3), ("dense_3/bias:0", b3)]}


def numpy_forward(x1, x2, w):
    (k1, b1), (k2, b2), (k3, b3) = [[a for _, a in w[n]] for n in ("dense_1", "dense_2", "dense_3")]
    h = np.maximum(x1 @ k1 + b1, 0.0)
    z = np.concatenate([h, x2], axis=-1) @ k2 + b2
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return [(e / e.sum(axis=-1, keepdims=True)).astype(np.float32), (h @ k3 + b3).astype(np.float32)]


def write_h5(path: Path, w):
    layer_names = ["input_1", "input_2", "dense_1", "concatenate_1", "dense_2", "dense_3"]
    with h5py.File(path, "w") as f:
        f.attrs["keras_version"] = b"2.0.8"
        f.attrs["backend"] = b"tensorflow"
        f.attrs["model_config"] = json.dumps(model_config()).encode("utf8")
        g = f.create_group("model_weights")
        g.attrs["layer_names"] = [n.encode("utf8") for n in layer_names]
        g.attrs["backend"] = b"tensorflow"
        g.attrs["keras_version"] = b"2.0.8"
        for n in layer_names:
            lg = g.create_group(n)
            ws = w.get(n, [])
            lg.attrs["weight_names"] = [wn.encode("utf8") for wn, _ in ws]  # [] -> empty float64 array
            for wn, arr in ws:
                ds = lg.create_dataset(wn, arr.shape, dtype=arr.dtype)
                ds[:] = arr


def main():
    WILD.mkdir(parents=True, exist_ok=True)
    path = WILD / f"{NAME}.h5"
    w = known_weights()
    write_h5(path, w)
    rng = np.random.default_rng(208)
    x1 = rng.normal(size=(3, 4)).astype(np.float32)
    x2 = rng.normal(size=(3, 3)).astype(np.float32)
    outs = numpy_forward(x1, x2, w)
    info = {
        "family": "wild",
        "model": NAME,
        "made_by": "HAND-MADE with h5py by samples/gen_wild.py (NOT written by Keras): Keras 2.0.8 cannot be "
                   "installed; layout follows the documented Keras 2.0 legacy HDF5 writer",
        "expected_outputs_by": "plain NumPy (relu Dense -> Concatenate -> softmax Dense; linear Dense)",
        "hand_made": True,
        "keras_version": "2.0.8 (claimed in the file)",
        **C.env_versions(),
        "covers": ["top-level class_name 'Model'", "batch_input_shape", "keras_version 2.0.8",
                   "3-element inbound refs without kwargs", "VarianceScaling glorot config",
                   "weight_names 'dense_1/kernel:0' -> dataset model_weights/dense_1/dense_1/kernel:0",
                   "empty weight_names stored as empty float64 array", "two inputs, two outputs"],
        "note_on_nodes": "tf.keras/Keras >=2.0 writers normally append a kwargs dict as 4th element; this file "
                         "uses the 3-element Keras-1 style that Keras 2 readers also accept",
        "files": {"h5": C.rel(path)},
        "inputs": {"input_1": {"shape": [3, 4], "dtype": "<f4"}, "input_2": {"shape": [3, 3], "dtype": "<f4"}},
        "input_names": ["input_1", "input_2"],
        "output_refs": [["dense_2", 0, 0], ["dense_3", 0, 0]],
        "outputs": [{"key": "output/0", "ref": ["dense_2", 0, 0], "layer": "dense_2", "shape": [3, 3], "dtype": "<f4"},
                    {"key": "output/1", "ref": ["dense_3", 0, 0], "layer": "dense_3", "shape": [3, 2], "dtype": "<f4"}],
        "params": {"total": 4 * 5 + 5 + 8 * 3 + 3 + 5 * 2 + 2, "trainable": 4 * 5 + 5 + 8 * 3 + 3 + 5 * 2 + 2,
                   "non_trainable": 0},
        "config_layers_order": ["input_1", "input_2", "dense_1", "concatenate_1", "dense_2", "dense_3"],
        "layer_depths": {"dense_2": 0, "dense_3": 0, "concatenate_1": 1, "dense_1": 2, "input_2": 2, "input_1": 3},
        "depth_attributes": "computed by hand with the Keras algorithm (no Keras made this file); confirmed by "
                            "tf_keras when it loads the file (see tf_keras_reload)",
        "weights": {n: {wn: a.tolist() for wn, a in ws} for n, ws in w.items()},
    }
    # check: can tf_keras load it, and does it agree with NumPy?
    try:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tf_keras as keras
        from tf_keras.src.engine import functional as kf

        m = keras.models.load_model(path)
        ko = [np.asarray(o) for o in m([x1, x2], training=False)]
        _, _, _, lbd = kf._map_graph_network(m.inputs, m.outputs)
        info["tf_keras_reload"] = {
            "ok": True, "keras_version": keras.__version__, "max_abs_diff": C.max_abs_diff(ko, outs),
            "layer_depths": {l.name: d for d, ls in lbd.items() for l in ls},
            "layers_order": [l.name for l in m.layers]}
    except Exception as e:  # noqa: BLE001
        info["tf_keras_reload"] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
    C.save_golden(f"wild_{NAME}", {"input_1": x1, "input_2": x2}, outs, info)
    print(f"  [{NAME}] tf_keras reload: {info['tf_keras_reload']}")


if __name__ == "__main__":
    main()
