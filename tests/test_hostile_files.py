"""Hostile model files, round 2: each is built here, in the test, from a committed sample, and every
command must end with a documented exit code and a one-line message, within the subprocess time
limit of :func:`tests._cli.run_cli`.

Samples: ``samples/k3/cnn_dir`` (an unzipped ``.keras``: config.json, metadata.json,
model.weights.h5) and ``samples/k3/cnn.keras`` (its zipped form), both written by Keras 3.15.1.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ._cli import run_cli as cli

SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "k3"
CNN_DIR = SAMPLES / "cnn_dir"
OTHER_WEIGHTS = SAMPLES / "mha_dir" / "model.weights.h5"


def assert_clean(res, code: int, *words: str) -> None:
    assert res.returncode == code, (res.returncode, res.stdout[-2000:], res.stderr[-2000:])
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
    for word in words:
        assert word in res.stdout + res.stderr, (word, res.stdout[-2000:], res.stderr)


def every_command(model: Path) -> list[tuple[list, int]]:
    """(arguments, expected exit code) of each command on ``model``, which cannot be loaded."""
    return [
        (["inspect", model], 3),
        (["render", model, "--format", "dot"], 3),
        (["run", model, "--random"], 3),
        (["diff", model, CNN_DIR], 3),
        (["validate", model], 1),
    ]


# --- directory-form members: symlinks out of the model, FIFOs, directories ---------------------------


def _dir_model(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    shutil.copytree(CNN_DIR, model)
    return model


@pytest.mark.parametrize(
    ("member", "target"),
    [
        ("config.json", "outside.json"),
        ("metadata.json", "outside.json"),
        ("model.weights.h5", "outside.h5"),
    ],
)
def test_a_member_symlinked_out_of_the_model_is_never_read(tmp_path: Path, member: str, target: str) -> None:
    model = _dir_model(tmp_path)
    outside = tmp_path / target
    shutil.copy(model / member if target.endswith(".json") else OTHER_WEIGHTS, outside)
    (model / member).unlink()
    os.symlink(outside, model / member)
    for args, code in every_command(model):
        res = cli(*args)
        assert_clean(res, code, "outside the model folder")


def test_a_symlink_inside_the_model_is_followed(tmp_path: Path) -> None:
    model = _dir_model(tmp_path)
    (model / "assets").mkdir()
    (model / "config.json").rename(model / "assets" / "config.json")
    os.symlink("assets/config.json", model / "config.json")
    assert_clean(cli("inspect", model), 0)


@pytest.mark.parametrize("member", ["config.json", "metadata.json", "model.weights.h5"])
@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_member_that_is_not_a_regular_file_is_refused_without_blocking(
    tmp_path: Path, member: str, kind: str
) -> None:
    model = _dir_model(tmp_path)
    (model / member).unlink()
    if kind == "fifo":
        os.mkfifo(model / member)
    else:
        (model / member).mkdir()
    words = "FIFO" if kind == "fifo" else "directory"
    for args, code in every_command(model):
        assert_clean(cli(*args), code, words)


def test_a_fifo_given_as_the_model_or_found_in_a_folder_does_not_block(tmp_path: Path) -> None:
    fifo = tmp_path / "model.h5"
    os.mkfifo(fifo)
    for args, code in every_command(fifo):
        assert_clean(cli(*args), code, "FIFO")
    folder = tmp_path / "folder"
    folder.mkdir()
    os.mkfifo(folder / "x.json")
    os.mkfifo(folder / "y.keras")
    res = cli("validate", folder)
    assert res.returncode in (1, 2), res.stderr
    assert "Traceback" not in res.stderr


# --- zips Keras rejects: CRC mismatch, local-header name differing from the central directory -----

CNN_KERAS = SAMPLES / "cnn.keras"


def _rewritten_zip(tmp_path: Path, member: str, compress: int, change) -> Path:
    """cnn.keras rewritten with ``member`` stored or deflated, then ``change(bytes, info)`` applied to
    the archive's bytes (the central directory keeps the original CRC and name)."""
    import zipfile

    path = tmp_path / "model.keras"
    with zipfile.ZipFile(CNN_KERAS) as src, zipfile.ZipFile(path, "w") as dst:
        for info in src.infolist():
            dst.writestr(
                info.filename, src.read(info), compress_type=compress if info.filename == member else 0
            )
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
    data = bytearray(path.read_bytes())
    change(data, info)
    path.write_bytes(bytes(data))
    return path


