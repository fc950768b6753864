"""The conversion and extraction cases Keras verifies (``verify_convert.py``) and the tests replay.

Needs only the standard library, NumPy and h5py, so tests import it without Keras.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOLDENS = HERE / "goldens"

# Goldens made with low-precision compute (mixed float16 / bfloat16 layers) compare loosely.
_LOOSE = {"k2_dtypes": 5e-2, "k3_dtypes": 5e-2}
DEFAULT_TOLERANCE = 1e-4


@dataclass(frozen=True)
class Case:
    """One ``modelgraph convert``/``extract`` call on a sample and what Keras checks of its result."""

    id: str
    golden: str  # the sample's golden JSON (inputs) relative to the repo root
    source: str
    weights: str | None = None
    suffix: str = ".keras"
    command: str = "convert"
    extra: tuple[str, ...] = ()
    outputs: tuple[str, ...] | None = None  # golden npz keys of the expected outputs (default: output/*)
    tolerance: float = DEFAULT_TOLERANCE
    source_loads_check: bool = True
    reference: str = "golden"  # "golden": Keras's outputs; "runner": modelgraph's run of the source
    tags: tuple[str, ...] = field(default_factory=tuple)
    feeds: tuple[tuple[str, str], ...] | None = None  # (model input, golden npz key); default input/<name>

    @property
    def golden_npz(self) -> str:
        return self.golden[: -len(".json")] + ".npz"

    def argv(self, root: Path, out: Path) -> list[str]:
        args = [self.command, str(root / self.source)]
        if self.weights:
            args += ["--weights", str(root / self.weights)]
        return [*args, *self.extra, "-o", str(out)]

    def feed_keys(self, golden: dict) -> dict[str, str]:
        """The converted model's inputs and the golden npz arrays that feed them."""
        if self.feeds is not None:
            return dict(self.feeds)
        return {name: f"input/{name}" for name in golden["inputs"]}

    def output_keys(self, data: dict) -> list[str]:
        if self.outputs is not None:
            return list(self.outputs)
        keys = [k for k in data if k.startswith("output/")]
        return sorted(keys, key=lambda k: int(k.split("/")[1]))


def _sources(files: dict) -> list[tuple[str, str, str | None]]:
    """``(kind, model file, weights file)`` for every model file a golden lists."""
    out: list[tuple[str, str, str | None]] = []
    for kind in ("keras", "h5", "legacy_h5"):
        if isinstance(files.get(kind), str):
            out.append((kind, files[kind], None))
    if isinstance(files.get("keras_dir"), list) and files["keras_dir"]:
        out.append(("keras_dir", str(Path(files["keras_dir"][0]).parent), None))
    if isinstance(files.get("json"), str) and isinstance(files.get("weights_h5"), str):
        out.append(("json", files["json"], files["weights_h5"]))
    tfjs = files.get("tfjs")
    if isinstance(tfjs, dict):
        for variant, path in sorted(tfjs.items()):
            out.append((f"tfjs{variant if variant.startswith('_') else ''}", path, None))
    return out


def convert_cases() -> list[Case]:
    """Every model file of every sample golden, converted to ``.keras``."""
    cases = []
    for golden in [*sorted(GOLDENS.glob("*.json")), *sorted((HERE / "convert").glob("*.json"))]:
        if golden.name == "verified.json":
            continue
        doc = json.loads(golden.read_text())
        files = doc.get("files")
        if not isinstance(files, dict) or not (golden.with_suffix(".npz")).is_file():
            continue
        stem = golden.stem
        for kind, source, weights in _sources(files):
            quantized = kind in ("tfjs_q8", "tfjs_f16")
            cases.append(
                Case(
                    id=f"{stem}/{kind}",
                    golden=f"samples/{golden.relative_to(HERE)}",
                    source=f"samples/{source}",
                    weights=f"samples/{weights}" if weights else None,
                    tolerance=_LOOSE.get(stem, DEFAULT_TOLERANCE),
                    source_loads_check=kind in ("keras", "h5", "legacy_h5", "keras_dir"),
                    reference="runner" if quantized else "golden",
                )
            )
    return cases


def _extract(stem: str, source: str, outputs: list[str], inputs: list[str], feeds: dict[str, str]) -> Case:
    extra = ("--outputs", ",".join(outputs)) + (("--inputs", ",".join(inputs)) if inputs else ())
    keys = tuple(f"intermediate/{_key(name)}" for name in outputs)
    return Case(
        id=f"extract/{stem}/{'+'.join(outputs)}",
        golden=f"samples/goldens/{stem}.json",
        source=f"samples/{source}",
        command="extract",
        extra=extra,
        outputs=keys,
        feeds=tuple(feeds.items()),
        source_loads_check=False,
    )


def _key(name: str) -> str:
    """``layer`` -> ``layer/0/0``; ``layer[n][t]`` -> ``layer/n/t`` (the goldens' intermediate keys)."""
    if name.endswith("]") and "[" in name:
        head, rest = name.split("[", 1)
        node, tensor = rest.rstrip("]").split("][")
        return f"{head}/{node}/{tensor}"
    return f"{name}/0/0"


