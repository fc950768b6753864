"""Every committed sample model, exported to ONNX with unknown dimensions, runs on onnxruntime at several
sizes to the NumPy runner's outputs; ``run --backend auto|onnxruntime`` never ends in exit 70.

The models are found by the discovery ``validate`` uses (:func:`modelgraph.validate.discover.iter_targets`)
under the sample folders below, and one application model rebuilt from its manifest (``APPS``). Two
exports per model:

- as declared: the batch is symbolic, and so are the time/spatial sizes the model leaves unknown
  (fed at batch 1 with those sizes 5, then batch 3 with 9);
- relaxed (the first container of each model): every input of rank 3 or more re-declared with all
  sizes between the batch and the last axis unknown (a sequence of any length, an image of any size),
  fed at the declared sizes (batch 1) and at twice them (batch 3; skipped where the NumPy runner itself
  cannot run that size, e.g. a Flatten before a Dense).

Exports that are refused are pinned below with the reason (a Lambda, by rule): each is a documented
refusal (exit 4 with one line naming every layer), never a crash.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from modelgraph.cli.main import cli
from modelgraph.errors import ModelGraphError, UnsupportedError, UsageError
from modelgraph.graph import ModelGraph
from modelgraph.loading import load
from modelgraph.runner import feeds as fd
from modelgraph.runner.interpreter import Runner
from modelgraph.validate.discover import iter_targets

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from modelgraph.saving.onnx import to_onnx  # noqa: E402

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
# Every folder of committed models (plugins/ needs its plugin modules; kernels/ and goldens/ hold arrays).
SAMPLE_DIRS = ("k1", "k2", "k3", "export", "convert", "fidelity3", "savedmodel", "tfjs", "wild", "training")
# Application models rebuilt from their manifests (about 4 s each): EfficientNetB0 (depthwise convolutions,
# squeeze-excite, swish); samples/k2 and k3 already hold MobileNetV2 and MobileNetV3Small. All eleven
# passed the same checks when this test was written.
APPS = ("k3_efficientnetb0",)

# Exports refused as declared: a model with a Lambda layer (Python code, which has no ONNX mapping).
# These three are pinned; any other sample with a Lambda is refused by the same rule (_refused).
REFUSED = {"convert/unconvertible.h5", "savedmodel/lambda_model", "savedmodel/lambda_model.h5"}
# Exports refused once the time/spatial sizes are unknown (by model, any container), and why.
_MASKED_RNN = "a recurrent layer with a mask over an unknown number of time steps"
RELAXED_REFUSED = {
    "k2/mask_rnn": _MASKED_RNN,
    "k2/rnn_mask": _MASKED_RNN,
    "k3/rnn_mask": _MASKED_RNN,
    "k3/mask_layers": _MASKED_RNN,
    "tfjs/rnn_mask": _MASKED_RNN,
    "fidelity3/bidi_masked_states": _MASKED_RNN,
    "fidelity3/bidi_unrolled": _MASKED_RNN,
    "k2/mha": "a causal MultiHeadAttention mask over unknown lengths",
    "k3/mha": "a causal MultiHeadAttention mask over unknown lengths",
    "tfjs/mha": "a causal MultiHeadAttention mask over unknown lengths",
}

# Allowed difference, as a fraction of the largest output value (at least 1): float32 kernels summing in
# another order, BatchNormalization folded into the layer before it.
RTOL = 1e-3
RTOL_OF = {
    "k2/dtypes": 2e-2,
    "k3/dtypes": 2e-2,
}  # bfloat16/float16 layers: a bf16 ulp is 2^-8 (see test_parity_samples.py)


def _targets() -> list[tuple[str, str | None]]:
    found = []
    for folder in SAMPLE_DIRS:
        for t in iter_targets([SAMPLES / folder]):
            found.append((Path(t.path).relative_to(SAMPLES).as_posix(), t.weights))
    return found


TARGETS = _targets()


@pytest.fixture(scope="module")
def rebuild(rebuilt_app):
    """``rebuild(name)``: the application model ``samples/apps/<name>`` written from its manifest (the
    session's shared rebuild, tests/conftest.py)."""
    return lambda name: str(rebuilt_app(name))


def _one_per_model() -> list[tuple[str, str | None]]:
    """The first container of each sample model."""
    seen: dict[str, tuple[str, str | None]] = {}
    for rel, weights in TARGETS:
        seen.setdefault(_model_name(rel), (rel, weights))
    return list(seen.values())


@functools.cache
def _load(rel: str, weights: str | None) -> ModelGraph | ModelGraphError:
    path = rel if Path(rel).is_absolute() else str(SAMPLES / rel)
    try:
        return load(path, weights=weights)
    except ModelGraphError as exc:
        return exc


def _model_name(rel: str) -> str:
    """``folder/model`` of a sample, whatever its container (``k3/cnn`` for ``k3/cnn.h5`` and ``k3/cnn_dir``)."""
    path = Path(rel)
    name = path.name
    for suffix in (".keras", ".h5", ".json"):
        name = name.removesuffix(suffix)
    return f"{path.parent.name}/{name.removesuffix('_dir')}"


CLI_TARGETS = _one_per_model()
# Other containers of a model: exported as declared; the relaxed export and the CLI runs use the first.
_LATER_CONTAINERS = {rel for rel, _ in TARGETS} - {rel for rel, _ in CLI_TARGETS}


def _refused(rel: str, graph: ModelGraph) -> bool:
    lambdas = any(layer.class_name == "Lambda" for _, layer in graph.walk())
    assert lambdas or rel not in REFUSED, rel
    return lambdas


def _relaxed(graph: ModelGraph) -> ModelGraph | None:
    """``graph`` with every input of rank >= 3 declared with unknown sizes between the batch and the
    last axis; None when no input has such a size to relax."""
    names = {ref.layer for ref in graph.inputs}
    layers, changed = [], False
    for layer in graph.layers:
        if layer.name in names:
            key = "batch_shape" if "batch_shape" in layer.config else "batch_input_shape"
            shape = layer.config.get(key)
            if (
                isinstance(shape, list | tuple)
                and len(shape) >= 3
                and any(d is not None for d in shape[1:-1])
            ):
                layer = replace(
                    layer, config={**layer.config, key: [shape[0], *[None] * (len(shape) - 2), shape[-1]]}
                )
                changed = True
        layers.append(layer)
    return replace(graph, layers=tuple(layers)) if changed else None


def _sizes(
    declared: Runner, runner: Runner, batch: int, length: int, scale: int
) -> dict[str, tuple[int, ...]]:
    """The sizes after the batch of each input with unknown ones: ``length`` where the model itself leaves
    a size unknown, ``scale`` times the declared size where only the relaxed export does."""
    sizes = {}
    for before, spec in zip(declared.inputs, runner.inputs, strict=True):
        assert before.shape is not None and spec.shape is not None
        if None in spec.shape[1:]:
            sizes[spec.name] = tuple(
                d if d is not None else (length if d0 is None else d0 * scale)
                for d0, d in zip(before.shape[1:], spec.shape[1:], strict=True)
            )
    return sizes


def _check_on_onnxruntime(graph: ModelGraph, declared: Runner, what: str, rtol: float) -> int:
    """Export ``graph``, run it on onnxruntime at batch 1 and 3 and compare with the NumPy runner; the
    number of sizes compared (a size the NumPy runner cannot run is left out)."""
    session = ort.InferenceSession(
        to_onnx(graph).model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    runner = declared if graph is declared.graph else Runner(graph)
    assert [o.name for o in session.get_outputs()] == list(runner.output_keys), what
    compared = 0
    for batch, length, scale in ((1, 5, 1), (3, 9, 2)):
        sizes = _sizes(declared, runner, batch, length, scale)
        feeds = fd.random_feeds(runner.inputs, graph, seed=batch, batch=batch, shapes=sizes)
        try:
            want = runner.run(feeds)
        except ModelGraphError:
            assert scale > 1, f"{what}: the NumPy runner fails at the declared sizes"
            continue  # e.g. a Flatten before a Dense: that size is not one the model can take
        got = session.run(None, {i.name: feeds[i.name] for i in session.get_inputs()})
        for (key, w), g in zip(want.items(), got, strict=True):
            w, g = np.asarray(w), np.asarray(g)
            at = f"{what}: output {key} at batch {batch}, sizes {sizes}"
            assert g.shape == w.shape, at
            if w.dtype.kind == "f" and w.size:
                scale_of = max(1.0, float(np.max(np.abs(w.astype(np.float64)))))
                np.testing.assert_allclose(g, w, rtol=0, atol=rtol * scale_of, err_msg=at)
            else:
                np.testing.assert_array_equal(g, w, err_msg=at)
        compared += 1
    return compared


def _sweep(rel: str, weights: str | None) -> None:
    graph = _load(rel, weights)
    if isinstance(graph, ModelGraphError):
        return  # weights-only files and formats out of scope: the CLI test pins their exit codes
    if not graph.has_weights:
        with pytest.raises(UsageError, match="holds no weights"):
            to_onnx(graph)
        return
    if _refused(rel, graph):
        with pytest.raises(UnsupportedError, match=r"cannot export to ONNX: .*\(Lambda\)"):
            to_onnx(graph)
        return
    declared = Runner(graph)
    name = _model_name(rel)
    rtol = RTOL_OF.get(name, RTOL)
    assert _check_on_onnxruntime(graph, declared, rel, rtol) == 2
    relaxed = _relaxed(graph) if rel not in _LATER_CONTAINERS else None  # the same graph as the first
    if relaxed is None:
        return
    if name in RELAXED_REFUSED:
        with pytest.raises(UnsupportedError, match="cannot export to ONNX"):
            to_onnx(relaxed)
        return
    assert _check_on_onnxruntime(relaxed, declared, f"{rel} (unknown sizes)", rtol) >= 1


@pytest.mark.parametrize(("rel", "weights"), TARGETS, ids=[t[0] for t in TARGETS])
def test_every_sample_runs_on_onnxruntime_with_unknown_sizes(rel: str, weights: str | None) -> None:
    _sweep(rel, weights)


@pytest.mark.slow
@pytest.mark.parametrize("app", APPS)
def test_application_models_run_on_onnxruntime_with_unknown_sizes(app: str, rebuild) -> None:
    _sweep(rebuild(app), None)


def test_the_sweep_covers_the_samples() -> None:
    """Discovery finds the committed models (a broken walk would make the sweep pass on nothing)."""
    loaded = [t for t in TARGETS if isinstance(_load(*t), ModelGraph)]
    assert len(TARGETS) >= 250 and len(loaded) >= 230, (len(TARGETS), len(loaded))
    relaxable = {
        _model_name(rel)
        for rel, w in TARGETS
        if (g := _load(rel, w)) and isinstance(g, ModelGraph) and _relaxed(g)
    }
    assert set(RELAXED_REFUSED) <= relaxable


@pytest.mark.parametrize(("rel", "weights"), CLI_TARGETS, ids=[t[0] for t in CLI_TARGETS])
def test_run_on_auto_and_onnxruntime_never_ends_in_an_internal_error(rel: str, weights: str | None) -> None:
    """``run --backend auto`` and ``--backend onnxruntime`` (random inputs, batch 3, unknown sizes 7): exit 0,
    or a documented exit code with one ``modelgraph: error:`` line. (``--backend numpy`` is the runner's
    own path, run on every sample by its parity tests.)"""
    args = ["run", str(SAMPLES / rel), "--random", "--batch", "3"]
    if weights is not None:
        args += ["--weights", weights]
    graph = _load(rel, weights)
    runnable = isinstance(graph, ModelGraph) and graph.has_weights and not _refused(rel, graph)
    if runnable:
        for spec in Runner(graph).inputs:
            if spec.shape is not None and None in spec.shape[1:]:
                args += ["--shape", f"{spec.name}=" + "x".join(str(d or 7) for d in spec.shape[1:])]
    for backend in ("auto", "onnxruntime"):
        result = CliRunner().invoke(cli, [*args, "--backend", backend])
        what = f"{rel} --backend {backend}: exit {result.exit_code}: {result.output[-300:]}"
        assert result.exit_code in (0, 2, 3, 4), what
        assert result.exception is None or isinstance(result.exception, SystemExit), what
        if runnable:
            assert result.exit_code == 0, what
            assert "runs NumPy" not in result.output, what  # auto ran onnxruntime: no fallback
        elif result.exit_code:
            errors = [line for line in result.output.splitlines() if line.startswith("modelgraph: error:")]
            assert len(errors) == 1 and "Traceback" not in result.output, what


@pytest.mark.parametrize("rel", sorted(REFUSED))
def test_export_refuses_what_it_cannot_map_with_exit_4_and_one_line(rel: str, tmp_path: Path) -> None:
    out = tmp_path / "m.onnx"
    result = CliRunner().invoke(cli, ["export", str(SAMPLES / rel), "-o", str(out)])
    assert result.exit_code == 4, result.output
    lines = result.output.strip().splitlines()
    # Refused before the walk: a Lambda's bytecode is a security error (exit 4 too), named with its layer.
    assert len(lines) == 1 and lines[0].startswith("modelgraph: error: refusing to write"), lines
    assert "(Lambda function)" in lines[0] and not out.exists()
