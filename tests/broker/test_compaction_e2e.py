"""Log compaction through a real broker and librdkafka: a full read returns exactly the latest
value per key at its original offset (tombstoned keys gone after delete.retention.ms),
records without a key are refused, a broker killed (-9) in the middle of a cleaning pass — at a
random moment, or exactly at each step of the segment swap — restarts with nothing lost, and
__consumer_offsets is compacted the same way."""

from __future__ import annotations

import os
import random
import time

import pytest
from broker_e2e import consume, consumer, create_topic, produce_and_flush, producer
from confluent_kafka import KafkaError, TopicPartition
from support import wait_until

from odradek.storage.checkpoint import CLEANER_OFFSET_CHECKPOINT, read_offset_checkpoint

FAST = {
    "log.cleaner.backoff.ms": 50,
    "log.retention.check.interval.ms": 100,
    "log.initial.task.delay.ms": 0,
    "log.segment.delete.delay.ms": 1000,
}
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": "4096",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "1500",
}


def produce_workload(broker, topic: str, n: int, keys: int, seed: int, tombstones: float = 0.08) -> dict:
    """``n`` keyed records (some tombstones); returns offset → (key, value) from the acks."""
    rng = random.Random(seed)
    items = []
    for i in range(n):
        key = b"key-%03d" % rng.randrange(keys)
        value = None if rng.random() < tombstones else b"value-%05d-" % i + b"p" * rng.randrange(20, 120)
        items.append({"key": key, "value": value})
    prod = producer(broker, batch_size=1500, linger_ms=2)
    acked = produce_and_flush(prod, topic, items).acked
    return {r.offset: (r.key, r.value) for r in acked}


def active_base(broker, topic: str) -> int:
    d = broker.data_dir / f"{topic}-0"
    return max(int(p.name[:20]) for p in d.iterdir() if p.name.endswith(".log"))


def log_bytes(d) -> int:
    total = 0
    for name in os.listdir(d):
        if name.endswith(".log"):
            try:
                total += os.path.getsize(d / name)
            except FileNotFoundError:
                pass  # removed meanwhile
    return total


def cleaner_checkpoint(broker, topic: str) -> int | None:
    try:
        return read_offset_checkpoint(str(broker.data_dir / CLEANER_OFFSET_CHECKPOINT)).get((topic, 0))
    except OSError:
        return None


def read_all(broker, topic: str) -> list:
    return consume(broker, topic, [0], start=0, auto_offset_reset="earliest")[0]


def check(broker, topic: str, written: dict, *, compacted: bool, tombstones_gone: bool = False) -> list:
    """What a full read must show. Always: original offsets, in order, each record the one
    written there, and replaying them gives every key's latest value (nothing lost). When
    ``compacted``: below the active segment, exactly one record per key, its latest there."""
    got = read_all(broker, topic)
    offsets = [r.offset for r in got]
    assert offsets == sorted(set(offsets))
    state = {}
    for r in got:
        assert written[r.offset] == (r.key, r.value), r.offset
        state[r.key] = r.value
    latest: dict = {}
    for offset in sorted(written):
        key, value = written[offset]
        latest[key] = (offset, value)
    live = {k: v for k, (o, v) in latest.items() if v is not None}
    assert {k: v for k, v in state.items() if v is not None} == live
    if compacted:
        active = active_base(broker, topic)
        below = [r for r in got if r.offset < active]
        keys = [r.key for r in below]
        assert len(keys) == len(set(keys)), "a key appears twice below the active segment"
        last_below = {}
        for offset in sorted(written):
            if offset < active:
                last_below[written[offset][0]] = offset
        expected = {k: o for k, o in last_below.items() if written[o][1] is not None}
        got_below = {r.key: r.offset for r in below}
        tombstones = {k: got_below.pop(k) for k in list(got_below) if written[got_below[k]][1] is None}
        assert got_below == expected
        for k, o in tombstones.items():  # a tombstone may stay until its delete horizon
            assert not tombstones_gone and last_below[k] == o
    return got


def wait_compacted(broker, topic: str, timeout: float = 20.0) -> None:
    wait_until(
        lambda: cleaner_checkpoint(broker, topic) == active_base(broker, topic),
        timeout,
        message="the cleaner to reach the active segment",
    )


def test_full_read_returns_the_latest_value_per_key_at_original_offsets(own_broker, topic_name):
    broker = own_broker(**FAST)
    create_topic(broker, topic_name, 1, COMPACTED)
    written = produce_workload(broker, topic_name, 3000, keys=60, seed=1)
    wait_compacted(broker, topic_name)
    got = check(broker, topic_name, written, compacted=True)
    assert len(got) < 800
    # delete.retention.ms later the tombstones go too, without any new data.
    active = active_base(broker, topic_name)
    wait_until(
        lambda: not [r for r in read_all(broker, topic_name) if r.offset < active and r.value is None],
        15,
        message="tombstones below the active segment to be removed",
    )
    check(broker, topic_name, written, compacted=True, tombstones_gone=True)
    # The segment files shrank on disk.
    d = broker.data_dir / f"{topic_name}-0"
    wait_until(
        lambda: log_bytes(d) < 3000 * 60 / 3,
        10,
        message="the log to shrink on disk",
    )


