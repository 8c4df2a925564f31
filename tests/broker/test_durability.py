"""No acknowledged record is lost: across a clean restart (SIGTERM), across a `kill -9` in
the middle of acks=all writes, and with an idempotent producer that rides through a crash."""

from __future__ import annotations

import threading
import time

from broker_e2e import Deliveries, consume, create_topic, produce_and_flush, producer
from support import wait_until

PARTITIONS = 4


def assert_acked_exactly_once_in_order(deliveries: Deliveries, got: dict) -> None:
    """Every acknowledged value is stored once, at the offset the producer was told, and each
    partition's acknowledged values appear in the order they were acknowledged."""
    stored = {p: [r.value for r in records] for p, records in got.items()}
    by_offset = {(p, r.offset): r.value for p, records in got.items() for r in records}
    for p, values in stored.items():
        assert len(values) == len(set(values)), f"partition {p} holds duplicates"
    for report in deliveries.acked:
        assert by_offset.get((report.partition, report.offset)) == report.value, (
            f"acked {report.value!r} at {report.partition}/{report.offset}, "
            f"found {by_offset.get((report.partition, report.offset))!r}"
        )
    for p in got:
        acked = [r.value for r in sorted(deliveries.acked, key=lambda r: r.offset) if r.partition == p]
        positions = {v: i for i, v in enumerate(stored[p])}
        assert [positions[v] for v in acked] == sorted(positions[v] for v in acked)


def test_clean_restart_keeps_everything_and_continues_offsets(own_broker, topic_name):
    b = own_broker()
    create_topic(b, topic_name, PARTITIONS, {"message.timestamp.type": "CreateTime"})
    prod = producer(b)
    items = [
        {
            "partition": i % PARTITIONS,
            "key": str(i).encode(),
            "value": f"v{i}".encode(),
            "headers": [("n", str(i).encode())],
        }
        for i in range(2000)
    ]
    deliveries = produce_and_flush(prod, topic_name, items)
    before = consume(b, topic_name, range(PARTITIONS))

    assert b.stop() == 0
    assert "stopped cleanly" in b.log_text()
    b.start()

    after = consume(b, topic_name, range(PARTITIONS))
    assert {
        p: [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in rs] for p, rs in after.items()
    } == {p: [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in rs] for p, rs in before.items()}
    assert_acked_exactly_once_in_order(deliveries, after)

    more = produce_and_flush(
        producer(b), topic_name, [{"partition": p, "value": b"next"} for p in range(PARTITIONS)]
    )
    assert sorted((r.partition, r.offset) for r in more.acked) == [(p, 500) for p in range(PARTITIONS)]


def produce_until(prod, topic: str, deliveries: Deliveries, stop: threading.Event, prefix: str) -> None:
    i = 0
    while not stop.is_set():
        try:
            prod.produce(topic, f"{prefix}-{i}".encode(), partition=i % PARTITIONS, on_delivery=deliveries)
            i += 1
        except BufferError:
            pass
        prod.poll(0.001 if i % 50 == 0 else 0)


def test_kill_9_during_acks_all_writes_keeps_every_acked_record(own_broker, topic_name):
    b = own_broker()
    create_topic(b, topic_name, PARTITIONS)
    prod = producer(b, acks="all", linger_ms=2, message_timeout_ms=5000)
    deliveries = Deliveries()
    stop = threading.Event()
    writer = threading.Thread(target=produce_until, args=(prod, topic_name, deliveries, stop, "crash"))
    writer.start()
    try:
        wait_until(lambda: len(deliveries.acked) >= 5000, timeout=60, message="5000 acknowledged records")
        b.kill()
    finally:
        stop.set()
        writer.join()
    # Nothing is acknowledged by a dead broker; drop what is still queued.
    prod.purge()
    prod.flush(10)
    acked = len(deliveries.acked)
    assert acked >= 5000

    b.start()
    got = consume(b, topic_name, range(PARTITIONS))
    assert len(deliveries.acked) == acked
    assert_acked_exactly_once_in_order(deliveries, got)
    # Offsets stay dense: the recovered log has no holes.
    for records in got.values():
        assert [r.offset for r in records] == list(range(len(records)))

    more = produce_and_flush(
        producer(b), topic_name, [{"partition": p, "value": b"after"} for p in range(PARTITIONS)]
    )
    for report in more.acked:
        assert report.offset == len(got[report.partition])


def test_idempotent_producer_rides_through_a_crash_without_duplicates(own_broker, topic_name):
    b = own_broker()
    create_topic(b, topic_name, PARTITIONS)
    prod = producer(b, enable_idempotence=True, linger_ms=2, message_timeout_ms=60000)
    deliveries = Deliveries()
    stop = threading.Event()
    writer = threading.Thread(target=produce_until, args=(prod, topic_name, deliveries, stop, "idem"))
    writer.start()
    try:
        wait_until(lambda: len(deliveries.acked) >= 3000, timeout=60, message="3000 acknowledged records")
        b.kill()
        time.sleep(0.2)  # let the producer notice the broker is gone and queue retries
        b.start()
        wait_until(
            lambda: len(deliveries.acked) >= 6000 or deliveries.errors,
            timeout=60,
            message="the producer to resume after the restart",
        )
    finally:
        stop.set()
        writer.join()
    assert prod.flush(60) == 0
    assert not deliveries.errors, deliveries.errors[:5]

    got = consume(b, topic_name, range(PARTITIONS))
    assert_acked_exactly_once_in_order(deliveries, got)
    # The idempotent producer retried everything in flight; the broker kept each once.
    stored = sorted(r.value for records in got.values() for r in records)
    assert stored == sorted(r.value for r in deliveries.acked)
