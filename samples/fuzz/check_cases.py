"""Check fuzzer cases (``fuzz.py``) with modelgraph alone: no Keras, no TensorFlow.

For every case and every format Keras wrote: load, layer depths, layer order, params, outputs within
``|err| <= atol + rtol * |ref|`` (the case's tolerance: float32 ``1e-4 + 1e-3 |ref|``), and
``validate`` without an error-severity finding. The outputs compared are the ones the case follows
(``case.json`` ``referee.follows``: TensorFlow's, or Keras 3 on JAX's in ``jax.npz`` where the two
backends disagree; ``referee.py``). For the case's main file (Keras 3: ``.keras``; tf_keras: ``.h5``)
two more checks:

- ``convert``: modelgraph writes a Keras 3 ``.keras`` file or refuses as it did when the case was
  made; where it wrote one, real Keras 3 loaded it in safe mode and reproduced the outputs at
  generation (``case.json`` ``convert.keras3 == "pass"``, recorded by ``referee.py``), and modelgraph
  runs the file it writes now to the same outputs;
- ``export``: onnxruntime runs modelgraph's ONNX export of the model to the same outputs (skipped when
  onnxruntime is not installed).

:func:`check_case` returns the failures as ``(format, failure class, detail)``; :func:`known_class`
names the failures that are known and owned elsewhere (see ``KNOWN``), which the committed test marks
expected-fail.

    python samples/fuzz/check_cases.py DIR [DIR...]            # counts by failure class
    python samples/fuzz/check_cases.py --prepare DIR [DIR...]  # write converted.keras for referee.py
    python samples/fuzz/check_cases.py --results OUT.jsonl DIR...  # also one JSON line per case
"""

from __future__ import annotations

import json
import sys
import tarfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np

# Failure classes that are known and not fixed yet, by the tags of the case that shows them: (class
# name, tags that must all be present, failure kinds it explains, texts one of which the failure's
# detail must contain, or None). ``flavour:k3`` / ``flavour:k2`` count as tags. A case is expected to
# fail only when known classes explain every one of its failures; any other failure fails the test.
# The four classes first found here (Keras 3 implicit attention masks, a mask through a nested model,
# op nodes without a module in Keras 3's legacy .h5, LayerNormalization rms_scaling's gamma) are fixed.
# Round 3 (JAX referee, convert and export checks) found one more, now fixed too: a tf_keras
# MultiHeadAttention whose integer attention mask hides every key of a query row (tf_keras seed 14;
# modelgraph/saving/masks.py, _mha_scores).
KNOWN: list[tuple[str, frozenset[str], frozenset[str], tuple[str, ...] | None]] = [
]  # fmt: skip


def cases_in(path: Path) -> Iterator[Path]:
    """Case directories under ``path`` (a directory of cases or one case)."""
    if (path / "case.json").is_file():
        yield path
        return
    for case in sorted(path.iterdir()):
        if (case / "case.json").is_file():
            yield case


def extract(archive: Path, into: Path) -> Path:
    """Unpack a ``.tar.xz`` of cases (members are checked to stay inside ``into``)."""
    with tarfile.open(archive, "r:xz") as tar:
        tar.extractall(into, filter="data")
    return into


def _load(case: Path, kind: str, entry):
    import modelgraph

    if kind == "json_weights":
        return modelgraph.load(case / entry[0], weights=case / entry[1])
    return modelgraph.load(case / entry)


def _structure(graph, facts: dict) -> list[tuple[str, str]]:
    problems = []
    depths = {lyr.name: lyr.depth for lyr in graph.layers}
    if depths != facts["layer_depths"]:
        wrong = sorted(k for k in set(depths) | set(facts["layer_depths"]) if depths.get(k) != facts["layer_depths"].get(k))
        problems.append(("depths", f"differ at {wrong[:4]}"))
    order = facts.get("operations_order") or facts.get("graph_layers_order") or facts["layers_order"]
    ours = [lyr.name for lyr in graph.layers if lyr.depth is not None]
    if ours != order:
        problems.append(("layer_order", f"{ours[:6]} vs {order[:6]}"))
    for name, nested in facts.get("nested", {}).items():
        try:
            sub = graph.layer(name).subgraph
        except Exception:  # noqa: BLE001
            sub = None
        if sub is None:
            problems.append(("nested", f"{name} is not nested"))
        elif "layer_depths" in nested:
            problems.extend(_structure(sub, nested))
    return problems


def _first_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


