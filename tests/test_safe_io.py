"""Hardened readers: zip, JSON and HDF5 refusals, caps, and the happy paths loaders rely on."""

from __future__ import annotations

import io
import json
import math
import sys
import time
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest

from modelgraph import safe_io
from modelgraph.errors import FormatError, LoadError, SecurityError

sys.path.insert(0, str(Path(__file__).resolve().parent / "validate"))
import _hostile as H  # noqa: E402

# --- JSON -----------------------------------------------------------------------------------------


def test_parse_json_plain_document() -> None:
    doc = safe_io.parse_json(b'{"a": [1, 2, {"b": "x"}]}', where="t.json")
    assert doc.value == {"a": [1, 2, {"b": "x"}]}
    assert doc.nonfinite == ()
    assert doc.depth == 3


def test_parse_json_records_nonfinite_literals_with_paths() -> None:
    doc = safe_io.parse_json('{"eps": NaN, "l": [1, Infinity, -Infinity], "k": 1e999}', where="t.json")
    assert math.isnan(doc.value["eps"])
    assert doc.nonfinite == ("$.eps", "$.l[1]", "$.l[2]", "$.k")


def test_parse_json_100k_deep_raises_typed_error_quickly() -> None:
    text = H.deep_json(100_000)
    start = time.perf_counter()
    with pytest.raises(FormatError, match=r"cfg\.json: JSON nesting deeper than 500 levels"):
        safe_io.parse_json(text, where="cfg.json")
    with pytest.raises(FormatError):
        safe_io.parse_json(text.encode(), where="cfg.json")
    assert time.perf_counter() - start < 5.0  # generous: it is milliseconds; a recursion crash never returns


def test_parse_json_depth_ignores_brackets_inside_strings() -> None:
    text = json.dumps({"s": "[" * 5000 + '\\"{' * 100, "t": ["]]]]"]})
    doc = safe_io.parse_json(text, where="t.json", max_depth=3)
    assert doc.value["t"] == ["]]]]"]
    assert safe_io.json_depth(text) == (2, text.index('["]]]]"]'))


def test_parse_json_depth_limit_is_configurable_and_exact() -> None:
    assert safe_io.parse_json("[[[]]]", where="x", max_depth=3).depth == 3
    with pytest.raises(FormatError, match="deeper than 2"):
        safe_io.parse_json("[[[]]]", where="x", max_depth=2)


def test_parse_json_syntax_error_has_line_and_column() -> None:
    with pytest.raises(FormatError, match=r"c\.json: invalid JSON at line 2 column 8"):
        safe_io.parse_json('{"a": 1,\n  "b": }', where="c.json")


def test_parse_json_refuses_huge_documents_before_parsing() -> None:
    with pytest.raises(FormatError, match="over the 100-byte limit"):
        safe_io.parse_json(b"[" + b"1," * 100 + b"1]", where="big.json", max_bytes=100)


def test_parse_json_invalid_utf8_is_a_format_error() -> None:
    with pytest.raises(FormatError, match="not valid UTF-8 at line 1"):
        safe_io.parse_json(b'{"a": "\xff"}', where="u.json")


def test_parse_json_unterminated_string_is_a_format_error() -> None:
    with pytest.raises(FormatError, match="invalid JSON"):
        safe_io.parse_json('{"a": "[[[[', where="u.json")


# --- ZIP ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["../evil", "assets/../../evil", "/etc/evil", "assets\\..\\evil", "C:/evil", "C:evil"],
)
def test_open_zip_rejects_traversal_members(tmp_path: Path, name: str) -> None:
    p = H.write_zip(tmp_path / "t.keras", {"config.json": b"{}", name: b"x"})
    with pytest.raises(SecurityError) as err:
        safe_io.open_zip(p)
    assert repr(name) in str(err.value)
    assert "\n" not in str(err.value)


def test_open_zip_near_miss_dotted_names_are_fine(tmp_path: Path) -> None:
    p = H.write_zip(tmp_path / "t.keras", {"config.json": b"{}", "assets/..a/b..c/.hidden": b"x"})
    with safe_io.open_zip(p) as z:
        assert z.read("assets/..a/b..c/.hidden") == b"x"


def test_open_zip_rejects_symlink_member(tmp_path: Path) -> None:
    with pytest.raises(SecurityError, match="'assets/link' is a symbolic link"):
        safe_io.open_zip(H.symlink_zip(tmp_path / "s.keras"))


