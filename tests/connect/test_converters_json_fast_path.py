"""JsonConverter's per-schema encoders and decoders give exactly what its general path gives:
the same bytes, the same values, the same errors (odradek/connect/converters/json_compiled.py)."""

from __future__ import annotations

import datetime
import decimal

import pytest

from odradek.connect.converters.json_converter import JsonConverter
from odradek.connect.converters.json_text import dumps, loads
from odradek.connect.data import Decimal, Schema, SchemaBuilder, Struct, Timestamp
from odradek.connect.errors import DataException

INNER = SchemaBuilder.struct().name("inner").field("x", Schema.OPTIONAL_FLOAT32_SCHEMA).build()
OUTER = (
    SchemaBuilder.struct()
    .field("id", Schema.INT16_SCHEMA)
    .field("label", SchemaBuilder.string().optional().default_value("none").build())
    .field("price", Decimal.schema(3))
    .field("at", Timestamp.SCHEMA)
    .field("blob", Schema.OPTIONAL_BYTES_SCHEMA)
    .field("ratio", Schema.FLOAT64_SCHEMA)
    .field("flags", SchemaBuilder.array(Schema.BOOLEAN_SCHEMA).build())
    .field("by_name", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT64_SCHEMA).build())
    .field("by_id", SchemaBuilder.map(Schema.INT32_SCHEMA, Schema.STRING_SCHEMA).build())
    .field("inner", INNER)
    .build()
)


def outer(label: str | None = "tab\tquote\" é \x1f") -> Struct:
    return (
        Struct(OUTER).put("id", -300).put("label", label).put("price", decimal.Decimal("-1.250"))
        .put("at", datetime.datetime(2024, 2, 29, 23, 59, 59, 999000, tzinfo=datetime.UTC))
        .put("blob", b"\x00\xff").put("ratio", 1e-7).put("flags", [True, False])
        .put("by_name", {"a": 1, "b": -(1 << 63)}).put("by_id", {7: "seven"})
        .put("inner", Struct(INNER).put("x", 0.1))
    )


def converter(**settings: str) -> JsonConverter:
    c = JsonConverter()
    c.configure(settings, is_key=False)
    return c


def general_bytes(c: JsonConverter, schema: Schema | None, value: object) -> bytes:
    payload = dumps(c.convert_to_json(schema, value))
    if not c.schemas_enabled:
        return payload.encode()
    schema_text = dumps(c.as_json_schema(schema)) if schema is not None else "null"
    return ('{"schema":' + schema_text + ',"payload":' + payload + "}").encode()


SETTINGS = [
    {},
    {"schemas.enable": "false"},
    {"decimal.format": "NUMERIC"},
    {"replace.null.with.default": "false"},
    {"schemas.cache.size": "0"},
]
VALUES = [
    (OUTER, outer()),
    (OUTER, outer(label=None)),
    (None, {"a": [1, 2.5, None, True, "x\n"], "b": {"c": b"\x01"}, "s": outer()}),
    (None, {1: "non-string keys", 2: [float("nan"), 1e22]}),
    (Schema.STRING_SCHEMA, "plain"),
    (SchemaBuilder.array(Schema.OPTIONAL_FLOAT32_SCHEMA).build(), [0.1, None, 3.4e38]),
]


@pytest.mark.parametrize("settings", SETTINGS)
@pytest.mark.parametrize(("schema", "value"), VALUES)
def test_fast_path_writes_and_reads_what_the_general_path_does(settings, schema, value):
    c = converter(**settings)
    data = c.from_connect_data("t", schema, value)
    assert data == general_bytes(c, schema, value)
    for _ in range(2):  # the second read takes the cached envelope and decoder
        back = c.to_connect_data("t", data)
        node = loads(data)
        expected_schema = c.as_connect_schema(node["schema"]) if c.schemas_enabled else None
        payload = node["payload"] if c.schemas_enabled else node
        assert back.schema == expected_schema
        assert back.value == c.convert_to_connect(expected_schema, payload)


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        (Schema.INT8_SCHEMA, True),
        (Schema.INT64_SCHEMA, "7"),
        (Schema.FLOAT64_SCHEMA, "1.5"),
        (Schema.STRING_SCHEMA, 3),
        (Schema.BOOLEAN_SCHEMA, 1),
        (Schema.BYTES_SCHEMA, "abc"),
        (SchemaBuilder.array(Schema.INT32_SCHEMA).build(), [1, "2"]),
        (SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT32_SCHEMA).build(), {1: 2}),
        (OUTER, Struct(INNER)),
        (Schema.INT32_SCHEMA, None),
        (Decimal.schema(2), 1.5),
        (Timestamp.SCHEMA, 5),
        (None, object()),
    ],
)
def test_fast_path_refuses_what_the_general_path_refuses(schema, value):
    c = converter()
    with pytest.raises(DataException) as general:
        general_bytes(c, schema, value)
    with pytest.raises(DataException) as fast:
        c.from_connect_data("t", schema, value)
    assert str(fast.value) == str(general.value)


