"""A fused plan keeps Keras's output names (issue #33): samples/gen_fidelity3.py, ``fused_output``.

The BatchNormalization that ends the model is folded into its Conv1D by the runner; the output is still
the BatchNormalization's, in a plain run and in ``--all-intermediates`` (which runs the unfused plan).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from modelgraph.cli.main import cli
from modelgraph.loading import load
from modelgraph.runner.interpreter import Runner

DIR = Path(__file__).resolve().parents[2] / "samples" / "fidelity3"


@pytest.mark.parametrize("suffix", ["keras", "h5"])
@pytest.mark.parametrize("backend", ["jax", "tensorflow"])
@pytest.mark.parametrize("intermediates", [False, True])
def test_fused_output_keeps_the_batchnorm_name(suffix, backend, intermediates):
    golden = np.load(DIR / f"fused_output.{backend}.npz")
    runner = Runner(load(DIR / f"fused_output.{suffix}"))
    assert runner.output_keys == ["dense_1"]
    out = runner.run({"signal": golden["input/signal"]}, all_intermediates=intermediates)
    np.testing.assert_allclose(out["dense_1"], golden["output/dense_1"], atol=1e-5, rtol=1e-4)
    if intermediates:
        assert {"tap/conv", "tap/dense_1"} <= set(out)


def test_cli_all_intermediates_on_a_fused_output(tmp_path):
    inputs = tmp_path / "x.npz"
    np.savez(inputs, signal=np.load(DIR / "fused_output.jax.npz")["input/signal"])
    result = CliRunner().invoke(
        cli, ["run", str(DIR / "fused_output.keras"), "--input", str(inputs), "--all-intermediates"]
    )
    assert result.exit_code == 0, result.output
    assert "dense_1" in result.output
