"""Protobuf imports as schema references: confluent-kafka's ProtobufSerializer registers a
user import as its own subject (well-known types need none), the records round-trip
through a fresh deserializer, and the registry refuses imports nobody registered and
deletes of what is referenced."""

from __future__ import annotations

import base64

from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

F = descriptor_pb2.FieldDescriptorProto


def order_class():
    """shop.Order (shop/order.proto) importing shop/money.proto and google/protobuf/timestamp.proto,
    built at run time as protoc would generate it."""
    money = descriptor_pb2.FileDescriptorProto(name="shop/money.proto", package="shop", syntax="proto3")
    m = money.message_type.add(name="Money")
    m.field.add(name="currency", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    m.field.add(name="units", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    order = descriptor_pb2.FileDescriptorProto(
        name="shop/order.proto", package="shop", syntax="proto3",
        dependency=["shop/money.proto", "google/protobuf/timestamp.proto"],
    )  # fmt: skip
    o = order.message_type.add(name="Order")
    o.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    o.field.add(name="total", number=2, type=F.TYPE_MESSAGE, type_name=".shop.Money", label=F.LABEL_OPTIONAL)
    o.field.add(name="at", number=3, type=F.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp", label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    timestamp = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(timestamp)
    for fd in (timestamp, money, order):
        pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_serializer_registers_imports_and_records_round_trip(broker, registry, topic_name):
    order_cls = order_class()
    client = SchemaRegistryClient({"url": registry.url})
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    serializer = ProtobufSerializer(order_cls, client, {"use.deprecated.format": False})
    sent = []
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(3):
        msg = order_cls(id=i)
        msg.total.currency, msg.total.units = "EUR", 100 + i
        msg.at.seconds = 1_700_000_000 + i
        sent.append(msg)
        producer.produce(topic_name, value=serializer(msg, ctx))
    assert producer.flush(30) == 0
    # The user import is a subject of its own (named after the file); the well-known one is not.
    assert sorted(client.get_subjects()) == sorted(["shop/money.proto", f"{topic_name}-value"])
    latest = client.get_latest_version(f"{topic_name}-value")
    assert [(r.name, r.subject, r.version) for r in latest.schema.references] == [
        ("shop/money.proto", "shop/money.proto", 1)
    ]
    money_id = client.get_latest_version("shop/money.proto").schema_id
    assert registry.ok("GET", "/subjects/shop%2Fmoney.proto/versions/1/referencedby") == [latest.schema_id]
    assert money_id != latest.schema_id
    # A fresh client resolves the references to decode.
    deserializer = ProtobufDeserializer(
        order_cls, {"use.deprecated.format": False}, schema_registry_client=SchemaRegistryClient({"url": registry.url})
    )
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"g-{topic_name}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic_name])
    got = []
    try:
        while len(got) < 3:
            m = consumer.poll(30)
            assert m is not None and m.error() is None, m and m.error()
            got.append(deserializer(m.value(), ctx))
    finally:
        consumer.close()
    assert got == sent
    # The import cannot go while the order schema uses it (Confluent's 42206).
    with_refs = registry.error("DELETE", "/subjects/shop%2Fmoney.proto")
    assert with_refs == (422, 42206)
    assert registry.error("DELETE", "/subjects/shop%2Fmoney.proto/versions/1") == (422, 42206)
    assert client.get_versions("shop/money.proto") == [1]


MONEY = 'syntax = "proto3"; package shop; message Money { string currency = 1; int64 units = 2; }'
ORDER = """syntax = "proto3";
package shop;
import "shop/money.proto";
import "google/protobuf/timestamp.proto";
message Order { int64 id = 1; Money total = 2; google.protobuf.Timestamp at = 3; }
"""


def test_proto_text_imports_need_references_and_resolve_through_them(registry):
    client = SchemaRegistryClient({"url": registry.url})
    client.register_schema("money", Schema(MONEY, "PROTOBUF"))
    # An import that no reference names: refused, nothing stored.
    with_no_refs = registry.error("POST", "/subjects/order/versions", {"schema": ORDER, "schemaType": "PROTOBUF"})
    assert with_no_refs == (422, 42201)
    ref = [{"name": "shop/money.proto", "subject": "money", "version": 1}]
    misnamed = [{"name": "money.proto", "subject": "money", "version": 1}]
    body = {"schema": ORDER, "schemaType": "PROTOBUF"}
    assert registry.error("POST", "/subjects/order/versions", {**body, "references": misnamed}) == (422, 42201)
    assert registry.ok("GET", "/subjects") == ["money"]
    first = registry.ok("POST", "/subjects/order/versions", {**body, "references": ref})["id"]
    # Money resolves to shop.Money through the reference: spelling it fully is the same type
    # (compatible), a different message is not.
    same = ORDER.replace("Money total", "shop.Money total")
    refs = [SchemaReference("shop/money.proto", "money", 1)]
    assert client.test_compatibility("order", Schema(same, "PROTOBUF", refs)) is True
    other = ORDER.replace("Money total", "google.protobuf.Timestamp total")
    assert client.test_compatibility("order", Schema(other, "PROTOBUF", refs)) is False
    assert registry.ok("GET", "/subjects/money/versions/1/referencedby") == [first]
    try:
        client.delete_subject("money")
        raise AssertionError("a referenced subject was deleted")
    except SchemaRegistryError as exc:
        assert exc.error_code == 42206


def test_proto_text_is_served_as_a_descriptor_that_confluent_clients_decode_with(broker, registry, topic_name):
    """Registered as .proto text (as `odradek schemas register` does), read back by
    confluent-kafka with ?format=serialized: a base64 FileDescriptorProto, references too."""
    client = SchemaRegistryClient({"url": registry.url})
    subject = f"{topic_name}-value"
    client.register_schema("money", Schema(MONEY, "PROTOBUF"))
    refs = [SchemaReference("shop/money.proto", "money", 1)]
    schema_id = client.register_schema(subject, Schema(ORDER, "PROTOBUF", refs))
    assert registry.ok("GET", f"/schemas/ids/{schema_id}")["schema"] == ORDER.strip()  # as stored
    order_cls = order_class()
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    serializer = ProtobufSerializer(
        order_cls, client, {"use.deprecated.format": False, "auto.register.schemas": False, "use.latest.version": True}
    )
    msg = order_cls(id=9)
    msg.total.currency, msg.total.units = "SEK", 12
    msg.at.seconds = 1_700_000_123
    framed = serializer(msg, ctx)
    assert int.from_bytes(framed[1:5], "big") == schema_id
    fresh = SchemaRegistryClient({"url": registry.url})
    deserializer = ProtobufDeserializer(order_cls, {"use.deprecated.format": False}, schema_registry_client=fresh)
    assert deserializer(framed, ctx) == msg
    served = registry.ok("GET", f"/subjects/{subject}/versions/1?format=serialized")["schema"]
    descriptor = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(served))
    assert list(descriptor.dependency) == ["shop/money.proto", "google/protobuf/timestamp.proto"]
    assert [(f.name, f.type_name) for f in descriptor.message_type[0].field] == [
        ("id", ""), ("total", ".shop.Money"), ("at", ".google.protobuf.Timestamp")
    ]
