"""AvroConverter against Odradek's registry beside a real broker, checked both ways against
confluent-kafka's own Avro serializer and deserializer."""

import datetime
import decimal
import json

import pytest
import requests
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from support import wait_until

from odradek.connect.converters import AvroConverter
from odradek.connect.converters.avro_data import to_avro_schema
from odradek.connect.data import Date, Decimal, Schema, SchemaBuilder, Struct, Timestamp
from odradek.connect.errors import ConfigException, DataException
from odradek.testing.process import free_port

ORDER = (
    SchemaBuilder.struct()
    .name("shop.Order")
    .field("id", Schema.INT64_SCHEMA)
    .field("qty", Schema.INT16_SCHEMA)
    .field("total", Decimal.schema(2))
    .field("day", Date.SCHEMA)
    .field("at", Timestamp.SCHEMA)
    .field("note", Schema.OPTIONAL_STRING_SCHEMA)
    .field("tags", SchemaBuilder.array(Schema.STRING_SCHEMA).build())
    .field("counts", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT32_SCHEMA).build())
    .field("by_id", SchemaBuilder.map(Schema.INT32_SCHEMA, Schema.STRING_SCHEMA).build())
    .build()
)
AT = datetime.datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=datetime.UTC)


def order():
    return (
        Struct(ORDER).put("id", 1).put("qty", 3).put("total", decimal.Decimal("19.99"))
        .put("day", datetime.date(2024, 5, 1)).put("at", AT).put("tags", ["a"]).put("counts", {"x": 1})
        .put("by_id", {7: "seven"})
    )


@pytest.fixture(scope="module")
def registry_url(tmp_path_factory):
    from odradek.testing.process import BrokerProcess

    url = f"http://127.0.0.1:{free_port()}"
    broker = BrokerProcess(tmp_path_factory.mktemp("avro") / "data", overrides={"schema.registry.listeners": url})
    broker.start()

    def ready():
        try:
            return requests.get(f"{url}/subjects", timeout=5).status_code == 200
        except requests.ConnectionError:
            return False

    try:
        wait_until(ready, 60, "the registry beside the broker")
        yield url
    finally:
        broker.stop()


def converter(url, is_key=False, **configs):
    c = AvroConverter()
    c.configure({"schema.registry.url": url, **configs}, is_key)
    return c


def test_avro_schema_follows_confluents_avro_data():
    avro = to_avro_schema(ORDER)
    assert (avro["type"], avro["name"], avro["namespace"], avro["connect.name"]) == ("record", "Order", "shop", "shop.Order")
    fields = {f["name"]: f for f in avro["fields"]}
    assert fields["qty"]["type"] == {"type": "int", "connect.type": "int16"}
    assert fields["note"] == {"name": "note", "type": ["null", "string"], "default": None}
    assert fields["total"]["type"]["logicalType"] == "decimal" and fields["total"]["type"]["scale"] == 2
    assert fields["at"]["type"]["logicalType"] == "timestamp-millis"
    assert fields["by_id"]["type"]["items"]["name"] == "MapEntry"
    unnamed = to_avro_schema(SchemaBuilder.struct().field("a", Schema.INT32_SCHEMA).build())
    assert (unnamed["name"], unnamed["namespace"]) == ("ConnectDefault", "io.confluent.connect.avro")


def test_round_trip_and_confluent_kafka_reads_what_the_converter_wrote(registry_url):
    topic = "orders-avro"
    data = converter(registry_url).from_connect_data(topic, ORDER, order())
    assert data[0] == 0  # Confluent's framing: magic byte, then the schema id
    back = converter(registry_url).to_connect_data(topic, data)
    assert back.schema == ORDER and back.value == order()
    subjects = requests.get(f"{registry_url}/subjects", timeout=10).json()
    assert f"{topic}-value" in subjects
    read = AvroDeserializer(SchemaRegistryClient({"url": registry_url}))(
        data, SerializationContext(topic, MessageField.VALUE)
    )
    assert read["id"] == 1 and read["total"] == decimal.Decimal("19.99") and read["at"] == AT
    assert read["day"] == datetime.date(2024, 5, 1) and read["by_id"] == [{"key": 7, "value": "seven"}]


def test_converter_reads_what_confluent_kafka_wrote(registry_url):
    schema = {
        "type": "record", "name": "Click", "namespace": "web",
        "fields": [
            {"name": "url", "type": "string"},
            {"name": "ms", "type": "long"},
            {"name": "ref", "type": ["null", "string"], "default": None},
            {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        ],
    }
    serializer = AvroSerializer(SchemaRegistryClient({"url": registry_url}), json.dumps(schema))
    data = serializer({"url": "/x", "ms": 5, "ref": None, "kind": "B"}, SerializationContext("clicks", MessageField.VALUE))
    got = converter(registry_url).to_connect_data("clicks", data)
    assert got.schema.name == "web.Click"
    assert [(f.name, f.schema.type.name, f.schema.is_optional) for f in got.schema.fields()] == [
        ("url", "STRING", False), ("ms", "INT64", False), ("ref", "STRING", True), ("kind", "STRING", False)
    ]
    assert (got.value.get("url"), got.value.get("ms"), got.value.get("ref"), got.value.get("kind")) == ("/x", 5, None, "B")


def test_keys_use_the_key_subject_and_errors_are_clear(registry_url):
    key = converter(registry_url, is_key=True).from_connect_data("orders-avro", Schema.STRING_SCHEMA, "k1")
    assert converter(registry_url, is_key=True).to_connect_data("orders-avro", key).value == "k1"
    assert "orders-avro-key" in requests.get(f"{registry_url}/subjects", timeout=10).json()
    with pytest.raises(DataException, match="not a schema-registry framed value"):
        converter(registry_url).to_connect_data("t", b"plain bytes")
    with pytest.raises(DataException, match="needs a schema"):
        converter(registry_url).from_connect_data("t", None, {"a": 1})
    with pytest.raises(ConfigException) as bad:
        AvroConverter().configure({}, False)
    assert bad.value.key == "schema.registry.url"
    with pytest.raises(DataException, match="schema"):
        converter("http://127.0.0.1:9").from_connect_data("t", Schema.STRING_SCHEMA, "x")  # nothing listens
