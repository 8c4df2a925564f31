"""Retention through a real broker and librdkafka: by time, by size and by DeleteRecords, the
earliest offset moves, old segment files leave the disk, reads below the start are
OFFSET_OUT_OF_RANGE and a consumer with auto.offset.reset follows the new start."""

from __future__ import annotations

import os
import time

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
from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec
from kio.schema.errors import ErrorCode
from support import wait_until

FAST = {"log.retention.check.interval.ms": 100, "log.segment.delete.delay.ms": 0, "log.initial.task.delay.ms": 0}
HOUR = 3600_000


def earliest(broker, topic: str, partition: int = 0) -> int:
    client = admin(broker)
    tp = TopicPartition(topic, partition)
    return client.list_offsets({tp: OffsetSpec.earliest()})[tp].result(timeout=15).offset


def _earliest_or_none(broker, topic: str) -> int | None:
    try:
        return earliest(broker, topic)
    except Exception:  # metadata not ready yet after a restart
        return None


def segment_bases(broker, topic: str, partition: int = 0) -> list[int]:
    d = broker.data_dir / f"{topic}-{partition}"
    return sorted(int(name[:20]) for name in os.listdir(d) if name.endswith(".log"))


def leftovers(broker, topic: str, partition: int = 0) -> list[str]:
    d = broker.data_dir / f"{topic}-{partition}"
    return sorted(p.name for p in d.iterdir() if p.name.endswith(".deleted"))


def test_time_retention_by_record_timestamps(own_broker, topic_name):
    broker = own_broker(**FAST)
    create_topic(broker, topic_name, 1, {"segment.bytes": "1200", "retention.ms": str(HOUR)})
    prod = producer(broker, batch_size=300, linger_ms=0)
    old = int(time.time() * 1000) - 3 * HOUR
    produce_and_flush(
        prod, topic_name, [{"value": b"old-%03d" % i + b"x" * 60, "timestamp": old} for i in range(60)]
    )
    fresh = produce_and_flush(prod, topic_name, [{"value": b"new-%03d" % i, "key": b"k"} for i in range(20)])
    first_fresh = fresh.acked[0].offset


    # A retention pass may run while the old records are still arriving, so the start can move
    # more than once; it settles when the first segment left is the one holding the first fresh
    # record (a segment with any fresh record has a fresh largest timestamp and stays).
    def settled_start() -> int | None:
        start = earliest(broker, topic_name)
        bases = segment_bases(broker, topic_name)
        holds_first_fresh = bases[0] <= first_fresh and (len(bases) == 1 or bases[1] > first_fresh)
        return start if start and bases[0] == start and holds_first_fresh else None

    start = wait_until(settled_start, 10, interval=0.1, message="old segments off disk and the earliest offset moved")
    assert 0 < start <= first_fresh
    wait_until(lambda: not leftovers(broker, topic_name), 10, message=".deleted files removed")
    got = consume(broker, topic_name, [0], start=start)[0]
    assert got[0].offset == start
    assert [r.value for r in got if r.offset >= first_fresh] == [b"new-%03d" % i for i in range(20)]
    assert all(r.value.startswith(b"old-") for r in got if r.offset < first_fresh)
    with RawClient(broker) as raw:
        (part,) = raw.request(1, 12, fetch_body(topic_name, 0, 0)).responses[0].partitions
        assert part.error_code == ErrorCode.offset_out_of_range
    # A consumer starting below the log start is reset to it.
    reset = consume(broker, topic_name, [0], start=0, auto_offset_reset="earliest")[0]
    assert reset[0].offset == start


def test_everything_expired_rolls_and_new_records_continue_the_offsets(own_broker, topic_name):
    broker = own_broker(**FAST)
    create_topic(broker, topic_name, 1, {"segment.bytes": "100000", "retention.ms": str(HOUR)})
    prod = producer(broker)
    old = int(time.time() * 1000) - 3 * HOUR
    produce_and_flush(prod, topic_name, [{"value": b"%d" % i, "timestamp": old} for i in range(30)])
    wait_until(lambda: earliest(broker, topic_name) == 30, 10, message="all 30 records expired")
    assert segment_bases(broker, topic_name) == [30]  # rolled first, then the old one went
    got = produce_and_flush(prod, topic_name, [{"value": b"after"}])
    assert got.acked[0].offset == 30
    assert [(r.offset, r.value) for r in consume(broker, topic_name, [0], start=30)[0]] == [(30, b"after")]


def test_size_retention_keeps_the_partition_near_retention_bytes(own_broker, topic_name):
    broker = own_broker(**FAST)
    create_topic(broker, topic_name, 1, {"segment.bytes": "1000", "retention.bytes": "3000"})
    prod = producer(broker, batch_size=300, linger_ms=0)
    produce_and_flush(prod, topic_name, [{"value": b"%04d" % i + b"y" * 80} for i in range(200)])

    def on_disk():
        d = broker.data_dir / f"{topic_name}-0"
        total = 0
        for p in d.iterdir():
            try:
                total += p.stat().st_size if p.name.endswith(".log") else 0
            except FileNotFoundError:
                pass  # removed by retention meanwhile
        return total

    wait_until(lambda: on_disk() <= 3000 + 1000, 10, message="the partition to shrink to retention.bytes")
    start = earliest(broker, topic_name)
    assert start > 100
    got = consume(broker, topic_name, [0], start=start)[0]
    assert [r.offset for r in got] == list(range(start, 200))


def test_delete_records_removes_segments_and_survives_a_restart(own_broker, topic_name):
    broker = own_broker(**FAST)
    create_topic(broker, topic_name, 1, {"segment.bytes": "1000"})
    prod = producer(broker, batch_size=300, linger_ms=0)
    produce_and_flush(prod, topic_name, [{"value": b"%04d" % i + b"z" * 60} for i in range(100)])
    client = admin(broker)
    tp = TopicPartition(topic_name, 0, 70)
    assert client.delete_records([tp], operation_timeout=10)[tp].result(timeout=15).low_watermark == 70
    cons = consumer(broker)
    try:
        assert cons.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10) == (70, 100)
    finally:
        cons.close()
    # Whole segments below the new start leave the disk at the next retention check.
    wait_until(lambda: segment_bases(broker, topic_name)[0] > 0, 10, message="segments below 70 removed")
    assert segment_bases(broker, topic_name)[0] <= 70
    broker.restart()  # the log start offset is checkpointed on shutdown (and periodically)
    wait_until(lambda: _earliest_or_none(broker, topic_name) == 70, 10, message="earliest 70 after restart")
    got = consume(broker, topic_name, [0], start=70)[0]
    assert [r.offset for r in got] == list(range(70, 100))
