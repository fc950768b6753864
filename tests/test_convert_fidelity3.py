"""convert: tf_keras MultiHeadAttention masks written as Keras 3 files that real Keras 3 verified.

``samples/gen_fidelity3.py verify-convert`` converted each tf_keras sample of its ``CONVERTED`` list
with modelgraph, loaded the written ``.keras`` in Keras 3 (safe mode) on JAX and on TensorFlow, ran
it on the tf_keras golden's inputs and recorded, in ``samples/fidelity3/converted.json``, the written
file's canonical content hash and how far Keras 3 was from tf_keras (or modelgraph's refusal).
These tests convert again without Keras: the same content must be written (so the verdict holds for
it), the modelgraph runner must reproduce tf_keras on it, and a refusal must still name its layer.

* ``mha_k2_masked_rows``: int ``attention_mask`` rows hiding every key, with returned scores
  (tf_keras spreads such a row evenly; Keras 3 zeroes it when it returns scores) - fuzz case k2_14.
* ``mha_k2_scores_mask``: the scores' own mask (attention_mask argument, causal band) reaches a
  ``Softmax``; Keras 3's Softmax zeroes a fully masked axis where tf_keras's spreads it, so convert
  refuses it by name.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import modelgraph
from modelgraph.errors import NotConvertibleError

ROOT = Path(__file__).resolve().parent.parent
DIR = ROOT / "samples" / "fidelity3"
RECORDS = json.loads((DIR / "converted.json").read_text(encoding="utf-8"))
NAMES = sorted(k for k, v in RECORDS.items() if isinstance(v, dict))
WRITTEN = [n for n in NAMES if RECORDS[n]["exit_code"] == 0]
REFUSED = [n for n in NAMES if RECORDS[n]["exit_code"] != 0]
BACKENDS = ("jax", "tensorflow")

sys.path.insert(0, str(ROOT / "samples"))
from convert_cases import canonical_hash  # noqa: E402


def _golden(name: str) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    g = np.load(DIR / f"{name}.tf_keras.npz")
    feeds = {k.split("/", 1)[1]: g[k] for k in g.files if k.startswith("input/")}
    return feeds, [g[k] for k in g.files if k.startswith("output/")]


def test_both_kinds_are_recorded() -> None:
    assert "mha_k2_masked_rows" in WRITTEN
    assert "mha_k2_scores_mask" in REFUSED


@pytest.mark.parametrize("name", WRITTEN)
def test_keras3_reproduced_tf_keras_on_both_backends(name: str) -> None:
    record = RECORDS[name]["keras3"]
    assert set(record) == set(BACKENDS)
    for backend in BACKENDS:
        assert record[backend]["loaded"] and record[backend]["matches"], (backend, record[backend])


@pytest.mark.parametrize("name", WRITTEN)
def test_converted_file_is_the_one_keras_verified(name: str, tmp_path: Path) -> None:
    out = tmp_path / f"{name}.keras"
    modelgraph.save(modelgraph.load(DIR / f"{name}.h5"), out)
    assert canonical_hash(out) == RECORDS[name]["canonical"]
    feeds, want = _golden(name)
    got = list(modelgraph.run(modelgraph.load(out), feeds).values())
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", REFUSED)
def test_refusal_names_the_layer(name: str, tmp_path: Path) -> None:
    with pytest.raises(NotConvertibleError) as info:
        modelgraph.save(modelgraph.load(DIR / f"{name}.h5"), tmp_path / "out.keras")
    first = str(info.value).splitlines()[0]
    reason = first.split(".keras: ", 1)[-1]  # after "cannot write <target>: "
    assert RECORDS[name]["message"].endswith(reason)
    assert "'cross_heads' (Softmax): a mask Keras 2 attached to attention scores reaches it" in reason
    assert "'self' (MultiHeadAttention): scores of a masked causal call" in reason