def _flip_last_data_byte(data: bytearray, info) -> None:
    name_len = int.from_bytes(data[info.header_offset + 26 : info.header_offset + 28], "little")
    extra_len = int.from_bytes(data[info.header_offset + 28 : info.header_offset + 30], "little")
    start = info.header_offset + 30 + name_len + extra_len
    if info.compress_type == 0:
        data[start + info.compress_size - 100] ^= 0x01  # a byte of the stored bytes
    else:  # a stored deflate block inside would decompress badly; alter the bytes zlib reads last
        data[start + info.compress_size - 5] ^= 0x01


def _rename_local(data: bytearray, info) -> None:
    start = info.header_offset + 30
    old = info.filename.encode()
    assert data[start : start + len(old)] == old
    data[start : start + 1] = b"X"


@pytest.mark.parametrize(
    ("member", "compress"),
    [("model.weights.h5", 0), ("config.json", 0), ("model.weights.h5", 8)],
    ids=["stored-weights", "stored-config", "deflated-weights"],
)
def test_a_member_whose_bytes_fail_its_crc_is_refused(tmp_path: Path, member: str, compress: int) -> None:
    model = _rewritten_zip(tmp_path, member, compress, _flip_last_data_byte)
    for args, code in every_command(model):
        res = cli(*args)
        if compress and args[0] != "validate" and "CRC" not in res.stderr:
            # a flipped deflate bit may break the stream itself: still a one-line load error
            assert_clean(res, code, member)
            continue
        assert_clean(res, code, member, "CRC")
    res = cli("validate", model)
    if "CRC-32" in res.stdout:
        assert "SEC117" in res.stdout and res.stdout.count(" error ") == 1, res.stdout


@pytest.mark.parametrize("member", ["model.weights.h5", "config.json"])
def test_a_local_header_name_differing_from_the_central_directory_is_refused(
    tmp_path: Path, member: str
) -> None:
    model = _rewritten_zip(tmp_path, member, 0, _rename_local)
    for args, code in every_command(model):
        assert_clean(cli(*args), code, "local header")
    res = cli("validate", model)
    assert "SEC117" in res.stdout and res.stdout.count(" error ") == 1, res.stdout


# --- numbers: huge integers, non-size input shapes, complex weights, overflowing dequantisation -----

SINGLE = SAMPLES / "single_bare.json"
SINGLE_WEIGHTS = SAMPLES / "single_bare.weights.h5"


def _single_with(tmp_path: Path, old: str, new: str) -> Path:
    """single_bare.json with one piece of its text replaced (numbers json.dumps cannot write)."""
    text = SINGLE.read_text()
    assert text.count(old) == 1, old
    path = tmp_path / "model.json"
    path.write_text(text.replace(old, new))
    return path


def test_an_integer_past_pythons_digit_limit_is_a_one_line_error_everywhere(tmp_path: Path) -> None:
    model = _single_with(tmp_path, '"units": 4', '"units": ' + "9" * 5000)
    for args, code in every_command(model):
        if args[0] == "diff":
            args = ["diff", model, SINGLE]
        assert_clean(cli(*args), code, "5,000 digits")
    res = cli("validate", model)
    assert res.stdout.count(" error ") == 1, res.stdout


@pytest.mark.parametrize("dim", ["1e400", "-0.0", "2.5"])
def test_a_batch_shape_run_refuses_is_a_validate_finding(tmp_path: Path, dim: str) -> None:
    model = _single_with(tmp_path, '"batch_shape": [null, 5]', f'"batch_shape": [null, {dim}]')
    run = cli("run", model, "--weights", SINGLE_WEIGHTS, "--random")
    assert_clean(run, 3, "not a list of sizes")
    assert_clean(cli("validate", model), 1, "SHP004", "not a list of sizes")


def test_complex_weights_are_refused_without_a_numpy_warning(tmp_path: Path) -> None:
    import h5py
    import numpy as np

    weights = tmp_path / "complex.weights.h5"
    shutil.copy(SINGLE_WEIGHTS, weights)
    with h5py.File(weights, "r+") as f:
        kernel = f["layers/dense/vars/0"][()]
        del f["layers/dense/vars/0"]
        f["layers/dense/vars/0"] = kernel.astype(np.complex64) + 1j
    res = cli("run", SINGLE, "--weights", weights, "--random")
    assert_clean(res, 3, "complex64", "kernel")
    assert "Warning" not in res.stderr, res.stderr
    res = cli("validate", SINGLE, "--weights", weights)
    assert_clean(res, 1, "complex64")
    assert "Warning" not in res.stderr


