"""Avro's schema-resolution rules under each compatibility level, case by case:
(old schema, new schema, level, allowed)."""

from __future__ import annotations

import json

import pytest

from odradek.schema_registry.avro_compatibility import reader_reads_writer
from odradek.schema_registry.avro_schema import AvroParseError, parse
from odradek.schema_registry.compatibility import check


def record(*fields, name="User", **extra) -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "com.example", "fields": list(fields), **extra})


def f(name, type_, **extra) -> dict:
    return {"name": name, "type": type_, **extra}


ID = f("id", "long")
V1 = record(ID)
ADD_WITH_DEFAULT = record(ID, f("email", "string", default=""))
ADD_WITHOUT_DEFAULT = record(ID, f("email", "string"))
ADD_OPTIONAL = record(ID, f("email", ["null", "string"], default=None))
INT_ID = record(f("id", "int"))
STRING_ID = record(f("id", "string"))
RENAMED_RECORD = record(ID, name="Customer")
ALIASED_RECORD = record(ID, name="Customer", aliases=["User"])
ENUM_AB = record(ID, f("color", {"type": "enum", "name": "Color", "symbols": ["A", "B"]}))
ENUM_ABC = record(ID, f("color", {"type": "enum", "name": "Color", "symbols": ["A", "B", "C"]}))
ENUM_AB_DEFAULT = record(ID, f("color", {"type": "enum", "name": "Color", "symbols": ["A", "B"], "default": "A"}))
FIXED_4 = record(ID, f("h", {"type": "fixed", "name": "Hash", "size": 4}))
FIXED_8 = record(ID, f("h", {"type": "fixed", "name": "Hash", "size": 8}))
ARRAY_INT = record(ID, f("xs", {"type": "array", "items": "int"}))
ARRAY_LONG = record(ID, f("xs", {"type": "array", "items": "long"}))
MAP_FLOAT = record(ID, f("m", {"type": "map", "values": "float"}))
MAP_DOUBLE = record(ID, f("m", {"type": "map", "values": "double"}))
UNION_NS = record(ID, f("v", ["null", "string"], default=None))
UNION_NSI = record(ID, f("v", ["null", "string", "int"], default=None))
RENAMED_FIELD_ALIAS = record(f("user_id", "long", aliases=["id"]))
RECURSIVE = record(ID, f("next", ["null", "User"], default=None))
RECURSIVE_WITH_NAME = record(ID, f("next", ["null", "User"], default=None), f("name", "string", default="x"))

CASES = [
    # Adding a field: with a default the new schema reads old data (BACKWARD); old readers
    # skip it (FORWARD); so FULL too.
    (V1, ADD_WITH_DEFAULT, "BACKWARD", True),
    (V1, ADD_WITH_DEFAULT, "FORWARD", True),
    (V1, ADD_WITH_DEFAULT, "FULL", True),
    (V1, ADD_OPTIONAL, "FULL", True),
    # Without a default, old data lacks it: not BACKWARD, still FORWARD.
    (V1, ADD_WITHOUT_DEFAULT, "BACKWARD", False),
    (V1, ADD_WITHOUT_DEFAULT, "FORWARD", True),
    (V1, ADD_WITHOUT_DEFAULT, "FULL", False),
    (V1, ADD_WITHOUT_DEFAULT, "NONE", True),
    # Removing a field without a default: the new schema reads old data; old readers miss it.
    (ADD_WITHOUT_DEFAULT, V1, "BACKWARD", True),
    (ADD_WITHOUT_DEFAULT, V1, "FORWARD", False),
    (ADD_WITH_DEFAULT, V1, "FORWARD", True),
    # Promotions work one way: int → long.
    (INT_ID, V1, "BACKWARD", True),
    (INT_ID, V1, "FORWARD", False),
    (V1, INT_ID, "BACKWARD", False),
    (V1, INT_ID, "FORWARD", True),
    (V1, STRING_ID, "BACKWARD", False),
    (V1, STRING_ID, "NONE", True),
    (ARRAY_INT, ARRAY_LONG, "BACKWARD", True),
    (ARRAY_INT, ARRAY_LONG, "FULL", False),
    (MAP_FLOAT, MAP_DOUBLE, "BACKWARD", True),
    (MAP_DOUBLE, MAP_FLOAT, "BACKWARD", False),
    # Records match by name, or by an alias of the reader's.
    (V1, RENAMED_RECORD, "BACKWARD", False),
    (V1, ALIASED_RECORD, "BACKWARD", True),
    (V1, RENAMED_FIELD_ALIAS, "BACKWARD", True),
    # Enums: a symbol the writer may write must exist in the reader, unless it has a default.
    (ENUM_AB, ENUM_ABC, "BACKWARD", True),
    (ENUM_AB, ENUM_ABC, "FORWARD", False),
    (ENUM_ABC, ENUM_AB_DEFAULT, "BACKWARD", True),
    (ENUM_ABC, ENUM_AB, "BACKWARD", False),
    # Fixed sizes must agree.
    (FIXED_4, FIXED_8, "BACKWARD", False),
    (FIXED_4, FIXED_4, "FULL_TRANSITIVE", True),
    # Unions: a wider union reads a narrower one, not the other way.
    (UNION_NS, UNION_NSI, "BACKWARD", True),
    (UNION_NS, UNION_NSI, "FORWARD", False),
    (record(ID, f("v", "string")), UNION_NS, "BACKWARD", True),
    (UNION_NS, record(ID, f("v", "string")), "BACKWARD", False),
    # Recursive types terminate.
    (RECURSIVE, RECURSIVE_WITH_NAME, "FULL", True),
]


