"""The committed ``*_pb2.py`` modules are what their ``.proto`` files generate.

Two checks, because the generator is a development tool CI does not install:

* with ``grpcio-tools`` at the version the modules were made with (the ``protos`` extra), every
  ``.proto`` is compiled again into a temporary folder and the output must be byte-identical to the
  committed module (any other generator version writes different code, so it is skipped, saying so);
* always, the messages, enums and fields declared in each ``.proto`` (read from its text) must be
  exactly the ones the committed module's descriptor holds: names, numbers, types, repeated or not.
  An edit of a ``.proto`` without regenerating fails here even where grpcio-tools is absent.
"""

from __future__ import annotations

import importlib
import re
from importlib import metadata
from pathlib import Path

import pytest
from google.protobuf.descriptor import FieldDescriptor

from modelgraph.loading import protos

HERE = Path(protos.__file__).resolve().parent
PROTOS = sorted(p.name for p in HERE.glob("*.proto"))
GENERATOR = "1.66.2"  # grpcio-tools version of the committed modules (see regenerate.py)


def test_every_proto_has_its_committed_module():
    assert PROTOS == ["checkpoint.proto", "keras_metadata.proto", "saved_model.proto"]
    assert sorted(p.name for p in HERE.glob("*_pb2.py")) == [p.replace(".proto", "_pb2.py") for p in PROTOS]


def test_regenerated_modules_are_the_committed_ones(tmp_path):
    try:
        version = metadata.version("grpcio-tools")
    except metadata.PackageNotFoundError:
        pytest.skip("grpcio-tools is not installed (pip install -e '.[protos]' to run this check)")
    if version != GENERATOR:
        pytest.skip(f"grpcio-tools {version} installed; the committed modules were made by {GENERATOR}")
    from modelgraph.loading.protos.regenerate import regenerate

    written = regenerate(tmp_path)
    assert sorted(p.name for p in written) == [p.replace(".proto", "_pb2.py") for p in PROTOS]
    for path in written:
        assert path.read_bytes() == (HERE / path.name).read_bytes(), f"{path.name} is stale: regenerate it"


_SCALARS = {
    FieldDescriptor.TYPE_DOUBLE: "double",
    FieldDescriptor.TYPE_FLOAT: "float",
    FieldDescriptor.TYPE_INT64: "int64",
    FieldDescriptor.TYPE_UINT64: "uint64",
    FieldDescriptor.TYPE_INT32: "int32",
    FieldDescriptor.TYPE_FIXED64: "fixed64",
    FieldDescriptor.TYPE_FIXED32: "fixed32",
    FieldDescriptor.TYPE_BOOL: "bool",
    FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_BYTES: "bytes",
    FieldDescriptor.TYPE_UINT32: "uint32",
    FieldDescriptor.TYPE_SINT32: "sint32",
    FieldDescriptor.TYPE_SINT64: "sint64",
}
_TOKEN = re.compile(
    r"(?P<open>(?P<kind>message|enum|oneof)\s+(?P<name>\w+)\s*\{)"
    r"|(?P<close>\})"
    r"|(?P<field>(?P<repeated>repeated\s+)?(?P<type>[\w.]+)\s+(?P<fname>\w+)\s*=\s*(?P<num>\d+)\s*;)"
    r"|(?P<value>(?P<vname>\w+)\s*=\s*(?P<vnum>-?\d+)\s*;)"
)


def _declared(text: str, package: str) -> dict[str, set]:
    """``{full name: {field or enum value}}`` of a .proto's text (comments and options removed)."""
    text = re.sub(r"//[^\n]*", "", text)
    out: dict[str, set] = {}
    scope: list[tuple[str, str]] = []  # (kind, full name)
    for m in _TOKEN.finditer(text):
        if m["open"]:
            if m["kind"] == "oneof":
                scope.append(("oneof", scope[-1][1]))
                continue
            parent = scope[-1][1] if scope else package
            name = f"{parent}.{m['name']}"
            out[name] = set()
            scope.append((m["kind"], name))
        elif m["close"]:
            scope.pop()
        elif m["field"] and scope and scope[-1][0] != "enum":
            out[scope[-1][1]].add((m["fname"], int(m["num"]), m["type"].split(".")[-1], bool(m["repeated"])))
        elif m["value"] and scope and scope[-1][0] == "enum":
            out[scope[-1][1]].add((m["vname"], int(m["vnum"])))
    return out


def _generated(file_descriptor) -> dict[str, set]:
    out: dict[str, set] = {}

    def enum(e) -> None:
        out[e.full_name] = {(v.name, v.number) for v in e.values}

    def message(d) -> None:
        fields = set()
        for f in d.fields:
            kind = f.message_type or f.enum_type
            type_name = kind.name if kind is not None else _SCALARS[f.type]
            repeated = getattr(f, "is_repeated", None)
            repeated = f.label == FieldDescriptor.LABEL_REPEATED if repeated is None else repeated
            fields.add((f.name, f.number, type_name, bool(repeated)))
        out[d.full_name] = fields
        for nested in d.nested_types:
            message(nested)
        for e in d.enum_types:
            enum(e)

    for d in file_descriptor.message_types_by_name.values():
        message(d)
    for e in file_descriptor.enum_types_by_name.values():
        enum(e)
    return out


@pytest.mark.parametrize("proto", PROTOS)
def test_committed_module_declares_what_the_proto_declares(proto):
    text = (HERE / proto).read_text()
    package = re.search(r"^package\s+([\w.]+)\s*;", text, re.M).group(1)
    module = importlib.import_module(f"modelgraph.loading.protos.{proto.replace('.proto', '_pb2')}")
    assert module.DESCRIPTOR.package == package
    declared, generated = _declared(text, package), _generated(module.DESCRIPTOR)
    assert declared and declared == generated
