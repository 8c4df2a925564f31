"""DeleteRecords: the low watermark moves, reads below it get OFFSET_OUT_OF_RANGE, consumers
with auto.offset.reset follow it, and the new log start survives a restart."""

from __future__ import annotations

import pytest
from broker_e2e import (
    RawClient,
    admin,
    consume,
    consumer,
    create_topic,
    fetch_body,
    produce_and_flush,
    producer,
)
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec
from kio.schema.errors import ErrorCode
from support import wait_until

FETCH = 1
DELETE_RECORDS = 21


def delete_records(broker, topic: str, partition: int, before: int):
    client = admin(broker)
    tp = TopicPartition(topic, partition, before)
    return client.delete_records([tp], operation_timeout=10)[tp].result(timeout=15)


def fill(broker, topic: str, n: int, partition: int = 0) -> None:
    produce_and_flush(
        producer(broker), topic, [{"value": str(i).encode(), "partition": partition} for i in range(n)]
    )


def test_delete_records_moves_the_low_watermark(broker, topic_name):
    create_topic(broker, topic_name, 2)
    fill(broker, topic_name, 100, partition=0)
    fill(broker, topic_name, 10, partition=1)

    assert delete_records(broker, topic_name, 0, 40).low_watermark == 40
    cons = consumer(broker)
    try:
        assert cons.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10) == (40, 100)
        assert cons.get_watermark_offsets(TopicPartition(topic_name, 1), timeout=10) == (0, 10)
    finally:
        cons.close()
    client = admin(broker)
    tp = TopicPartition(topic_name, 0)
    assert client.list_offsets({tp: OffsetSpec.earliest()})[tp].result(timeout=15).offset == 40

    got = consume(broker, topic_name, [0], start=40)[0]
    assert [r.offset for r in got] == list(range(40, 100))
    assert [r.value for r in got] == [str(i).encode() for i in range(40, 100)]


def test_fetch_below_log_start_is_out_of_range(broker, topic_name):
    create_topic(broker, topic_name, 1)
    fill(broker, topic_name, 30)
    delete_records(broker, topic_name, 0, 20)
    with RawClient(broker) as raw:
        response = raw.request(FETCH, 12, fetch_body(topic_name, 0, 5))
        (part,) = response.responses[0].partitions
        assert part.error_code == ErrorCode.offset_out_of_range
        assert part.records in (None, b"")
        # At the new start, the read works.
        response = raw.request(FETCH, 12, fetch_body(topic_name, 0, 20))
        (part,) = response.responses[0].partitions
        assert part.error_code == ErrorCode.none
        assert part.records


@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_auto_offset_reset_follows_the_new_log_start(broker, topic_name, reset):
    create_topic(broker, topic_name, 1)
    fill(broker, topic_name, 50)
    delete_records(broker, topic_name, 0, 30)

    got = consume(broker, topic_name, [0], start=3, auto_offset_reset=reset)[0]
    expected = list(range(30, 50)) if reset == "earliest" else []
    assert [r.offset for r in got] == expected


def test_auto_offset_reset_error_reports_out_of_range(broker, topic_name):
    create_topic(broker, topic_name, 1)
    fill(broker, topic_name, 10)
    delete_records(broker, topic_name, 0, 5)
    cons = consumer(broker, auto_offset_reset="error")
    try:
        cons.assign([TopicPartition(topic_name, 0, 2)])

        def reset_error():
            msg = cons.poll(0.2)
            return (
                msg is not None
                and msg.error() is not None
                and msg.error().code() == KafkaError._AUTO_OFFSET_RESET
            )

        wait_until(reset_error, timeout=15, message="an _AUTO_OFFSET_RESET (offset out of range) error")
    finally:
        cons.close()


def test_delete_records_to_high_watermark_and_beyond(broker, topic_name):
    create_topic(broker, topic_name, 1)
    fill(broker, topic_name, 10)
    # -1 means "up to the high watermark".
    assert delete_records(broker, topic_name, 0, -1).low_watermark == 10
    with pytest.raises(KafkaException) as info:
        delete_records(broker, topic_name, 0, 11)
    assert info.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE
    # The partition keeps taking writes at the old end.
    deliveries = produce_and_flush(producer(broker), topic_name, [{"value": b"after", "partition": 0}])
    assert deliveries.acked[0].offset == 10


def test_delete_records_on_unknown_topic_or_partition(broker, topic_name):
    create_topic(broker, topic_name, 1)
    body = {
        "topics": [
            {"name": topic_name, "partitions": [{"partition_index": 3, "offset": 0}]},
            {"name": topic_name + "-missing", "partitions": [{"partition_index": 0, "offset": 0}]},
        ],
        "timeout": 10000,
    }
    with RawClient(broker) as raw:
        response = raw.request(DELETE_RECORDS, 2, body)
    got = {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}
    assert got == {
        (topic_name, 3): ErrorCode.unknown_topic_or_partition,
        (topic_name + "-missing", 0): ErrorCode.unknown_topic_or_partition,
    }


def test_log_start_offset_survives_clean_restart(own_broker, topic_name):
    """Kafka checkpoints the log start offset on clean shutdown (after a crash it may fall
    back to the first segment's base, as Kafka's does)."""
    b = own_broker()
    create_topic(b, topic_name, 1)
    fill(b, topic_name, 60)
    delete_records(b, topic_name, 0, 25)
    b.restart(clean=True)

    cons = consumer(b)
    try:
        assert cons.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10) == (25, 60)
    finally:
        cons.close()
    got = consume(b, topic_name, [0], start=0, auto_offset_reset="earliest")[0]
    assert [r.offset for r in got] == list(range(25, 60))
