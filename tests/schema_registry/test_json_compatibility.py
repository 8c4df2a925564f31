"""JSON Schema compatibility (Confluent's rules), case by case: (old, new, level, allowed)."""

from __future__ import annotations

import json

import pytest

from odradek.schema_registry.compatibility import check
from odradek.schema_registry.json_compatibility import reader_reads_writer
from odradek.schema_registry.json_schema import JsonSchemaParseError, parse


def obj(properties: dict, required=(), closed: bool = False, **extra) -> str:
    schema = {"type": "object", "properties": properties, **extra}
    if required:
        schema["required"] = list(required)
    if closed:
        schema["additionalProperties"] = False
    return json.dumps(schema)


S, INT, N = {"type": "string"}, {"type": "integer"}, {"type": "number"}
OPEN_A = obj({"a": S})
CLOSED_A = obj({"a": S}, closed=True)
CLOSED_AB = obj({"a": S, "b": S}, closed=True)
OPEN_AB = obj({"a": S, "b": S})

CASES = [
    # Types: widening integer → number reads old data; narrowing does not.
    (obj({"n": INT}), obj({"n": N}), "BACKWARD", True),
    (obj({"n": N}), obj({"n": INT}), "BACKWARD", False),
    (obj({"n": INT}), obj({"n": N}), "FULL", False),
    (obj({"n": S}), obj({"n": {"type": ["string", "null"]}}), "BACKWARD", True),
    (obj({"n": {"type": ["string", "null"]}}), obj({"n": S}), "BACKWARD", False),
    (obj({"n": S}), obj({"n": INT}), "BACKWARD", False),
    (obj({"n": S}), obj({"n": INT}), "NONE", True),
    # Properties: an optional one added to a closed model is fine; to an open one it is not
    # (old documents may hold that name with any value); removing from a closed reader is not.
    (CLOSED_A, CLOSED_AB, "BACKWARD", True),
    (OPEN_A, OPEN_AB, "BACKWARD", False),
    (OPEN_A, obj({"a": S, "b": {}}), "BACKWARD", True),
    (CLOSED_AB, CLOSED_A, "BACKWARD", False),
    (OPEN_AB, OPEN_A, "BACKWARD", True),
    (CLOSED_A, CLOSED_AB, "FORWARD", False),
    # Required: adding a requirement narrows (unless the property has a default); dropping widens.
    (OPEN_A, obj({"a": S}, required=["a"]), "BACKWARD", False),
    (OPEN_A, obj({"a": {**S, "default": "x"}}, required=["a"]), "BACKWARD", True),
    (obj({"a": S}, required=["a"]), OPEN_A, "BACKWARD", True),
    (obj({"a": S}, required=["a"]), OPEN_A, "FORWARD", False),
    # additionalProperties: closing narrows, opening widens.
    (OPEN_A, CLOSED_A, "BACKWARD", False),
    (CLOSED_A, OPEN_A, "BACKWARD", True),
    # Bounds: added or tightened narrow; removed or relaxed widen.
    (obj({"s": S}), obj({"s": {**S, "maxLength": 5}}), "BACKWARD", False),
    (obj({"s": {**S, "maxLength": 5}}), obj({"s": {**S, "maxLength": 10}}), "BACKWARD", True),
    (obj({"s": {**S, "maxLength": 10}}), obj({"s": {**S, "maxLength": 5}}), "BACKWARD", False),
    (obj({"n": {**N, "minimum": 0}}), obj({"n": N}), "BACKWARD", True),
    (obj({"n": {**N, "minimum": 0}}), obj({"n": {**N, "minimum": 1}}), "BACKWARD", False),
    (obj({"s": S}), obj({"s": {**S, "pattern": "^a"}}), "BACKWARD", False),
    (obj({"xs": {"type": "array", "items": INT}}), obj({"xs": {"type": "array", "items": N}}), "BACKWARD", True),
    (obj({"xs": {"type": "array", "items": N}}), obj({"xs": {"type": "array", "items": INT}}), "BACKWARD", False),
    (obj({"xs": {"type": "array"}}), obj({"xs": {"type": "array", "uniqueItems": True}}), "BACKWARD", False),
    # Enums: extending widens, narrowing does not.
    (obj({"c": {"enum": ["a", "b"]}}), obj({"c": {"enum": ["a", "b", "c"]}}), "BACKWARD", True),
    (obj({"c": {"enum": ["a", "b"]}}), obj({"c": {"enum": ["a"]}}), "BACKWARD", False),
    # oneOf: every branch the writer had must be accepted by one of the reader's.
    (obj({"v": {"oneOf": [S, INT]}}), obj({"v": {"oneOf": [S, N]}}), "BACKWARD", True),
    (obj({"v": {"oneOf": [S, N]}}), obj({"v": {"oneOf": [S]}}), "BACKWARD", False),
    # Local $refs resolve.
    (json.dumps({"$defs": {"x": INT}, "type": "object", "properties": {"v": {"$ref": "#/$defs/x"}}}),
     json.dumps({"$defs": {"x": N}, "type": "object", "properties": {"v": {"$ref": "#/$defs/x"}}}), "BACKWARD", True),
    (json.dumps({"$defs": {"x": N}, "type": "object", "properties": {"v": {"$ref": "#/$defs/x"}}}),
     json.dumps({"$defs": {"x": INT}, "type": "object", "properties": {"v": {"$ref": "#/$defs/x"}}}), "BACKWARD", False),
]  # fmt: skip


@pytest.mark.parametrize(("old", "new", "level", "allowed"), CASES)
def test_one_step(old, new, level, allowed):
    reasons = check(reader_reads_writer, [parse(old)], parse(new), level)
    assert (not reasons) is allowed, reasons


def test_reasons_name_the_rule_and_the_path():
    [reason] = check(reader_reads_writer, [parse(OPEN_A)], parse(obj({"a": S}, required=["a"])), "BACKWARD")
    assert reason.startswith("REQUIRED_PROPERTY_ADDED at /") and "'a'" in reason
    [reason] = check(reader_reads_writer, [parse(obj({"n": S}))], parse(obj({"n": INT})), "BACKWARD")
    assert reason.startswith("TYPE_CHANGED at /properties/n")


@pytest.mark.parametrize(
    "text",
    ["{nope", "[1, 2]", json.dumps({"type": "strnig"}), json.dumps({"properties": {"a": {"minLength": -1}}}),
     json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "required": "a"})],
)  # fmt: skip
def test_invalid_json_schemas_are_refused(text):
    with pytest.raises(JsonSchemaParseError):
        parse(text)


def test_a_ref_into_a_referenced_schema_is_followed_there_and_its_own_pointers_stay_in_it():
    def address(text_type: str) -> str:  # Street points at Text inside address.json
        return json.dumps({"definitions": {"Street": {"$ref": "#/definitions/Text"}, "Text": {"type": text_type}}})

    # The order's own Text is a string: resolving address.json's pointer in the order would hide the change.
    order = obj({"street": {"$ref": "address.json#/definitions/Street"}}, definitions={"Text": S})
    old = parse(order, [("address.json", address("string"))])
    assert check(reader_reads_writer, [old], parse(order, [("address.json", address("string"))]), "FULL") == []
    [reason] = check(reader_reads_writer, [old], parse(order, [("address.json", address("integer"))]), "BACKWARD")
    assert reason.startswith("TYPE_CHANGED at /properties/street"), reason
