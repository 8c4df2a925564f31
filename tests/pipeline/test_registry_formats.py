"""Typed Avro columns through the schema registry: records confluent-kafka's AvroSerializer wrote
read into typed columns (older versions through schema resolution), DataFrames the sink wrote
read back by confluent-kafka's AvroDeserializer, and bad input refused with the stated errors."""

from __future__ import annotations

import datetime
import decimal
import json

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient, record_subject_name_strategy
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pipeline_kafka import create_topic, produce, read_topic, registry_read, registry_write

UTC = datetime.UTC
ORDER_V1 = {
    "type": "record", "name": "Order", "namespace": "com.example",
    "fields": [
        {"name": "id", "type": "int"},
        {"name": "customer", "type": "string"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "counts", "type": {"type": "map", "values": "long"}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "total", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "ship", "type": {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]}},
        {"name": "either", "type": ["int", "string"]},
    ],
}  # fmt: skip
# v2: id promoted to long, a new field with a default (BACKWARD compatible).
ORDER_V2 = {
    **ORDER_V1,
    "fields": [
        {"name": "id", "type": "long"},
        *ORDER_V1["fields"][1:],
        {"name": "channel", "type": "string", "default": "web"},
    ],
}
V1_TYPE = (
    "struct<id:int,customer:string,tags:array<string>,counts:map<string,bigint>,status:string,"
    "total:decimal(9,2),day:date,at:timestamp,at_us:timestamp,note:string,ship:struct<city:string>,"
    "either:struct<member0:int,member1:string>>"
)
V2_TYPE = V1_TYPE.replace("struct<id:int", "struct<id:bigint")[:-1] + ",channel:string>"


def _order(i: int) -> dict:
    return {
        "id": i,
        "customer": f"c{i}",
        "tags": ["a", f"t{i}"],
        "counts": {"x": i, "y": 2 * i},
        "status": "PAID" if i % 2 else "NEW",
        "total": decimal.Decimal(f"{i}.25"),
        "day": datetime.date(2024, 1, 1 + i),
        "at": datetime.datetime(2024, 1, 1, 12, 0, i, 123000, tzinfo=UTC),
        "at_us": datetime.datetime(2024, 1, 1, 12, 0, i, 123456, tzinfo=UTC),
        "note": None if i % 2 else f"n{i}",
        "ship": {"city": f"city{i}"},
        "either": i if i % 2 else f"s{i}",
    }


def _serialize(client, broker, schema: dict, topic: str, values: list[dict]) -> None:
    serializer = AvroSerializer(client, json.dumps(schema))
    ctx = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for value in values:
        producer.produce(topic, value=serializer(value, ctx))
    assert producer.flush(30) == 0


@pytest.fixture
def sr(registry_broker):
    return SchemaRegistryClient({"url": registry_broker.registry_url})


def _spark_row(order: dict, *, v2: bool) -> dict:
    """What the value column holds for an order: Spark's Python values."""
    either = order["either"]
    expected = {
        **order,
        "either": {"member0": either, "member1": None} if isinstance(either, int) else {"member0": None, "member1": either},
        "at": order["at"].replace(tzinfo=None),  # the session is in UTC; Spark hands back naive datetimes
        "at_us": order["at_us"].replace(tzinfo=None),
    }
    if v2:
        expected["channel"] = order.get("channel", "web")
    return expected


def test_avro_records_read_into_typed_columns_older_versions_through_resolution(spark, registry_broker, sr, topic_name):
    create_topic(registry_broker.bootstrap_servers, topic_name)
    old = [_order(i) for i in range(3)]
    new = [{**_order(i), "channel": "app"} for i in range(3, 5)]
    _serialize(sr, registry_broker, ORDER_V1, topic_name, old)
    _serialize(sr, registry_broker, ORDER_V2, topic_name, new)
    subject = f"{topic_name}-value"
    assert sr.get_versions(subject) == [1, 2]

    latest = registry_read(spark, registry_broker, topic_name, valueFormat="avro")
    assert latest.schema["value"].dataType.simpleString() == V2_TYPE
    assert latest.schema["key"].dataType.simpleString() == "binary"
    rows = latest.orderBy("offset").select("offset", "value").collect()
    assert [r.offset for r in rows] == list(range(5))
    got = [r.value.asDict(recursive=True) for r in rows]
    assert got == [_spark_row(o, v2=True) for o in old + new]  # v1 records: id widened, channel defaulted

    # Version 1 as the reader: its own records read; v2's long ids do not fit an int (Avro's rules).
    first = registry_read(spark, registry_broker, topic_name, valueFormat="avro", mode="PERMISSIVE", **{"schema.version": "1"})
    assert first.schema["value"].dataType.simpleString() == V1_TYPE
    rows = first.orderBy("offset").collect()
    assert [r.value.asDict(recursive=True) if r.value else None for r in rows] == [
        *[_spark_row(o, v2=False) for o in old], None, None
    ]
    assert "Schema mismatch: long is not int" in rows[3]._corrupt_record


