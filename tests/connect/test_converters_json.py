"""JsonConverter: Kafka's envelope byte for byte, Kafka's own JSON examples read back, both modes."""

import datetime
import decimal

import pytest

from odradek.connect.converters import JsonConverter
from odradek.connect.data import Date, Decimal, Schema, SchemaAndValue, SchemaBuilder, Struct, Time, Timestamp
from odradek.connect.errors import ConfigException, DataException


def converter(**configs):
    c = JsonConverter()
    c.configure({k.replace("_", "."): v for k, v in configs.items()}, False)
    return c


def test_quickstart_record_is_byte_for_byte_what_kafka_writes():
    # Kafka's quickstart shows the FileStream source's lines in connect-test exactly like this.
    data = converter().from_connect_data("connect-test", Schema.STRING_SCHEMA, "foo")
    assert data == b'{"schema":{"type":"string","optional":false},"payload":"foo"}'
    assert converter().to_connect_data("connect-test", data) == SchemaAndValue(Schema.STRING_SCHEMA, "foo")


ORDER = (
    SchemaBuilder.struct()
    .name("shop.Order")
    .version(3)
    .doc("an order")
    .field("id", Schema.INT64_SCHEMA)
    .field("total", Decimal.schema(2))
    .field("day", Date.SCHEMA)
    .field("at", Time.SCHEMA)
    .field("ts", Timestamp.builder().optional().build())
    .field("tags", SchemaBuilder.array(Schema.STRING_SCHEMA).optional().build())
    .field("counts", SchemaBuilder.map(Schema.INT32_SCHEMA, Schema.FLOAT64_SCHEMA).build())
    .field("note", SchemaBuilder.string().optional().default_value("none").build())
    .build()
)
ORDER_SCHEMA_JSON = (
    '{"type":"struct","fields":['
    '{"type":"int64","optional":false,"field":"id"},'
    '{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,'
    '"parameters":{"scale":"2"},"field":"total"},'
    '{"type":"int32","optional":false,"name":"org.apache.kafka.connect.data.Date","version":1,"field":"day"},'
    '{"type":"int32","optional":false,"name":"org.apache.kafka.connect.data.Time","version":1,"field":"at"},'
    '{"type":"int64","optional":true,"name":"org.apache.kafka.connect.data.Timestamp","version":1,"field":"ts"},'
    '{"type":"array","items":{"type":"string","optional":false},"optional":true,"field":"tags"},'
    '{"type":"map","keys":{"type":"int32","optional":false},"values":{"type":"double","optional":false},'
    '"optional":false,"field":"counts"},'
    '{"type":"string","optional":true,"default":"none","field":"note"}'
    '],"optional":false,"name":"shop.Order","version":3,"doc":"an order"}'
)


def order():
    return (
        Struct(ORDER)
        .put("id", 4398046511104)
        .put("total", decimal.Decimal("1.56"))  # Kafka's test: unscaled 156 is bytes {0, -100}: "AJw="
        .put("day", datetime.date(1970, 1, 1) + datetime.timedelta(days=10000))
        .put("at", datetime.time(4, 0))  # 14400000 ms
        .put("ts", datetime.datetime(1970, 2, 16, 7, 6, 40, tzinfo=datetime.UTC))  # 4000000000 ms
        .put("tags", ["a", "b"])
        .put("counts", {1: 1e10, 2: 0.5})
    )


def test_struct_with_logical_types_is_byte_for_byte_kafkas_envelope():
    data = converter().from_connect_data("orders", ORDER, order())
    payload = (
        '{"id":4398046511104,"total":"AJw=","day":10000,"at":14400000,"ts":4000000000,'
        '"tags":["a","b"],"counts":[[1,1.0E10],[2,0.5]],"note":"none"}'
    )
    assert data.decode() == '{"schema":' + ORDER_SCHEMA_JSON + ',"payload":' + payload + "}"
    back = converter().to_connect_data("orders", data)
    assert back.schema == ORDER
    assert back.value == order().put("note", "none")


