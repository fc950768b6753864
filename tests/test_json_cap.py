"""The JSON size cap follows what Keras writes: about 1 KB per layer, so a 100,000-layer Keras 3
chain's to_json() (96 MB) is read; MODELGRAPH_MAX_JSON_BYTES moves the cap; nesting stays bounded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from modelgraph import safe_io

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def chain_json(n: int) -> str:
    """A Keras 3 to_json() chain of ``n`` Dense layers, each the real Keras 3 record of
    samples/k3/single_bare.json's first Dense renamed (the shape of a file Keras writes)."""
    model = json.loads((SAMPLES / "k3" / "single_bare.json").read_text())
    layers = model["config"]["layers"]
    template = json.dumps(layers[1])
    out, previous = [layers[0]], layers[0]["name"]
    for i in range(n):
        name = f"dense_{i}"
        record = template.replace('"d1"', json.dumps(name)).replace(
            '["x", 0, 0]', json.dumps([previous, 0, 0])
        )
        out.append(json.loads(record))
        previous = name
    model["config"]["layers"] = out
    model["config"]["output_layers"] = [previous, 0, 0]
    return json.dumps(model)


def test_default_cap_takes_a_100000_layer_keras_chain():
    per_layer = (len(chain_json(101)) - len(chain_json(1))) / 100
    assert 900 < per_layer < 1100  # what Keras 3 writes per Dense layer
    assert 100_000 * per_layer + len(chain_json(1)) < safe_io.MAX_JSON_BYTES
    assert safe_io.MAX_JSON_DEPTH == 500  # nesting stays bounded


def _inspect(path: Path, limit: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "MODELGRAPH_MAX_JSON_BYTES"}
    if limit is not None:
        env["MODELGRAPH_MAX_JSON_BYTES"] = limit
    return subprocess.run(
        [sys.executable, "-m", "modelgraph", "inspect", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tempfile.gettempdir(),
        env=env,
    )


def test_the_cap_is_an_option(tmp_path: Path):
    path = tmp_path / "chain.json"
    path.write_text(chain_json(300))
    size = path.stat().st_size
    refused = _inspect(path, str(size - 1))
    assert refused.returncode == 3
    assert refused.stderr.startswith("modelgraph: error:") and "over the" in refused.stderr
    assert f"{size - 1:,}-byte limit" in refused.stderr
    accepted = _inspect(path, str(size))
    assert accepted.returncode == 0, accepted.stderr
    assert "dense_299" in accepted.stdout
    default = _inspect(path, "not a number")  # ignored: the default applies
    assert default.returncode == 0, default.stderr