def test_open_zip_rejects_duplicate_member(tmp_path: Path) -> None:
    with pytest.raises(SecurityError, match="appears more than once"):
        safe_io.open_zip(H.duplicate_zip(tmp_path / "d.keras"))


def test_open_zip_rejects_declared_size_bomb(tmp_path: Path) -> None:
    p = H.declared_size_bomb(tmp_path / "b.keras")
    with pytest.raises(SecurityError, match="'model.weights.h5' expands .* zip bomb"):
        safe_io.open_zip(p)


def test_open_zip_rejects_member_over_size_limit_and_total(tmp_path: Path) -> None:
    p = H.write_zip(tmp_path / "t.keras", {"a": b"x" * 100, "b": b"y" * 100})
    with pytest.raises(SecurityError, match="'a' declares 100 bytes, over the limit of 50"):
        safe_io.open_zip(p, safe_io.ZipLimits(max_member_bytes=50))
    with pytest.raises(SecurityError, match="zip declares 200 uncompressed bytes"):
        safe_io.open_zip(p, safe_io.ZipLimits(max_total_bytes=150))


def test_open_zip_rejects_too_many_members(tmp_path: Path) -> None:
    p = H.write_zip(tmp_path / "t.keras", {f"assets/{i}": b"" for i in range(11)})
    with pytest.raises(SecurityError, match="11 members, over the limit of 10"):
        safe_io.open_zip(p, safe_io.ZipLimits(max_members=10))


def test_open_zip_reports_how_many_more_problems(tmp_path: Path) -> None:
    p = H.write_zip(tmp_path / "t.keras", {"../a": b"", "../b": b""})
    with pytest.raises(SecurityError, match=r"\(\+1 more\)"):
        safe_io.open_zip(p)


def test_open_zip_corrupt_and_truncated_are_format_errors(tmp_path: Path) -> None:
    junk = tmp_path / "junk.keras"
    junk.write_bytes(b"PK\x03\x04 this is not a zip")
    with pytest.raises(FormatError, match="truncated or corrupt zip"):
        safe_io.open_zip(junk)
    good = H.write_zip(tmp_path / "g.keras", {"config.json": b"{}" * 1000})
    cut = tmp_path / "cut.keras"
    cut.write_bytes(good.read_bytes()[:-30])
    with pytest.raises(FormatError):
        safe_io.open_zip(cut)
    with pytest.raises(FormatError, match="cannot open"):
        safe_io.open_zip(tmp_path / "missing.keras")


def test_read_is_capped_and_lying_header_cannot_overread(tmp_path: Path) -> None:
    p = H.write_zip(tmp_path / "t.keras", {"config.json": b'{"a": 1}'})
    with safe_io.open_zip(p) as z:
        assert z.read("config.json") == b'{"a": 1}'
        with pytest.raises(SecurityError, match="over the 4-byte limit"):
            z.read("config.json", max_bytes=4)
        with pytest.raises(FormatError, match="no member 'nope'"):
            z.read("nope")
    with safe_io.open_zip(H.lying_size_zip(tmp_path / "l.keras")) as z, pytest.raises(LoadError):
        z.read("config.json")  # declared 10 bytes: never more than 10 are accepted (CRC then fails)


def test_read_json_parses_with_member_in_where(tmp_path: Path) -> None:
    p = H.write_zip(tmp_path / "t.keras", {"config.json": H.deep_json(2000).encode()})
    with safe_io.open_zip(p) as z, pytest.raises(FormatError, match=r"t\.keras:config\.json: JSON nesting"):
        z.read_json("config.json")


