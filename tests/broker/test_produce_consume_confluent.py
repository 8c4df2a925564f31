"""confluent-kafka (librdkafka) producing to and consuming from the broker: partitions, keys,
headers, timestamps and compression, each checked record by record."""

from __future__ import annotations

import time

import pytest
from broker_e2e import (
    CODEC_IDS,
    consume,
    create_topic,
    java_partition,
    produce_and_flush,
    producer,
    stored_batch_codecs,
)
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME

CODECS = ["gzip", "snappy", "lz4", "zstd"]


def test_many_partitions_keep_per_partition_order(broker, topic_name):
    partitions, per_partition = 12, 150
    create_topic(broker, topic_name, partitions)
    prod = producer(broker)
    items = [
        {"partition": p, "key": f"k{p}-{i}".encode(), "value": f"v{p}-{i}".encode()}
        for i in range(per_partition)
        for p in range(partitions)
    ]
    deliveries = produce_and_flush(prod, topic_name, items)
    assert len(deliveries.acked) == partitions * per_partition

    got = consume(broker, topic_name, range(partitions))
    for p in range(partitions):
        assert [r.offset for r in got[p]] == list(range(per_partition))
        assert [r.value for r in got[p]] == [f"v{p}-{i}".encode() for i in range(per_partition)]
        assert [r.key for r in got[p]] == [f"k{p}-{i}".encode() for i in range(per_partition)]


@pytest.mark.parametrize("partitioner", ["murmur2_random", "murmur2"])
def test_same_key_lands_on_javas_murmur2_partition(broker, topic_name, partitioner):
    partitions = 7
    create_topic(broker, topic_name, partitions)
    keys = [f"user-{i}".encode() for i in range(60)]
    prod = producer(broker, partitioner=partitioner)
    items = [{"key": k, "value": k + b"-" + str(n).encode()} for n in range(3) for k in keys]
    deliveries = produce_and_flush(prod, topic_name, items)

    for report in deliveries.acked:
        assert report.partition == java_partition(report.key, partitions), report.key
    got = consume(broker, topic_name, range(partitions))
    for p, records in got.items():
        for r in records:
            assert java_partition(r.key, partitions) == p
    assert sum(len(r) for r in got.values()) == len(items)
    # The same key always went to one partition, in production order.
    for k in keys:
        p = java_partition(k, partitions)
        assert [r.value for r in got[p] if r.key == k] == [k + b"-" + str(n).encode() for n in range(3)]


def test_headers_round_trip(broker, topic_name):
    headers = [
        ("trace-id", b"abc123"),
        ("empty", b""),
        ("null", None),
        ("dup", b"1"),
        ("dup", b"2"),
        ("utf8-\u00e9", "caf\u00e9".encode()),
        ("binary", bytes(range(256))),
    ]
    prod = producer(broker)
    produce_and_flush(prod, topic_name, [{"value": b"with headers", "headers": headers, "partition": 0}])
    produce_and_flush(prod, topic_name, [{"value": b"no headers", "partition": 0}])

    got = consume(broker, topic_name, [0])[0]
    assert [r.value for r in got] == [b"with headers", b"no headers"]
    assert got[0].headers == headers
    assert got[1].headers is None


def test_null_key_null_value_and_empty_value(broker, topic_name):
    prod = producer(broker)
    items = [
        {"key": None, "value": None, "partition": 0},
        {"key": b"", "value": b"", "partition": 0},
        {"key": b"k", "value": None, "partition": 0},
    ]
    produce_and_flush(prod, topic_name, items)
    got = consume(broker, topic_name, [0])[0]
    assert [(r.key, r.value) for r in got] == [(None, None), (b"", b""), (b"k", None)]


def test_create_time_timestamps_are_kept(broker, topic_name):
    base = 1_600_000_000_000
    prod = producer(broker)
    items = [{"value": str(i).encode(), "timestamp": base + i * 1000, "partition": 0} for i in range(20)]
    produce_and_flush(prod, topic_name, items)

    got = consume(broker, topic_name, [0])[0]
    assert [(r.timestamp_type, r.timestamp) for r in got] == [
        (TIMESTAMP_CREATE_TIME, base + i * 1000) for i in range(20)
    ]


def test_log_append_time_topic_gets_broker_timestamps(broker, topic_name):
    create_topic(broker, topic_name, 1, {"message.timestamp.type": "LogAppendTime"})
    prod = producer(broker)
    before = int(time.time() * 1000)
    deliveries = produce_and_flush(
        prod,
        topic_name,
        [{"value": str(i).encode(), "timestamp": 1_000_000 + i, "partition": 0} for i in range(10)],
    )
    after = int(time.time() * 1000)

    # The produce response tells the producer the time the broker assigned.
    for report in deliveries.acked:
        assert report.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
        assert before - 1000 <= report.timestamp <= after + 1000
    got = consume(broker, topic_name, [0])[0]
    assert [r.value for r in got] == [str(i).encode() for i in range(10)]
    for r in got:
        assert r.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
        assert before - 1000 <= r.timestamp <= after + 1000, (before, r.timestamp, after)


@pytest.mark.parametrize("codec", CODECS)
def test_producer_compression_round_trips_and_is_stored_compressed(broker, topic_name, codec):
    prod = producer(broker, compression_type=codec, linger_ms=50, batch_num_messages=500)
    values = [(f"record {i} " * (1 + i % 17)).encode() for i in range(400)]
    produce_and_flush(
        prod, topic_name, [{"value": v, "key": str(i).encode(), "partition": 0} for i, v in enumerate(values)]
    )

    got = consume(broker, topic_name, [0])[0]
    assert [r.value for r in got] == values
    assert [r.key for r in got] == [str(i).encode() for i in range(400)]
    # compression.type=producer (the default) keeps the producer's batches as they came;
    # librdkafka sends a batch uncompressed when compressing would not make it smaller.
    stored = stored_batch_codecs(broker, topic_name)
    assert CODEC_IDS[codec] in stored and stored <= {0, CODEC_IDS[codec]}


@pytest.mark.parametrize(
    ("topic_codec", "producer_codec"), [("zstd", "none"), ("gzip", "lz4"), ("uncompressed", "snappy")]
)
def test_topic_compression_type_recompresses(broker, topic_name, topic_codec, producer_codec):
    create_topic(broker, topic_name, 1, {"compression.type": topic_codec})
    prod = producer(broker, compression_type=producer_codec, linger_ms=20)
    values = [(f"value-{i}-" * 20).encode() for i in range(300)]
    headers = [("h", b"x")]
    produce_and_flush(prod, topic_name, [{"value": v, "headers": headers, "partition": 0} for v in values])

    got = consume(broker, topic_name, [0])[0]
    assert [r.value for r in got] == values
    assert all(r.headers == headers for r in got)
    assert [r.offset for r in got] == list(range(300))
    expected = 0 if topic_codec == "uncompressed" else CODEC_IDS[topic_codec]
    assert stored_batch_codecs(broker, topic_name) == {expected}


def test_large_records_near_default_limit(broker, topic_name):
    prod = producer(broker, message_max_bytes=1_000_000)
    values = [bytes([i]) * 900_000 for i in range(3)]
    produce_and_flush(prod, topic_name, [{"value": v, "partition": 0} for v in values])
    got = consume(broker, topic_name, [0])[0]
    assert [r.value for r in got] == values
