"""The Connect data model: schemas, structs, logical types, records and headers."""

import datetime
import decimal

import pytest

from odradek.connect.data import (
    Date,
    Decimal,
    Schema,
    SchemaAndValue,
    SchemaBuilder,
    Struct,
    Time,
    Timestamp,
    Type,
    copy_schema_basics,
)
from odradek.connect.errors import DataException, SchemaBuilderException
from odradek.connect.records import Headers, SinkRecord, SourceRecord

PERSON = (
    SchemaBuilder.struct()
    .name("com.example.Person")
    .version(2)
    .doc("a person")
    .field("name", Schema.STRING_SCHEMA)
    .field("age", SchemaBuilder.int32().optional().build())
    .field("tags", SchemaBuilder.array(Schema.STRING_SCHEMA).optional())
    .field("country", SchemaBuilder.string().default_value("NL").build())
    .build()
)


def test_schema_constants_and_builder():
    assert Schema.STRING_SCHEMA.type == Type.STRING and not Schema.STRING_SCHEMA.is_optional
    assert Schema.OPTIONAL_INT64_SCHEMA.is_optional
    assert PERSON.name == "com.example.Person" and PERSON.version == 2 and PERSON.doc == "a person"
    assert [f.name for f in PERSON.fields()] == ["name", "age", "tags", "country"]
    assert PERSON.field("age").index == 1 and PERSON.field("missing") is None
    assert PERSON.field("tags").schema.value_schema == Schema.STRING_SCHEMA
    m = SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT32_SCHEMA).build()
    assert m.key_schema == Schema.STRING_SCHEMA and m.value_schema == Schema.INT32_SCHEMA
    # Equal schemas built twice compare and hash equal (converters cache by schema).
    again = copy_schema_basics(PERSON, SchemaBuilder.struct())
    for f in PERSON.fields():
        again.field(f.name, f.schema)
    assert again.build() == PERSON and hash(again.build()) == hash(PERSON)
    assert SchemaBuilder.int32().default_value(1).build() != SchemaBuilder.int32().default_value(2).build()


def test_builder_refuses_what_kafka_refuses():
    with pytest.raises(SchemaBuilderException, match="duplication"):
        SchemaBuilder.struct().field("a", Schema.INT8_SCHEMA).field("a", Schema.INT8_SCHEMA)
    with pytest.raises(SchemaBuilderException):
        SchemaBuilder.string().field("a", Schema.INT8_SCHEMA)
    with pytest.raises(SchemaBuilderException, match="already been set"):
        SchemaBuilder.string().name("a").name("b")
    with pytest.raises(SchemaBuilderException, match="Invalid default value"):
        SchemaBuilder.int8().default_value(1000)
    with pytest.raises(DataException):
        Schema.STRING_SCHEMA.fields()
    with pytest.raises(DataException):
        _ = Schema.STRING_SCHEMA.key_schema


def test_struct_put_get_validate():
    person = Struct(PERSON).put("name", "Ada").put("tags", ["x"])
    person.validate()
    assert person.get("name") == "Ada" and person.get("age") is None
    assert person.get("country") == "NL" and person.get_without_default("country") is None
    assert person == Struct(PERSON).put("name", "Ada").put("tags", ["x"])
    assert repr(person) == "Struct{name=Ada,tags=['x']}"
    with pytest.raises(DataException, match="not a valid field name"):
        person.put("nope", 1)
    with pytest.raises(DataException, match="INT32"):
        person.put("age", "old")
    with pytest.raises(DataException, match="out of range"):
        Struct(SchemaBuilder.struct().field("b", Schema.INT8_SCHEMA).build()).put("b", 128)
    with pytest.raises(DataException, match="BOOLEAN|INT32"):
        person.put("age", True)  # a bool is not an int32
    with pytest.raises(DataException, match='required field: "name"'):
        Struct(PERSON).validate()
    with pytest.raises(DataException):
        Struct(Schema.STRING_SCHEMA)


def test_decimal_bytes_are_javas_big_integer_bytes():
    schema = Decimal.schema(2)
    assert schema.name == "org.apache.kafka.connect.data.Decimal" and schema.parameters == {"scale": "2"}
    # BigInteger.valueOf(15601).toByteArray() == {0x3C, 0xF1}; -1 -> {0xFF}; 128 -> {0x00, 0x80}
    assert Decimal.from_logical(schema, decimal.Decimal("156.01")) == b"\x3c\xf1"
    assert Decimal.from_logical(schema, decimal.Decimal("-0.01")) == b"\xff"
    assert Decimal.from_logical(schema, decimal.Decimal("1.28")) == b"\x00\x80"
    assert Decimal.from_logical(schema, decimal.Decimal("0")) == b"\x00"
    assert Decimal.to_logical(schema, b"\x3c\xf1") == decimal.Decimal("156.01")
    with pytest.raises(DataException, match="mismatching scale"):
        Decimal.from_logical(schema, decimal.Decimal("1.001"))


def test_date_time_timestamp():
    assert Date.from_logical(Date.SCHEMA, datetime.date(1970, 1, 11)) == 10
    assert Date.to_logical(Date.SCHEMA, -1) == datetime.date(1969, 12, 31)
    assert Time.from_logical(Time.SCHEMA, datetime.time(0, 0, 1, 500_000)) == 1500
    assert Time.to_logical(Time.SCHEMA, 1500) == datetime.time(0, 0, 1, 500_000)
    moment = datetime.datetime(2024, 5, 1, 12, 0, 0, 123_000, tzinfo=datetime.UTC)
    assert Timestamp.from_logical(Timestamp.SCHEMA, moment) == 1714564800123
    assert Timestamp.to_logical(Timestamp.SCHEMA, 1714564800123) == moment
    with pytest.raises(DataException, match="time fields"):
        Date.from_logical(Date.SCHEMA, datetime.datetime(2024, 1, 1, 1))
    with pytest.raises(DataException):
        Date.from_logical(Schema.INT32_SCHEMA, datetime.date(2024, 1, 1))


def test_headers():
    headers = Headers().add_string("a", "1").add_int("b", 2).add("a", SchemaAndValue(Schema.STRING_SCHEMA, "3"))
    assert [h.key for h in headers] == ["a", "b", "a"]
    assert [h.value for h in headers.all_with_name("a")] == ["1", "3"]
    assert headers.last_with_name("a").value == "3" and headers.last_with_name("z") is None
    assert [h.value for h in headers.duplicate().retain_latest()] == [2, "3"]
    assert [h.value for h in headers.duplicate().retain_latest("b")] == ["1", 2, "3"]
    assert [h.key for h in headers.duplicate().remove("a")] == ["b"]
    with pytest.raises(DataException):
        Headers().add("x", "not an int", Schema.INT32_SCHEMA)


def test_records_new_record_keeps_originals_and_copies_headers():
    record = SinkRecord(
        topic="orders", kafka_partition=3, key_schema=None, key=b"k", value_schema=None, value={"a": 1},
        timestamp=1000, kafka_offset=42,
    )
    record.headers.add_string("h", "v")
    moved = record.new_record(topic="orders-eu", kafka_partition=0)
    assert (moved.topic, moved.kafka_partition, moved.kafka_offset) == ("orders-eu", 0, 42)
    assert (moved.original_topic, moved.original_kafka_partition, moved.original_kafka_offset) == ("orders", 3, 42)
    moved.headers.add_string("other", "x")
    assert len(record.headers) == 1 and len(moved.headers) == 2
    source = SourceRecord(topic="t", source_partition={"file": "a"}, source_offset={"position": 10}, value="x")
    assert source.new_record(value="y").source_offset == {"position": 10}
