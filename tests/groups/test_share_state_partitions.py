"""A share group's records 9 (ShareGroupPartitionMetadata) and 15 (ShareGroupStatePartitionMetadata)
in __consumer_offsets: the coordinator writes which partitions have share state, in Kafka's
format, and after a restart still knows them, so deleting the group deletes that state."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
)
from group_raw import RawClient
from support import set_group_configs, started_broker, wait_until

from odradek.broker.group import modern_group_records as records
from odradek.protocol.errors import ErrorCode

OVERRIDES = {
    "group.coordinator.rebalance.protocols": "classic,consumer,share",
    "group.share.heartbeat.interval.ms": 300,
    "group.share.session.timeout.ms": 3000,
}


@pytest.fixture
def broker(tmp_path):
    yield from started_broker(tmp_path / "data", OVERRIDES)


def _read_all(broker, group: str, topic: str, expected: set[bytes]) -> list[bytes]:
    c = ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
    c.subscribe([topic])
    read: list[bytes] = []
    try:
        wait_until(lambda: set(read) >= expected, 30, "the records",
                   step=lambda: read.extend(m.value() for m in c.poll(0.3) or [] if m.error() is None))  # fmt: skip
        for _ in range(3):
            c.poll(0.3)  # acknowledges (implicitly) what it read
    finally:
        c.close()
    return read


def _start_offset(broker, group: str, topic_id) -> int:
    body = {"group_id": group, "topics": [{"topic_id": topic_id, "partitions": [{"partition": 0, "leader_epoch": 0}]}]}
    with RawClient(broker) as raw:
        result = raw.request(87, 1, body).results[0].partitions[0]
    assert result.error_code == ErrorCode.none, result
    return result.start_offset


def _share_records(broker, group: str) -> dict[int, object]:
    """The latest value of each share-group record type of ``group`` in __consumer_offsets."""
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})  # fmt: skip
    md = c.list_topics("__consumer_offsets", timeout=10)
    parts = list(md.topics["__consumer_offsets"].partitions)
    c.assign([TopicPartition("__consumer_offsets", p, 0) for p in parts])
    found: dict[int, object] = {}
    idle_until = time.monotonic() + 3
    try:
        while time.monotonic() < idle_until:
            m = c.poll(0.3)
            if m is None or m.error() is not None or not m.key():
                continue
            idle_until = time.monotonic() + 1
            kind = int.from_bytes(m.key()[:2], "big", signed=True)
            if kind not in records.SHARE_TYPES:
                continue
            key = records.decode_key(kind, m.key())
            if key is not None and key.group == group and key.member is None:
                found[kind] = None if m.value() is None else records.decode_value(kind, m.value())
    finally:
        c.close()
    return found


def test_a_restarted_coordinator_knows_the_initialized_share_partitions_and_deletes_their_state(broker):
    topic, group = f"q-{uuid.uuid4().hex[:6]}", f"sg-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    set_group_configs(admin, group, share_auto_offset_reset="earliest")
    values = {f"r{i}".encode() for i in range(10)}
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for v in sorted(values):
        p.produce(topic, value=v)
    assert p.flush(10) == 0
    assert sorted(_read_all(broker, group, topic, values)) == sorted(values)
    with RawClient(broker) as raw:
        md = raw.request(3, 12, {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False})  # fmt: skip
    topic_id = md.topics[0].topic_id
    wait_until(lambda: _start_offset(broker, group, topic_id) == 10, 10, "the acknowledgements in the share state")

    # records 9 and 15, in Kafka's format
    written = _share_records(broker, group)
    assert written[records.SHARE_GROUP_PARTITION_METADATA] == [records.TopicMetadata(topic_id, topic, 1)]
    state = written[records.SHARE_GROUP_STATE_PARTITION_METADATA]
    assert state.initialized == {topic_id: (topic, frozenset({0}))} and state.initializing == {}

    broker.stop()
    broker.start()
    wait_until(lambda: _start_offset(broker, group, topic_id) == 10, 20, "the share state after the restart")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})

    # the restarted coordinator serves no share partition of the group: only record 15 says
    # which partitions have state, and deleting the group deletes it
    def deleted() -> bool:
        with RawClient(broker) as raw:
            answer = raw.request(42, 2, {"groups_names": [group]})
        return answer.results[0].error_code == ErrorCode.none

    wait_until(deleted, 20, "the share group deleted")
    wait_until(lambda: _start_offset(broker, group, topic_id) == -1, 10, "the group's share state deleted")
    assert _share_records(broker, group)[records.SHARE_GROUP_STATE_PARTITION_METADATA] is None  # a tombstone

    # a new group of that name starts afresh: from the earliest record again
    set_group_configs(admin, group, share_auto_offset_reset="earliest")
    assert sorted(_read_all(broker, group, topic, values)) == sorted(values)
