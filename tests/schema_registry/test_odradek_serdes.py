"""Odradek's own Avro serializers speak Confluent's framing: records written by one side are
read by the other's (confluent-kafka's AvroSerializer/AvroDeserializer), through a broker."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer as ConfluentDeserializer
from confluent_kafka.schema_registry.avro import AvroSerializer as ConfluentSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from support import wait_until

from odradek import Consumer, Producer
from odradek.schema_registry.avro_serde import (
    AvroDeserializer,
    AvroSerializer,
    record_subject,
    topic_record_subject,
    topic_subject,
    unframe,
)
from odradek.schema_registry.registry_client import RegistryClient
from odradek.schema_registry.registry_errors import RegistryError

V1 = json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                 "fields": [{"name": "id", "type": "long"}, {"name": "total", "type": "double"}]})  # fmt: skip
V2 = json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                 "fields": [{"name": "id", "type": "long"}, {"name": "total", "type": "double"},
                            {"name": "note", "type": "string", "default": ""}]})  # fmt: skip


def test_subject_strategies_name_subjects_as_confluents():
    assert topic_subject("orders") == "orders-value"
    assert topic_subject("orders", is_key=True) == "orders-key"
    assert record_subject(V1) == "shop.Order"
    assert topic_record_subject("orders", V1) == "orders-shop.Order"


def test_odradek_writes_confluent_reads_and_back(broker, registry, topic_name):
    client = RegistryClient(registry.url)
    orders = [{"id": i, "total": i * 1.5} for i in range(10)]
    with Producer(bootstrap_servers=broker.bootstrap_servers,
                  value_serializer=AvroSerializer(client, V1, topic_subject(topic_name))) as producer:  # fmt: skip
        for order in orders:
            producer.send(topic_name, order)
        producer.flush()
    with Consumer(bootstrap_servers=broker.bootstrap_servers, group_id=f"g-{topic_name}", auto_offset_reset="earliest") as consumer:
        consumer.subscribe([topic_name])
        raw: list = []
        wait_until(lambda: len(raw) >= len(orders), 30, "the records", step=lambda: raw.extend(consumer.poll(timeout=1)))
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    theirs = ConfluentDeserializer(SchemaRegistryClient({"url": registry.url}))
    assert [theirs(r.value, ctx) for r in raw] == orders
    assert {unframe(r.value)[0] for r in raw} == {1}
    # confluent-kafka writes with v2; Odradek reads it, as written and resolved into v1.
    framed = ConfluentSerializer(SchemaRegistryClient({"url": registry.url}), V2)({"id": 1, "total": 2.0, "note": "hi"}, ctx)
    assert AvroDeserializer(client)(framed) == {"id": 1, "total": 2.0, "note": "hi"}
    assert AvroDeserializer(client, reader_schema=V1)(framed) == {"id": 1, "total": 2.0}
    assert unframe(framed)[0] == 2
    with pytest.raises(ValueError):
        AvroDeserializer(client)(b"\x01plain")


def test_without_auto_register_an_unknown_schema_fails_with_the_registry_code(registry):
    serializer = AvroSerializer(RegistryClient(registry.url), V1, "absent-value", auto_register=False)
    with pytest.raises(RegistryError) as info:
        serializer({"id": 1, "total": 1.0})
    assert info.value.code == 40401