def test_record_name_strategy_and_a_typed_key(spark, registry_broker, sr, topic_name):
    create_topic(registry_broker.bootstrap_servers, topic_name)
    key_serializer = AvroSerializer(sr, json.dumps("string"))
    value_serializer = AvroSerializer(sr, json.dumps(ORDER_V1), conf={"subject.name.strategy": record_subject_name_strategy})
    producer = Producer({"bootstrap.servers": registry_broker.bootstrap_servers})
    for i in range(3):
        producer.produce(
            topic_name,
            key=key_serializer(f"k{i}", SerializationContext(topic_name, MessageField.KEY)),
            value=value_serializer(_order(i), SerializationContext(topic_name, MessageField.VALUE)),
        )
    assert producer.flush(30) == 0
    df = registry_read(
        spark, registry_broker, topic_name, valueFormat="avro", keyFormat="avro",
        **{"value.subject.name.strategy": "io.confluent.kafka.serializers.subject.RecordNameStrategy",
           "value.record.name": "com.example.Order"},
    )  # fmt: skip
    assert df.schema["key"].dataType.simpleString() == "string"
    rows = df.orderBy("offset").select("key", "value.customer").collect()
    assert [(r.key, r.customer) for r in rows] == [(f"k{i}", f"c{i}") for i in range(3)]


def test_the_sink_writes_what_confluents_avro_deserializer_reads(spark, registry_broker, sr, topic_name):
    create_topic(registry_broker.bootstrap_servers, topic_name)
    df = spark.createDataFrame(
        [("k1", 1, "ann", ["x"], {"a": 1}, decimal.Decimal("1.50"), datetime.date(2024, 2, 3), None),
         ("k2", 2, "bob", [], {}, decimal.Decimal("2.00"), datetime.date(2024, 2, 4), "vip")],
        "key string, id int, name string, tags array<string>, counts map<string,bigint>, "
        "total decimal(9,2), day date, note string",
    )  # fmt: skip
    registry_write(
        df, registry_broker, topic_name, valueFormat="avro", keyFormat="avro",
        **{"value.record.name": "com.example.Customer"},
    )  # fmt: skip
    registered = json.loads(sr.get_latest_version(f"{topic_name}-value").schema.schema_str)
    assert (registered["name"], registered["namespace"]) == ("Customer", "com.example")
    assert json.loads(sr.get_latest_version(f"{topic_name}-key").schema.schema_str) == "string"
    records = read_topic(registry_broker.bootstrap_servers, topic_name)
    values = AvroDeserializer(SchemaRegistryClient({"url": registry_broker.registry_url}))
    keys = AvroDeserializer(SchemaRegistryClient({"url": registry_broker.registry_url}))
    got = sorted(
        (keys(r.key, SerializationContext(topic_name, MessageField.KEY)),
         values(r.value, SerializationContext(topic_name, MessageField.VALUE)))
        for r in records
    )  # fmt: skip
    assert got == [
        ("k1", {"id": 1, "name": "ann", "tags": ["x"], "counts": {"a": 1}, "total": decimal.Decimal("1.50"),
                "day": datetime.date(2024, 2, 3), "note": None}),
        ("k2", {"id": 2, "name": "bob", "tags": [], "counts": {}, "total": decimal.Decimal("2.00"),
                "day": datetime.date(2024, 2, 4), "note": "vip"}),
    ]  # fmt: skip
    # A struct value column writes the same way, and our own source reads it back.
    struct_df = spark.createDataFrame(
        [(3, "cy", [], {}, decimal.Decimal("0.10"), datetime.date(2024, 2, 5), None)], df.drop("key").schema
    ).selectExpr("struct(*) as value")
    registry_write(struct_df, registry_broker, topic_name, valueFormat="avro", **{"value.record.name": "com.example.Customer"})
    back = registry_read(spark, registry_broker, topic_name, valueFormat="avro").orderBy("offset").select("value.name")
    assert [r.name for r in back.collect()][-1] == "cy"
    assert sr.get_versions(f"{topic_name}-value") == [1]  # the same schema: no new version


def _spark_error(call) -> str:
    with pytest.raises(Exception) as info:  # noqa: PT011 - Spark wraps the Python error in its own classes
        call()
    return str(info.value)


