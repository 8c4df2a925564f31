"""Typed JSON Schema and Protobuf columns through the schema registry: records confluent-kafka's
JSONSerializer and ProtobufSerializer wrote read into typed columns (older versions too), and
DataFrames the sink wrote read back by its JSONDeserializer and ProtobufDeserializer."""

from __future__ import annotations

import base64
import datetime
import json

import pytest
import requests
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from pipeline_kafka import create_topic, read_topic, registry_read, registry_write

PERSON_V1 = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Person",
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "score": {"type": "number"},
        "born": {"type": "string", "format": "date"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "address": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
    "required": ["name"],
    "additionalProperties": False,
}
PERSON_V2 = {**PERSON_V1, "properties": {**PERSON_V1["properties"], "email": {"type": ["string", "null"]}}}

F = descriptor_pb2.FieldDescriptorProto


def _item_file(with_note: bool) -> descriptor_pb2.FileDescriptorProto:
    """shop.Item as protoc would describe it; version 2 adds ``note = 7``."""
    fd = descriptor_pb2.FileDescriptorProto(name="item.proto", package="shop", syntax="proto3")
    fd.enum_type.add(name="Color").value.extend([
        descriptor_pb2.EnumValueDescriptorProto(name="RED", number=0),
        descriptor_pb2.EnumValueDescriptorProto(name="GREEN", number=1),
    ])  # fmt: skip
    item = fd.message_type.add(name="Item")
    dim = item.nested_type.add(name="Dim")
    dim.field.add(name="w", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    entry = item.nested_type.add(name="StockEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    item.field.add(name="name", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    item.field.add(name="qty", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    item.field.add(name="tags", number=3, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    item.field.add(name="stock", number=4, type=F.TYPE_MESSAGE, type_name=".shop.Item.StockEntry", label=F.LABEL_REPEATED)
    item.field.add(name="color", number=5, type=F.TYPE_ENUM, type_name=".shop.Color", label=F.LABEL_OPTIONAL)
    item.field.add(name="dim", number=6, type=F.TYPE_MESSAGE, type_name=".shop.Item.Dim", label=F.LABEL_OPTIONAL)
    if with_note:
        item.field.add(name="note", number=7, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    return fd


def _message_class(fd: descriptor_pb2.FileDescriptorProto, name: str):
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


@pytest.fixture
def sr(registry_broker):
    return SchemaRegistryClient({"url": registry_broker.registry_url})


def _produce(broker, topic: str, serializer, values: list) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    ctx = SerializationContext(topic, MessageField.VALUE)
    for value in values:
        producer.produce(topic, value=serializer(value, ctx))
    assert producer.flush(30) == 0


def test_json_schema_records_read_into_typed_columns(spark, registry_broker, sr, topic_name):
    create_topic(registry_broker.bootstrap_servers, topic_name)
    people = [
        {"name": "ann", "age": 31, "score": 1.5, "born": "1993-04-05", "tags": ["a"], "address": {"city": "Oslo"}},
        {"name": "bob"},
    ]
    _produce(registry_broker, topic_name, JSONSerializer(json.dumps(PERSON_V1), sr), people)
    _produce(registry_broker, topic_name, JSONSerializer(json.dumps(PERSON_V2), sr), [{"name": "cy", "email": "c@x"}])
    assert sr.get_versions(f"{topic_name}-value") == [1, 2]
    df = registry_read(spark, registry_broker, topic_name, valueFormat="json")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<name:string,age:bigint,score:double,born:date,tags:array<string>,address:struct<city:string>,"
        "email:string>"
    )
    got = [r.value.asDict(recursive=True) for r in df.orderBy("offset").collect()]
    assert got == [
        {"name": "ann", "age": 31, "score": 1.5, "born": datetime.date(1993, 4, 5), "tags": ["a"],
         "address": {"city": "Oslo"}, "email": None},
        {"name": "bob", "age": None, "score": None, "born": None, "tags": None, "address": None, "email": None},
        {"name": "cy", "age": None, "score": None, "born": None, "tags": None, "address": None, "email": "c@x"},
    ]  # fmt: skip


def test_the_json_sink_writes_what_confluents_json_deserializer_reads(spark, registry_broker, sr, topic_name):
    create_topic(registry_broker.bootstrap_servers, topic_name)
    df = spark.createDataFrame(
        [("ann", 31, ["a", "b"], datetime.date(2024, 1, 2)), ("bob", None, [], None)],
        "name string not null, age int, tags array<string>, day date",
    )
    registry_write(df, registry_broker, topic_name, valueFormat="json", **{"value.record.name": "Person"})
    registered = json.loads(sr.get_latest_version(f"{topic_name}-value").schema.schema_str)
    assert registered["required"] == ["name"] and registered["properties"]["day"]["format"] == "date"
    deserializer = JSONDeserializer(None, schema_registry_client=SchemaRegistryClient({"url": registry_broker.registry_url}))
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    got = sorted((deserializer(r.value, ctx) for r in read_topic(registry_broker.bootstrap_servers, topic_name)),
                 key=lambda v: v["name"])  # fmt: skip
    assert got == [
        {"name": "ann", "age": 31, "tags": ["a", "b"], "day": "2024-01-02"},
        {"name": "bob", "age": None, "tags": [], "day": None},
    ]
    back = registry_read(spark, registry_broker, topic_name, valueFormat="json").select("value.*").orderBy("name").collect()
    assert [(r.name, r.day) for r in back] == [("ann", datetime.date(2024, 1, 2)), ("bob", None)]


def test_protobuf_records_read_into_typed_columns_by_field_number(spark, registry_broker, sr, topic_name):
    create_topic(registry_broker.bootstrap_servers, topic_name)
    v1, v2 = _message_class(_item_file(False), "shop.Item"), _message_class(_item_file(True), "shop.Item")
    old = v1(name="cup", qty=2, tags=["kitchen"], stock={"oslo": 5}, color=1, dim=v1.Dim(w=1.5))
    _produce(registry_broker, topic_name, ProtobufSerializer(v1, sr), [old, v1(name="plain")])
    _produce(registry_broker, topic_name, ProtobufSerializer(v2, sr), [v2(name="pen", note="blue ink")])
    assert sr.get_versions(f"{topic_name}-value") == [1, 2]
    df = registry_read(spark, registry_broker, topic_name, valueFormat="protobuf")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<name:string,qty:int,tags:array<string>,stock:map<string,bigint>,color:string,dim:struct<w:double>,"
        "note:string>"
    )
    got = [r.value.asDict(recursive=True) for r in df.orderBy("offset").collect()]
    assert got == [
        {"name": "cup", "qty": 2, "tags": ["kitchen"], "stock": {"oslo": 5}, "color": "GREEN", "dim": {"w": 1.5},
         "note": ""},
        {"name": "plain", "qty": 0, "tags": [], "stock": {}, "color": "RED", "dim": None, "note": ""},
        {"name": "pen", "qty": 0, "tags": [], "stock": {}, "color": "RED", "dim": None, "note": "blue ink"},
    ]  # fmt: skip
    # Version 1 as the reader: the v2 record's field 7 is unknown to it and left out.
    first = registry_read(spark, registry_broker, topic_name, valueFormat="protobuf", **{"schema.version": "1"})
    assert [r.value.name for r in first.orderBy("offset").collect()] == ["cup", "plain", "pen"]
    assert "note" not in first.schema["value"].dataType.fieldNames()


def test_the_protobuf_sink_writes_what_confluents_protobuf_deserializer_reads(spark, registry_broker, sr, topic_name):
    create_topic(registry_broker.bootstrap_servers, topic_name)
    df = spark.createDataFrame(
        [("cup", 2, ["a"], {"oslo": 5}, (1.5,)), ("pen", 1, [], {}, None)],
        "name string, qty int, tags array<string>, stock map<string,bigint>, dim struct<w:double>",
    )
    registry_write(df, registry_broker, topic_name, valueFormat="protobuf", **{"value.record.name": "shop.Item"})
    schema = sr.get_latest_version(f"{topic_name}-value").schema
    assert schema.schema_type == "PROTOBUF"
    fd = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema.schema_str))
    cls = _message_class(fd, "shop.Item")
    deserializer = ProtobufDeserializer(cls, {"use.deprecated.format": False})
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    got = sorted((deserializer(r.value, ctx) for r in read_topic(registry_broker.bootstrap_servers, topic_name)),
                 key=lambda m: m.name)  # fmt: skip
    assert [(m.name, m.qty, list(m.tags), dict(m.stock), m.HasField("dim") and m.dim.w) for m in got] == [
        ("cup", 2, ["a"], {"oslo": 5}, 1.5),
        ("pen", 1, [], {}, False),
    ]
    back = registry_read(spark, registry_broker, topic_name, valueFormat="protobuf").select("value.*").orderBy("name")
    assert [(r.name, r.dim) for r in back.collect()] == [("cup", (1.5,)), ("pen", None)]


def test_a_proto_text_schema_becomes_the_dataframe_schema(spark, registry_broker, topic_name):
    proto = """
        syntax = "proto3";
        package shop;
        enum Size { S = 0; L = 1; }
        message Order {
          message Line { string sku = 1; int64 count = 2; }
          string id = 1;
          repeated Line lines = 2;
          map<string, string> labels = 3;
          Size size = 4;
          oneof paid { bool card = 5; bool cash = 6; }
        }
    """
    resp = requests.post(
        f"{registry_broker.registry_url}/subjects/{topic_name}-value/versions",
        json={"schema": proto, "schemaType": "PROTOBUF"},
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        timeout=30,
    )
    assert resp.status_code == 200, resp.text
    create_topic(registry_broker.bootstrap_servers, topic_name)
    df = registry_read(spark, registry_broker, topic_name, valueFormat="protobuf")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:string,lines:array<struct<sku:string,count:bigint>>,labels:map<string,string>,size:string,"
        "card:boolean,cash:boolean>"
    )
    assert df.count() == 0
