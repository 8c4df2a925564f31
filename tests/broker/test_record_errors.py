"""Per-record errors in Produce (KIP-467): a batch refused for some of its records names them.

Kafka refuses the whole batch (nothing is appended) with INVALID_RECORD or INVALID_TIMESTAMP,
an ``error_message`` and, from Produce v8, ``record_errors`` listing each bad record's index
in the batch. librdkafka then fails the listed records with their own message and the others
with _INVALID_DIFFERENT_RECORD, so an application can resend exactly the good ones (with a
single record error librdkafka reports the partition's error on every record instead).
"""

from __future__ import annotations

import threading
import time

from broker_e2e import (
    RawClient,
    consume,
    create_topic,
    produce_body,
    producer,
    record_batch,
)
from confluent_kafka import KafkaError
from kafka.record.default_records import DefaultRecordBatchBuilder

COMPACTED = {"cleanup.policy": "compact"}


class Reports:
    """Every delivery report of a producer, with the message it is about."""

    def __init__(self):
        self.ok: list[bytes] = []
        self.failed: list[tuple[int, str, bytes]] = []
        self._lock = threading.Lock()

    def __call__(self, err, msg):
        with self._lock:
            if err is None:
                self.ok.append(msg.value())
            else:
                self.failed.append((err.code(), err.str(), msg.value()))


def _send_all(prod, topic: str, items) -> Reports:
    """Produce ``items`` to partition 0, as one batch: the leader is known before the first
    record, and the producer's linger outlasts the loop."""
    prod.list_topics(topic, timeout=10)
    reports = Reports()
    for key, value in items:
        prod.produce(topic, key=key, value=value, partition=0, on_delivery=reports)
    assert prod.flush(30) == 0
    return reports


def test_librdkafka_fails_only_the_keyless_records_of_a_batch_on_a_compacted_topic(broker, topic_name):
    """100 records in one batch, every tenth without a key: the 10 keyless ones fail with
    INVALID_RECORD, the 90 others with _INVALID_DIFFERENT_RECORD, and nothing is written;
    resending the 90 writes exactly those. (librdkafka keeps each record's reason for its own
    logs; confluent-kafka's report shows the code's text, so the reasons are checked below on
    the raw response.)"""
    create_topic(broker, topic_name, config=COMPACTED)
    items = [(None if i % 10 == 3 else f"k{i}".encode(), f"v{i}".encode()) for i in range(100)]
    prod = producer(broker, linger_ms=1000, acks="all")
    reports = _send_all(prod, topic_name, items)

    assert reports.ok == []
    keyless = {value for key, value in items if key is None}
    bad = [(code, why, value) for code, why, value in reports.failed if value in keyless]
    others = [(code, value) for code, _, value in reports.failed if value not in keyless]
    assert sorted(v for *_, v in bad) == sorted(keyless)
    assert {code for code, _, _ in bad} == {KafkaError.INVALID_RECORD}
    assert len(others) == 90 and {code for code, _ in others} == {KafkaError._INVALID_DIFFERENT_RECORD}

    good = [(key, value) for key, value in items if key is not None]
    again = _send_all(prod, topic_name, good)
    assert again.failed == [] and len(again.ok) == 90
    got = consume(broker, topic_name, [0])[0]
    assert [(r.offset, r.key, r.value) for r in got] == [(i, k, v) for i, (k, v) in enumerate(good)]


def _produce_raw(broker, topic: str, version: int, batch):
    with RawClient(broker) as raw:
        response = raw.request(0, version, produce_body(topic, 0, batch))
    (partition,) = response.responses[0].partition_responses
    return partition


def test_record_errors_list_each_bad_record_from_produce_v8(broker, topic_name):
    create_topic(broker, topic_name, config=COMPACTED)
    batch = record_batch([b"a", b"b", b"c", b"d", b"e"], keys=[b"1", None, b"3", b"4", None], compression=1)
    for version in (8, 9, 11):
        p = _produce_raw(broker, topic_name, version, batch)
        assert p.error_code == 87  # INVALID_RECORD
        assert [e.batch_index for e in p.record_errors] == [1, 4]
        assert all("without key" in e.batch_index_error_message for e in p.record_errors)
        assert "2 of the batch's 5 records were rejected" in p.error_message
    old = _produce_raw(broker, topic_name, 7, batch)  # before v8: the error code alone
    assert old.error_code == 87
    with RawClient(broker) as raw:
        offsets = raw.request(
            2,
            1,
            {
                "replica_id": -1,
                "topics": [{"name": topic_name, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
            },
        )
    assert offsets.topics[0].partitions[0].offset == 0  # nothing was appended


def test_records_with_out_of_range_timestamps_are_named(broker, topic_name):
    create_topic(broker, topic_name, config={"message.timestamp.before.max.ms": "3600000"})
    now = int(time.time() * 1000)
    timestamps = [now - 7_200_000, now, now - 10_800_000, now]
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, ts in enumerate(timestamps):
        builder.append(i, timestamp=ts, key=b"k", value=b"v", headers=[])
    p = _produce_raw(broker, topic_name, 9, builder.build())
    assert p.error_code == 32  # INVALID_TIMESTAMP
    assert [e.batch_index for e in p.record_errors] == [0, 2]
    assert "out of the allowed range" in p.record_errors[0].batch_index_error_message