def test_bad_input_fails_fast_or_reads_as_null_or_is_dropped(spark, registry_broker, sr, topic_name):
    create_topic(registry_broker.bootstrap_servers, topic_name)
    _serialize(sr, registry_broker, ORDER_V1, topic_name, [_order(0)])
    unknown_id = b"\x00" + (999_999).to_bytes(4, "big") + b"\x02"
    produce(registry_broker.bootstrap_servers, topic_name, [{"value": b"plain text"}, {"value": unknown_id}])
    _serialize(sr, registry_broker, ORDER_V1, topic_name, [_order(3)])

    message = _spark_error(lambda: registry_read(spark, registry_broker, topic_name, valueFormat="avro").collect())
    assert f"{topic_name}-0 offset 1: the value cannot be read as avro" in message
    assert "not a schema-registry framed value" in message and "mode=PERMISSIVE" in message

    permissive = registry_read(spark, registry_broker, topic_name, valueFormat="avro", mode="PERMISSIVE")
    rows = permissive.orderBy("offset").select("offset", "value.customer", "_corrupt_record").collect()
    assert [(r.offset, r.customer) for r in rows] == [(0, "c0"), (1, None), (2, None), (3, "c3")]
    assert rows[0]._corrupt_record is None and rows[3]._corrupt_record is None
    assert "not a schema-registry framed value" in rows[1]._corrupt_record
    assert "schema id 999999 is not in the registry" in rows[2]._corrupt_record

    dropped = registry_read(spark, registry_broker, topic_name, valueFormat="avro", mode="DROPMALFORMED")
    assert [r.offset for r in dropped.orderBy("offset").collect()] == [0, 3]


def test_an_incompatible_dataframe_is_refused_and_options_are_checked(spark, registry_broker, sr, topic_name):
    create_topic(registry_broker.bootstrap_servers, topic_name)
    _serialize(sr, registry_broker, ORDER_V1, topic_name, [_order(0)])
    df = spark.createDataFrame([("x",)], "id string")  # id was an int: BACKWARD refuses it

    def write(**options):
        registry_write(df, registry_broker, topic_name, valueFormat="avro", **{"value.record.name": "com.example.Order"}, **options)

    message = _spark_error(write)
    assert f"refused the DataFrame's value schema under subject '{topic_name}-value' (409" in message
    assert sr.get_versions(f"{topic_name}-value") == [1]
    # Without registration the DataFrame is written with the registered version, if it fits.
    assert "does not fit schema id" in _spark_error(lambda: write(**{"auto.register.schemas": "false"}))
    assert len(read_topic(registry_broker.bootstrap_servers, topic_name)) == 1

    assert "must be one of avro, json, protobuf" in _spark_error(
        lambda: registry_read(spark, registry_broker, topic_name, valueFormat="xml").schema
    )
    assert "has no version 7 of subject" in _spark_error(
        lambda: registry_read(spark, registry_broker, topic_name, valueFormat="avro", **{"schema.version": "7"}).schema
    )


def test_the_docs_pipeline_avro_orders_in_json_totals_out(spark, registry_broker, sr, topic_name):
    """docs/schema-registry.md's Spark example: Avro orders in, totals per customer out as
    JSON Schema records that confluent-kafka's JSONDeserializer reads."""
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from pyspark.sql import functions as F  # noqa: N812 - Spark's own spelling

    out = f"{topic_name}-totals"
    create_topic(registry_broker.bootstrap_servers, topic_name)
    create_topic(registry_broker.bootstrap_servers, out)
    orders = [_order(i) for i in range(4)]
    for order, customer in zip(orders, ["ann", "bob", "ann", "ann"], strict=True):
        order["customer"] = customer
    _serialize(sr, registry_broker, ORDER_V1, topic_name, orders)

    source = registry_read(spark, registry_broker, topic_name, valueFormat="avro")
    totals = source.groupBy("value.customer").agg(F.sum("value.total").alias("total"))
    registry_write(
        totals.selectExpr("customer AS key", "customer", "total"), registry_broker, out,
        valueFormat="json", **{"value.record.name": "CustomerTotal"},
    )  # fmt: skip
    deserializer = JSONDeserializer(None, schema_registry_client=sr)
    ctx = SerializationContext(out, MessageField.VALUE)
    got = {r.key: deserializer(r.value, ctx) for r in read_topic(registry_broker.bootstrap_servers, out)}
    assert got == {b"ann": {"customer": "ann", "total": 5.75}, b"bob": {"customer": "bob", "total": 1.25}}
    assert json.loads(sr.get_latest_version(f"{out}-value").schema.schema_str)["title"] == "CustomerTotal"