@pytest.mark.parametrize(("old", "new", "level", "allowed"), CASES)
def test_one_step(old, new, level, allowed):
    reasons = check(reader_reads_writer, [parse(old)], parse(new), level)
    assert (not reasons) is allowed, reasons


def test_transitive_levels_check_every_earlier_version_and_the_others_only_the_latest():
    # v1 has no email; v2 adds it with a default; v3 drops the default. v3 reads v2's data
    # (which has an email) but not v1's.
    v1, v2, v3 = parse(V1), parse(ADD_WITH_DEFAULT), parse(ADD_WITHOUT_DEFAULT)
    assert check(reader_reads_writer, [v1, v2], v3, "BACKWARD") == []
    assert check(reader_reads_writer, [v1, v2], v3, "BACKWARD_TRANSITIVE") != []
    assert check(reader_reads_writer, [v3, v2], v1, "FORWARD") == []
    assert check(reader_reads_writer, [v3, v2], v1, "FORWARD_TRANSITIVE") != []
    assert check(reader_reads_writer, [v1, v2], v3, "FULL_TRANSITIVE") != []


def test_each_reason_names_the_rule_and_the_path():
    reasons = check(reader_reads_writer, [parse(V1)], parse(ADD_WITHOUT_DEFAULT), "BACKWARD")
    assert len(reasons) == 1
    assert reasons[0].startswith("READER_FIELD_MISSING_DEFAULT_VALUE at /fields/1")
    assert "'email'" in reasons[0]
    [mismatch] = check(reader_reads_writer, [parse(V1)], parse(STRING_ID), "BACKWARD")
    assert mismatch.startswith("TYPE_MISMATCH at /fields/0/type")


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        json.dumps({"type": "record", "name": "A"}),
        json.dumps({"type": "record", "name": "A", "fields": [{"name": "x", "type": "Unknown"}]}),
        json.dumps({"type": "record", "name": "A", "fields": [{"name": "x", "type": "int", "default": "s"}]}),
        json.dumps({"type": "enum", "name": "E", "symbols": "AB"}),
        json.dumps({"type": "nonsense"}),
    ],
)
def test_invalid_schemas_are_refused(text):
    with pytest.raises(AvroParseError):
        parse(text)


def test_references_supply_named_types():
    address = json.dumps({"type": "record", "name": "Address", "namespace": "com.example", "fields": [f("city", "string")]})
    user = record(ID, f("home", "com.example.Address"))
    with pytest.raises(AvroParseError):
        parse(user)
    assert parse(user, [address]).parsed["fields"][1]["type"] == "com.example.Address"


def test_normalized_form_is_the_same_for_the_same_schema_spelled_differently():
    a = '{"type": "record", "name": "U", "namespace": "n", "fields": [{"name": "x", "type": {"type": "int"}}]}'
    b = '{"fields":[{"type":"int","name":"x"}],"name":"n.U","type":"record"}'
    assert parse(a).canonical() != parse(b).canonical()
    assert parse(a).normalized() == parse(b).normalized()
