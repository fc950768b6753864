"""Rough edges a new user hits (issue 22, part 4): each test failed on the code before the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import modelgraph
from modelgraph.cli.main import cli

ROOT = Path(__file__).resolve().parent.parent
K3 = ROOT / "samples" / "k3"
CNN = K3 / "cnn.keras"
GOLDEN = ROOT / "samples" / "goldens" / "k3_cnn.npz"


def invoke(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args], prog_name="modelgraph")


def one_line_error(result, code: int, *words: str) -> None:
    assert result.exit_code == code, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("modelgraph: error: ")]
    assert len(errors) == 1 and "Usage:" not in result.output and "Traceback" not in result.output, (
        result.output
    )
    for word in words:
        assert word in errors[0], (word, errors[0])


# --- output into a folder that does not exist -------------------------------------------------------


def test_render_and_diff_create_missing_output_folders(tmp_path: Path) -> None:
    out = tmp_path / "new" / "deeper" / "model.dot"
    assert invoke("render", CNN, "-o", out).exit_code == 0
    assert out.read_text().startswith("digraph")
    diff_out = tmp_path / "other" / "diff.dot"
    assert invoke("diff", CNN, K3 / "nested.keras", "-o", diff_out).exit_code == 1
    assert diff_out.read_text().startswith("digraph")


# --- one line and one exit code for a missing file, in every command ----------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["inspect", "{missing}"],
        ["render", "{missing}", "-o", "x.dot"],
        ["diff", str(CNN), "{missing}"],
        ["diff", "{missing}", str(CNN)],
        ["run", "{missing}", "--random"],
        ["validate", "{missing}"],  # (validate was already one line, exit 2: the others now match it)
        ["inspect", str(CNN), "--weights", "{missing}"],
    ],
)
def test_a_missing_file_is_one_line_and_exit_2(tmp_path: Path, args: list[str]) -> None:
    missing = str(tmp_path / "nope.keras")
    one_line_error(invoke(*[a.replace("{missing}", missing) for a in args]), 2, "nope.keras")


def test_a_bad_option_is_one_line_naming_the_help(tmp_path: Path) -> None:
    one_line_error(invoke("inspect", CNN, "--bogus"), 2, "--bogus", "modelgraph inspect --help")


# --- did you mean ---------------------------------------------------------------------------------


def test_mistyped_command_suggests_the_right_one() -> None:
    one_line_error(invoke("inspct", CNN), 2, "no such command 'inspct'", "did you mean 'inspect'?")
    one_line_error(invoke("rnu", CNN), 2, "did you mean 'run'?")


def test_mistyped_tap_layer_suggests_the_right_one() -> None:
    one_line_error(
        invoke("run", CNN, "--random", "--tap", "conv_1"), 2, "unknown layer 'conv_1'", "did you mean 'conv1'"
    )


# --- input files -----------------------------------------------------------------------------------


def test_an_empty_npy_input_is_a_usage_error(tmp_path: Path) -> None:
    empty = tmp_path / "x.npy"
    empty.write_bytes(b"")
    one_line_error(invoke("run", CNN, "--input", empty), 2, "x.npy", "empty")
    one_line_error(invoke("run", CNN, "--input", f"img={empty}"), 2, "empty")


def test_a_png_renamed_npz_does_not_suggest_allow_pickle(tmp_path: Path) -> None:
    fake = tmp_path / "picture.npz"
    fake.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    result = invoke("run", CNN, "--input", fake)
    one_line_error(result, 2, "picture.npz", "not an .npz")
    assert "pickle" not in result.output
    one_line_error(invoke("run", CNN, "--expect", fake, "--random"), 2, "picture.npz")


def test_input_accepts_a_combined_inputs_and_outputs_npz(tmp_path: Path) -> None:
    golden = np.load(GOLDEN)
    combined = tmp_path / "both.npz"
    x = golden["input/img"]
    np.savez(combined, img=x, probs=golden["output/0"], extra=np.zeros(3))
    result = invoke("run", CNN, "--input", combined, "--expect", GOLDEN)
    assert result.exit_code == 0, result.output
    note = [line for line in result.output.splitlines() if "ignored" in line and "not inputs" in line]
    assert note and "extra" in note[0] and "probs" in note[0]


# --- run: failures-only view, profile repeats ---------------------------------------------------------


def test_failures_only_lists_only_the_failing_tensors() -> None:
    # A tolerance between the tensors' errors (which depend on the machine's BLAS): some pass, some fail.
    probe = invoke("run", CNN, "--expect", GOLDEN, "--all-intermediates", "--format", "json")
    errors = sorted({t["max_abs"] for t in json.loads(probe.stdout)["comparison"]["tensors"]})
    assert len(errors) > 2, errors
    atol = errors[len(errors) // 2]
    args = ["run", CNN, "--expect", GOLDEN, "--all-intermediates", "--atol", repr(atol), "--rtol", "0"]
    full = invoke(*args)
    short = invoke(*args, "--failures-only")
    assert full.exit_code == short.exit_code == 1
    table = [
        line
        for line in short.output.splitlines()
        if line.startswith("  ") and ("ok " in line or "FAIL" in line)
    ]
    assert table and all("FAIL" in line for line in table)
    assert sum(" ok " in line for line in full.output.splitlines()) > 0
    assert "tensors within tolerance (not listed: --failures-only)" in short.output
    one_line_error(invoke("run", CNN, "--random", "--failures-only"), 2, "--expect")


def test_profile_warms_up_and_reports_the_median_of_repeats() -> None:
    result = invoke("run", CNN, "--random", "--profile", "--repeat", "3", "--format", "json")
    assert result.exit_code == 0, result.output
    profile = json.loads(result.stdout)["profile"]
    assert profile["runs"] == 3 and profile["warmup"] == 1
    text = invoke("run", CNN, "--random", "--profile", "--repeat", "3")
    assert "median of 3 runs after 1 warm-up" in text.output
    one_line_error(invoke("run", CNN, "--random", "--repeat", "3"), 2, "--profile")


# --- python -m modelgraph from a source checkout --------------------------------------------------


def test_python_m_modelgraph_runs_from_a_source_checkout() -> None:
    """No install: ``-S`` skips site-packages' .pth files (the editable install's finder); the
    dependencies come through PYTHONPATH, the package only from the checkout (the working folder)."""
    import click as click_module

    site = str(Path(click_module.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), site])}
    done = subprocess.run(
        [sys.executable, "-S", "-m", "modelgraph", "inspect", str(CNN), "--totals"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "cnn" in done.stdout


# --- the Python API ---------------------------------------------------------------------------------


def test_validate_report_is_falsy_without_findings(tmp_path: Path) -> None:
    clean = modelgraph.validate(str(CNN))
    assert len(clean) == 1 and not clean and clean.ok and clean.issues == []
    broken = tmp_path / "broken.json"
    config = json.loads((K3 / "cnn.json").read_text())
    text = json.dumps(config).replace('"conv1", 0, 0', '"no_such_layer", 0, 0')
    broken.write_text(text)
    found = modelgraph.validate(str(broken))
    assert found and found.issues and not found.ok


# --- --highlight-issues draws broken graphs ----------------------------------------------------------


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    text = (K3 / "cnn.json").read_text()
    assert old in text
    path = tmp_path / "broken.json"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    ("old", "new", "marked", "words"),
    [
        ('"keras_history": ["img", 0, 0]', '"keras_history": ["bn1", 0, 0]', "conv1", ["cycle"]),
        ('"keras_history": ["pool1", 0, 0]', '"keras_history": ["nowhere", 0, 0]', "b2_dw", ["nowhere"]),
    ],
    ids=["cycle", "dangling"],
)
def test_highlight_issues_draws_a_broken_graph(
    tmp_path: Path, old: str, new: str, marked: str, words: list
) -> None:
    model = _broken(tmp_path, old, new)
    out = tmp_path / "broken.dot"
    refused = invoke("render", model, "-o", out)
    assert refused.exit_code == 3  # without the flag a broken file is still refused
    result = invoke("render", model, "-o", out, "--highlight-issues")
    assert result.exit_code == 0, result.output
    dot = out.read_text()
    node = next(line for line in dot.splitlines() if f"<B>{marked}</B>" in line)
    assert "#f9d0d0" in node and "error: STR" in node  # the broken part, marked
    title = next(line for line in dot.splitlines() if line.strip().startswith("graph ["))
    for word in words:  # the finding's message, not only its rule id
        assert word in title, title


# --- shell completion (documented in the README) -----------------------------------------------------


def test_shell_completion_completes_commands_and_options() -> None:
    exe = Path(sys.executable).with_name("modelgraph")
    if not exe.exists():
        pytest.skip("the modelgraph console script is not installed next to this Python")

    def complete(words: str, cword: int) -> str:
        env = {
            **os.environ,
            "COMP_WORDS": words,
            "COMP_CWORD": str(cword),
            "_MODELGRAPH_COMPLETE": "bash_complete",
        }
        return subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=60).stdout

    assert "inspect" in complete("modelgraph ins", 1)
    assert "--max-depth" in complete("modelgraph inspect --max", 2)  # --depth is a hidden alias now
    readme = (ROOT / "README.md").read_text()
    assert "_MODELGRAPH_COMPLETE=bash_source modelgraph" in readme


# --- Layer.weights of a nested model --------------------------------------------------------------


@pytest.mark.parametrize("model", ["k3/nested.keras", "k3/nested.h5", "k2/nested.h5", "k2/nested.keras"])
def test_nested_model_layer_lists_its_weights(model: str) -> None:
    """As Keras's ``model.get_layer("inner_model").weights``: every weight of its layers, by path."""
    graph = modelgraph.load(ROOT / "samples" / model)
    inner = graph.layer("inner_model")
    assert inner.subgraph is not None
    expected = [(f"{lyr.name}/{w.name}", w) for lyr in inner.subgraph.layers for w in lyr.weights]
    assert [w.name for w in inner.weights] == [name for name, _ in expected]
    assert "inner_dense/kernel" in [w.name for w in inner.weights]
    for got, (_, want) in zip(inner.weights, expected, strict=True):
        np.testing.assert_array_equal(got.read(), want.read())
    assert inner.own_weights == ()
    # counted once: the model's parameters are its layers' parameters
    assert inner.param_count == sum(w.size for w in inner.weights)
    assert graph.param_count == sum(w.size for lyr in graph.layers for w in lyr.weights)
