"""``modelgraph run``'s inputs: every way a feed file or a random draw can be wrong gets exit 2 and a
message naming the file or input; the accepted forms feed the model Keras's golden inputs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from modelgraph.cli.main import cli

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
MULTI = SAMPLES / "k3" / "multi_io_list.keras"
MULTI_GOLDEN = SAMPLES / "goldens" / "k3_multi_io_list.npz"
RNN_MASK = SAMPLES / "k3" / "rnn_mask.keras"

pytestmark = pytest.mark.skipif(not MULTI.exists(), reason="samples are not committed")


def run(*args: object):
    return CliRunner().invoke(cli, ["run", *map(str, args)])


def assert_usage_error(res, *words: str) -> None:
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    for word in words:
        assert word in res.output, res.output


def golden_arrays() -> dict[str, np.ndarray]:
    with np.load(MULTI_GOLDEN, allow_pickle=False) as g:
        return {k: g[k] for k in g.files if not k.startswith("intermediate/")}


def test_a_golden_npz_feeds_the_model_by_its_input_prefix(tmp_path):
    out = tmp_path / "out.npz"
    res = run(MULTI, "--input", MULTI_GOLDEN, "--expect", MULTI_GOLDEN, "-o", out)
    assert res.exit_code == 0, res.output
    assert "PASSED" in res.output


def test_name_equals_a_one_array_npz_and_a_missing_name(tmp_path):
    arrays = golden_arrays()
    np.savez(tmp_path / "only.npz", whatever=arrays["input/a"])
    np.savez(tmp_path / "b.npz", b=arrays["input/b"])
    res = run(MULTI, "--input", f"a={tmp_path / 'only.npz'}", "--input", f"b={tmp_path / 'b.npz'}")
    assert res.exit_code == 0, res.output
    np.savez(tmp_path / "two.npz", x=arrays["input/a"], y=arrays["input/b"])
    assert_usage_error(run(MULTI, "--input", f"a={tmp_path / 'two.npz'}"), "two.npz", "which one", "'a'")


def test_a_npy_cannot_feed_a_two_input_model(tmp_path):
    np.save(tmp_path / "a.npy", golden_arrays()["input/a"])
    assert_usage_error(run(MULTI, "--input", tmp_path / "a.npy"), "a.npy", "single-input", "NAME=FILE")


def test_missing_files_and_unknown_names(tmp_path):
    assert_usage_error(run(MULTI, "--input", tmp_path / "nope.npz"), "nope.npz", "does not exist")
    assert_usage_error(run(MULTI, "--input", f"a={tmp_path / 'nope.npy'}"), "nope.npy", "does not exist")
    np.savez(tmp_path / "c.npz", c=np.zeros((1, 8), np.float32))
    assert_usage_error(run(MULTI, "--input", tmp_path / "c.npz"), "unknown input 'c'", "c.npz")


def test_pickled_and_corrupt_input_files_are_refused(tmp_path):
    pickled = tmp_path / "obj.npy"
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    assert_usage_error(run(MULTI, "--input", f"a={pickled}"), "obj.npy", "without pickle")
    corrupt = tmp_path / "bad.npz"
    corrupt.write_bytes(b"PK\x03\x04 this is not a zip archive")
    assert_usage_error(run(MULTI, "--input", corrupt), "bad.npz", "without pickle")


def test_random_token_ids_cover_the_embedding_table():
    from modelgraph.loading import load
    from modelgraph.runner.feeds import random_feeds
    from modelgraph.runner.interpreter import Runner

    # rnn_mask's integer input 'tok' feeds an Embedding of 20 rows: ids are drawn from all 20 of them
    # (not the default 0..9 of other integer inputs), never past the table.
    graph = load(RNN_MASK)
    feeds = random_feeds(Runner(graph).inputs, graph, seed=3, batch=64)
    assert graph.layer("emb").config["input_dim"] == 20
    assert 10 <= feeds["tok"].max() < 20 and feeds["tok"].min() >= 0
    res = run(RNN_MASK, "--random", "--seed", "3", "--batch", "4")
    assert res.exit_code == 0, res.output


def weightless_model(tmp_path: Path, shape: list, dtype: str = "float32") -> Path:
    """A to_json()-style config: an input of ``shape`` and one global pooling (no weights needed)."""
    tensor = {
        "class_name": "__keras_tensor__",
        "config": {"shape": shape, "dtype": dtype, "keras_history": ["x", 0, 0]},
    }
    config = {
        "class_name": "Functional",
        "config": {
            "name": "m",
            "layers": [
                {
                    "module": "keras.layers",
                    "class_name": "InputLayer",
                    "name": "x",
                    "config": {"name": "x", "batch_shape": shape, "dtype": dtype},
                    "inbound_nodes": [],
                },
                {
                    "module": "keras.layers",
                    "class_name": "GlobalMaxPooling2D",
                    "name": "pool",
                    "config": {"name": "pool"},
                    "inbound_nodes": [{"args": [tensor], "kwargs": {}}],
                },
            ],
            "input_layers": [["x", 0, 0]],
            "output_layers": [["pool", 0, 0]],
        },
        "keras_version": "3.15.1",
    }
    path = tmp_path / "m.json"
    path.write_text(json.dumps(config))
    return path


def test_random_inputs_need_known_dimensions_and_a_drawable_dtype(tmp_path):
    model = weightless_model(tmp_path, [None, None, None, 3])
    assert_usage_error(run(model, "--random"), "'x'", "unknown dimensions", "--input")
    np.save(tmp_path / "x.npy", np.ones((2, 5, 4, 3), np.float32))
    res = run(model, "--input", tmp_path / "x.npy")
    assert res.exit_code == 0, res.output
    model = weightless_model(tmp_path, [None, 4, 4, 3], dtype="string")
    assert_usage_error(run(model, "--random"), "'x'", "dtype string", "cannot draw")
    assert_usage_error(run(model, "--input", tmp_path / "x.npy"), "'x'", "expects shape (None, 4, 4, 3)")
    np.save(tmp_path / "x.npy", np.ones((2, 4, 4, 3), np.float32))
    assert_usage_error(run(model, "--input", tmp_path / "x.npy"), "'x'", "cannot be cast to string")


def test_a_random_draw_too_large_for_memory_is_a_usage_error(tmp_path):
    # A file may declare any input shape; drawing 100M x 100M random values must not be attempted.
    model = weightless_model(tmp_path, [None, 100_000_000, 100_000_000, 3])
    assert_usage_error(run(model, "--random"), "'x'", "(1, 100000000, 100000000, 3)", "GiB", "--input")
    assert_usage_error(run(model, "--random", "--batch", "1000000000"), "'x'", "GiB")


# --- ids for Embeddings and sizes for unknown axes (samples random_ids, made by tf_keras and Keras 3) --

RANDOM_IDS = ["k2/random_ids.h5", "k2/random_ids.keras", "k3/random_ids.keras", "k3/random_ids.h5"]


@pytest.mark.parametrize("model", RANDOM_IDS)
def test_random_ids_reach_embeddings_in_range(model: str) -> None:
    """float32 inputs holding ids (into a nested model's Embedding, TimeDistributed(Embedding), a
    Reshape then an Embedding) are drawn as integers in [0, input_dim), whatever their dtype."""
    from modelgraph.loading import load
    from modelgraph.runner import feeds as fd
    from modelgraph.runner.interpreter import Runner

    graph = load(SAMPLES / model)
    assert fd._embedding_limits(graph) == {"ids": 50, "grid": 30, "flat_ids": 7}
    runner = Runner(graph)
    feeds = fd.random_feeds(runner.inputs, graph, seed=3, batch=2, shapes={"seq": (9, 4)})
    for name, high in (("ids", 50), ("grid", 30), ("flat_ids", 7)):
        assert feeds[name].dtype == np.float32
        assert feeds[name].min() >= 0 and feeds[name].max() < high
        np.testing.assert_array_equal(feeds[name], np.round(feeds[name]))
    assert feeds["seq"].shape == (2, 9, 4)
    res = run(SAMPLES / model, "--random", "--shape", "seq=9x4", "--batch", "2")
    assert res.exit_code == 0, res.output
    assert "(2, 55)" in res.output


def test_unknown_axes_need_shape() -> None:
    model = SAMPLES / "k3" / "random_ids.keras"
    assert_usage_error(run(model, "--random"), "seq", "--shape seq=")
    assert_usage_error(run(model, "--random", "--shape", "seq=9x5"), "does not fit", "(None, None, 4)")
    assert_usage_error(run(model, "--random", "--shape", "seq=9xa"), "positive sizes")
    assert_usage_error(run(model, "--random", "--shape", "nope=9x4"), "unknown input 'nope'")
    assert_usage_error(run(model, "--random", "--shape", "9x4"), "name the input")
    assert_usage_error(run(model, "--shape", "seq=9x4"), "--random")
