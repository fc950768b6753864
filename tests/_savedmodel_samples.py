"""The tf_keras SavedModel/checkpoint samples (samples/savedmodel) and their goldens, shared by the
SavedModel tests of both layouts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from click.testing import CliRunner

import modelgraph
from modelgraph.cli.main import cli

ROOT = Path(__file__).resolve().parent.parent
SM = ROOT / "samples" / "savedmodel"
GOLDENS = {p.stem: json.loads(p.read_text()) for p in sorted((SM / "goldens").glob("*.json"))}


def invoke(*args: object):
    """The CLI on ``args`` (paths as strings), in this process."""
    return CliRunner().invoke(cli, [str(a) for a in args])


def golden_arrays(stem: str) -> tuple[np.lib.npyio.NpzFile, dict[str, np.ndarray]]:
    """A golden ``.npz`` written by tf_keras and the model inputs it holds (``input/<name>``)."""
    golden = np.load(SM / "goldens" / f"{stem}.npz")
    return golden, {k[len("input/") :]: golden[k] for k in golden.files if k.startswith("input/")}


def assert_runs_to_tf_keras(graph: modelgraph.ModelGraph, name: str) -> None:
    """Every output of ``graph`` on the golden's inputs within 1e-4 + 1e-3 |ref| of tf_keras's."""
    golden, feeds = golden_arrays(name)
    outputs = list(modelgraph.Runner(graph).run(feeds).values())
    assert len(outputs) == len(GOLDENS[name]["outputs"])
    for i, got in enumerate(outputs):
        ref = golden[f"output/{i}"]
        assert np.all(np.abs(got - ref) <= 1e-4 + 1e-3 * np.abs(ref)), name
