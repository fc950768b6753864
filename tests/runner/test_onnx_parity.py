"""ONNX export parity, three ways: for every committed sample with a Keras golden, the model exported
to ONNX (``onnx.checker`` full check included) and run by onnxruntime matches Keras's recorded outputs
and the NumPy runner's, within the sample's float32 tolerance (or its recorded one).

One container per sample (the first of .keras, .h5, legacy .h5 and JSON + weights, or the rebuilt
keras.applications file); the loaders are checked against every container by test_parity_samples.py.
Needs the ``onnx`` and ``onnxruntime`` packages (in the ``test`` extra).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from modelgraph.loading import load
from modelgraph.runner.compare import compare_results
from modelgraph.runner.interpreter import Runner

from .test_parity_samples import ATOL, GOLDENS, RTOL, SAMPLES, TOLERANCE, _load_golden, _variants

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


#: Samples whose features the ONNX exporter does not map yet, by stem, with the reason (strict, so a
#: fix shows up). Empty: RNN(cell), rank-5 TimeDistributed and Keras 3's mask rules are mapped.
ONNX_GAPS: dict[str, str] = {}


def _marks(stem: str) -> list:
    reason = ONNX_GAPS.get(stem)
    return [] if reason is None else [pytest.mark.xfail(reason=reason, strict=True)]


def _cases() -> list:
    cases = []
    for path in GOLDENS:
        if not path.with_suffix(".npz").exists():
            continue
        variants = _variants(json.loads(path.read_text()))
        if variants:
            variant, model, weights = variants[0]
            cases.append(
                pytest.param(path.stem, variant, model, weights, id=path.stem, marks=_marks(path.stem))
            )
    return cases


def _outputs_only(golden: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: v for k, v in golden.items() if k.startswith(("output/", "input/"))}


@pytest.mark.parametrize(("stem", "variant", "model", "weights"), _cases())
def test_onnx_export_matches_keras_and_numpy(stem, variant, model, weights, rebuilt_apps):
    golden = _load_golden(stem)
    path = rebuilt_apps(model) if variant == "rebuilt" else SAMPLES / model
    graph = load(path, weights=None if weights is None else SAMPLES / weights)
    feeds = {k[len("input/") :]: v for k, v in golden.items() if k.startswith("input/")}
    atol, rtol, _reason = TOLERANCE.get(stem, (ATOL, RTOL, ""))

    onnx_runner = Runner(graph, backend="onnxruntime")
    assert onnx_runner.backend == "onnxruntime"
    got = onnx_runner.run(feeds)

    against_keras = compare_results(got, _outputs_only(golden), onnx_runner.output_keys, atol=atol, rtol=rtol)
    assert len(against_keras.outputs) == len(onnx_runner.output_keys)
    bad = [t for t in against_keras.tensors if not t.passed]
    assert not bad, "vs Keras: " + "; ".join(f"{t.name}: max abs {t.max_abs:.3e}, {t.note}" for t in bad)

    numpy_results = Runner(graph).run(feeds)
    reference = {f"output/{i}": numpy_results[k] for i, k in enumerate(onnx_runner.output_keys)}
    against_numpy = compare_results(got, reference, onnx_runner.output_keys, atol=atol, rtol=rtol)
    bad = [t for t in against_numpy.tensors if not t.passed]
    assert not bad, "vs NumPy: " + "; ".join(f"{t.name}: max abs {t.max_abs:.3e}, {t.note}" for t in bad)


def _all_containers() -> list:
    from .._samples import golden_model_files

    firsts = {c.values[2] for c in _cases()}
    cases = []
    for name, model in golden_model_files():
        config_only = model.endswith(".json") and not model.startswith("tfjs/")
        if model not in firsts and not config_only:
            cases.append(pytest.param(name, model, id=model, marks=_marks(name.removesuffix(".json"))))
    return cases


@pytest.mark.parametrize(("golden_name", "model"), _all_containers())
def test_every_other_container_runs_on_onnxruntime_like_numpy(golden_name, model):
    """The other containers of each sample (legacy .h5, TF.js with float16 and uint8-quantized
    weights, ...) export too, and onnxruntime gives the NumPy runner's outputs on the golden inputs."""
    graph = load(SAMPLES / model)
    if not graph.has_weights:
        pytest.skip("config-only file (its weights file is paired with it in the parity test)")
    golden = _load_golden(golden_name[: -len(".json")])
    feeds = {k[len("input/") :]: v for k, v in golden.items() if k.startswith("input/")}
    atol, rtol, _reason = TOLERANCE.get(golden_name[: -len(".json")], (ATOL, RTOL, ""))
    onnx_runner = Runner(graph, backend="onnxruntime")
    got = onnx_runner.run(feeds)
    want = Runner(graph).run(feeds)
    reference = {f"output/{i}": want[k] for i, k in enumerate(onnx_runner.output_keys)}
    comparison = compare_results(got, reference, onnx_runner.output_keys, atol=atol, rtol=rtol)
    bad = [t for t in comparison.tensors if not t.passed]
    assert not bad, "; ".join(f"{t.name}: max abs {t.max_abs:.3e}, {t.note}" for t in bad)
