"""TimestampConverter, the routers, SetSchemaMetadata, Filter and the header SMTs."""

import datetime

import pytest

from odradek.connect.data import Date, Schema, SchemaBuilder, Struct, Time, Timestamp
from odradek.connect.errors import ConfigException, DataException
from odradek.connect.records import SinkRecord
from odradek.connect.transforms import TRANSFORMATIONS

T = "org.apache.kafka.connect.transforms."
MOMENT = datetime.datetime(2024, 5, 1, 13, 2, 3, 45000, tzinfo=datetime.UTC)
MILLIS = 1714568523045


def smt(name, **configs):
    transform = TRANSFORMATIONS[T + name]()
    transform.configure({k.replace("_", "."): v for k, v in configs.items()})
    return transform


def record(value=None, schema=None, topic="orders", timestamp=MILLIS, **kw):
    return SinkRecord(topic=topic, kafka_partition=0, value_schema=schema, value=value, timestamp=timestamp, **kw)


def test_timestamp_converter_between_every_kind():
    to_string = smt("TimestampConverter$Value", target_type="string", format="yyyy-MM-dd'T'HH:mm:ss.SSSZ")
    assert to_string.apply(record(MILLIS, Schema.INT64_SCHEMA)).value == "2024-05-01T13:02:03.045+0000"
    assert to_string.apply(record(MILLIS)).value == "2024-05-01T13:02:03.045+0000"
    assert to_string.apply(record(MILLIS, Schema.INT64_SCHEMA)).value_schema == Schema.STRING_SCHEMA
    from_string = smt("TimestampConverter$Value", target_type="Timestamp", format="yyyy-MM-dd HH:mm:ss.SSS")
    out = from_string.apply(record("2024-05-01 13:02:03.045", Schema.STRING_SCHEMA))
    assert out.value == MOMENT and out.value_schema == Timestamp.SCHEMA
    seconds = smt("TimestampConverter$Value", target_type="unix", unix_precision="seconds")
    assert seconds.apply(record(MOMENT, Timestamp.SCHEMA)).value == MILLIS // 1000
    micros = smt("TimestampConverter$Value", target_type="Timestamp", unix_precision="microseconds")
    assert micros.apply(record(MILLIS * 1000, Schema.INT64_SCHEMA)).value == MOMENT
    assert smt("TimestampConverter$Value", target_type="Date").apply(record(MOMENT, Timestamp.SCHEMA)).value == MOMENT.date()
    as_time = smt("TimestampConverter$Value", target_type="Time").apply(record(MOMENT, Timestamp.SCHEMA))
    assert as_time.value == MOMENT.time().replace(tzinfo=None) and as_time.value_schema == Time.SCHEMA
    day = smt("TimestampConverter$Value", target_type="unix").apply(record(MOMENT.date(), Date.SCHEMA))
    assert day.value == 1714521600000


def test_timestamp_converter_on_a_field():
    schema = SchemaBuilder.struct().field("id", Schema.INT32_SCHEMA).field("at", Schema.OPTIONAL_INT64_SCHEMA).build()
    convert = smt("TimestampConverter$Value", field="at", target_type="Timestamp")
    out = convert.apply(record(Struct(schema).put("id", 1).put("at", MILLIS), schema))
    assert out.value.get("at") == MOMENT and out.value_schema.field("at").schema == Timestamp.builder().optional().build()
    assert convert.apply(record({"id": 1, "at": MILLIS})).value == {"id": 1, "at": MOMENT}
    assert convert.apply(record(Struct(schema).put("id", 1), schema)).value.get("at") is None


def test_timestamp_converter_errors():
    with pytest.raises(ConfigException) as bad:
        smt("TimestampConverter$Value", target_type="string")
    assert bad.value.key == "format"
    with pytest.raises(ConfigException) as bad:
        smt("TimestampConverter$Value", target_type="epoch")
    assert bad.value.key == "target.type"
    with pytest.raises(ConfigException) as bad:
        smt("TimestampConverter$Value", target_type="Timestamp", format="yyyy-QQ")
    assert bad.value.key == "format"
    parse = smt("TimestampConverter$Value", target_type="unix", format="yyyy-MM-dd")
    with pytest.raises(DataException, match="does not match pattern"):
        parse.apply(record("01/05/2024", Schema.STRING_SCHEMA))
    with pytest.raises(DataException, match="known timestamp type"):
        parse.apply(record(True, Schema.BOOLEAN_SCHEMA))


