"""Seeded structure-aware fuzzing of the readers (zip headers, HDF5 structure, directory members):
every command ends with a documented exit code within a time and memory bound. See
``tests/_fuzz_readers.py``; ``MODELGRAPH_FUZZ_CASES`` sets how many cases run (default 16)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ._fuzz_readers import MEMORY_LIMIT, TIME_LIMIT, case_memory, run_case

CASES = int(os.environ.get("MODELGRAPH_FUZZ_CASES", "16"))


@pytest.mark.parametrize("seed", range(CASES))
def test_a_mutated_container_gets_a_documented_exit_code(seed: int, tmp_path: Path) -> None:
    family, outcomes = run_case(seed, tmp_path)
    for command, code, seconds, bad in outcomes:
        assert not bad, f"{family}: {command} exit {code}: {bad}"
        assert seconds < TIME_LIMIT, (family, command, seconds)
    assert case_memory() < MEMORY_LIMIT
