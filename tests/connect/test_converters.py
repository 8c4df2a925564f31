"""String, byte-array, number and header converters: Kafka's byte formats, round trips, errors."""

import datetime
import struct

import pytest

from odradek.connect.converters import (
    CONVERTERS,
    DEFAULT_HEADER_CONVERTER,
    HEADER_CONVERTERS,
    BooleanConverter,
    ByteArrayConverter,
    DoubleConverter,
    FloatConverter,
    IntegerConverter,
    LongConverter,
    ShortConverter,
    SimpleHeaderConverter,
    StringConverter,
)
from odradek.connect.data import Date, Schema, SchemaAndValue, SchemaBuilder, Timestamp
from odradek.connect.errors import DataException


@pytest.mark.parametrize(
    "converter, value, data, schema",
    [
        (ShortConverter(), -2, b"\xff\xfe", Schema.OPTIONAL_INT16_SCHEMA),
        (IntegerConverter(), 1, b"\x00\x00\x00\x01", Schema.OPTIONAL_INT32_SCHEMA),
        (LongConverter(), 1 << 40, b"\x00\x00\x01\x00\x00\x00\x00\x00", Schema.OPTIONAL_INT64_SCHEMA),
        (FloatConverter(), 1.5, b"\x3f\xc0\x00\x00", Schema.OPTIONAL_FLOAT32_SCHEMA),
        (DoubleConverter(), -2.25, struct.pack(">d", -2.25), Schema.OPTIONAL_FLOAT64_SCHEMA),
        (BooleanConverter(), True, b"\x01", Schema.OPTIONAL_BOOLEAN_SCHEMA),
        (BooleanConverter(), False, b"\x00", Schema.OPTIONAL_BOOLEAN_SCHEMA),
    ],
)
def test_number_converters_write_kafkas_serializer_bytes(converter, value, data, schema):
    converter.configure({}, False)
    assert converter.from_connect_data("t", schema, value) == data
    assert converter.to_connect_data("t", data) == SchemaAndValue(schema, value)
    assert converter.from_connect_header("t", "h", schema, value) == data
    assert converter.to_connect_header("t", "h", data).value == value
    assert converter.from_connect_data("t", schema, None) is None
    assert converter.to_connect_data("t", None) == SchemaAndValue(schema, None)


def test_number_converters_refuse_wrong_values_and_sizes():
    with pytest.raises(DataException, match="size of data"):
        IntegerConverter().to_connect_data("t", b"\x00\x01")
    with pytest.raises(DataException, match="integer"):
        IntegerConverter().from_connect_data("t", None, "12")
    with pytest.raises(DataException, match="does not fit"):
        ShortConverter().from_connect_data("t", None, 1 << 20)
    with pytest.raises(DataException):
        IntegerConverter().from_connect_data("t", None, True)
    with pytest.raises(DataException, match="unexpected byte 2"):
        BooleanConverter().to_connect_data("t", b"\x02")


def test_string_converter_round_trips_in_its_encoding():
    c = StringConverter()
    c.configure({}, False)
    assert c.from_connect_data("t", Schema.STRING_SCHEMA, "héllo") == "héllo".encode()
    assert c.to_connect_data("t", "héllo".encode()) == SchemaAndValue(Schema.OPTIONAL_STRING_SCHEMA, "héllo")
    assert c.from_connect_data("t", Schema.INT32_SCHEMA, 42) == b"42"  # any value as its string form
    assert c.from_connect_data("t", None, True) == b"true"
    assert c.to_connect_data("t", None) == SchemaAndValue(Schema.OPTIONAL_STRING_SCHEMA, None)
    latin = StringConverter()
    latin.configure({"converter.encoding": "ISO-8859-1"}, True)
    assert latin.from_connect_data("t", None, "é") == b"\xe9"
    assert latin.to_connect_data("t", b"\xe9").value == "é"
    with pytest.raises(DataException, match="Unknown character encoding"):
        StringConverter().configure({"converter.encoding": "no-such-encoding"}, False)
    with pytest.raises(DataException):
        c.to_connect_data("t", b"\xff\xfe\xfd")


