"""Weight rules (WGT): stored weights against the config; values with check_values, in bounded slabs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _models as M  # noqa: E402

from modelgraph.validate import weights as W  # noqa: E402
from modelgraph.validate.api import Options, validate, validate_file  # noqa: E402


def _issues(path: Path, **opts: Any) -> list[Any]:
    return list(validate_file(str(path), Options(**opts)).issues)


def _rules(path: Path, **opts: Any) -> list[str]:
    return [i.rule for i in _issues(path, **opts)]


def _keras(tmp: Path, name: str, arrays: list[np.ndarray], cfg: Any = None) -> Path:
    return M.write_keras(tmp / f"{name}.keras", cfg or M.simple(), {"dense": arrays})


def test_valid_model_has_no_weight_findings(tmp_path: Path) -> None:
    good = M.valid_keras(tmp_path / "good.keras")
    assert [r for r in _rules(good, check_values=True) if r.startswith("WGT")] == []


def test_wgt001_missing_weight(tmp_path: Path) -> None:
    kernel, _ = M.dense_weights()
    hits = [i for i in _issues(_keras(tmp_path, "bad", [kernel])) if i.rule == "WGT001"]
    assert hits and "'bias'" in hits[0].message and hits[0].where.startswith("layer 'd1'")
    no_bias = M.model([M.inp(), M.dense("d1", "in", use_bias=False)])
    assert "WGT001" not in _rules(_keras(tmp_path, "good", [kernel], no_bias))


def test_wgt002_unexpected_weight(tmp_path: Path) -> None:
    no_bias = M.model([M.inp(), M.dense("d1", "in", use_bias=False)])
    hits = [i for i in _issues(_keras(tmp_path, "bad", M.dense_weights(), no_bias)) if i.rule == "WGT002"]
    assert hits and "var_1" in hits[0].message and "(3,)" in hits[0].message
    assert "WGT002" not in _rules(M.valid_keras(tmp_path / "good.keras"))


def test_wgt003_misshaped_weight_against_the_config(tmp_path: Path) -> None:
    # The Dense sits after a layer without a shape rule, so inference cannot check the kernel against
    # the input; the config (units, build_config) still says what the kernel must be.
    def cfg() -> Any:
        d = M.dense("d1", "c", units=3)
        d["build_config"] = {"input_shape": [None, 4]}
        return M.model([M.inp(), M.layer("MyCustomLayer", "c", "in"), d])

    bad = M.write_keras(
        tmp_path / "bad.keras",
        cfg(),
        {"my_custom_layer": [], "dense": M.dense_weights(4, 5)[:1] + [np.zeros(3, "f4")]},
    )
    hits = [i for i in _issues(bad) if i.rule == "WGT003"]
    assert hits and "(4, 5)" in hits[0].message and "(4, 3)" in hits[0].message
    good = M.write_keras(
        tmp_path / "good.keras", cfg(), {"my_custom_layer": [], "dense": M.dense_weights(4, 3)}
    )
    assert "WGT003" not in _rules(good)


def test_wgt004_integer_kernel_and_wgt005_precision(tmp_path: Path) -> None:
    k, b = M.dense_weights()
    assert "WGT004" in _rules(_keras(tmp_path, "int", [k.astype("int32"), b]))
    r64 = _rules(_keras(tmp_path, "f64", [k.astype("float64"), b]))
    assert "WGT005" in r64 and "WGT004" not in r64
    good = _rules(M.valid_keras(tmp_path / "good.keras"))
    assert "WGT004" not in good and "WGT005" not in good


def test_quantized_layers_are_not_dtype_errors(tmp_path: Path) -> None:
    cfg = M.simple()
    cfg["config"]["layers"][1]["config"]["dtype"] = {
        "module": "keras",
        "class_name": "QuantizedDTypePolicy",
        "config": {"name": "int8_from_float32", "source_name": "float32"},
    }
    k, b = M.dense_weights()
    assert "WGT004" not in _rules(_keras(tmp_path, "q", [k.astype("int8"), b], cfg))


def test_wgt006_nan_inf_by_default_and_skipped_with_no_check_values(tmp_path: Path) -> None:
    k, b = M.dense_weights()
    k[0, 0] = np.nan
    k[1, 1] = np.inf
    bad = _keras(tmp_path, "bad", [k, b])
    assert "WGT006" not in _rules(bad, check_values=False)
    hits = [i for i in _issues(bad) if i.rule == "WGT006"]
    assert hits and "1 NaN, 1 Inf" in hits[0].message and hits[0].severity == "error"
    assert "WGT006" not in _rules(M.valid_keras(tmp_path / "good.keras"))
    results = validate(str(bad))  # the public entry point scans values by default too
    assert not results[0].ok and "WGT006" in [i.rule for i in results[0].issues]


def test_wgt007_all_zero_kernel_but_not_zero_bias(tmp_path: Path) -> None:
    k, b = M.dense_weights()
    assert "WGT007" in _rules(_keras(tmp_path, "bad", [np.zeros_like(k), b]), check_values=True)
    assert "WGT007" not in _rules(_keras(tmp_path, "good", [k, np.zeros_like(b)]), check_values=True)


def test_wgt010_keras_archive_without_weights_is_an_error(tmp_path: Path) -> None:
    """Keras's load_model fails on a .keras without model.weights.h5 when layers have weights; a
    to_json() file without weights stays WGT008 (info)."""
    stripped = M.write_keras(tmp_path / "stripped.keras", M.simple())
    result = validate_file(str(stripped), Options())
    assert [i.rule for i in result.issues] == ["WGT010"] and not result.ok
    assert "WGT010" not in _rules(M.valid_keras(tmp_path / "good.keras"))


def test_wgt008_architecture_only_is_info(tmp_path: Path) -> None:
    result = validate_file(str(M.write_json(tmp_path / "arch.json", M.simple())), Options())
    assert [i.rule for i in result.issues] == ["WGT008"] and result.ok
    assert "WGT008" not in _rules(M.valid_keras(tmp_path / "good.keras"))


def test_wgt009_unreadable_weight(tmp_path: Path) -> None:
    k, b = M.dense_weights()
    compound = np.zeros((4, 3), dtype=[("a", "f4"), ("b", "f4")])
    hits = [
        i for i in _issues(_keras(tmp_path, "bad", [compound, b]), check_values=True) if i.rule == "WGT009"
    ]
    assert hits and "cannot be read" in hits[0].message
    assert "WGT009" not in _rules(M.valid_keras(tmp_path / "good.keras"), check_values=True)


def test_values_are_read_in_bounded_slabs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    k = np.ones((256, 3), "f4")
    k[-1, -1] = np.nan
    cfg = M.model([M.inp("in", (None, 256)), M.dense("d1", "in")])
    path = M.write_keras(tmp_path / "big.keras", cfg, {"dense": [k, np.zeros(3, "f4")]})
    monkeypatch.setattr(W, "CHUNK_BYTES", 64 * 4 * 3)  # 64 rows per slab
    seen: list[int] = []
    original = W.iter_chunks

    def spy(weight: Any, chunk_bytes: int = W.CHUNK_BYTES) -> Any:
        for chunk in original(weight, chunk_bytes):
            seen.append(chunk.nbytes)
            yield chunk

    monkeypatch.setattr(W, "iter_chunks", spy)
    assert "WGT006" in _rules(path, check_values=True)
    assert max(seen) <= 64 * 4 * 3 and len(seen) >= 4


def test_iter_chunks_reads_an_h5_dataset_slab_by_slab(tmp_path: Path) -> None:
    from modelgraph.graph import Weight

    with h5py.File(tmp_path / "w.h5", "w") as f:
        f.create_dataset("k", data=np.arange(1000, dtype="f4").reshape(100, 10))
    f = h5py.File(tmp_path / "w.h5", "r")
    dset = f["k"]
    w = Weight("kernel", (100, 10), "float32", "w.h5:/k", lambda dset=dset: np.asarray(dset[()]))
    chunks = list(W.iter_chunks(w, chunk_bytes=400))
    assert len(chunks) == 10 and np.array_equal(np.concatenate(chunks), np.arange(1000).reshape(100, 10))
    f.close()


@pytest.mark.parametrize("fmt", ["ln_rms.keras", "ln_rms.h5"])
def test_rms_scaling_layer_norm_owns_gamma_without_scale(fmt: str) -> None:
    """Keras 3 LayerNormalization(rms_scaling=True, scale=False) creates and stores gamma (sample made
    by Keras 3.15.1): no WGT002."""
    path = Path(__file__).resolve().parents[2] / "samples" / "k3" / fmt
    assert [r for r in _rules(path, check_values=True) if r.startswith("WGT")] == []