@pytest.mark.parametrize("compress", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_open_member_gives_a_seekable_file_for_h5py(tmp_path: Path, compress: int) -> None:
    weights = H.h5_bytes(H.plain_weights_h5, tmp_path)
    p = H.write_zip(
        tmp_path / "t.keras", {"config.json": b"{}", "model.weights.h5": weights}, compress=compress
    )
    with safe_io.open_zip(p) as z, z.open_member("model.weights.h5") as fh:
        assert fh.seekable()
        fh.seek(-4, io.SEEK_END)
        assert fh.read() == weights[-4:]
        fh.seek(0)
        assert fh.read(8) == b"\x89HDF\r\n\x1a\n"
        with safe_io.open_h5(fh) as f:
            ds = safe_io.safe_dataset(f, "layers/dense/vars/0")
            assert safe_io.read_dataset(ds).tolist() == np.ones((4, 4), "f4").tolist()
            assert safe_io.read_attr(safe_io.safe_group(f, "layers/dense/vars"), "name") == "d"


# --- HDF5 -----------------------------------------------------------------------------------------


def test_safe_group_and_dataset_refuse_external_link(tmp_path: Path) -> None:
    with safe_io.open_h5(H.external_link_h5(tmp_path / "e.h5")) as f:
        with pytest.raises(SecurityError, match=r"/layers/dense/vars/2 is a external link to '/etc/passwd'"):
            safe_io.safe_dataset(f, "layers/dense/vars/2")
        assert safe_io.safe_dataset(f, "layers/dense/vars/0").shape == (4, 4)


def test_soft_link_refused_even_as_an_intermediate_component(tmp_path: Path) -> None:
    with safe_io.open_h5(H.soft_cycle_h5(tmp_path / "s.h5")) as f:
        with pytest.raises(SecurityError, match="soft link to '/layers'"):
            safe_io.safe_group(f, "layers/dense/vars/loop/dense")
        with pytest.raises(SecurityError, match="soft link"):
            safe_io.safe_group(f, "a")


def test_safe_dataset_refuses_external_virtual_and_bomb(tmp_path: Path) -> None:
    cases = [
        (H.external_dataset_h5(tmp_path / "x.h5", tmp_path / "raw.bin"), "external file"),
        (H.virtual_dataset_h5(tmp_path / "v.h5"), "virtual dataset"),
        (H.shape_bomb_h5(tmp_path / "b.h5"), "shape bomb|over the limit"),
    ]
    for path, pattern in cases:
        with safe_io.open_h5(path) as f:
            with pytest.raises(SecurityError, match=pattern):
                safe_io.safe_dataset(f, "layers/dense/vars/0")
            ds = f["layers/dense/vars/0"]  # direct handle: read_dataset checks again
            with pytest.raises(SecurityError):
                safe_io.read_dataset(ds)


def test_shape_bomb_ratio_and_absolute_cap(tmp_path: Path) -> None:
    p = tmp_path / "r.h5"
    with h5py.File(p, "w") as f:
        f.create_dataset("d", shape=(1024, 1024, 1100), dtype="f4", chunks=(16, 16, 16))  # 4.3 GiB, empty
        f.create_dataset("ok", data=np.arange(10, dtype="f4"))
    with safe_io.open_h5(p) as f:
        assert [k for k, _ in safe_io.dataset_problems(f["d"])] == ["bomb"]
        assert safe_io.dataset_problems(f["ok"]) == []
        assert [k for k, _ in safe_io.dataset_problems(f["ok"], max_bytes=8)] == ["too_large"]
        with pytest.raises(SecurityError, match="over the limit of 8"):
            safe_io.read_dataset(f["ok"], max_bytes=8)


def test_missing_and_wrong_kind(tmp_path: Path) -> None:
    with safe_io.open_h5(H.plain_weights_h5(tmp_path / "p.h5")) as f:
        assert safe_io.safe_group(f, "nope", required=False) is None
        assert safe_io.safe_dataset(f, "layers/nope/0", required=False) is None
        with pytest.raises(FormatError, match="no group 'nope'"):
            safe_io.safe_group(f, "nope")
        with pytest.raises(FormatError, match="is not a dataset"):
            safe_io.safe_dataset(f, "layers/dense")
        with pytest.raises(FormatError, match="is not a group"):
            safe_io.safe_group(f, "layers/dense/vars/0")


def test_open_h5_unreadable_is_format_error(tmp_path: Path) -> None:
    p = tmp_path / "n.h5"
    p.write_bytes(b"not hdf5")
    with pytest.raises(FormatError, match="not a readable HDF5 file"):
        safe_io.open_h5(p)


def test_read_attr_decodes_all_string_kinds_and_chunks(tmp_path: Path) -> None:
    p = tmp_path / "a.h5"
    with h5py.File(p, "w") as f:
        f.attrs["s"] = "text"
        f.attrs["b"] = np.bytes_(b"bytes")
        f.attrs["arr"] = np.array([b"x", b"y"])
        f.attrs["vlen"] = np.array(["p", "q"], dtype=h5py.string_dtype())
        f.attrs["empty"] = np.array([], dtype="f8")
        f.attrs["n"] = np.int64(3)
        f.attrs["layer_names0"] = np.array([b"a", b"b"])
        f.attrs["layer_names1"] = np.array([b"c"])
    with safe_io.open_h5(p) as f:
        assert safe_io.read_attr(f, "s") == "text"
        assert safe_io.read_attr(f, "b") == "bytes"
        assert safe_io.read_attr(f, "arr") == ["x", "y"]
        assert safe_io.read_attr(f, "vlen") == ["p", "q"]
        assert safe_io.read_attr(f, "empty") == []
        assert safe_io.read_attr(f, "n") == 3
        assert safe_io.read_attr(f, "layer_names") == ["a", "b", "c"]
        assert safe_io.read_attr(f, "missing", None) is None
        with pytest.raises(FormatError, match="no attribute 'missing'"):
            safe_io.read_attr(f, "missing")


def test_read_dataset_bfloat16_and_refused_dtypes(tmp_path: Path) -> None:
    p = tmp_path / "bf.h5"
    bits = np.array([0x3F80, 0x4000, 0xC040], dtype="<u2")
    with h5py.File(p, "w") as f:
        d = f.create_dataset("bf", data=np.frombuffer(bits.tobytes(), dtype="V2"))
        d.attrs["dtype"] = "bfloat16"
        f.create_dataset("opaque", data=np.frombuffer(bits.tobytes(), dtype="V2"))
        f.create_dataset("vlen", data=np.array(["a"], dtype=h5py.string_dtype()))
        f.create_dataset("f16", data=np.array([1.5], dtype="f2"))
    with safe_io.open_h5(p) as f:
        out = safe_io.read_dataset(f["bf"])
        assert out.dtype == np.float32 and out.tolist() == [1.0, 2.0, -3.0]
        assert safe_io.read_dataset(f["f16"]).dtype == np.float16
        with pytest.raises(FormatError, match="without dtype='bfloat16'"):
            safe_io.read_dataset(f["opaque"])
        with pytest.raises(FormatError, match="unsupported dtype"):
            safe_io.read_dataset(f["vlen"])


def test_walk_h5_reports_links_without_following_and_terminates(tmp_path: Path) -> None:
    with safe_io.open_h5(H.soft_cycle_h5(tmp_path / "c.h5")) as f:
        entries = {e.path: e for e in safe_io.walk_h5(f)}
    assert entries["/layers/dense/vars/loop"].kind == "soft_link"
    assert entries["/layers/dense/vars/loop"].detail == "cycle"
    assert entries["/a"].detail == "cycle" and entries["/b"].detail == "cycle"
    assert entries["/layers/dense/vars/0"].kind == "dataset"
    with safe_io.open_h5(H.external_link_h5(tmp_path / "e.h5")) as f:
        ext = [e for e in safe_io.walk_h5(f) if e.kind == "external_link"]
    assert [(e.path, e.target) for e in ext] == [("/layers/dense/vars/2", "/etc/passwd:/x")]
    with safe_io.open_h5(H.soft_link_h5(tmp_path / "s.h5")) as f:
        alias = next(e for e in safe_io.walk_h5(f) if e.path == "/alias")
    assert (alias.kind, alias.detail) == ("soft_link", "ok")


def test_walk_h5_hard_link_cycle_is_visited_once(tmp_path: Path) -> None:
    with safe_io.open_h5(H.hard_cycle_h5(tmp_path / "h.h5")) as f:
        entries = list(safe_io.walk_h5(f))
    assert [(e.path, e.kind) for e in entries] == [("/a", "group"), ("/a/b", "group"), ("/a/b/up", "repeat")]


def test_walk_h5_link_limit(tmp_path: Path) -> None:
    with safe_io.open_h5(H.plain_weights_h5(tmp_path / "p.h5")) as f:
        entries = list(safe_io.walk_h5(f, max_links=3))
    assert entries[-1].kind == "limit"


def test_walk_h5_is_iterative_on_deep_trees(tmp_path: Path) -> None:
    p = tmp_path / "deep.h5"
    with h5py.File(p, "w") as f:
        f.create_group("/".join(["g"] * 1500))
    with safe_io.open_h5(p) as f:
        entries = list(safe_io.walk_h5(f))
    # iterative, and bounded: it stops (and says so) past MAX_H5_DEPTH levels
    assert entries[-1].kind == "limit" and "nested deeper" in entries[-1].detail
    assert len(entries) <= safe_io.MAX_H5_DEPTH + 2