def test_byte_array_converter_passes_bytes_and_refuses_other_schemas():
    c = ByteArrayConverter()
    assert c.from_connect_data("t", Schema.BYTES_SCHEMA, b"\x00\x01") == b"\x00\x01"
    assert c.to_connect_data("t", b"\x00\x01") == SchemaAndValue(Schema.OPTIONAL_BYTES_SCHEMA, b"\x00\x01")
    with pytest.raises(DataException, match="Invalid schema type"):
        c.from_connect_data("t", Schema.STRING_SCHEMA, "x")
    with pytest.raises(DataException):
        c.from_connect_data("t", None, "not bytes")


@pytest.mark.parametrize(
    "schema, value, text",
    [
        (Schema.STRING_SCHEMA, "hello world", "hello world"),
        (Schema.INT8_SCHEMA, 42, "42"),
        (Schema.INT16_SCHEMA, 300, "300"),
        (Schema.BOOLEAN_SCHEMA, True, "true"),
        (Schema.FLOAT32_SCHEMA, 1.5, "1.5"),
        (SchemaBuilder.array(Schema.INT8_SCHEMA).build(), [1, 2, 3], "[1,2,3]"),
        (SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT8_SCHEMA).build(), {"a": 1, "b": 2}, '{"a":1,"b":2}'),
        (Date.SCHEMA, datetime.date(2024, 5, 1), "2024-05-01"),
        (
            Timestamp.SCHEMA,
            datetime.datetime(2024, 5, 1, 12, 0, 0, 250000, tzinfo=datetime.UTC),
            "2024-05-01T12:00:00.250Z",
        ),
    ],
)
def test_simple_header_converter_writes_text_and_infers_the_schema_back(schema, value, text):
    c = SimpleHeaderConverter()
    assert c.from_connect_header("t", "h", schema, value) == text.encode()
    assert c.to_connect_header("t", "h", text.encode()) == SchemaAndValue(schema, value)


def test_simple_header_converter_nulls_and_empties():
    c = SimpleHeaderConverter()
    assert c.from_connect_header("t", "h", Schema.OPTIONAL_STRING_SCHEMA, None) is None
    assert c.to_connect_header("t", "h", None) == SchemaAndValue.NULL
    assert c.to_connect_header("t", "h", b"") == SchemaAndValue(Schema.STRING_SCHEMA, "")
    assert c.to_connect_header("t", "h", b"a,b") == SchemaAndValue(Schema.STRING_SCHEMA, "a,b")


def test_tables_name_every_converter_by_kafkas_class_name():
    assert set(CONVERTERS) >= {
        "org.apache.kafka.connect.storage.StringConverter",
        "org.apache.kafka.connect.json.JsonConverter",
        "org.apache.kafka.connect.converters.ByteArrayConverter",
        "org.apache.kafka.connect.converters.IntegerConverter",
        "org.apache.kafka.connect.converters.LongConverter",
        "org.apache.kafka.connect.converters.ShortConverter",
        "org.apache.kafka.connect.converters.FloatConverter",
        "org.apache.kafka.connect.converters.DoubleConverter",
        "org.apache.kafka.connect.converters.BooleanConverter",
    }
    assert DEFAULT_HEADER_CONVERTER in HEADER_CONVERTERS
    assert "io.confluent.connect.avro.AvroConverter" in CONVERTERS
    for name, cls in CONVERTERS.items():
        c = cls()
        c.configure({"schema.registry.url": "http://127.0.0.1:9"}, False)  # read by AvroConverter only
        assert c.from_connect_data("t", None, None) is None, name


def test_kafka_names_for_error_reports():
    from odradek.connect.converters import KAFKA_NAMES
    from odradek.connect.errors import ConfigException, DataException
    from odradek.connect.transforms import KAFKA_NAMES as SMT_NAMES
    from odradek.connect.transforms import TRANSFORMATIONS

    assert KAFKA_NAMES[StringConverter] == "org.apache.kafka.connect.storage.StringConverter"
    assert KAFKA_NAMES[SimpleHeaderConverter] == "org.apache.kafka.connect.storage.SimpleHeaderConverter"
    mask_value = TRANSFORMATIONS["org.apache.kafka.connect.transforms.MaskField$Value"]
    assert SMT_NAMES[mask_value] == "org.apache.kafka.connect.transforms.MaskField$Value"
    assert DataException("x").kafka_name == "org.apache.kafka.connect.errors.DataException"
    assert ConfigException("k", "v").kafka_name == "org.apache.kafka.common.config.ConfigException"
