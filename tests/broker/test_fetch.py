"""Fetch semantics clients depend on: min_bytes and max_wait, byte limits that still return
at least one batch, leader-epoch checks (KIP-320) and OffsetForLeaderEpoch."""

from __future__ import annotations

import threading
import time

import pytest
from broker_e2e import (
    RawClient,
    admin,
    create_topic,
    decode_batches,
    fetch_body,
    fetch_records,
    produce_and_flush,
    producer,
)
from kio.schema.errors import ErrorCode

FETCH, OFFSET_FOR_LEADER_EPOCH = 1, 23


def fill(broker, topic: str, n: int, size: int = 1000, partition: int = 0) -> None:
    prod = producer(broker, linger_ms=0, batch_num_messages=1)
    produce_and_flush(
        prod, topic, [{"value": bytes([65 + i % 26]) * size, "partition": partition} for i in range(n)]
    )


def test_min_bytes_waits_up_to_max_wait(broker, topic_name):
    create_topic(broker, topic_name, 1)
    fill(broker, topic_name, 1, size=100)
    with RawClient(broker) as raw:
        body = dict(fetch_body(topic_name, 0, 0), min_bytes=1_000_000, max_wait=400)
        start = time.monotonic()
        response = raw.request(FETCH, 12, body)
        waited = time.monotonic() - start
    (part,) = response.responses[0].partitions
    # Not enough bytes ever arrive: the answer comes at max_wait, with what there is.
    assert 0.3 <= waited < 3, waited
    assert part.error_code == ErrorCode.none
    assert [b.base_offset for b in decode_batches(part.records)] == [0]


def test_a_long_poll_at_the_high_watermark_answers_when_records_arrive(broker, topic_name):
    """A waiting fetch with min_bytes=1 (what consumers and followers send) is answered as
    soon as a record lands, not at max_wait; a second partition still at its end does not
    hold it back, and one that fails (its topic deleted) answers at once with the error."""
    create_topic(broker, topic_name, 2)
    fill(broker, topic_name, 2, size=100)
    body = fetch_body(topic_name, 0, 2, max_wait_ms=8000)
    body["topics"][0]["partitions"].append({"partition": 1, "fetch_offset": 0, "partition_max_bytes": 1 << 20})
    with RawClient(broker) as raw:
        threading.Timer(0.5, fill, (broker, topic_name, 1), {"size": 100}).start()
        start = time.monotonic()
        response = raw.request(FETCH, 12, body)
        waited = time.monotonic() - start
    parts = {p.partition_index: p for p in response.responses[0].partitions}
    assert 0.4 <= waited < 5, waited
    assert [b.base_offset for b in decode_batches(parts[0].records)] == [2]
    assert not parts[1].records
    with RawClient(broker) as raw:
        threading.Timer(0.5, lambda: admin(broker).delete_topics([topic_name])[topic_name].result(10)).start()
        start = time.monotonic()
        response = raw.request(FETCH, 12, fetch_body(topic_name, 0, 3, max_wait_ms=8000))
        waited = time.monotonic() - start
    (part,) = response.responses[0].partitions
    assert waited < 5, waited
    assert part.error_code != ErrorCode.none


def test_partition_max_bytes_still_returns_one_whole_batch(broker, topic_name):
    create_topic(broker, topic_name, 1)
    fill(broker, topic_name, 5, size=5000)
    with RawClient(broker) as raw:
        error, records = fetch_records(raw, topic_name, 0, 0, max_bytes=100)
        assert error == ErrorCode.none
        # KIP-74: the first batch comes back whole even when it is larger than the limit.
        assert [r[0] for r in records] == [0]
        assert records[0][2] == b"A" * 5000
        error, records = fetch_records(raw, topic_name, 0, 0, max_bytes=12_000)
        assert [r[0] for r in records] == [0, 1]


@pytest.mark.parametrize("zero_copy", ["0", "1"])
def test_large_fetch_with_either_send_path(own_broker, topic_name, monkeypatch, zero_copy):
    """Record data is read and written a chunk at a time (default) or goes out with sendfile
    (ODRADEK_ZERO_COPY=1); a response larger than the socket buffer comes back whole."""
    monkeypatch.setenv("ODRADEK_ZERO_COPY", zero_copy)
    b = own_broker()
    create_topic(b, topic_name, 1)
    fill(b, topic_name, 300, size=10_000)
    with RawClient(b) as raw:
        for _ in range(3):
            error, records = fetch_records(raw, topic_name, 0, 0, max_bytes=4 << 20)
            assert error == ErrorCode.none
            assert [r[0] for r in records] == list(range(300))
            assert all(r[2] == bytes([65 + i % 26]) * 10_000 for i, r in enumerate(records))


