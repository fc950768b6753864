"""Independent steps side by side: dependencies kept, slots released once, errors surface, no nested
parallel regions, the same numbers as a serial run, and the decision from a timed serial run."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from modelgraph.loading import load
from modelgraph.runner import interpreter, parallel, schedule
from modelgraph.runner.interpreter import Runner
from modelgraph.runner.schedule import (
    ShapeSchedule,
    SideBySide,
    StepGraph,
    run_side_by_side,
    side_by_side_plan,
    simulate,
)

GOLDENS = Path(__file__).resolve().parents[2] / "samples" / "goldens"

# A diamond and a tail: 0 -> (1, 2) -> 3 -> 4; slot k is written by step k, slot 9 is a model input.
DIAMOND_IN = [(9,), (0,), (0,), (1, 2), (3,)]
DIAMOND_OUT = [(0,), (1,), (2,), (3,), (4,)]
DIAMOND_PLAN = SideBySide(frozenset({0, 3, 4}), 0.0, 0.0)


def test_step_graph_counts_producers_consumers_and_readers() -> None:
    graph = StepGraph.of(DIAMOND_IN, DIAMOND_OUT)
    assert graph.waits == (0, 1, 1, 2, 1)
    assert graph.consumers == ((1, 2), (3,), (3,), (4,), ())
    assert graph.readers == {9: 1, 0: 2, 1: 1, 2: 1, 3: 1}


def test_predicted_time_of_a_diamond() -> None:
    graph = StepGraph.of(DIAMOND_IN, DIAMOND_OUT)
    seconds = [1.0, 3.0, 2.0, 1.0, 1.0]
    assert simulate(graph, seconds, 1).predicted_seconds == pytest.approx(8.0)
    two = simulate(graph, seconds, 2)
    assert two.predicted_seconds == pytest.approx(6.0)  # 1 and 2 side by side
    assert two.exclusive == {0, 3, 4}  # the steps that start with nothing else running or ready
    plan = side_by_side_plan(graph, [s * 1e-3 for s in seconds], 2)  # 6 <= 0.85 * 8
    assert plan is not None and plan.exclusive == {0, 3, 4}
    assert side_by_side_plan(graph, [s * 1e-3 for s in seconds], 1) is None
    # A chain gains nothing.
    chain = StepGraph.of([(9,), (0,), (1,)], [(0,), (1,), (2,)])
    assert side_by_side_plan(chain, [1e-3] * 3, 2) is None


def _decide(trial_seconds: list[float], serial_seconds: float = 8e-3) -> ShapeSchedule:
    """A diamond's schedule after a warm-up, two timed serial runs of ``serial_seconds`` and trial
    runs of ``trial_seconds``."""
    graph = StepGraph.of(DIAMOND_IN, DIAMOND_OUT)
    steps = [1e-3, 3e-3, 2e-3, 1e-3, 1e-3]
    decision = ShapeSchedule(timed_runs=2)
    assert decision.serial_timing(len(steps)) is None  # the warm-up is not timed
    for _ in range(2):
        assert decision.serial_timing(len(steps)) is not None
        assert decision.plan() is None  # serial until the timed runs are in
        decision.serial_done(list(steps), serial_seconds, graph, workers=2)
    assert decision.plan() is not None and not decision.decided  # 6 <= 0.85 * 8: on trial
    for seconds in trial_seconds:
        assert decision.plan() is not None
        decision.trial_done(seconds)
    return decision


def test_side_by_side_is_kept_only_when_the_trial_runs_were_faster() -> None:
    assert schedule.TRIAL_RUNS == 3
    faster = _decide([9e-3, 7e-3, 6e-3])  # a slow first run (scratch), then 6 <= 0.95 * 8
    assert faster.decided and faster.plan() is not None and faster.plan().exclusive == {0, 3, 4}
    faster.trial_done(1.0)  # a slow run later changes nothing: the schedule is fixed
    assert faster.plan() is not None and faster.serial_timing(5) is None
    # Predicted faster but measured slower (steps mostly Python, which the GIL serialises): serial.
    slower = _decide([12e-3, 10e-3, 9e-3])
    assert slower.decided and slower.plan() is None and slower.serial_timing(5) is None
    # Within 5% of the serial run is no gain worth other rounding.
    assert _decide([7.9e-3, 7.7e-3, 7.8e-3]).plan() is None


def test_a_chain_is_decided_serial_without_a_trial() -> None:
    chain = StepGraph.of([(9,), (0,), (1,)], [(0,), (1,), (2,)])
    decision = ShapeSchedule(timed_runs=2)
    for _ in range(3):
        timing = decision.serial_timing(3)
        if timing is not None:
            decision.serial_done([1e-3] * 3, 3e-3, chain, workers=2)
    assert decision.decided and decision.plan() is None


def _record_run(
    graph: StepGraph, fail: int | None = None
) -> tuple[list[int], list[int], set[str], list[bool]]:
    order: list[int] = []
    released: list[int] = []
    names: set[str] = set()
    nested: list[bool] = []
    lock = threading.Lock()

    def run_step(i: int) -> None:
        with lock:
            order.append(i)
            names.add(threading.current_thread().name)
            nested.append(parallel.threads_for(8, float(1 << 40)) == 1)
        if i == fail:
            raise ValueError(f"step {i} failed")
        time.sleep(0.02)

    def release(slot: int) -> None:
        with lock:
            released.append(slot)

    run_side_by_side(graph, DIAMOND_PLAN, 2, 2, run_step, release)
    return order, released, names, nested


def test_steps_run_after_their_producers_and_slots_are_released_once() -> None:
    graph = StepGraph.of(DIAMOND_IN, DIAMOND_OUT)
    order, released, names, _ = _record_run(graph)
    assert sorted(order) == [0, 1, 2, 3, 4]
    assert order[0] == 0 and order[3:] == [3, 4]
    assert sorted(released) == [0, 1, 2, 3, 4, 9]  # 4: written, read by nothing
    assert released.index(0) > 0  # slot 0 outlives its first reader
    assert len(names) == 2  # the two branches ran on two threads


@pytest.mark.skipif(parallel.blas_thread_setter() is None, reason="no BLAS thread control")
def test_steps_beside_others_never_spread_their_own_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODELGRAPH_THREADS", "2")
    graph = StepGraph.of(DIAMOND_IN, DIAMOND_OUT)
    order, _, _, nested = _record_run(graph)
    serial = dict(zip(order, nested, strict=True))
    # 1 and 2 run beside each other: their for_each runs serially; 0, 3 and 4 run alone and may spread.
    assert serial[1] and serial[2]
    assert not serial[0] and not serial[3] and not serial[4]


def test_a_failing_step_stops_the_run_and_surfaces() -> None:
    graph = StepGraph.of(DIAMOND_IN, DIAMOND_OUT)
    with pytest.raises(ValueError, match="step 1 failed"):
        _record_run(graph, fail=1)
    # No step after the failure's consumers started: 3 and 4 wait for step 1.
    order: list[int] = []

    def run_step(i: int) -> None:
        order.append(i)
        if i == 1:
            raise ValueError("boom")

    with pytest.raises(ValueError):
        run_side_by_side(graph, DIAMOND_PLAN, 2, 2, run_step, lambda s: None)
    assert 3 not in order and 4 not in order


def test_a_branching_app_runs_side_by_side_with_kerass_numbers(
    rebuilt_apps, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NASNetMobile's cells, forced side by side (any predicted or measured time kept): the run after
    the warm-up and the timed serial runs of an input shape runs side by side, within float32 rounding of a serial run and within the golden's
    tolerance of Keras."""
    golden = np.load(GOLDENS / "k3_app_nasnetmobile.npz")
    x = golden["input/input_layer"]
    graph = load(rebuilt_apps("apps/k3_nasnetmobile/manifest.json"))
    serial = Runner(graph, threads=1).run(x)
    monkeypatch.setattr(schedule, "MAX_PREDICTED_FRACTION", 1.0)
    monkeypatch.setattr(schedule, "MAX_MEASURED_FRACTION", float("inf"))
    calls: list[int] = []
    real = interpreter.run_side_by_side

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(interpreter, "run_side_by_side", counted)
    runner = Runner(graph, threads=2)
    for _ in range(1 + interpreter.TIMED_RUNS):
        runner.run(x)  # a warm-up run, then the timed serial runs that decide
    assert calls == []
    side = runner.run(x)
    again = runner.run(x)
    assert calls == [1, 1]
    for key, expected in serial.items():
        # Float32 rounding of 400 steps, judged against the output's scale: these logits span
        # -516..280, and the GEMMs split otherwise beside other steps, so an element of -22 moved by
        # 2.3e-4 (4.4e-7 of the largest), 1.03e-5 of itself. Serial and side by side are each as close
        # to Keras's golden (max |d| / max |golden| 4.7e-7 and 8.3e-7).
        np.testing.assert_allclose(side[key], expected, rtol=1e-5, atol=1e-6 * float(np.abs(expected).max()))
        np.testing.assert_array_equal(side[key], again[key])
        np.testing.assert_allclose(side[key], golden["output/0"], rtol=1e-4, atol=1e-5)
