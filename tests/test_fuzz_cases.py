"""Every committed case of the differential fuzzer agrees with Keras.

The cases (``samples/fuzz/*.tar.xz``, made by ``samples/fuzz/fuzz.py`` and ``named.py`` with real
Keras 3 and tf_keras) hold a random functional model in every format Keras wrote, its inputs and
Keras's outputs, depths, layer order and params; the later ones also Keras 3 on JAX's outputs
(``jax.npz``, the referee followed where the two backends disagree) and whether real Keras 3 loaded
modelgraph's conversion and reproduced the outputs (``referee.py``). Each is checked by
``samples/fuzz/check_cases.py``: load, depths, layer order, params, outputs within the case's
tolerance (float32: ``1e-4 + 1e-3 |ref|``) and ``validate`` without an error-severity finding, in
every format; for the main file also ``convert`` (pinned to what Keras 3 verified) and ``export``
(onnxruntime reproduces the outputs; skipped without onnxruntime).

A case whose failures are all explained by a known failure class (``check_cases.KNOWN``: fixed on
another branch) is an expected failure naming its class; any other failure fails.
"""

from __future__ import annotations

import importlib.util
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest

FUZZ = Path(__file__).resolve().parent.parent / "samples" / "fuzz"
ARCHIVES = sorted(FUZZ.glob("*.tar.xz"))


def _checker():
    spec = importlib.util.spec_from_file_location("fuzz_check_cases", FUZZ / "check_cases.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CHECK = _checker()


def _cases() -> list:
    params = []
    for archive in ARCHIVES:
        with tarfile.open(archive, "r:xz") as tar:
            names = sorted(n[: -len("/case.json")] for n in tar.getnames() if n.endswith("/case.json"))
        params += [
            pytest.param(archive.name, name, id=f"{archive.stem.split('.')[0]}/{name}") for name in names
        ]
    return params


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fuzz")
    return {a.name: CHECK.extract(a, root / a.name) for a in ARCHIVES}


def test_there_are_cases() -> None:
    assert len(_cases()) >= 300


def test_export_and_convert_checks_see_a_wrong_output(unpacked: dict[str, Path]) -> None:
    """The export check (onnxruntime, the [test] extra) and the convert check report outputs that
    differ from the referee's: the reference outputs of a case are shifted by 0.5 and both fail."""
    if not CHECK.export_available():
        pytest.skip("onnx/onnxruntime not installed: the fuzz cases are not checked through ONNX export")
    verified = [
        c
        for root in unpacked.values()
        for c in sorted(root.iterdir())
        if (c / "case.json").is_file()
        and (json.loads((c / "case.json").read_text(encoding="utf-8")).get("convert") or {}).get("keras3")
        == "pass"
    ]
    assert verified, "no committed case carries a convert verdict from Keras 3"
    case = verified[0]
    golden = json.loads((case / "case.json").read_text(encoding="utf-8"))
    with np.load(case / "io.npz") as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays.update({f"ref/{i}": arrays[f"out/{i}"] + 0.5 for i in range(golden["outputs"])})
    io = CHECK._Arrays(arrays)
    kind = CHECK.main_file(golden)
    graph = CHECK._load(case, kind, golden["files"][kind])
    assert CHECK._export(graph, io, golden)[0] == "export"
    assert CHECK._convert(graph, io, golden)[0] == "convert"


@pytest.mark.parametrize(("archive", "case"), _cases())
def test_case_agrees_with_keras(archive: str, case: str, unpacked: dict[str, Path]) -> None:
    where = unpacked[archive] / case
    failures = CHECK.check_case(where)
    if not failures:
        return
    known = CHECK.known_class(where, failures)
    if known is not None:
        pytest.xfail(f"known failure class {known}: {failures[0]}")
    pytest.fail("\n".join(f"{kind}: {cls}: {detail}" for kind, cls, detail in failures))
