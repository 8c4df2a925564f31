"""Field SMTs (InsertField, ReplaceField, MaskField, ValueToKey, ExtractField, HoistField, Cast,
Flatten), each schemaless and with schemas, and their config errors."""

import datetime
import decimal

import pytest

from odradek.connect.data import Decimal, Schema, SchemaBuilder, Struct, Timestamp
from odradek.connect.errors import ConfigException, DataException
from odradek.connect.records import SinkRecord, SourceRecord
from odradek.connect.transforms import TRANSFORMATIONS

T = "org.apache.kafka.connect.transforms."


def smt(name, **configs):
    transform = TRANSFORMATIONS[T + name]()
    transform.configure({k.replace("_", "."): v for k, v in configs.items()})
    return transform


ADDRESS = SchemaBuilder.struct().name("Address").optional().field("city", Schema.STRING_SCHEMA).build()
USER = (
    SchemaBuilder.struct()
    .name("User")
    .field("id", Schema.INT64_SCHEMA)
    .field("name", Schema.STRING_SCHEMA)
    .field("score", Schema.OPTIONAL_FLOAT64_SCHEMA)
    .field("address", ADDRESS)
    .build()
)


def user(score=1.5):
    return (
        Struct(USER)
        .put("id", 7)
        .put("name", "ada")
        .put("score", score)
        .put("address", Struct(ADDRESS).put("city", "Oslo"))
    )


def sink(value, schema=None, key=None, key_schema=None, **kw):
    return SinkRecord(
        topic="users", kafka_partition=2, key_schema=key_schema, key=key, value_schema=schema, value=value,
        timestamp=1714564800123, kafka_offset=42, **kw,
    )


def test_insert_field_schemaless_and_with_schema():
    insert = smt(
        "InsertField$Value", topic_field="t", partition_field="p!", offset_field="o", timestamp_field="ts",
        static_field="s", static_value="v",
    )
    out = insert.apply(sink({"a": 1}))
    assert out.value == {"a": 1, "t": "users", "p": 2, "o": 42, "ts": 1714564800123, "s": "v"}
    out = insert.apply(sink(user(), USER))
    fields = {f.name: f.schema for f in out.value_schema.fields()}
    assert fields["t"] == Schema.OPTIONAL_STRING_SCHEMA and fields["p"] == Schema.INT32_SCHEMA
    assert fields["ts"].name == Timestamp.LOGICAL_NAME and fields["ts"].is_optional
    assert out.value.get("ts") == datetime.datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=datetime.UTC)
    assert out.value.get("name") == "ada" and out.value_schema.name == "User"
    assert insert.apply(sink(None)).value is None  # tombstones pass untouched
    with pytest.raises(DataException, match="SinkRecord"):
        insert.apply(SourceRecord(topic="t", value={"a": 1}))
    with pytest.raises(DataException, match="Only Map objects"):
        insert.apply(sink("not a map"))
    with pytest.raises(ConfigException) as bad:
        smt("InsertField$Value", static_field="s")
    assert bad.value.key == "static.value"


def test_insert_field_on_the_key():
    out = smt("InsertField$Key", topic_field="t").apply(sink({"v": 1}, key={"k": 1}))
    assert out.key == {"k": 1, "t": "users"} and out.value == {"v": 1}


def test_replace_field_include_exclude_renames_and_old_names():
    out = smt("ReplaceField$Value", exclude="score", renames="name:full_name,id:user_id").apply(sink(user(), USER))
    assert [f.name for f in out.value_schema.fields()] == ["user_id", "full_name", "address"]
    assert out.value.get("full_name") == "ada" and out.value.get("user_id") == 7
    out = smt("ReplaceField$Value", include="id,name").apply(sink({"id": 1, "name": "x", "other": 2}))
    assert out.value == {"id": 1, "name": "x"}
    out = smt("ReplaceField$Value", blacklist="other", whitelist="id,other").apply(sink({"id": 1, "other": 2}))
    assert out.value == {"id": 1}
    with pytest.raises(ConfigException) as bad:
        smt("ReplaceField$Value", renames="nocolon")
    assert bad.value.key == "renames" and "Invalid rename mapping" in str(bad.value)


