"""Protobuf compatibility (Confluent's rules), case by case: (old, new, level, allowed); and the
two spellings a schema arrives in (.proto text, base64 FileDescriptorProto) read alike."""

from __future__ import annotations

import base64

import pytest
from google.protobuf import descriptor_pb2

from odradek.schema_registry.compatibility import check
from odradek.schema_registry.protobuf_compatibility import reader_reads_writer
from odradek.schema_registry.protobuf_schema import ProtobufParseError, parse


def proto(body: str, package: str = "shop") -> str:
    return f'syntax = "proto3";\npackage {package};\n{body}\n'


V1 = proto("message Order { int64 id = 1; string note = 2; }")
CASES = [
    (V1, proto("message Order { int64 id = 1; string note = 2; int32 qty = 3; }"), "FULL_TRANSITIVE", True),
    (V1, proto("message Order { int64 id = 1; }"), "FULL", True),
    (V1, proto("message Order { int32 id = 1; string note = 2; }"), "FULL", True),  # same wire group
    (V1, proto("message Order { uint64 id = 1; bytes note = 2; }"), "FULL", True),
    (V1, proto("message Order { sint64 id = 1; string note = 2; }"), "BACKWARD", False),
    (V1, proto("message Order { double id = 1; string note = 2; }"), "BACKWARD", False),
    (V1, proto("message Order { double id = 1; string note = 2; }"), "NONE", True),
    (V1, proto("message Order { repeated int64 id = 1; string note = 2; }"), "BACKWARD", False),
    (V1, proto("message Order { Item id = 1; string note = 2; } message Item { string n = 1; }"), "BACKWARD", False),
    (V1, proto("message Order { int64 id = 1; string note = 2; }", package="store"), "BACKWARD", False),
    (V1, proto("message Invoice { int64 id = 1; }"), "BACKWARD", False),  # Order removed
    # A message added: new readers know every old one; an old reader lacks it (MESSAGE_REMOVED
    # seen from the old side: the framing's message index may point at it).
    (V1, V1 + "message Extra { int32 x = 1; }", "BACKWARD", True),
    (V1, V1 + "message Extra { int32 x = 1; }", "FORWARD", False),
    (proto("message A { Item i = 1; } message Item { string n = 1; }"),
     proto("message A { Other i = 1; } message Item { string n = 1; } message Other { string n = 1; }"), "BACKWARD", False),
    # oneofs: moving one new-ish field into a new oneof is fine; two existing ones, or into an existing oneof, not.
    (V1, proto("message Order { int64 id = 1; oneof x { string note = 2; } }"), "BACKWARD", True),
    (V1, proto("message Order { oneof x { int64 id = 1; string note = 2; } }"), "BACKWARD", False),
    (proto("message Order { int64 id = 1; oneof x { string note = 2; } }"),
     proto("message Order { oneof x { int64 id = 1; string note = 2; } }"), "BACKWARD", False),
    # proto2 required fields may be neither added nor removed.
    ('syntax = "proto2"; package shop; message O { optional int64 id = 1; }',
     'syntax = "proto2"; package shop; message O { optional int64 id = 1; required string r = 2; }', "BACKWARD", False),
    ('syntax = "proto2"; package shop; message O { required int64 id = 1; }',
     'syntax = "proto2"; package shop; message O { optional int64 id = 1; }', "BACKWARD", False),
    # enums may gain and lose constants.
    (proto("enum Color { RED = 0; } message A { Color c = 1; }"),
     proto("enum Color { RED = 0; BLUE = 1; } message A { Color c = 1; }"), "FULL", True),
]  # fmt: skip


@pytest.mark.parametrize(("old", "new", "level", "allowed"), CASES)
def test_one_step(old, new, level, allowed):
    reasons = check(reader_reads_writer, [parse(old)], parse(new), level)
    assert (not reasons) is allowed, reasons


def descriptor_b64() -> str:
    fd = descriptor_pb2.FileDescriptorProto(name="order.proto", package="shop", syntax="proto3")
    msg = fd.message_type.add(name="Order")
    msg.field.add(name="id", number=1, type=3, label=1)  # int64
    msg.field.add(name="note", number=2, type=9, label=1)  # string
    return base64.standard_b64encode(fd.SerializeToString()).decode()


def test_a_base64_descriptor_reads_as_the_same_schema_as_its_text():
    from_descriptor, from_text = parse(descriptor_b64()), parse(V1)
    assert from_descriptor.messages == from_text.messages
    assert from_descriptor.normalized() == from_text.normalized()
    assert check(reader_reads_writer, [from_text], from_descriptor, "FULL") == []


def test_nested_names_resolve_to_full_names():
    schema = parse(proto("message A { message B { string s = 1; } B b = 1; Color c = 2; } enum Color { RED = 0; }"))
    assert schema.messages["shop.A"][1].type == "shop.A.B"
    assert schema.messages["shop.A"][2].type == "shop.Color"


@pytest.mark.parametrize("text", ["message {", "syntax = \"proto3\";", "bm90IGEgZGVzY3JpcHRvcg=="])
def test_invalid_protobuf_schemas_are_refused(text):
    with pytest.raises(ProtobufParseError):
        parse(text)
