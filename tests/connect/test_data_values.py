"""Values as text (Kafka's Values) and Java's number formatting."""

import datetime
import decimal

import pytest

from odradek.connect.data import Date, Decimal, Schema, SchemaAndValue, SchemaBuilder, Struct, Time
from odradek.connect.data_values import (
    convert_to_string,
    infer_schema,
    java_double_str,
    java_float_str,
    parse_string,
)


@pytest.mark.parametrize(
    "value, double, float32",
    [
        (12.34, "12.34", "12.34"),
        (1e10, "1.0E10", "1.0E10"),
        (1e-5, "1.0E-5", "1.0E-5"),
        (0.001, "0.001", "0.001"),
        (1234567.0, "1234567.0", "1234567.0"),
        (12345678.0, "1.2345678E7", "1.2345678E7"),
        (-0.0, "-0.0", "-0.0"),
        (0.1, "0.1", "0.1"),
        (float("nan"), "NaN", "NaN"),
        (float("-inf"), "-Infinity", "-Infinity"),
        (1 / 3, "0.3333333333333333", "0.33333334"),
    ],
)
def test_java_number_text(value, double, float32):
    assert java_double_str(value) == double
    assert java_float_str(value) == float32


@pytest.mark.parametrize(
    "text, expected",
    [
        ("true", SchemaAndValue(Schema.BOOLEAN_SCHEMA, True)),
        ("-128", SchemaAndValue(Schema.INT8_SCHEMA, -128)),
        ("40000", SchemaAndValue(Schema.INT32_SCHEMA, 40000)),
        ("9999999999", SchemaAndValue(Schema.INT64_SCHEMA, 9999999999)),
        ("2.5", SchemaAndValue(Schema.FLOAT32_SCHEMA, 2.5)),
        ("1.23456789012", SchemaAndValue(Schema.FLOAT64_SCHEMA, 1.23456789012)),
        ("1.23456789123456789", SchemaAndValue(Decimal.schema(17), decimal.Decimal("1.23456789123456789"))),
        ("null", SchemaAndValue.NULL),
        ('["a","b"]', SchemaAndValue(SchemaBuilder.array(Schema.STRING_SCHEMA).build(), ["a", "b"])),
        ("[1,300]", SchemaAndValue(SchemaBuilder.array(Schema.INT16_SCHEMA).build(), [1, 300])),
        ("2024-02-29", SchemaAndValue(Date.SCHEMA, datetime.date(2024, 2, 29))),
        ("23:59:59.999Z", SchemaAndValue(Time.SCHEMA, datetime.time(23, 59, 59, 999000))),
        ("just words", SchemaAndValue(Schema.STRING_SCHEMA, "just words")),
        ("[unclosed", SchemaAndValue(Schema.STRING_SCHEMA, "[unclosed")),
        ("", SchemaAndValue(Schema.STRING_SCHEMA, "")),
    ],
)
def test_parse_string_infers_schemas(text, expected):
    assert parse_string(text) == expected


def test_convert_to_string():
    struct_schema = SchemaBuilder.struct().field("a", Schema.INT32_SCHEMA).field("b", Schema.OPTIONAL_STRING_SCHEMA).build()
    assert convert_to_string(struct_schema, Struct(struct_schema).put("a", 1)) == "Struct{a=1}"
    assert convert_to_string(None, {"k": [1, "two", None, b"\x00"]}) == '{"k":[1,"two",null,"AA=="]}'
    assert convert_to_string(Schema.FLOAT32_SCHEMA, 0.1) == "0.1"
    assert convert_to_string(None, 'say "hi"') == 'say "hi"'
    assert convert_to_string(None, ['say "hi"']) == '["say \\"hi\\""]'
    assert convert_to_string(None, None) is None


def test_infer_schema():
    assert infer_schema(5) == Schema.INT32_SCHEMA and infer_schema(1 << 40) == Schema.INT64_SCHEMA
    assert infer_schema(["a", "b"]) == SchemaBuilder.array(Schema.STRING_SCHEMA).build()
    assert infer_schema({"a": 1.5}) == SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.FLOAT64_SCHEMA).build()
    assert infer_schema([1, "a"]) is None and infer_schema(None) is None and infer_schema(object()) is None
    assert infer_schema(decimal.Decimal("1.50")) == Decimal.schema(2)