def extract_cases() -> list[Case]:
    """Sub-models cut out of samples; their expected outputs are the goldens' intermediate tensors."""
    return [
        # cut before a nested Functional called twice, a nested Sequential and a shared BN path
        _extract("k2_nested", "k2/nested.h5", ["cat"], ["proj"], {"proj": "intermediate/proj/0/0"}),
        # a shared layer keeps only the calls the sub-model uses (renumbered), two outputs
        _extract(
            "k3_multi_io_list",
            "k3/multi_io_list.keras",
            ["add_layer", "shared_dense[2][0]"],
            ["b"],
            {"a": "input/a", "b": "input/b"},
        ),
        # TFOpLambda layers become Keras 3 ops; cut at the second output of tf.split
        _extract(
            "k2_tfops",
            "k2/tfops.h5",
            ["tf.nn.relu"],
            ["tf.split[0][0]", "a"],
            {"tf.split": "intermediate/tf.split/0/0", "a": "input/a"},
        ),
        # only the third call of the shared layer is kept: renumbered to call 0
        _extract(
            "k3_multi_io_list",
            "k3/multi_io_list.keras",
            ["shared_dense[2][0]"],
            ["add_layer"],
            {"add_layer": "intermediate/add_layer/0/0"},
        ),
        # Keras 3 raw ops and layers side by side
        _extract(
            "k3_ops",
            "k3/ops.keras",
            ["concatenate_layer"],
            ["add"],
            {"add": "intermediate/add/0/0", "x": "input/x", "y": "input/y"},
        ),
        # an RNN's state output as a sub-model output
        _extract("k2_rnn_state", "k2/rnn_state.h5", ["lstm_state[0][2]", "bidi"], [], {"x": "input/x"}),
        # the middle of a CNN, cut at a concatenation
        _extract("k3_cnn", "k3/cnn.keras", ["pool2"], ["cat"], {"cat": "intermediate/cat/0/0"}),
        _extract("k3_mha", "k3/mha.keras", ["ln2"], ["ln1"], {"ln1": "intermediate/ln1/0/0"}),
    ]


def h5_cases() -> list[Case]:
    """Every sample converted to a legacy ``.h5`` (checked by Keras 3 and by tf_keras)."""
    from dataclasses import replace

    return [
        replace(case, id=f"h5/{case.id}", suffix=".h5", source_loads_check=False) for case in convert_cases()
    ]


def refusal_cases() -> list[Case]:
    """Real Keras files ``convert`` must refuse, naming every layer it cannot write."""
    return [
        Case(id=f"refuse/{name}", golden="", source=f"samples/convert/{name}.h5")
        for name in ("unconvertible",)
    ]


#: How the verify scripts run Keras 3: TensorFlow on the CPU, deterministic kernels, quiet logs.
KERAS3_ENVIRONMENT = {
    "KERAS_BACKEND": "tensorflow",
    "TF_ENABLE_ONEDNN_OPTS": "0",
    "CUDA_VISIBLE_DEVICES": "-1",
    "TF_CPP_MIN_LOG_LEVEL": "3",
}


def use_keras3_environment() -> None:
    """Set :data:`KERAS3_ENVIRONMENT` (what the caller's environment already says wins); call it
    before Keras is imported."""
    for key, value in KERAS3_ENVIRONMENT.items():
        os.environ.setdefault(key, value)


def writer_versions(modelgraph: str) -> dict[str, str]:
    """The HDF5, h5py and NumPy versions of the environment the ``modelgraph`` executable runs in:
    what decides the exact bytes of the files it writes."""
    python = str(Path(modelgraph).parent / "python")
    code = "import h5py, numpy; print(h5py.version.hdf5_version, h5py.__version__, numpy.__version__)"
    hdf5, h5py_version, numpy_version = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    return {
        "writer_hdf5_version": hdf5,
        "writer_h5py_version": h5py_version,
        "writer_numpy_version": numpy_version,
    }


def canonical_hash(path: Path) -> str:
    """A hash of a written file's content that does not depend on the HDF5 library's byte layout.

    ``.keras``: the zip member names in order, the bytes of every non-HDF5 member, and for
    ``model.weights.h5`` every group/dataset path in sorted order with its attributes, dtype,
    shape and raw data. ``.h5``: the same walk over the whole file. Two h5py/libhdf5 versions
    may lay the same tree out differently (the sha256 then differs), but never this hash.
    """
    import h5py

    digest = hashlib.sha256()
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            for name in archive.namelist():
                digest.update(name.encode() + b"\0")
                data = archive.read(name)
                if name.endswith(".h5"):
                    import io

                    with h5py.File(io.BytesIO(data), "r") as f:
                        _hash_h5(f, digest)
                else:
                    digest.update(data)
    else:
        with h5py.File(path, "r") as f:
            _hash_h5(f, digest)
    return digest.hexdigest()


def _hash_h5(f, digest) -> None:  # noqa: ANN001 - h5py objects
    import h5py
    import numpy as np

    def attrs(obj) -> None:  # noqa: ANN001
        for key in sorted(obj.attrs):
            value = obj.attrs[key]
            digest.update(f"@{key}=".encode() + repr(np.asarray(value).tolist()).encode() + b"\0")

    attrs(f)
    names: list[str] = []
    f.visit(names.append)
    for name in sorted(names):
        obj = f[name]
        digest.update(name.encode() + b"\0")
        attrs(obj)
        if isinstance(obj, h5py.Dataset):
            data = obj[()]
            digest.update(f"{obj.dtype.str}{obj.shape}".encode())
            digest.update(np.ascontiguousarray(data).tobytes())