def test_records_without_a_key_are_refused(own_broker, topic_name):
    broker = own_broker(**FAST)
    create_topic(broker, topic_name, 1, COMPACTED)
    prod = producer(broker, retries=0)
    errors_seen = []
    prod.produce(topic_name, value=b"no key", on_delivery=lambda err, msg: errors_seen.append(err))
    prod.flush(15)  # (a batch holding a keyless record is refused whole, as by Kafka)
    prod.produce(topic_name, key=b"k", value=b"keyed", on_delivery=lambda err, msg: errors_seen.append(err))
    prod.flush(15)
    assert errors_seen[0] is not None and errors_seen[0].code() == KafkaError.INVALID_RECORD
    assert errors_seen[1] is None
    assert [(r.key, r.value) for r in read_all(broker, topic_name)] == [(b"k", b"keyed")]


def test_kill_9_in_the_middle_of_a_cleaning_pass_loses_nothing(own_broker, topic_name):
    broker = own_broker(**FAST, **{"log.cleaner.enable": "false"})
    create_topic(broker, topic_name, 1, {**COMPACTED, "segment.bytes": "16384"})
    written = produce_workload(broker, topic_name, 5000, keys=200, seed=2)
    # Restart with a slow cleaner and kill it while a pass is writing its .cleaned segment.
    broker.overrides.update({"log.cleaner.enable": "true", "log.cleaner.io.max.bytes.per.second": "150000"})
    broker.restart()
    d = broker.data_dir / f"{topic_name}-0"
    wait_until(lambda: any(p.name.endswith(".cleaned") for p in d.iterdir()), 20, message="a pass under way")
    time.sleep(random.uniform(0.0, 0.5))
    broker.kill()
    broker.overrides.pop("log.cleaner.io.max.bytes.per.second")
    broker.start()
    check(broker, topic_name, written, compacted=False)
    wait_compacted(broker, topic_name)
    check(broker, topic_name, written, compacted=True)


@pytest.mark.parametrize(
    "point", ["cleaner-after-cleaned", "cleaner-after-swap", "cleaner-after-old-deleted"]
)
def test_crash_at_each_step_of_the_swap(own_broker, topic_name, monkeypatch, point):
    broker = own_broker(**FAST, **{"log.cleaner.enable": "false"})
    create_topic(broker, topic_name, 1, COMPACTED)
    written = produce_workload(broker, topic_name, 1500, keys=40, seed=3)
    broker.stop()
    monkeypatch.setenv("ODRADEK_STORAGE_FAULT", point)  # the broker SIGKILLs itself there
    broker.overrides["log.cleaner.enable"] = "true"
    broker.start()
    wait_until(lambda: broker.proc.poll() is not None, 20, message=f"the broker to die at {point}")
    monkeypatch.delenv("ODRADEK_STORAGE_FAULT")
    broker.start()
    check(broker, topic_name, written, compacted=False)
    wait_compacted(broker, topic_name)
    check(broker, topic_name, written, compacted=True)


def test_consumer_offsets_is_compacted_and_commits_survive(own_broker, topic_name):
    broker = own_broker(**FAST, **{"offsets.topic.num.partitions": 1, "offsets.topic.segment.bytes": 4096})
    create_topic(broker, topic_name, 1)
    produce_and_flush(producer(broker), topic_name, [{"value": b"x"}] * 10)
    cons = consumer(broker, group_id=f"g-{topic_name}")
    try:
        for i in range(300):
            cons.commit(offsets=[TopicPartition(topic_name, 0, i % 10 + 1)], asynchronous=False)
        cons.commit(offsets=[TopicPartition(topic_name, 0, 7)], asynchronous=False)
    finally:
        cons.close()
    # The cleaner's checkpoint moves before its cleaned segments replace the old ones, so
    # wait for the outcome itself: 300 commits of one key shrink to far less than they took.
    wait_until(
        lambda: (cleaner_checkpoint(broker, "__consumer_offsets") or 0) > 200
        and log_bytes(broker.data_dir / "__consumer_offsets-0") < 300 * 60,
        30,
        message="__consumer_offsets to be compacted",
    )
    broker.restart()
    cons = consumer(broker, group_id=f"g-{topic_name}")
    try:
        (tp,) = wait_until(lambda: _committed(cons, topic_name), 15, message="the committed offset")
        assert tp.offset == 7
    finally:
        cons.close()


def _committed(cons, topic: str):
    try:
        got = cons.committed([TopicPartition(topic, 0)], timeout=5)
    except Exception:  # the coordinator is still loading after the restart
        return None
    return got if got and got[0].offset >= 0 else None