@pytest.mark.parametrize(
    "payload",
    ['{"id":70000}', '{"id":true}', '{"id":"1"}', '{"id":null}', '{"id":1,"blob":"not base64!"}',
     '{"id":1,"price":"%%%"}', '{"id":1,"price":true}', '{"id":1,"at":"yesterday"}', "[1]"],
)
def test_fast_path_rejects_payloads_the_general_path_rejects(payload):
    schema = (
        SchemaBuilder.struct().field("id", Schema.INT16_SCHEMA).field("blob", Schema.OPTIONAL_BYTES_SCHEMA)
        .field("price", SchemaBuilder.bytes().name(Decimal.LOGICAL_NAME).parameter("scale", "2").optional().build())
        .field("at", SchemaBuilder.int64().name(Timestamp.LOGICAL_NAME).optional().build())
        .build()
    )
    c = converter()
    envelope = '{"schema":' + dumps(c.as_json_schema(schema)) + ',"payload":' + payload + "}"
    with pytest.raises(DataException) as general:
        c.convert_to_connect(schema, loads(payload))
    for _ in range(2):
        with pytest.raises(DataException) as fast:
            c.to_connect_data("t", envelope.encode())
        assert str(fast.value) == str(general.value)


def numbered_schema(n: int) -> Schema:
    return SchemaBuilder.struct().name(f"row{n}").field("id", Schema.INT64_SCHEMA).field(f"f{n}", Schema.STRING_SCHEMA).build()


# A parameter named "payload" puts the envelope's separator inside the schema's own text.
TRICKY = SchemaBuilder.string().parameter("payload", "x").build()


def test_records_with_alternating_schemas_read_back_through_the_envelope_cache():
    writer, reader = converter(), converter()
    first, second = numbered_schema(1), numbered_schema(2)
    records = []
    for i in range(6):
        schema = first if i % 2 == 0 else second
        value = Struct(schema).put("id", i).put(f"f{1 + i % 2}", f"text {i}")
        records.append((schema, value, writer.from_connect_data("t", schema, value)))
    records.append((TRICKY, "p", writer.from_connect_data("t", TRICKY, "p")))
    for _ in range(2):  # the second round reads every schema from the cache
        for schema, value, data in records:
            back = reader.to_connect_data("t", data)
            assert back.schema == schema
            assert back.value == value
            assert reader.from_connect_data("t", back.schema, back.value) == data
    assert len(reader._envelopes) == 3  # noqa: SLF001 - one entry per schema text seen


@pytest.mark.parametrize("tail", [b" ", b"x", b',"extra":1}'])
def test_a_known_schema_followed_by_anything_but_one_payload_is_read_as_before(tail):
    c = converter()
    schema = numbered_schema(1)
    data = c.from_connect_data("t", schema, Struct(schema).put("id", 1).put("f1", "a"))
    c.to_connect_data("t", data)  # the schema's text is known from here on
    altered = data[:-1] + tail if tail.startswith(b",") else data + tail
    if tail == b" ":
        assert c.to_connect_data("t", altered).value == c.to_connect_data("t", data).value
    else:
        with pytest.raises(DataException):
            c.to_connect_data("t", altered)


def test_schemas_cache_size_bounds_every_schema_cache():
    c = converter(**{"schemas.cache.size": "2"})
    for round in range(2):
        for n in range(5):
            schema = numbered_schema(n)
            value = Struct(schema).put("id", n).put(f"f{n}", str(round))
            data = c.from_connect_data("t", schema, value)
            assert c.to_connect_data("t", data).value == value
    caches = (c._envelopes, c._writers, c._decoders, c._to_connect_schemas, c._schema_texts)  # noqa: SLF001
    assert [len(cache) for cache in caches] == [2] * len(caches)


@pytest.mark.parametrize("amount", ["1.234", "Infinity", "NaN"])
def test_a_decimal_the_schema_cannot_hold_fails_as_on_the_general_path(amount):
    c = converter()
    with pytest.raises((DataException, ArithmeticError, ValueError)) as general:
        general_bytes(c, Decimal.schema(2), decimal.Decimal(amount))
    with pytest.raises(general.type) as fast:
        c.from_connect_data("t", Decimal.schema(2), decimal.Decimal(amount))
    assert str(fast.value) == str(general.value)