def test_response_max_bytes_spans_partitions(broker, topic_name):
    create_topic(broker, topic_name, 3)
    for p in range(3):
        fill(broker, topic_name, 3, size=4000, partition=p)
    body = {
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 10_000,
        "isolation_level": 1,
        "topics": [
            {
                "topic": topic_name,
                "partitions": [
                    {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20} for p in range(3)
                ],
            }
        ],
        "forgotten_topics_data": [],
    }
    with RawClient(broker) as raw:
        response = raw.request(FETCH, 12, body)
    sizes = {p.partition_index: len(p.records or b"") for p in response.responses[0].partitions}
    assert all(p.error_code == ErrorCode.none for p in response.responses[0].partitions)
    assert all(p.high_watermark == 3 and p.last_stable_offset == 3 for p in response.responses[0].partitions)
    # The first partition gets at least one batch; the total stays near max_bytes.
    assert sizes[0] > 0
    assert sum(sizes.values()) <= 10_000 + 4200, sizes


def test_fetch_checks_the_current_leader_epoch(broker, topic_name):
    create_topic(broker, topic_name, 1)
    fill(broker, topic_name, 2, size=10)
    with RawClient(broker) as raw:
        for epoch, expected in [
            (-1, ErrorCode.none),
            (0, ErrorCode.none),
            (7, ErrorCode.unknown_leader_epoch),
        ]:
            body = fetch_body(topic_name, 0, 0)
            body["topics"][0]["partitions"][0]["current_leader_epoch"] = epoch
            response = raw.request(FETCH, 12, body)
            assert response.responses[0].partitions[0].error_code == expected, epoch


def test_offset_for_leader_epoch(broker, topic_name):
    create_topic(broker, topic_name, 1)
    fill(broker, topic_name, 4, size=10)
    body = {
        "replica_id": -1,
        "topics": [
            {
                "topic": topic_name,
                "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0},
                    {"partition": 9, "current_leader_epoch": -1, "leader_epoch": 0},
                ],
            }
        ],
    }
    with RawClient(broker) as raw:
        response = raw.request(OFFSET_FOR_LEADER_EPOCH, 4, body)
    got = {p.partition: (p.error_code, p.leader_epoch, p.end_offset) for p in response.topics[0].partitions}
    assert got == {
        0: (ErrorCode.none, 0, 4),
        9: (ErrorCode.unknown_topic_or_partition, -1, -1),
    }


def test_fetch_v13_to_v17_names_topics_by_id(broker, topic_name):
    """KIP-516: from v13 a consumer fetches by topic id; an id the broker does not know
    answers UNKNOWN_TOPIC_ID (and does not hold the fetch back)."""
    import uuid

    from kafka import KafkaAdminClient

    create_topic(broker, topic_name, 1)
    fill(broker, topic_name, 3, size=10)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        (described,) = admin.describe_topics([topic_name])
    finally:
        admin.close()
    topic_id = uuid.UUID(str(described["topic_id"]))
    stranger = uuid.uuid4()
    for version in range(13, 18):
        body = fetch_body(topic_name, 0, 0, max_wait_ms=5000)
        body["min_bytes"] = 1_000_000
        for t in body["topics"]:
            del t["topic"]
        body["topics"] = [dict(body["topics"][0], topic_id=topic_id), dict(body["topics"][0], topic_id=stranger)]
        with RawClient(broker) as raw:
            start = time.monotonic()
            response = raw.request(FETCH, version, body)
            assert time.monotonic() - start < 3  # the unknown id answers at once
        by_id = {t.topic_id: t.partitions[0] for t in response.responses}
        assert by_id[stranger].error_code == ErrorCode.unknown_topic_id
        known = by_id[topic_id]
        assert known.error_code == 0 and known.high_watermark == 3
        assert sum(len(list(b)) for b in decode_batches(known.records)) == 3