def test_kafkas_json_examples_read_as_kafka_reads_them():
    c = converter()

    def read(text):
        return c.to_connect_data("t", text.encode())

    assert read('{ "schema": { "type": "boolean", "default": true }, "payload": null }') == SchemaAndValue(
        SchemaBuilder.bool().default_value(True).build(), True
    )
    assert read(
        '{ "schema": { "type": "boolean", "optional": false, "name": "bool", "version": 2, '
        '"doc": "the documentation", "parameters": { "foo": "bar" }}, "payload": true }'
    ) == SchemaAndValue(
        SchemaBuilder.bool().required().name("bool").version(2).doc("the documentation").parameter("foo", "bar").build(),
        True,
    )
    assert read('{ "schema": { "type": "float" }, "payload": 12.34 }').value == pytest.approx(12.34)
    assert read('{ "schema": { "type": "bytes" }, "payload": "dGVzdC1zdHJpbmc=" }').value == b"test-string"
    assert read(
        '{ "schema": { "type": "map", "keys": { "type" : "int32" }, "values": { "type" : "int32" } }, '
        '"payload": [ [1, 12], [2, 15] ] }'
    ).value == {1: 12, 2: 15}
    optional_struct = read(
        '{ "schema": { "type": "struct", "fields": [{ "field":"optional", "type": "string", "optional": true }, '
        '{  "field": "required", "type": "string" }] }, "payload": { "required": "required" } }'
    )
    assert optional_struct.value.get("required") == "required" and optional_struct.value.get("optional") is None
    decimal_schema = '"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1'
    assert read(
        '{ "schema": { ' + decimal_schema + ', "parameters": { "scale": "4" } }, "payload": 1.5600 }'
    ).value.as_tuple() == decimal.Decimal("1.5600").as_tuple()
    assert read(
        '{ "schema": { ' + decimal_schema + ', "parameters": { "scale": "17" } }, "payload": 1.23456789123456789 }'
    ).value == decimal.Decimal("1.23456789123456789")
    assert read(
        '{ "schema": { ' + decimal_schema + ', "default": "AJw=", "parameters": { "scale": "2" } }, "payload": null }'
    ).value == decimal.Decimal("1.56")
    assert read(
        '{ "schema": { "type": "int64", "name": "org.apache.kafka.connect.data.Timestamp", "version": 1,  '
        '"optional": true, "default": 42 }, "payload": null }'
    ).value == datetime.datetime(1970, 1, 1, 0, 0, 0, 42000, tzinfo=datetime.UTC)
    # No schema: integers as INT64, fractions as FLOAT64, objects as maps.
    assert read('{ "schema": null, "payload": 12 }') == SchemaAndValue(None, 12)
    assert read('{ "schema": null, "payload": 12.24 }') == SchemaAndValue(None, 12.24)
    assert read('{ "schema": null, "payload": [1, "2", 3] }').value == [1, "2", 3]
    assert read('{ "schema": null, "payload": null }') == SchemaAndValue.NULL
    assert c.to_connect_data("t", None) == SchemaAndValue.NULL


def test_schemas_disabled_writes_and_reads_plain_json():
    c = converter(schemas_enable="false")
    assert c.from_connect_data("t", None, {"a": 1, "b": [True, None], "c": 1.5}) == b'{"a":1,"b":[true,null],"c":1.5}'
    assert c.from_connect_data("t", Schema.STRING_SCHEMA, "x") == b'"x"'
    assert c.to_connect_data("t", b'{ "a": "", "b": null}') == SchemaAndValue(None, {"a": "", "b": None})
    assert c.to_connect_data("t", b"") == SchemaAndValue.NULL
    assert c.from_connect_data("t", None, None) is None  # a tombstone stays a tombstone


