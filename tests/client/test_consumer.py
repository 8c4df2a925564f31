"""The blocking consumer without group management: positions, seeks, lookups, commits."""

from __future__ import annotations

import time

import pytest

from odradek import Consumer, Producer, TopicPartition
from odradek.client.client_errors import (
    ClientClosedError,
    IllegalStateError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
)
from odradek.client.structs import OffsetAndMetadata
from odradek.protocol.errors import ErrorCode, error_for


@pytest.fixture
def filled(bootstrap, make_topic, topic):
    """A 2-partition topic with 100 records per partition, timestamps 1000 + offset * 10.

    The last record of each partition goes in a batch of its own: tansu 0.6 answers
    ListOffsets(latest) with the last batch's base offset + 1.
    """
    make_topic(topic, 2)
    with Producer(bootstrap_servers=bootstrap, linger_ms=10) as p:
        for last in (False, True):
            for part in range(2):
                for i in range(99, 100) if last else range(99):
                    p.send(topic, b"%d-%d" % (part, i), partition=part, timestamp_ms=1_000_000 + i * 10)
            p.flush()
    return topic


def poll_n(c, n, timeout=15.0):
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out.extend(c.poll(0.3))
    return out


def test_assign_seek_position_and_max_poll_records(bootstrap, filled):
    tp0, tp1 = TopicPartition(filled, 0), TopicPartition(filled, 1)
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", max_poll_records=7) as c:
        c.assign([tp0, tp1])
        assert c.assignment() == {tp0, tp1}
        assert c.position(tp0) == 0
        first = c.poll(10)
        assert 0 < len(first) <= 7
        got = first + poll_n(c, 193)
        assert len(got) == 200
        assert sorted(r.offset for r in got if r.partition == 0) == list(range(100))
        assert c.position(tp0) == 100 and c.position(tp1) == 100
        c.seek(tp1, 42)
        again = poll_n(c, 58)
        assert [r.offset for r in again] == list(range(42, 100)) and {r.partition for r in again} == {1}
        assert again[0].value == b"1-42" and again[0].timestamp == 1_000_420
        c.seek_to_beginning(tp0)
        assert c.position(tp0) == 0
        c.seek_to_end(tp0)
        assert c.position(tp0) == 100
        assert c.highwater(tp0) == 100


def test_latest_reset_and_none_reset(bootstrap, filled):
    tp = TopicPartition(filled, 0)
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="latest") as c:
        c.assign([tp])
        assert c.position(tp) == 100
        assert c.poll(0.5) == []
    with Consumer(bootstrap_servers=bootstrap, group_id=f"none-{filled}", auto_offset_reset="none") as c:
        c.assign([tp])
        with pytest.raises(NoOffsetForPartitionError, match=f"{filled}-0"):
            for _ in range(20):
                c.poll(0.5)


def test_pause_and_resume(bootstrap, filled):
    tp0, tp1 = TopicPartition(filled, 0), TopicPartition(filled, 1)
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([tp0, tp1])
        c.pause(tp1)
        assert c.paused() == {tp1}
        got = poll_n(c, 100)
        time.sleep(0.3)
        got += c.poll(0.5)
        assert {r.partition for r in got} == {0} and len(got) == 100
        c.resume(tp1)
        got = poll_n(c, 100)
        assert {r.partition for r in got} == {1} and len(got) == 100


def test_offset_lookups(kafka, bootstrap, filled):
    tp0, tp1 = TopicPartition(filled, 0), TopicPartition(filled, 1)
    with Consumer(bootstrap_servers=bootstrap) as c:
        assert c.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        assert c.end_offsets([tp0, tp1]) == {tp0: 100, tp1: 100}
        found = c.offsets_for_times({tp0: 1_000_255, tp1: 9_999_999_999})
        if kafka.name == "tansu":
            # tansu 0.6 ignores the timestamp (confluent-kafka gets offset 0 from it too)
            assert found[tp0] is not None
        else:
            assert found[tp0].offset == 26 and found[tp0].timestamp == 1_000_260
            assert found[tp1] is None
        assert c.partitions_for_topic(filled) == {0, 1}
        assert filled in c.topics()