def test_timestamp_router_and_regex_router():
    assert smt("TimestampRouter").apply(record()).topic == "orders-20240501"
    router = smt("TimestampRouter", topic_format="${timestamp}_${topic}", timestamp_format="yyyy.MM")
    assert router.apply(record()).topic == "2024.05_orders"
    with pytest.raises(DataException, match="Timestamp missing"):
        router.apply(record(timestamp=None))
    regex = smt("RegexRouter", regex="(.*)-(\\d+)", replacement="$2.$1")
    moved = regex.apply(record(topic="orders-17"))
    assert moved.topic == "17.orders" and moved.original_topic == "orders-17"
    assert regex.apply(record(topic="orders")).topic == "orders"  # no full match, no change
    assert smt("RegexRouter", regex="orders", replacement="all-\\$").apply(record()).topic == "all-$"
    with pytest.raises(ConfigException) as bad:
        smt("RegexRouter", regex="(", replacement="x")
    assert bad.value.key == "regex"
    with pytest.raises(ConfigException) as bad:
        smt("RegexRouter", regex="x")
    assert bad.value.key == "replacement"


def test_set_schema_metadata():
    schema = SchemaBuilder.struct().name("old").version(1).field("a", Schema.INT32_SCHEMA).build()
    out = smt("SetSchemaMetadata$Value", schema_name="new.Name", schema_version="3").apply(
        record(Struct(schema).put("a", 1), schema)
    )
    assert (out.value_schema.name, out.value_schema.version) == ("new.Name", 3)
    assert out.value.schema == out.value_schema and out.value.get("a") == 1
    keyed = smt("SetSchemaMetadata$Key", schema_name="K").apply(record(key="k", key_schema=Schema.STRING_SCHEMA))
    assert keyed.key_schema.name == "K" and keyed.key == "k"
    with pytest.raises(DataException, match="Schema required"):
        smt("SetSchemaMetadata$Value", schema_name="x").apply(record({"a": 1}))
    with pytest.raises(ConfigException) as bad:
        smt("SetSchemaMetadata$Value", schema_version="one")
    assert bad.value.key == "schema.version"


def test_filter_drops_everything():
    assert smt("Filter").apply(record("x")) is None


def test_header_smts():
    base = record({"id": 1, "name": "ada"})
    base.headers.add_string("trace", "a").add_string("keep", "b").add_string("trace", "c")
    dropped = smt("DropHeaders", headers="trace").apply(base)
    assert [h.key for h in dropped.headers] == ["keep"] and len(base.headers) == 3
    inserted = smt("InsertHeader", header="version", value_literal="42").apply(base)
    last = inserted.headers.last_with_name("version")
    assert (last.value, last.schema) == (42, Schema.INT8_SCHEMA)
    copied = smt("HeaderFrom$Value", fields="id", headers="user-id", operation="copy").apply(base)
    assert copied.headers.last_with_name("user-id").value == 1 and copied.value == {"id": 1, "name": "ada"}
    schema = SchemaBuilder.struct().field("id", Schema.INT32_SCHEMA).field("name", Schema.STRING_SCHEMA).build()
    moved = smt("HeaderFrom$Value", fields="id", headers="user-id", operation="move").apply(
        record(Struct(schema).put("id", 1).put("name", "ada"), schema)
    )
    header = moved.headers.last_with_name("user-id")
    assert (header.value, header.schema) == (1, Schema.INT32_SCHEMA)
    assert [f.name for f in moved.value_schema.fields()] == ["name"] and moved.value.get("name") == "ada"
    with pytest.raises(ConfigException, match="same number"):
        smt("HeaderFrom$Value", fields="a,b", headers="x", operation="copy")
    with pytest.raises(ConfigException) as bad:
        smt("HeaderFrom$Value", fields="a", headers="x", operation="steal")
    assert bad.value.key == "operation"
    with pytest.raises(ConfigException) as bad:
        smt("InsertHeader", header="h")
    assert bad.value.key == "value.literal"
