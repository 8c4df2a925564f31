"""Streams' registry serdes (odradek.streams.registry_serdes) speak Confluent's framing: what they
write, confluent-kafka's deserializers read, and the other way round, through a real registry."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer as ConfluentAvroDeserializer
from confluent_kafka.schema_registry.avro import AvroSerializer as ConfluentAvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer as ConfluentJsonDeserializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer as ConfluentJsonSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from odradek.client.client_errors import SerializationError
from odradek.schema_registry.avro_serde import unframe
from odradek.streams.registry_serdes import AvroSerde, JsonSchemaSerde, ProtobufSerde
from odradek.streams.serdes import Serdes

ORDER = json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                    "fields": [{"name": "id", "type": "long"}, {"name": "total", "type": "double"}]})  # fmt: skip
ORDER_JSON = json.dumps({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]})


def test_avro_serde_round_trips_with_confluent_kafka(registry):
    ours = Serdes.from_class_name("io.confluent.kafka.streams.serdes.avro.GenericAvroSerde")
    ours.configure({"schema.registry.url": registry.url}, is_key=False)
    writer = AvroSerde(registry.url, ORDER)
    ctx = SerializationContext("orders", MessageField.VALUE)
    confluent = SchemaRegistryClient({"url": registry.url})
    data = writer.serialize("orders", {"id": 1, "total": 2.5})
    assert ConfluentAvroDeserializer(confluent)(data, ctx) == {"id": 1, "total": 2.5}
    assert registry.ok("GET", "/subjects") == ["orders-value"]
    theirs = ConfluentAvroSerializer(confluent, ORDER)({"id": 2, "total": 1.0}, ctx)
    assert ours.deserialize("orders", theirs) == {"id": 2, "total": 1.0}
    assert writer.serialize("orders", None) is None and ours.deserialize("orders", None) is None
    with pytest.raises(SerializationError, match="not a schema-registry framed value"):
        ours.deserialize("orders", b"\x01nope")
    key_serde = AvroSerde(registry.url, ORDER, is_key=True)
    key_serde.serialize("orders", {"id": 3, "total": 0.0})
    assert sorted(registry.ok("GET", "/subjects")) == ["orders-key", "orders-value"]


def test_json_schema_serde_round_trips_with_confluent_kafka(registry):
    ours = JsonSchemaSerde(registry.url, ORDER_JSON)
    ctx = SerializationContext("events", MessageField.VALUE)
    confluent = SchemaRegistryClient({"url": registry.url})
    data = ours.serialize("events", {"id": 5})
    assert unframe(data)[1] == b'{"id":5}'
    assert ConfluentJsonDeserializer(ORDER_JSON, schema_registry_client=confluent)(data, ctx) == {"id": 5}
    theirs = ConfluentJsonSerializer(ORDER_JSON, confluent)({"id": 6}, ctx)
    assert ours.deserialize("events", theirs) == {"id": 6}
    with pytest.raises(SerializationError, match="does not match the schema"):
        ours.serialize("events", {"name": "no id"})


def test_protobuf_serde_frames_the_message_with_its_index(registry):
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fd = descriptor_pb2.FileDescriptorProto(name="shop_streams.proto", package="shopstreams", syntax="proto3")
    msg = fd.message_type.add(name="Sale")
    msg.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
                  label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)  # fmt: skip
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    sale_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("shopstreams.Sale"))
    serde = ProtobufSerde(registry.url, message_class=sale_class)
    data = serde.serialize("sales", sale_class(id=42))
    schema_id, payload = unframe(data)
    assert payload == b"\x00" + sale_class(id=42).SerializeToString()  # index [0] is written as one 0 byte
    assert registry.ok("GET", f"/schemas/ids/{schema_id}")["schemaType"] == "PROTOBUF"
    assert serde.deserialize("sales", data).id == 42