def test_commit_and_committed_with_manual_assignment(kafka, bootstrap, filled, group):
    tp0, tp1 = TopicPartition(filled, 0), TopicPartition(filled, 1)
    with Consumer(
        bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False
    ) as c:
        c.assign([tp0, tp1])
        assert c.committed(tp0) is None
        poll_n(c, 200)
        c.commit()
        assert c.committed([tp0, tp1]) == {tp0: OffsetAndMetadata(100), tp1: OffsetAndMetadata(100)}
        c.commit({tp0: OffsetAndMetadata(10, "note")})
        assert c.committed(tp0).offset == 10
        if kafka.name != "tansu":  # tansu 0.6 drops commit metadata (confluent-kafka sees None too)
            assert c.committed(tp0).metadata == "note"
    # A new consumer in the group starts from the committed offsets.
    with Consumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False) as c:
        c.assign([tp0])
        got = poll_n(c, 90)
        assert got[0].offset == 10 and len(got) == 90


def test_async_commit_retry_never_overwrites_a_newer_commit(bootstrap, filled, group):
    tp = TopicPartition(filled, 0)
    attempts = []
    results = []

    def fault(offsets, attempt):
        attempts.append((offsets[tp].offset, attempt))
        if attempt == 1 and offsets[tp].offset in (10, 30):
            return error_for(ErrorCode.request_timed_out)("injected")
        return None

    with Consumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False, retry_backoff_ms=200
    ) as c:
        c.assign([tp])
        c._aio._coordinator.offsets.commit_fault = fault
        # 10 fails; 20 (sent right after) succeeds; 10's retry is dropped: 20 is newer.
        c.commit_async({tp: 10}, callback=lambda offsets, err: results.append((offsets[tp].offset, err)))
        c.commit_async({tp: 20}, callback=lambda offsets, err: results.append((offsets[tp].offset, err)))
        time.sleep(0.6)
        assert c.committed(tp).offset == 20
        # 30 fails once with nothing newer behind it: it is retried and lands.
        c.commit_async({tp: 30}, callback=lambda offsets, err: results.append((offsets[tp].offset, err)))
        time.sleep(0.6)
        assert c.committed(tp).offset == 30
    assert [a for a in attempts if a[0] == 10] == [(10, 1)]
    assert (30, 2) in attempts
    assert sorted((o, err is None) for o, err in results) == [(10, False), (20, True), (30, True)]


def test_closed_consumer_raises_and_poll_needs_subscription(bootstrap, filled):
    c = Consumer(bootstrap_servers=bootstrap)
    with pytest.raises(IllegalStateError, match="subscribe"):
        c.poll(0.1)
    c.assign([TopicPartition(filled, 0)])
    c.close()
    for call in (lambda: c.poll(0.1), lambda: c.assign([TopicPartition(filled, 0)]), lambda: c.commit()):
        with pytest.raises(ClientClosedError):
            call()
    c.close()


def test_unreachable_bootstrap_gives_timeout(unused_port):
    with Consumer(bootstrap_servers=f"127.0.0.1:{unused_port}", default_api_timeout_ms=1000) as c:
        t = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="bootstrap"):
            c.partitions_for_topic("anything")
        assert time.monotonic() - t < 5
        c.assign([TopicPartition("anything", 0)])
        assert c.poll(0.5) == []  # poll returns after its timeout instead of hanging


def test_deserializers_and_interceptors(bootstrap, filled):
    seen = []

    class Count:
        def on_consume(self, records):
            seen.append(len(records))
            return [r for r in records if r.offset % 2 == 0]

    with Consumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        value_deserializer=lambda b: b.decode().upper(),
        interceptors=[Count()],
    ) as c:
        c.assign([TopicPartition(filled, 0)])
        got = poll_n(c, 50)
    assert len(got) == 50 and got[0].value == "0-0" and all(r.offset % 2 == 0 for r in got)
    assert sum(seen) >= 100


def test_auto_commit_on_interval_and_on_close(bootstrap, filled, group):
    tp0, tp1 = TopicPartition(filled, 0), TopicPartition(filled, 1)
    with Consumer(
        bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest", auto_commit_interval_ms=200
    ) as c:
        c.assign([tp0])
        poll_n(c, 100)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (c.committed(tp0) or OffsetAndMetadata(-1)).offset != 100:
            c.poll(0.1)
        assert c.committed(tp0).offset == 100  # committed by the interval timer
        c.assign([tp1])
        poll_n(c, 30)
        c.seek(tp1, 30)
    with Consumer(bootstrap_servers=bootstrap, group_id=group) as c:
        assert c.committed(tp1).offset == 30  # committed by close