def _outputs(graph, io, golden: dict, backend: str = "numpy", kind: str = "run") -> tuple[str, str] | None:
    from modelgraph.runner.interpreter import Runner

    feeds = {k[3:]: io[k] for k in io.files if k.startswith("in/")}
    try:
        got = list(Runner(graph, backend=backend).run(feeds).values())
    except Exception as e:  # noqa: BLE001 - every failure is a finding of the fuzzer
        return (kind, _first_line(e))
    want = [io[f"ref/{i}"] for i in range(golden["outputs"])]
    if len(got) != len(want):
        return ("outputs", f"{len(got)} outputs, Keras gave {len(want)}")
    tol = golden["tolerance"]
    worst = 0.0
    for g, w in zip(got, want, strict=True):
        g = np.asarray(g, dtype=np.float64)
        w = np.asarray(w, dtype=np.float64)
        if g.shape != w.shape:
            return ("outputs", f"shape {g.shape} vs Keras {w.shape}")
        excess = np.abs(g - w) - (tol["atol"] + tol["rtol"] * np.abs(w))
        if excess.size and (not np.all(np.isfinite(g)) or excess.max() > 0):
            worst = max(worst, float(np.nanmax(np.abs(g - w))) if np.all(np.isfinite(g)) else np.inf)
    name = "outputs" if kind == "run" else kind
    return (name, f"max |err| {worst:.3g}") if worst else None


def main_file(golden: dict) -> str:
    """The format the convert and export checks use: the ``.keras`` file of a Keras 3 case, the
    ``.h5`` of a tf_keras case (else the first format Keras wrote)."""
    order = ("keras", "h5") if golden["flavour"] == "k3" else ("h5", "keras")
    return next((k for k in order if k in golden["files"]), next(iter(golden["files"])))


def convert_to(graph, target: Path) -> str | None:
    """Write ``graph`` as a Keras 3 ``.keras`` file; the refusal's first line, or None when written."""
    import modelgraph

    try:
        modelgraph.save(graph, target)
    except Exception as e:  # noqa: BLE001 - refusals are recorded and pinned
        return _first_line(e)
    return None


def _convert(graph, io, golden: dict) -> tuple[str, str] | None:
    import tempfile

    import modelgraph

    recorded = golden.get("convert")
    if recorded is None or "written" not in recorded or (recorded["written"] and "keras3" not in recorded):
        return None  # not made or not yet seen by Keras 3 (referee.py)
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "converted.keras"
        refused = convert_to(graph, target)
        if refused is not None:
            return None if not recorded["written"] else ("convert", f"refused now: {refused}")
        if not recorded["written"]:
            return ("convert", f"writes a file now (refused at generation: {recorded.get('refused')}); regenerate")
        if recorded.get("keras3") != "pass":
            detail = recorded.get("error") or f"max |err| {recorded.get('max_err', '?')}"
            verdict = {"fail": "gave other outputs for", "refused": "refused"}.get(recorded.get("keras3"), "never loaded")
            return ("convert", f"Keras 3 {verdict} the written file: {detail}")
        try:
            back = modelgraph.load(target)
        except Exception as e:  # noqa: BLE001
            return ("convert", f"cannot reload the written file: {_first_line(e)}")
        return _outputs(back, io, golden, kind="convert")


def _export(graph, io, golden: dict) -> tuple[str, str] | None:
    return _outputs(graph, io, golden, backend="onnxruntime", kind="export")


def prepare(case: Path) -> None:
    """Write ``converted.keras`` (modelgraph's conversion of the main file) for ``referee.py``, and
    record in ``case.json`` whether it was written."""
    golden = json.loads((case / "case.json").read_text(encoding="utf-8"))
    kind = main_file(golden)
    graph = _load(case, kind, golden["files"][kind])
    refused = convert_to(graph, case / "converted.keras")
    golden["convert"] = {"from": kind, "written": refused is None, **({"refused": refused} if refused else {})}
    (case / "case.json").write_text(json.dumps(golden, indent=1, default=str) + "\n", encoding="utf-8")