def test_numbers_print_as_java_prints_them():
    c = converter()
    assert c.from_connect_data("t", Schema.FLOAT64_SCHEMA, 1e10).endswith(b'"payload":1.0E10}')
    assert c.from_connect_data("t", Schema.FLOAT64_SCHEMA, 0.0001).endswith(b'"payload":1.0E-4}')
    assert c.from_connect_data("t", Schema.FLOAT64_SCHEMA, 100.0).endswith(b'"payload":100.0}')
    assert c.from_connect_data("t", Schema.FLOAT32_SCHEMA, 12.34).endswith(b'"payload":12.34}')
    assert c.from_connect_data("t", Schema.STRING_SCHEMA, 'a"\\\x01\n\u00e9').endswith(
        '"payload":"a\\"\\\\\\u0001\\n\u00e9"}'.encode()
    )
    numeric = converter(decimal_format="numeric")
    assert numeric.from_connect_data("t", Decimal.schema(4), decimal.Decimal("1.5600")).endswith(b'"payload":1.5600}')
    assert numeric.to_connect_data(
        "t", numeric.from_connect_data("t", Decimal.schema(4), decimal.Decimal("1.5600"))
    ).value == decimal.Decimal("1.5600")


def test_replace_null_with_default_off_keeps_nulls():
    schema = SchemaBuilder.struct().field("n", SchemaBuilder.int32().optional().default_value(7).build()).build()
    keep = converter(replace_null_with_default="false")
    data = keep.from_connect_data("t", schema, Struct(schema))
    assert data.endswith(b'"payload":{"n":null}}')
    assert keep.to_connect_data("t", data).value.get_without_default("n") is None
    assert converter().to_connect_data("t", data).value.get_without_default("n") == 7


def test_bad_input_is_a_data_exception_that_says_what_to_do():
    c = converter()
    with pytest.raises(DataException, match="set schemas.enable=false"):
        c.to_connect_data("t", b'{"a": 1}')
    with pytest.raises(DataException, match="serialization error"):
        c.to_connect_data("t", b"{not json")
    with pytest.raises(DataException, match="Unknown schema type: nope"):
        c.to_connect_data("t", b'{"schema": {"type": "nope"}, "payload": 1}')
    with pytest.raises(DataException, match="required INT32"):
        c.to_connect_data("t", b'{"schema": {"type": "int32"}, "payload": null}')
    with pytest.raises(DataException):
        c.from_connect_data("t", Schema.FLOAT64_SCHEMA, True)
    with pytest.raises(DataException, match="required"):
        c.from_connect_data("t", Schema.STRING_SCHEMA, None)
    with pytest.raises(DataException):
        c.from_connect_data("t", None, decimal.Decimal("1.5"))  # no schema type for a bare Decimal


def test_bad_config_names_the_key():
    with pytest.raises(ConfigException) as bad:
        converter(decimal_format="HEX")
    assert bad.value.key == "decimal.format" and "BASE64" in str(bad.value)
    with pytest.raises(ConfigException) as bad:
        JsonConverter().configure({"schemas.cache.size": "-1"}, True)
    assert bad.value.key == "schemas.cache.size"


def test_json_headers_use_the_envelope_too():
    c = converter()
    data = c.from_connect_header("t", "h", Schema.INT32_SCHEMA, 5)
    assert data == b'{"schema":{"type":"int32","optional":false},"payload":5}'
    assert c.to_connect_header("t", "h", data) == SchemaAndValue(Schema.INT32_SCHEMA, 5)


def test_a_run_of_records_with_one_schema_reads_the_same_as_each_alone():
    c = converter()
    first = c.from_connect_data("t", ORDER, order())
    other = order().put("id", 8).put("note", "x")
    second = c.from_connect_data("t", ORDER, other)
    reader = converter()
    assert reader.to_connect_data("t", first).value == order().put("note", "none")
    assert reader.to_connect_data("t", second) == SchemaAndValue(ORDER, other)  # the schema prefix seen before
    prefix = first[: first.index(b',"payload":') + len(b',"payload":')]
    with pytest.raises(DataException, match="set schemas.enable=false"):
        reader.to_connect_data("t", prefix + b'1,"extra":2}')
    assert reader.to_connect_data("t", b'{"schema":{"type":"int32","optional":false},"payload":3}').value == 3
