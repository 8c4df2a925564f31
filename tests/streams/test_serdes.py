"""Serdes write Kafka's byte formats (checked against the layouts Kafka's serializers document),
map None to None both ways, and their Spark expressions agree with them byte for byte."""

from __future__ import annotations

import math
import uuid

import pytest

from odradek.client.client_errors import SerializationError
from odradek.streams.serdes import Serde, Serdes

T = "topic"


@pytest.mark.parametrize(
    "serde, value, data",
    [
        (Serdes.String(), "héllo", "héllo".encode()),
        (Serdes.String(), "", b""),
        (Serdes.Long(), 1, b"\0\0\0\0\0\0\0\x01"),
        (Serdes.Long(), -1, b"\xff" * 8),
        (Serdes.Long(), 2**63 - 1, b"\x7f" + b"\xff" * 7),
        (Serdes.Long(), -(2**63), b"\x80" + b"\0" * 7),
        (Serdes.Integer(), 258, b"\0\0\x01\x02"),
        (Serdes.Integer(), -2, b"\xff\xff\xff\xfe"),
        (Serdes.Short(), -32768, b"\x80\x00"),
        (Serdes.Double(), 1.5, b"\x3f\xf8" + b"\0" * 6),
        (Serdes.Float(), -2.0, b"\xc0\0\0\0"),
        (Serdes.ByteArray(), b"\x00\xff", b"\x00\xff"),
        (Serdes.Bytes(), b"", b""),
        (Serdes.JSON(), {"a": [1, "é"]}, '{"a":[1,"é"]}'.encode()),
        (Serdes.UUID(), uuid.UUID(int=1), b"00000000-0000-0000-0000-000000000001"),
    ],
)
def test_bytes_are_kafkas_and_read_back(serde: Serde, value, data):
    assert serde.serialize(T, value) == data
    assert serde.deserialize(T, data) == value


@pytest.mark.parametrize("name", ["String", "Long", "Integer", "Short", "Double", "Float",
                                  "ByteArray", "Bytes", "Void", "UUID", "JSON"])  # fmt: skip
def test_none_is_null_both_ways(name):
    serde = getattr(Serdes, name)()
    assert serde.serialize(T, None) is None
    assert serde.deserialize(T, None) is None


def test_bad_input_raises_serialization_errors_that_say_why():
    with pytest.raises(SerializationError, match="is not 8"):
        Serdes.Long().deserialize(T, b"\0\0\0\x01")
    with pytest.raises(SerializationError, match="is not 4"):
        Serdes.Integer().deserialize(T, b"\0")
    with pytest.raises(SerializationError, match="cannot write"):
        Serdes.Integer().serialize(T, 2**31)
    with pytest.raises(SerializationError, match="expects an int"):
        Serdes.Long().serialize(T, "1")
    with pytest.raises(SerializationError, match="expects a str"):
        Serdes.String().serialize(T, 1)
    with pytest.raises(SerializationError, match="should be null"):
        Serdes.Void().deserialize(T, b"x")
    with pytest.raises(SerializationError, match="not JSON"):
        Serdes.JSON().deserialize(T, b"{")
    assert Serdes.String().deserialize(T, b"\xff") == "\ufffd"  # as Java's new String(bytes, UTF_8)
    assert math.isnan(Serdes.Double().deserialize(T, Serdes.Double().serialize(T, math.nan)))


@pytest.mark.parametrize(
    "name, expected",
    [
        ("org.apache.kafka.common.serialization.Serdes$StringSerde", "String"),
        ("org.apache.kafka.common.serialization.Serdes$LongSerde", "Long"),
        ("org.apache.kafka.common.serialization.Serdes.IntegerSerde", "Integer"),
        ("org.apache.kafka.common.serialization.Serdes$ByteArraySerde", "ByteArray"),
        ("org.apache.kafka.common.serialization.Serdes$VoidSerde", "Void"),
        ("org.apache.kafka.common.serialization.Serdes$DoubleSerde", "Double"),
        ("odradek.streams.serdes.JsonSerde", "JSON"),
        ("long", "Long"),
        ("String", "String"),
    ],
)
def test_from_class_name_reads_kafkas_names(name, expected):
    serde = Serdes.from_class_name(name)
    assert serde == getattr(Serdes, expected)()
    assert Serdes.from_class_name(serde.kafka_class_name) == serde
    assert Serdes.from_class_name(serde) is serde


def test_from_class_name_knows_the_registry_serdes_and_refuses_unknown_names():
    avro = Serdes.from_class_name("io.confluent.kafka.streams.serdes.avro.GenericAvroSerde")
    assert type(avro).__name__ == "AvroSerde"
    with pytest.raises(ValueError, match="unknown serde 'org.example.Nope'.*long"):
        Serdes.from_class_name("org.example.Nope")


SPARK_CASES = [
    ("Long", [0, 1, -1, 255, 256, 2**63 - 1, -(2**63), -123456789012, None], "long"),
    ("Integer", [0, 1, -1, 2**31 - 1, -(2**31), 65536, None], "int"),
    ("Short", [0, -1, 32767, -32768, 300, None], "short"),
    ("String", ["", "abc", "日本語", None], "string"),
    ("ByteArray", [b"", b"\x00\xff", None], "binary"),
]


@pytest.mark.parametrize("name, values, sql_type", SPARK_CASES)
def test_spark_expressions_agree_with_python_byte_for_byte(spark, name, values, sql_type):
    from pyspark.sql import functions as F

    serde = getattr(Serdes, name)()
    rows = [(serde.serialize(T, v), v) for v in values]
    df = spark.createDataFrame(rows, f"data binary, value {sql_type}")
    out = df.select(
        serde.spark_decode(F.col("data")).alias("decoded"),
        serde.spark_encode(F.col("value")).alias("encoded"),
    ).collect()
    assert [r.decoded for r in out] == [serde.deserialize(T, d) for d, _ in rows]
    assert [None if r.encoded is None else bytes(r.encoded) for r in out] == [d for d, _ in rows]


def test_spark_decode_fails_the_query_on_bytes_of_the_wrong_size(spark):
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(b"\x01\x02\x03",)], "data binary")
    with pytest.raises(Exception, match="is not 8"):
        df.select(Serdes.Long().spark_decode(F.col("data"))).collect()


def test_void_in_spark_is_null_and_unknown_formats_are_not_native(spark):
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(None,)], "data binary")
    assert df.select(Serdes.Void().spark_decode(F.col("data")).alias("v")).first().v is None
    assert df.select(Serdes.Void().spark_encode(F.col("data")).alias("v")).first().v is None
    assert Serdes.JSON().spark_decode(F.col("data")) is None
    assert Serdes.Double().spark_encode(F.col("data")) is None