def export_available() -> bool:
    """Whether onnxruntime (and onnx) are installed for the export check."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("onnx", "onnxruntime"))


def _validate(case: Path, kind: str, entry) -> tuple[str, str] | None:
    import modelgraph

    if kind == "json_weights":
        results = modelgraph.validate(str(case / entry[0]), weights=str(case / entry[1]), config=None)
    else:
        results = modelgraph.validate(str(case / entry))
    errors = sorted({i.rule for r in results for i in r.issues if i.severity == "error"})
    return ("validate", ",".join(errors)) if errors else None


def check_case(case: Path, export: bool | None = None) -> list[tuple[str, str, str]]:
    """Every failure of one case: ``(format, class, detail)``; empty when modelgraph agrees with the
    referee the case follows. ``export`` (default: when onnxruntime is installed) adds the ONNX check."""
    golden = json.loads((case / "case.json").read_text(encoding="utf-8"))
    export = export_available() if export is None else export
    failures = []
    with np.load(case / "io.npz") as npz:
        io_arrays = {k: npz[k] for k in npz.files}
    follows = (golden.get("referee") or {}).get("follows", "tensorflow")
    if follows == "jax":
        with np.load(case / "jax.npz") as npz:
            io_arrays.update({f"ref/{k[4:]}": npz[k] for k in npz.files if k.startswith("out/")})
    else:
        io_arrays.update({f"ref/{k[4:]}": v for k, v in list(io_arrays.items()) if k.startswith("out/")})
    io = _Arrays(io_arrays)
    main = main_file(golden)
    for kind, entry in golden["files"].items():
        try:
            graph = _load(case, kind, entry)
        except Exception as e:  # noqa: BLE001
            failures.append((kind, "load", f"{type(e).__name__}: {str(e)[:200]}"))
            continue
        for cls, detail in _structure(graph, golden["graph"]):
            failures.append((kind, cls, detail))
        if graph.has_weights and graph.param_count != golden["params"]["total"]:
            failures.append((kind, "params", f"{graph.param_count} vs Keras {golden['params']['total']}"))
        found = _outputs(graph, io, golden)
        if found is not None:
            failures.append((kind, *found))
        found = _validate(case, kind, entry)
        if found is not None:
            failures.append((kind, *found))
        if kind == main:
            for check in (_convert, *((_export,) if export else ())):
                found = check(graph, io, golden)
                if found is not None:
                    failures.append((kind, *found))
    return failures


class _Arrays:
    def __init__(self, arrays: dict):
        self._arrays = arrays
        self.files = list(arrays)

    def __getitem__(self, key: str) -> np.ndarray:
        return self._arrays[key]


def known_class(case: Path, failures: list[tuple[str, str, str]]) -> str | None:
    """The known failure classes (joined with ``+``) that together explain every failure of ``case``,
    or None."""
    golden = json.loads((case / "case.json").read_text(encoding="utf-8"))
    tags = {*golden["tags"], f"flavour:{golden['flavour']}"}
    names: list[str] = []
    for _, cls, detail in failures:
        found = [
            name
            for name, needs, kinds, text in KNOWN
            if needs <= tags and cls in kinds and (text is None or any(t in detail for t in text))
        ]
        if not found:
            return None
        names += [n for n in found[:1] if n not in names]
    return "+".join(names)


def classify(failures: list[tuple[str, str, str]]) -> str:
    """One label for a case's failures (for counting): the first failure's class and detail head."""
    kind, cls, detail = failures[0]
    head = detail.split(":")[0] if cls in ("run", "load") else ""
    if cls == "run":
        head = detail[:90]
    return f"{cls}:{head}" if head else cls


def main(argv: list[str]) -> int:
    if argv[:1] == ["--prepare"]:
        for arg in argv[1:]:
            for case in cases_in(Path(arg)):
                try:
                    prepare(case)
                except Exception as e:  # noqa: BLE001 - a load failure is found again by the check
                    print(f"{case.name}: prepare: {_first_line(e)}", flush=True)
        return 0
    results = None
    if argv[:1] == ["--results"]:
        results = open(argv[1], "a", encoding="utf-8")  # noqa: SIM115 - one line per case, flushed
        argv = argv[2:]
    counts: Counter[str] = Counter()
    total = 0
    for arg in argv:
        for case in cases_in(Path(arg)):
            total += 1
            failures = check_case(case)
            if results is not None:
                results.write(json.dumps({"case": str(case), "failures": failures}) + "\n")
                results.flush()
            if not failures:
                counts["ok"] += 1
                continue
            known = known_class(case, failures)
            label = f"known:{known}" if known else classify(failures)
            counts[label] += 1
            print(f"{case.name}: {label} | {failures[0]}", flush=True)
    print(f"\n{total} cases")
    for label, n in counts.most_common():
        print(f"{n:6d}  {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
