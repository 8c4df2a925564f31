"""ListOffsets as clients use it: watermarks, earliest/latest/max-timestamp specs, and
offsets_for_times, with confluent-kafka and with a hand-made request for exact error codes."""

from __future__ import annotations

import pytest
from broker_e2e import RawClient, admin, consumer, create_topic, produce_and_flush, producer
from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec
from kio.schema.errors import ErrorCode

LIST_OFFSETS = 2
BASE_TS = 1_700_000_000_000
# Timestamps out of order on purpose: max-timestamp is not simply the last record.
TS_STEPS = [5, 1, 9, 3, 7, 2, 8, 4, 6, 0]


@pytest.fixture
def timed_topic(broker, topic_name):
    """One partition, ten records in ten batches, timestamps BASE_TS + 1000 * TS_STEPS[i]."""
    create_topic(broker, topic_name, 1)
    prod = producer(broker, linger_ms=0)
    for i, step in enumerate(TS_STEPS):
        produce_and_flush(
            prod, topic_name, [{"value": str(i).encode(), "timestamp": BASE_TS + 1000 * step, "partition": 0}]
        )
    return topic_name


def list_offsets(broker, topic: str, spec) -> tuple[int, int]:
    client = admin(broker)
    tp = TopicPartition(topic, 0)
    result = client.list_offsets({tp: spec}, request_timeout=10)[tp].result(timeout=15)
    return result.offset, result.timestamp


def test_empty_partition_offsets(broker, topic_name):
    create_topic(broker, topic_name, 1)
    assert list_offsets(broker, topic_name, OffsetSpec.earliest())[0] == 0
    assert list_offsets(broker, topic_name, OffsetSpec.latest())[0] == 0
    assert list_offsets(broker, topic_name, OffsetSpec.max_timestamp()) == (-1, -1)
    cons = consumer(broker)
    try:
        assert cons.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10) == (0, 0)
    finally:
        cons.close()


def test_earliest_latest_and_watermarks(broker, timed_topic):
    assert list_offsets(broker, timed_topic, OffsetSpec.earliest())[0] == 0
    assert list_offsets(broker, timed_topic, OffsetSpec.latest())[0] == 10
    cons = consumer(broker)
    try:
        assert cons.get_watermark_offsets(TopicPartition(timed_topic, 0), timeout=10) == (0, 10)
    finally:
        cons.close()


def test_max_timestamp_finds_the_record_with_the_largest_timestamp(broker, timed_topic):
    offset, timestamp = list_offsets(broker, timed_topic, OffsetSpec.max_timestamp())
    assert (offset, timestamp) == (TS_STEPS.index(9), BASE_TS + 9000)


def test_offsets_for_times(broker, timed_topic):
    def first_at_or_after(ts):
        hits = [i for i, step in enumerate(TS_STEPS) if BASE_TS + 1000 * step >= ts]
        return hits[0] if hits else -1

    queries = [
        BASE_TS - 1,
        BASE_TS,
        BASE_TS + 4500,
        BASE_TS + 5000,
        BASE_TS + 8999,
        BASE_TS + 9000,
        BASE_TS + 9001,
    ]
    cons = consumer(broker)
    try:
        for ts in queries:
            (found,) = cons.offsets_for_times([TopicPartition(timed_topic, 0, ts)], timeout=10)
            assert found.error is None
            assert found.offset == first_at_or_after(ts), ts
    finally:
        cons.close()
    # The admin API reports the timestamp of the record found.
    assert list_offsets(broker, timed_topic, OffsetSpec.for_timestamp(BASE_TS + 4500)) == (0, BASE_TS + 5000)


def test_list_offsets_errors(broker, timed_topic, topic_name):
    missing = topic_name + "-missing"
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {
                "name": timed_topic,
                "partitions": [
                    {"partition_index": 0, "timestamp": -1},
                    {"partition_index": 0, "timestamp": -2},
                    {"partition_index": 7, "timestamp": -1},
                ],
            },
            {"name": missing, "partitions": [{"partition_index": 0, "timestamp": -1}]},
        ],
    }
    with RawClient(broker) as raw:
        response = raw.request(LIST_OFFSETS, 7, body)
    got = {(t.name, p.partition_index, p.offset): p.error_code for t in response.topics for p in t.partitions}
    assert got == {
        (timed_topic, 0, 10): ErrorCode.none,
        (timed_topic, 0, 0): ErrorCode.none,
        (timed_topic, 7, -1): ErrorCode.unknown_topic_or_partition,
        (missing, 0, -1): ErrorCode.unknown_topic_or_partition,
    }


def test_earliest_local_and_latest_tiered_without_tiered_storage(broker, timed_topic):
    """v8 (KIP-405) and v9 (KIP-1005): as Kafka answers when nothing is tiered, the earliest
    local offset is the log start offset and the latest tiered offset is -1 with epoch -1;
    kafka-python asks for them by name."""
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import OffsetSpec as KOffsetSpec

    with RawClient(broker) as raw:
        for timestamp, expected in ((-4, (0, -1)), (-5, (-1, -1))):
            body = {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [{"name": timed_topic, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}],
            }
            (p,) = raw.request(LIST_OFFSETS, 9, body).topics[0].partitions
            assert (p.error_code, p.offset, p.timestamp) == (0, *expected)
            if timestamp == -5:
                assert p.leader_epoch == -1
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        tp = KTopicPartition(timed_topic, 0)
        got = client.list_partition_offsets({tp: KOffsetSpec.EARLIEST_LOCAL})
    finally:
        client.close()
    assert got[tp].offset == 0
