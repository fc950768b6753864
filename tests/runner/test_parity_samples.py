"""Whole-model parity: every committed sample with a golden, run by the NumPy runner, against Keras.

The goldens (samples/goldens/*.npz, made by real Keras: see samples/README.md) hold the inputs
(``input/<name>``), Keras's outputs (``output/<i>``) and, for most samples, every layer's output
(``intermediate/<layer>/<node>/<tensor>``). Each sample is run from every container it was saved in
(.keras zip, unzipped directory, legacy .h5, JSON config + weights file); the keras.applications
samples are rebuilt from their weights manifest into a session temp dir (samples/rebuild.py).

Tolerance: |a - b| <= atol + rtol * |b| with atol 1e-5, rtol 1e-4 (float32), except where TOLERANCE
says otherwise and why. When an output fails, the message names the first diverging layer.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from modelgraph.loading import load
from modelgraph.runner.compare import compare_results, reference_taps
from modelgraph.runner.interpreter import Runner

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
GOLDENS = sorted((SAMPLES / "goldens").glob("*.json"))
ATOL, RTOL = 1e-5, 1e-4

# Per-sample tolerances, each with its reason.
TOLERANCE: dict[str, tuple[float, float, str]] = {
    "k3_dtypes": (
        0.07,
        2e-2,
        "bfloat16 layers: TensorFlow's CPU bf16 matmul truncates the float32 product to bf16 before "
        "the bias add, the Dense kernel rounds once (RNE) after it: 1 bf16 ulp (2^-8 relative), which "
        "the following bf16 layer amplifies",
    ),
    "k2_dtypes": (
        0.07,
        2e-2,
        "bfloat16/float16 layers (see k3_dtypes)",
    ),
}


def _variants(meta: dict) -> list[tuple[str, str, str | None]]:
    """(variant, model path relative to samples/, weights path or None) for every container."""
    files = meta.get("files", {})
    out: list[tuple[str, str, str | None]] = []
    for kind in ("keras", "h5", "legacy_h5"):
        if isinstance(files.get(kind), str):
            out.append((kind, files[kind], None))
    if isinstance(files.get("keras_dir"), list) and files["keras_dir"]:
        out.append(("keras_dir", str(Path(files["keras_dir"][0]).parent), None))
    if isinstance(files.get("json"), str) and isinstance(files.get("weights_h5"), str):
        out.append(("json+weights_h5", files["json"], files["weights_h5"]))
    if not out and isinstance(files.get("manifest"), str):
        out.append(("rebuilt", files["manifest"], None))
    return out


def _cases() -> list:
    cases = []
    for path in GOLDENS:
        meta = json.loads(path.read_text())
        if not (path.with_suffix(".npz")).exists():
            continue
        for variant, model, weights in _variants(meta):
            cases.append(pytest.param(path.stem, variant, model, weights, id=f"{path.stem}-{variant}"))
    return cases


def _load_golden(stem: str) -> dict[str, np.ndarray]:
    with np.load(SAMPLES / "goldens" / f"{stem}.npz", allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


@pytest.mark.parametrize(("stem", "variant", "model", "weights"), _cases())
def test_sample_parity(stem, variant, model, weights, rebuilt_apps):
    golden = _load_golden(stem)
    path = rebuilt_apps(model) if variant == "rebuilt" else SAMPLES / model
    graph = load(path, weights=None if weights is None else SAMPLES / weights)
    runner = Runner(graph)
    feeds = {k[len("input/") :]: v for k, v in golden.items() if k.startswith("input/")}
    known = set(runner.layer_paths())
    taps = [p for p in reference_taps(golden) if p in known]
    results = runner.run(feeds, taps=taps)
    atol, rtol, _reason = TOLERANCE.get(stem, (ATOL, RTOL, ""))
    comparison = compare_results(
        results, golden, runner.output_keys, atol=atol, rtol=rtol, order=runner.layer_paths()
    )
    outputs = comparison.outputs
    assert len(outputs) == len(runner.output_keys), (
        f"golden has {len(outputs)} outputs, model {runner.output_keys}"
    )
    failed = [t for t in comparison.tensors if not t.passed]
    detail = "; ".join(
        f"{t.name}: max abs {t.max_abs:.3e}, max rel {t.max_rel:.3e}, {t.note}" for t in failed[:5]
    )
    assert comparison.passed, (
        f"first diverging layer: {comparison.first_divergence}; {detail}; missing {comparison.missing}"
    )
    # The same outputs from the plan that runs without intermediates (fused Conv/BN/ReLU chains).
    plain = runner.run(feeds)
    fused = compare_results(
        plain, golden, runner.output_keys, atol=atol, rtol=rtol, order=runner.layer_paths()
    )
    bad = [t for t in fused.outputs if not t.passed]
    assert not bad, "; ".join(f"{t.name}: max abs {t.max_abs:.3e}, max rel {t.max_rel:.3e}" for t in bad)
