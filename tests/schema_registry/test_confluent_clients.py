"""confluent-kafka's SchemaRegistryClient, AvroSerializer and AvroDeserializer, unchanged, against
a registry process and a broker: records produced, consumed and decoded; subject name
strategies; evolution allowed and refused per level; a restart keeps every id."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import (
    Schema,
    SchemaRegistryClient,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
    topic_subject_name_strategy,
)
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

USER_V1 = json.dumps({
    "type": "record", "name": "User", "namespace": "com.example",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}],
})  # fmt: skip
USER_V2 = json.dumps({
    "type": "record", "name": "User", "namespace": "com.example",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "long"},
               {"name": "email", "type": ["null", "string"], "default": None}],
})  # fmt: skip


def _consume(bootstrap: str, topic: str, count: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    out = []
    try:
        while len(out) < count:
            msg = consumer.poll(30)
            assert msg is not None, f"only {len(out)} of {count} records came back"
            assert msg.error() is None, msg.error()
            out.append(msg)
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize(
    ("strategy", "subject"),
    [
        (topic_subject_name_strategy, "{topic}-value"),
        (record_subject_name_strategy, "com.example.User"),
        (topic_record_subject_name_strategy, "{topic}-com.example.User"),
    ],
)
def test_avro_records_round_trip_with_each_subject_name_strategy(broker, registry, topic_name, strategy, subject):
    client = SchemaRegistryClient({"url": registry.url})
    serializer = AvroSerializer(client, USER_V1, conf={"subject.name.strategy": strategy})
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    users = [{"name": f"user{i}", "age": 20 + i} for i in range(5)]
    for user in users:
        ctx = SerializationContext(topic_name, MessageField.VALUE)
        producer.produce(topic_name, value=serializer(user, ctx))
    assert producer.flush(30) == 0
    expected_subject = subject.format(topic=topic_name)
    assert client.get_subjects() == [expected_subject]
    schema_id = client.get_latest_version(expected_subject).schema_id
    records = _consume(broker.bootstrap_servers, topic_name, len(users))
    for msg in records:  # Confluent's framing: magic byte 0, then the id as 4 bytes big-endian
        assert msg.value()[0] == 0 and int.from_bytes(msg.value()[1:5], "big") == schema_id
    # A fresh client (no cache) decodes them by asking the registry for the id.
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    decoded = [deserializer(m.value(), SerializationContext(topic_name, MessageField.VALUE)) for m in records]
    assert decoded == users


def test_evolution_is_allowed_or_refused_per_level_with_confluents_errors(registry):
    client = SchemaRegistryClient({"url": registry.url})
    subject = "users-value"
    first = client.register_schema(subject, Schema(USER_V1, "AVRO"))
    # BACKWARD (the default): int → long and an optional field read old data.
    second = client.register_schema(subject, Schema(USER_V2, "AVRO"))
    assert second != first
    assert client.test_compatibility(subject, Schema(USER_V1, "AVRO")) is False  # long → int
    # A schema the subject already has keeps its id without a check (as Confluent's does) ...
    assert client.register_schema(subject, Schema(USER_V1, "AVRO")) == first
    # ... a new one that cannot read the latest's data is refused.
    age_as_string = USER_V2.replace('"long"', '"string"')
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(age_as_string, "AVRO"))
    assert refused.value.http_status_code == 409 and refused.value.error_code == 409
    # FORWARD_TRANSITIVE: both older versions must read the new one's data.
    client.set_compatibility(subject, "FORWARD_TRANSITIVE")
    assert client.get_compatibility(subject) == "FORWARD_TRANSITIVE"
    # age back to int: v1 reads it as is, v2 promotes it to long.
    age_as_int = USER_V2.replace('"long"', '"int"')
    assert client.register_schema(subject, Schema(age_as_int, "AVRO")) > second
    # age as long again: v1 and the latest (age int) cannot read its data.
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(USER_V2.replace('"email"', '"mail"'), "AVRO"))
    assert refused.value.error_code == 409
    no_age = json.dumps({**json.loads(USER_V1), "fields": json.loads(USER_V1)["fields"][:1]})
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(no_age, "AVRO"))
    assert refused.value.error_code == 409
    # NONE lets anything in; an invalid schema is still 42201; an unknown level 42203.
    client.set_compatibility(subject, "NONE")
    client.register_schema(subject, Schema(no_age, "AVRO"))
    with pytest.raises(SchemaRegistryError) as invalid:
        client.register_schema(subject, Schema('{"type": "record"}', "AVRO"))
    assert invalid.value.error_code == 42201
    with pytest.raises(SchemaRegistryError) as level:
        client.set_compatibility(subject, "SIDEWAYS")
    assert level.value.error_code == 42203
    assert client.get_versions(subject) == [1, 2, 3, 4]
    # Deletes through the client.
    assert client.delete_version(subject, 4) == 4
    assert client.delete_subject(subject) == [1, 2, 3]
    assert client.get_subjects() == []


def test_a_restarted_registry_keeps_every_id_and_decodes_old_records(broker, registry_factory, topic_name):
    first = registry_factory()
    client = SchemaRegistryClient({"url": first.url})
    ids = {
        subject: client.register_schema(subject, Schema(USER_V1 if i % 2 else USER_V2, "AVRO"))
        for i, subject in enumerate(["a", "b", "c", "d"])
    }
    serializer = AvroSerializer(client, USER_V2)
    payload = serializer({"name": "x", "age": 3, "email": None}, SerializationContext(topic_name, MessageField.VALUE))
    first.stop()
    second = registry_factory()
    fresh = SchemaRegistryClient({"url": second.url})
    assert {s: fresh.get_latest_version(s).schema_id for s in ids} == ids
    decoded = AvroDeserializer(fresh)(payload, SerializationContext(topic_name, MessageField.VALUE))
    assert decoded == {"name": "x", "age": 3, "email": None}
    assert fresh.register_schema("e", Schema(json.dumps({"type": "record", "name": "New", "fields": []}), "AVRO")) == max(ids.values()) + 1


ORDER_JSON = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
    "properties": {"id": {"type": "integer"}, "total": {"type": "number"}},
    "required": ["id"], "additionalProperties": False,
})  # fmt: skip


def test_json_schema_records_round_trip_and_evolution_is_checked(broker, registry, topic_name):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    client = SchemaRegistryClient({"url": registry.url})
    serializer = JSONSerializer(ORDER_JSON, client)
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    orders = [{"id": i, "total": i / 2} for i in range(4)]
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for order in orders:
        producer.produce(topic_name, value=serializer(order, ctx))
    assert producer.flush(30) == 0
    subject = f"{topic_name}-value"
    latest = client.get_latest_version(subject)
    assert latest.schema.schema_type == "JSON"
    deserializer = JSONDeserializer(None, schema_registry_client=SchemaRegistryClient({"url": registry.url}))
    assert [deserializer(m.value(), ctx) for m in _consume(broker.bootstrap_servers, topic_name, 4)] == orders
    # BACKWARD: an optional property added to the closed model is fine; a new requirement is not.
    widened = json.loads(ORDER_JSON)
    widened["properties"]["note"] = {"type": "string"}
    assert client.register_schema(subject, Schema(json.dumps(widened), "JSON")) != latest.schema_id
    widened["required"] = ["id", "note"]
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(json.dumps(widened), "JSON"))
    assert refused.value.error_code == 409
    with pytest.raises(SchemaRegistryError) as invalid:
        client.register_schema(subject, Schema('{"type": "strnig"}', "JSON"))
    assert invalid.value.error_code == 42201


def _order_class(with_note: bool):
    """A protobuf message class built at run time (what protoc would generate)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fd = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop", syntax="proto3")
    msg = fd.message_type.add(name="Order")
    msg.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64, label=1)
    if with_note:
        msg.field.add(name="note", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, label=1)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_records_round_trip_and_evolution_is_checked(broker, registry, topic_name):
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

    client = SchemaRegistryClient({"url": registry.url})
    order_v1, order_v2 = _order_class(False), _order_class(True)
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    serializer = ProtobufSerializer(order_v1, client, {"use.deprecated.format": False})
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(3):
        producer.produce(topic_name, value=serializer(order_v1(id=i), ctx))
    assert producer.flush(30) == 0
    subject = f"{topic_name}-value"
    assert client.get_latest_version(subject).schema.schema_type == "PROTOBUF"
    deserializer = ProtobufDeserializer(
        order_v1, {"use.deprecated.format": False}, schema_registry_client=SchemaRegistryClient({"url": registry.url})
    )
    decoded = [deserializer(m.value(), ctx) for m in _consume(broker.bootstrap_servers, topic_name, 3)]
    assert [d.id for d in decoded] == [0, 1, 2]
    # A field added: compatible; id's type changed to a string: refused with 409.
    v2_id = ProtobufSerializer(order_v2, client, {"use.deprecated.format": False})(order_v2(id=1, note="x"), ctx)
    fresh = SchemaRegistryClient({"url": registry.url})  # the first client caches the latest version
    assert int.from_bytes(v2_id[1:5], "big") == fresh.get_latest_version(subject).schema_id == 2
    bad = 'syntax = "proto3"; package shop; message Order { string id = 1; }'
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(bad, "PROTOBUF"))
    assert refused.value.error_code == 409
    with pytest.raises(SchemaRegistryError) as invalid:
        client.register_schema(subject, Schema("message {", "PROTOBUF"))
    assert invalid.value.error_code == 42201
