"""Every committed case of the differential fuzzer agrees with Keras.

The cases (``samples/fuzz/*.tar.xz``, made by ``samples/fuzz/fuzz.py`` and ``named.py`` with real
Keras 3 and tf_keras) hold a random functional model in every format Keras wrote, its inputs and
Keras's outputs, depths, layer order and params. Each is checked by ``samples/fuzz/check_cases.py``:
load, depths, layer order, params, outputs within the case's tolerance (float32:
``1e-4 + 1e-3 |ref|``) and ``validate`` without an error-severity finding, in every format.

A case whose failures are all explained by a known failure class (``check_cases.KNOWN``: fixed on
another branch) is an expected failure naming its class; any other failure fails.
"""

from __future__ import annotations

import importlib.util
import tarfile
from pathlib import Path

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
