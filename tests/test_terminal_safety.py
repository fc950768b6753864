"""Names from a file cannot write terminal escapes or line breaks into text output.

A layer of samples/k3/single_bare.json (Input(5) -> Dense d1 -> Dense d2, Keras 3.15.1) is renamed to
a string with an OSC title sequence, a colour sequence, a bell, a carriage return and a newline.
Text output shows those characters as ``\\xNN``; JSON output keeps the name as it is (JSON escapes
control characters itself).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ._cli import run_cli as cli

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "k3" / "single_bare.json"
WEIGHTS = SAMPLE.with_name("single_bare.weights.h5")
HOSTILE = "d1\x1b]0;pwned\x07\x1b[31m\r\nfake row\x9b"
SHOWN = "d1\\x1b]0;pwned\\x07\\x1b[31m\\x0d\\x0afake row\\u009b"


@pytest.fixture(scope="module")
def hostile_model(tmp_path_factory) -> Path:
    text = SAMPLE.read_text()
    assert text.count('"d1"') >= 2  # the layer's name and d2's reference to it
    path = tmp_path_factory.mktemp("hostile") / "model.json"
    path.write_text(text.replace('"d1"', json.dumps(HOSTILE)))
    return path


def assert_escaped(text: str) -> None:
    assert SHOWN in text, text
    assert not any(c in text for c in "\x1b\x07\r\x9b"), repr(text)
    assert "\nfake row" not in text


@pytest.mark.parametrize(
    "args",
    [
        ["inspect", "--columns", "layer,params"],  # room for the whole name at any terminal width
        ["run", "--weights", WEIGHTS, "--random", "--profile"],
        ["diff", SAMPLE],
    ],
    ids=["inspect", "run-profile", "diff"],
)
def test_text_output_escapes_control_characters(hostile_model: Path, args: list) -> None:
    command, *rest = args
    res = cli(command, hostile_model, *rest)
    assert res.returncode in (0, 1), res.stderr
    assert_escaped(res.stdout)


def test_json_output_keeps_the_name(hostile_model: Path) -> None:
    res = cli("inspect", hostile_model, "--format", "json")
    assert res.returncode == 0, res.stderr
    assert HOSTILE in [layer["name"] for layer in json.loads(res.stdout)["layers"]]


def _broken(tmp_path: Path, hostile_model: Path, key: str, value: object) -> Path:
    """The hostile model with one config entry of the renamed layer changed."""
    config = json.loads(hostile_model.read_text())
    (layer,) = [lyr for lyr in config["config"]["layers"] if lyr["name"] == HOSTILE]
    layer["config"][key] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(config))
    return path


def test_run_check_lists_the_layer_escaped(tmp_path: Path, hostile_model: Path) -> None:
    broken = _broken(tmp_path, hostile_model, "activation", "no_such_activation")
    res = cli("run", broken, "--weights", WEIGHTS, "--check")
    assert res.returncode == 4, res.stderr
    assert_escaped(res.stdout)


def test_an_error_naming_the_layer_stays_one_escaped_line(tmp_path: Path, hostile_model: Path) -> None:
    res = cli("run", _broken(tmp_path, hostile_model, "units", -3), "--weights", WEIGHTS, "--random")
    assert res.returncode not in (0, 70), res.stderr
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("modelgraph: error: "), res.stderr
    assert_escaped(res.stderr)


BIDI = "d1\u202eevil\u202c\u2066x\u2069\u200e\u200f\u061c"
BIDI_SHOWN = "d1\\u202eevil\\u202c\\u2066x\\u2069\\u200e\\u200f\\u061c"


def test_bidi_controls_are_escaped_in_text_and_kept_in_json(tmp_path: Path) -> None:
    """A right-to-left override (U+202E) and the other bidi controls would show a name reordered."""
    path = tmp_path / "model.json"
    path.write_text(SAMPLE.read_text().replace('"d1"', json.dumps(BIDI)))
    # --wide: one line per layer, so the escaped name is shown whole (the default table wraps it).
    for args in (["inspect", "--wide"], ["run", "--weights", WEIGHTS, "--random", "--profile"]):
        command, *rest = args
        res = cli(command, path, *rest)
        assert res.returncode == 0, res.stderr
        assert BIDI_SHOWN in res.stdout, res.stdout
        assert not any(c in res.stdout for c in "\u202e\u202c\u2066\u2069\u200e\u200f\u061c")
    res = cli("inspect", path, "--format", "json")
    assert BIDI in [layer["name"] for layer in json.loads(res.stdout)["layers"]]