def test_mask_field():
    out = smt("MaskField$Value", fields="name,score,address").apply(sink({"name": "ada", "score": 2.5, "address": {"c": 1}, "id": 3}))
    assert out.value == {"name": "", "score": 0.0, "address": {}, "id": 3}
    out = smt("MaskField$Value", fields="name,id").apply(sink(user(), USER))
    assert out.value.get("name") == "" and out.value.get("id") == 0 and out.value_schema == USER
    out = smt("MaskField$Value", fields="id", replacement="99").apply(sink(user(), USER))
    assert out.value.get("id") == 99
    with pytest.raises(DataException, match="Unable to convert"):
        smt("MaskField$Value", fields="id", replacement="abc").apply(sink(user(), USER))
    schema = SchemaBuilder.struct().field("price", Decimal.schema(2)).build()
    masked = smt("MaskField$Value", fields="price").apply(sink(Struct(schema).put("price", decimal.Decimal("9.99")), schema))
    assert masked.value.get("price") == 0
    with pytest.raises(ConfigException) as bad:
        smt("MaskField$Value")
    assert bad.value.key == "fields"


def test_value_to_key():
    out = smt("ValueToKey", fields="id,name").apply(sink(user(), USER))
    assert [f.name for f in out.key_schema.fields()] == ["id", "name"]
    assert out.key.get("id") == 7 and out.value == user()
    assert smt("ValueToKey", fields="id").apply(sink({"id": 1, "x": 2})).key == {"id": 1}
    with pytest.raises(DataException, match="Field does not exist: nope"):
        smt("ValueToKey", fields="nope").apply(sink(user(), USER))


def test_extract_field_and_nested_paths():
    out = smt("ExtractField$Value", field="name").apply(sink(user(), USER))
    assert out.value == "ada" and out.value_schema == Schema.STRING_SCHEMA
    assert smt("ExtractField$Key", field="id").apply(sink(None, key={"id": 5})).key == 5
    nested = smt("ExtractField$Value", field="address.city", field_syntax_version="V2")
    assert nested.apply(sink(user(), USER)).value == "Oslo"
    assert nested.apply(sink({"address": {"city": "Rome"}})).value == "Rome"
    with pytest.raises(DataException, match="Unknown field: nope"):
        smt("ExtractField$Value", field="nope").apply(sink(user(), USER))
    with pytest.raises(ConfigException) as bad:
        smt("ExtractField$Value", field="a", field_syntax_version="V9")
    assert bad.value.key == "field.syntax.version"


def test_hoist_field():
    out = smt("HoistField$Value", field="line").apply(sink("hello", Schema.STRING_SCHEMA))
    assert out.value_schema.field("line").schema == Schema.STRING_SCHEMA and out.value.get("line") == "hello"
    assert smt("HoistField$Key", field="k").apply(sink(None, key=3)).key == {"k": 3}


def test_cast_fields_and_whole_values():
    cast = smt("Cast$Value", spec="id:string,score:int32,name:boolean")
    out = cast.apply(sink(user(score=2.9), USER))
    assert out.value.get("id") == "7" and out.value.get("score") == 2 and out.value.get("name") is False
    assert out.value_schema.field("score").schema == Schema.OPTIONAL_INT32_SCHEMA
    assert cast.apply(sink({"id": 7, "score": "3", "name": "TRUE"})).value == {"id": "7", "score": 3, "name": True}
    whole = smt("Cast$Value", spec="int64")
    assert whole.apply(sink("42", Schema.STRING_SCHEMA)).value == 42
    assert whole.apply(sink("42", Schema.STRING_SCHEMA)).value_schema == Schema.INT64_SCHEMA
    assert smt("Cast$Value", spec="int8").apply(sink(300)).value == 44  # Java's (byte) 300
    assert smt("Cast$Value", spec="string").apply(sink(1e10)).value == "1.0E10"
    assert smt("Cast$Value", spec="string").apply(sink(b"\x00\x01", Schema.BYTES_SCHEMA)).value == "AAE="
    with pytest.raises(DataException, match="Cannot cast"):
        whole.apply(sink("forty-two", Schema.STRING_SCHEMA))
    with pytest.raises(DataException, match="does not support casting"):
        smt("Cast$Value", spec="address:string").apply(sink(user(), USER))
    with pytest.raises(ConfigException) as bad:
        smt("Cast$Value", spec="id:uuid")
    assert bad.value.key == "spec" and "uuid" in str(bad.value)
    with pytest.raises(ConfigException, match="single cast"):
        smt("Cast$Value", spec="int32,id:int64")


def test_flatten():
    out = smt("Flatten$Value").apply(sink(user(), USER))
    assert [f.name for f in out.value_schema.fields()] == ["id", "name", "score", "address.city"]
    assert out.value_schema.field("address.city").schema.is_optional  # under an optional struct
    assert out.value.get("address.city") == "Oslo"
    no_address = user().put("address", None)
    assert smt("Flatten$Value").apply(sink(no_address, USER)).value.get("address.city") is None
    flat = smt("Flatten$Value", delimiter="_").apply(sink({"a": {"b": {"c": 1}, "d": [1, 2]}, "e": 2}))
    assert flat.value == {"a_b_c": 1, "a_d": [1, 2], "e": 2}
