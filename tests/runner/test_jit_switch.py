"""``MODELGRAPH_JIT`` is read once per model run: the kernels ask ``jit.available()`` hundreds of
times a run (NASNetMobile at batch 1: 401), and reading an unset variable costs about 2 us."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from modelgraph.loading import load
from modelgraph.runner.fast import jit
from modelgraph.runner.feeds import random_feeds
from modelgraph.runner.interpreter import Runner

CNN = Path(__file__).resolve().parents[2] / "samples" / "k3" / "cnn.keras"


def _runner_and_input() -> tuple[Runner, dict[str, np.ndarray]]:
    graph = load(CNN)
    runner = Runner(graph)
    return runner, random_feeds(runner.inputs, graph)


def test_the_switch_is_read_once_per_run(monkeypatch) -> None:
    runner, x = _runner_and_input()
    runner.run(x)
    reads: list[bool] = []
    real = jit._enabled

    def counted() -> bool:
        reads.append(real())
        return reads[-1]

    monkeypatch.setattr(jit, "_enabled", counted)
    runner.run(x)
    assert len(reads) == 1
    # Outside a run every call reads it.
    jit.available()
    jit.available()
    assert len(reads) == 3


def test_turned_off_before_a_run_no_compiled_loop_runs(monkeypatch) -> None:
    runner, x = _runner_and_input()
    expected = runner.run(x)

    def refused(*args, **kwargs):
        raise AssertionError("a compiled loop ran")

    monkeypatch.setattr(jit, "depthwise", refused)
    monkeypatch.setattr(jit, "pad_clamp", refused)
    monkeypatch.setenv(jit.ENV, "0")
    out = runner.run(x)
    for key, value in expected.items():
        np.testing.assert_allclose(out[key], value, rtol=1e-5, atol=1e-5)
    if jit._installed():
        monkeypatch.setenv(jit.ENV, "1")
        with pytest.raises(Exception, match="a compiled loop ran"):
            runner.run(x)


def test_a_run_keeps_the_answer_it_started_with(monkeypatch) -> None:
    monkeypatch.setenv(jit.ENV, "0")
    with jit.fixed_for_run() as outer:
        assert outer is False
        os.environ[jit.ENV] = "1"
        assert jit.available() is False
        with jit.fixed_for_run() as inner:  # a nested run keeps the outer's answer
            assert inner is False
        assert jit.available() is False
    assert jit.available() is jit._installed()