def test_overflowing_tfjs_dequantisation_prints_no_numpy_warning(tmp_path: Path) -> None:
    import json

    model = tmp_path / "q8"
    shutil.copytree(SAMPLES.parent / "tfjs" / "cnn_q8", model)
    doc = json.loads((model / "model.json").read_text())
    for group in doc["weightsManifest"]:
        for entry in group["weights"]:
            if "quantization" in entry:
                entry["quantization"].update(scale=3e38, min=-3e38)
    (model / "model.json").write_text(json.dumps(doc))
    run = cli("run", model, "--random")
    assert run.returncode == 0 and "NaN" in run.stdout + run.stderr, run.stderr
    assert "RuntimeWarning" not in run.stderr and "encountered" not in run.stderr, run.stderr
    res = cli("validate", model)  # the value scan is on by default
    assert_clean(res, 1, "WGT006")
    assert "RuntimeWarning" not in res.stderr


# --- HDF5 structure: duplicate names, deep nesting, many hard links: bounded time and memory --------

K2_CNN_H5 = SAMPLES.parent / "k2" / "cnn.h5"  # tf_keras 2.21 legacy .h5


def timed(*args: object) -> tuple[object, float, int]:
    """The CLI run under /usr/bin/time: (result, seconds, peak resident KB)."""
    import subprocess
    import sys
    import tempfile

    if not Path("/usr/bin/time").exists():
        pytest.skip("needs /usr/bin/time")
    res = subprocess.run(
        ["/usr/bin/time", "-f", "TIME %e %M", sys.executable, "-m", "modelgraph", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tempfile.gettempdir(),
    )
    *rest, last = res.stderr.rstrip("\n").split("\n")
    _, seconds, kb = last.split()
    res.stderr = "\n".join(rest)
    return res, float(seconds), int(kb)


def _legacy_with(tmp_path: Path, change) -> Path:
    import h5py

    path = tmp_path / "model.h5"
    shutil.copy(K2_CNN_H5, path)
    with h5py.File(path, "r+") as f:
        change(f)
    return path


def _chunked_attr(obj, name: str, values: list[bytes], per_chunk: int) -> None:
    """Keras's form for attributes over 64 KiB: name0, name1, ..."""
    import numpy as np

    del obj.attrs[name]
    for i in range(0, len(values), per_chunk):
        obj.attrs.create(f"{name}{i // per_chunk}", np.array(values[i : i + per_chunk]))


@pytest.mark.parametrize(
    ("what", "change"),
    [
        (
            "layer_names",
            lambda f: _chunked_attr(f["model_weights"], "layer_names", [b"b1_conv"] * 100_000, 5000),
        ),
        (
            "weight_names",
            lambda f: _chunked_attr(
                f["model_weights/b1_conv"], "weight_names", [b"b1_conv/kernel:0"] * 100_000, 3000
            ),
        ),
    ],
)
def test_duplicate_legacy_names_are_rejected_early(tmp_path: Path, what: str, change) -> None:
    model = _legacy_with(tmp_path, change)
    for args, code in every_command(model):
        if args[0] == "diff":
            args = ["diff", model, K2_CNN_H5]
        res, seconds, kb = timed(*args)
        assert_clean(res, code, what)
        assert seconds < 20 and kb < 500_000, (args[0], seconds, kb)
    res = cli("validate", model)
    assert "SEC118" in res.stdout and res.stdout.count(" error ") == 1, res.stdout


def test_deeply_nested_groups_and_many_hard_links_are_bounded(tmp_path: Path) -> None:
    """3,000 nested groups and 200,000 hard links to one dataset in a directory-form model's
    weights (Keras 3 tree): every command ends within seconds, in bounded memory."""
    import h5py

    deep = _dir_model(tmp_path / "deep")
    with h5py.File(deep / "model.weights.h5", "r+") as f:
        group = f["layers"]
        for _ in range(3000):
            group = group.create_group("g")
    links = _dir_model(tmp_path / "links")
    with h5py.File(links / "model.weights.h5", "r+") as f:
        target = next(o for o in _datasets(f))
        group = f.create_group("links")
        for i in range(200_000):
            group[f"l{i}"] = target
    for model, words, code in ((deep, "nested deeper", 3), (links, "", 0)):
        for args, _ in every_command(model):
            if args[0] == "run":
                args = [*args, "--seed", "1"]
            res, seconds, kb = timed(*args)
            expected = {"validate": 1 if code else 0}.get(args[0], code)
            assert_clean(res, expected, words)
            assert seconds < 20 and kb < 600_000, (args[0], seconds, kb)


def _datasets(f):
    import h5py

    found = []
    f.visit(lambda name: found.append(f[name]) if isinstance(f[name], h5py.Dataset) else None)
    return found


# --- declared-size bombs under the old 4 GiB floor; allocations checked against available memory ----


def test_a_dataset_declaring_gigabytes_and_storing_nothing_is_refused_quickly(tmp_path: Path) -> None:
    import h5py

    model = _dir_model(tmp_path)
    with h5py.File(model / "model.weights.h5", "r+") as f:
        name = "layers/batch_normalization/vars/0"
        del f[name]
        f.create_dataset(name, shape=(950_000_000,), dtype="f4")  # 3.8 GB declared, never written
        assert f[name].id.get_storage_size() == 0
    for args, code in every_command(model):
        res, seconds, kb = timed(*args)
        assert_clean(res, code, "3,800,000,000 bytes", "shape bomb")
        assert seconds < 20 and kb < 300_000, (args[0], seconds, kb)
    assert "SEC113" in cli("validate", model).stdout


def test_allocations_are_checked_against_available_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """A weight or random input larger than the memory available is a one-line error, not a
    MemoryError (the machine running the suite has plenty, so the amount available is set here)."""
    from modelgraph import load, safe_io
    from modelgraph.errors import FormatError, UsageError
    from modelgraph.runner.feeds import random_feeds
    from modelgraph.runner.interpreter import Runner

    graph = load(SINGLE, weights=SINGLE_WEIGHTS)
    runner = Runner(graph)
    monkeypatch.setattr(safe_io, "available_memory", lambda: 64)
    with pytest.raises(UsageError, match="more than the 64 bytes of memory available"):
        random_feeds(runner.inputs, graph, batch=100)
    kernel = graph.layer("d1").weights[0]  # 5 x 4 float32: 80 bytes
    with pytest.raises(FormatError, match="80 bytes, more than the 64 bytes of memory available"):
        kernel.read()
    monkeypatch.setattr(safe_io, "available_memory", lambda: None)  # unknown: not refused
    assert kernel.read().shape == (5, 4)


# --- polyglots: one file that is both a zip and an HDF5 file ------------------------------------------


def test_an_hdf5_model_followed_by_a_keras_zip_is_refused(tmp_path: Path) -> None:
    model = tmp_path / "model.h5"
    model.write_bytes(K2_CNN_H5.read_bytes() + CNN_KERAS.read_bytes())
    for args, code in every_command(model):
        assert_clean(cli(*args), code, "polyglot")
    res = cli("validate", model)
    assert "SEC119" in res.stdout and res.stdout.count(" error ") == 1, res.stdout


def _keras_with_weights_at(tmp_path: Path, offset: int, model_config: bool) -> Path:
    """A copy of a real .keras whose stored model.weights.h5 begins exactly at ``offset`` (where an
    HDF5 reader looks for a superblock), padded with a local-header extra field; optionally with a
    ``model_config`` attribute on the weights file's root, as a polyglot model would carry."""
    import struct
    import zipfile

    import h5py

    members = {}
    with zipfile.ZipFile(CNN_KERAS) as zf:
        for info in zf.infolist():
            members[info.filename] = zf.read(info.filename)
    weights = tmp_path / "w.h5"
    weights.write_bytes(members["model.weights.h5"])
    if model_config:
        with h5py.File(weights, "r+") as f:
            f.attrs["model_config"] = "{}"
    members["model.weights.h5"] = weights.read_bytes()
    out = tmp_path / "model.keras"
    name = b"model.weights.h5"
    pad = offset - 30 - len(name) - 4
    extra = struct.pack("<HH", 0xCAFE, pad) + b"\0" * pad
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zf:
        info = zipfile.ZipInfo("model.weights.h5", date_time=(2020, 1, 1, 0, 0, 0))
        info.extra = extra
        zf.writestr(info, members["model.weights.h5"])
        for n in ("config.json", "metadata.json"):
            zf.writestr(n, members[n])
    with open(out, "rb") as fh:
        fh.seek(offset)
        assert fh.read(8) == b"\x89HDF\r\n\x1a\n"
    return out


def test_a_keras_zip_whose_stored_weights_start_at_a_user_block_offset_is_not_a_polyglot(
    tmp_path: Path,
) -> None:
    """Real tf_keras wrote such a file (fuzz case k2_585): read as HDF5 it is only its weights file."""
    model = _keras_with_weights_at(tmp_path, 1024, model_config=False)
    res = cli("inspect", model)
    assert res.returncode == 0, res.stderr
    res = cli("validate", model)
    assert "SEC119" not in res.stdout, res.stdout


def test_a_keras_zip_whose_stored_member_reads_as_an_hdf5_model_is_refused(tmp_path: Path) -> None:
    model = _keras_with_weights_at(tmp_path, 1024, model_config=True)
    assert_clean(cli("inspect", model), 3, "polyglot")
    assert "SEC119" in cli("validate", model).stdout


# --- render: huge graphs, huge names, dot's own failures ---------------------------------------------


def _chain(tmp_path: Path, n: int) -> Path:
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location(
        "bench_load", SAMPLES.parents[1] / "bench" / "bench_load.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = tmp_path / f"chain_{n}.json"
    path.write_text(json.dumps(module.chain_config(n)))
    return path


@pytest.mark.skipif(shutil.which("dot") is None, reason="needs Graphviz dot")
def test_render_refuses_a_graph_too_big_to_lay_out_and_says_what_to_do(tmp_path: Path) -> None:
    model = _chain(tmp_path, 12_000)
    res, seconds, _ = timed("render", model, "-o", tmp_path / "x.svg")
    assert_clean(res, 2, "12,00", "--format dot")
    assert seconds < 60 and not (tmp_path / "x.svg").exists()
    assert cli("render", model, "--format", "dot", "-o", tmp_path / "x.dot").returncode == 0


@pytest.mark.skipif(shutil.which("dot") is None, reason="needs Graphviz dot")
def test_a_megabyte_layer_name_is_cut_in_labels_and_dot_failures_are_not_exit_4(tmp_path: Path) -> None:
    import json

    name = "n" * 1_000_000
    model = tmp_path / "model.json"
    model.write_text(SINGLE.read_text().replace('"d1"', json.dumps(name)))
    res = cli("render", model, "-o", tmp_path / "x.svg")
    assert_clean(res, 0)
    assert "n" * 199 + "…" in (tmp_path / "x.svg").read_text()
    # dot's own failure (here: a syntax error) and its time limit are ToolFailedError (exit 5)
    import importlib

    from modelgraph.errors import ToolFailedError

    render_module = importlib.import_module("modelgraph.render")

    with pytest.raises(ToolFailedError, match="Graphviz dot failed"):
        render_module.run_dot("digraph { a -> }", "svg")
    with pytest.raises(ToolFailedError, match="limit"):
        render_module.run_dot("digraph { a -> b }", "svg", timeout=0.000001)


@pytest.mark.parametrize(
    ("member", "method"), [("model.weights.h5", 8), ("config.json", 8), ("config.json", 14)]
)
def test_a_compression_method_that_does_not_match_the_bytes_is_a_load_error(
    tmp_path: Path, member: str, method: int
) -> None:
    """Found by tests/_fuzz_readers.py: a stored member whose headers claim deflate or LZMA made
    zlib/lzma raise their own errors (exit 70)."""

    def claim(data: bytearray, info) -> None:
        import struct

        data[info.header_offset + 8 : info.header_offset + 10] = struct.pack("<H", method)
        at = bytes(data).find(b"PK\x01\x02")
        while at >= 0:
            name_len = int.from_bytes(data[at + 28 : at + 30], "little")
            if bytes(data[at + 46 : at + 46 + name_len]) == member.encode():
                data[at + 10 : at + 12] = struct.pack("<H", method)
            at = bytes(data).find(b"PK\x01\x02", at + 4)

    model = _rewritten_zip(tmp_path, member, 0, claim)
    for args, code in every_command(model):
        assert_clean(cli(*args), code)
