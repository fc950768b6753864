"""Fixtures shared by the runner tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from modelgraph.runner.interpreter import Runner


@pytest.fixture(scope="session")
def rebuilt_apps(rebuilt_app):
    """``rebuilt_apps("apps/<name>/manifest.json")``: the session's rebuilt application model
    (tests/conftest.py ``rebuilt_app``), by its manifest path relative to samples/."""
    return lambda manifest: rebuilt_app(Path(manifest).parent.name)


def _plan_matches_plain(graph, rtol: float = 1e-4, atol: float = 1e-6) -> None:
    """The fused plan of ``graph`` computes what its plain (unfused) graph does, on one random image
    of the model's declared size."""
    size = graph.layer(graph.inputs[0].layer).config["batch_shape"][1:]
    x = np.random.default_rng(0).uniform(-1, 1, (1, *size)).astype(np.float32)
    merged = Runner(graph).run(x)
    plain = Runner(graph, fuse=False).run(x)
    for key, value in plain.items():
        np.testing.assert_allclose(merged[key], value, rtol=rtol, atol=atol)


@pytest.fixture(scope="session")
def plan_matches_plain():
    """``plan_matches_plain(graph)``: assert the fused plan computes what the plain graph does."""
    return _plan_matches_plain


@pytest.fixture(scope="session")
def ir_targets():
    """The targets the IR loops are tested for (``modelgraph/runner/fast/ir.py``): this machine's, and
    on an AVX-512 machine with AVX2 also Haswell's (8-float vectors, 4-pixel tiles), so both vector
    widths run here. Skips without the ``jit`` extra."""
    from modelgraph.runner.fast import jit

    if not jit.available():
        pytest.skip("the jit extra (numba, llvmlite) is not installed")
    from modelgraph.runner.fast import ir

    host = ir.host_target()
    features = host.features.split(",")
    narrower = host.lanes == 16 and "+avx2" in features and "+fma" in features
    return [host, ir.Target("haswell", "", 8, 4)] if narrower else [host]
