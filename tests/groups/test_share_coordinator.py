"""The share coordinator's APIs (KIP-932) on one broker, as a share-partition leader in a cluster
sends them: InitializeShareGroupState, Read/WriteShareGroupState, ReadShareGroupStateSummary,
DeleteShareGroupState and FindCoordinator key type 2, with Kafka's error codes; and the pure
parts (state-batch merging, coordinator keys)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from group_raw import RawClient
from support import wait_until

from odradek.broker.share.share_coordinator import parse_state_key
from odradek.broker.share.share_state_topic import merge_batches
from odradek.protocol import errors
from odradek.protocol.errors import ErrorCode
from odradek.testing.process import BrokerProcess

ACKED, ARCHIVED, AVAILABLE = 2, 4, 0
STATE_APIS = (83, 84, 85, 86, 87)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(
        tmp_path_factory.mktemp("share-coordinator") / "data",
        overrides={"group.coordinator.rebalance.protocols": "classic,consumer,share"},
    ).start()
    yield proc
    proc.stop()
    log = proc.log_text()
    assert "Traceback" not in log, f"the broker logged a traceback:\n{log[-4000:]}"


@pytest.fixture(scope="module")
def topic_id(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic("tasks", 2, 1)])["tasks"].result(15)
    with RawClient(broker) as raw:
        md = raw.request(3, 12, {"topics": [{"name": "tasks", "topic_id": None}], "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False})  # fmt: skip
        return md.topics[0].topic_id


def _one(raw, api_key: int, version: int, group: str, topic_id, **fields):
    body = {"group_id": group, "topics": [{"topic_id": topic_id, "partitions": [{"partition": 0, **fields}]}]}
    return raw.request(api_key, version, body).results[0].partitions[0]


def _write(raw, group, topic_id, state_epoch, leader_epoch, start, batches):
    return _one(raw, 85, 1, group, topic_id, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start,
                state_batches=[{"first_offset": a, "last_offset": b, "delivery_state": s, "delivery_count": n}
                               for a, b, s, n in batches])  # fmt: skip


def _batches(result) -> list[tuple]:
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in result.state_batches]


def test_share_state_apis_are_advertised_only_with_share_groups_on(broker, tmp_path):
    with RawClient(broker) as raw:
        keys = {k.api_key: (k.min_version, k.max_version) for k in raw.request(18, 3, {"client_software_name": "t", "client_software_version": "1"}).api_keys}
    assert {k: keys.get(k) for k in STATE_APIS} == {83: (0, 0), 84: (0, 0), 85: (0, 1), 86: (0, 0), 87: (0, 1)}
    plain = BrokerProcess(tmp_path / "plain", overrides={"group.coordinator.rebalance.protocols": "classic,consumer"}).start()
    try:
        with RawClient(plain) as raw:
            keys = {k.api_key for k in raw.request(18, 3, {"client_software_name": "t", "client_software_version": "1"}).api_keys}
        assert not keys & set(STATE_APIS)
        with RawClient(plain) as raw:
            found = raw.request(10, 6, {"key_type": 2, "coordinator_keys": [f"g:{uuid.uuid4()}:0"]}).coordinators[0]
        assert found.error_code == ErrorCode.invalid_request
    finally:
        plain.stop()


def test_find_coordinator_for_share_state_keys(broker, topic_id):
    with RawClient(broker) as raw:
        def find(key, version=6):
            body = {"key_type": 2, "coordinator_keys": [key]} if version >= 4 else {"key": key, "key_type": 2}
            answer = raw.request(10, version, body)
            return answer.coordinators[0] if version >= 4 else answer

        found = wait_until(lambda: (f := find(f"g:{topic_id}:0")).error_code == ErrorCode.none and f, 20, "a share coordinator")
        assert (found.node_id, found.port) == (broker.node_id, broker.port)
        assert find("not-a-key").error_code == ErrorCode.invalid_request
        assert find(f"g:{topic_id}:-1").error_code == ErrorCode.invalid_request
        assert find(f"g:{topic_id}:0", version=5).error_code == ErrorCode.invalid_request


def test_share_state_lifecycle_with_kafkas_fencing(broker, topic_id):
    group = f"sg-{uuid.uuid4().hex[:6]}"
    with RawClient(broker) as raw:
        wait_until(lambda: raw.request(10, 6, {"key_type": 2, "coordinator_keys": [f"{group}:{topic_id}:0"]}).coordinators[0].error_code == ErrorCode.none, 20, "the state topic")  # fmt: skip
        never = _one(raw, 84, 0, group, topic_id, leader_epoch=0)
        assert (never.error_code, never.start_offset, never.state_epoch, _batches(never)) == (0, -1, 0, [])

        assert _one(raw, 83, 0, group, topic_id, state_epoch=1, start_offset=5).error_code == ErrorCode.none
        assert _one(raw, 83, 0, group, topic_id, state_epoch=1, start_offset=7).error_code == ErrorCode.fenced_state_epoch
        assert _write(raw, group, topic_id, 1, 3, 5, [(5, 6, ACKED, 1), (7, 9, AVAILABLE, 1)]).error_code == ErrorCode.none
        # later writes are merged in: overlapping ranges replaced, below the start offset dropped
        assert _write(raw, group, topic_id, 1, 3, 6, [(8, 12, ARCHIVED, 2)]).error_code == ErrorCode.none
        read = _one(raw, 84, 0, group, topic_id, leader_epoch=3)
        assert (read.error_code, read.state_epoch, read.start_offset) == (0, 1, 6)
        assert _batches(read) == [(6, 6, ACKED, 1), (7, 7, AVAILABLE, 1), (8, 12, ARCHIVED, 2)]

        assert _write(raw, group, topic_id, 0, 3, 6, []).error_code == ErrorCode.fenced_state_epoch
        assert _write(raw, group, topic_id, 1, 2, 6, []).error_code == ErrorCode.fenced_leader_epoch
        assert _one(raw, 84, 0, group, topic_id, leader_epoch=2).error_code == ErrorCode.fenced_leader_epoch
        assert _one(raw, 84, 0, group, topic_id, leader_epoch=4).error_code == ErrorCode.none  # a newer leader
        assert _write(raw, group, topic_id, 1, 3, 6, []).error_code == ErrorCode.fenced_leader_epoch

        summary = _one(raw, 87, 1, group, topic_id, leader_epoch=4)
        assert (summary.error_code, summary.state_epoch, summary.leader_epoch, summary.start_offset) == (0, 1, 4, 6)

        assert _one(raw, 84, 0, group, topic_id, leader_epoch=0, partition=5).error_code == ErrorCode.unknown_topic_or_partition
        assert _one(raw, 84, 0, group, uuid.uuid4(), leader_epoch=0).error_code == ErrorCode.unknown_topic_or_partition
        assert _one(raw, 84, 0, group, None, leader_epoch=0).error_code == ErrorCode.invalid_request

        assert _one(raw, 86, 0, group, topic_id).error_code == ErrorCode.none
        gone = _one(raw, 84, 0, group, topic_id, leader_epoch=0)
        assert (gone.start_offset, gone.state_epoch) == (-1, 0)


def test_merge_batches_overrides_overlaps_and_cuts_below_the_start():
    old = [(0, 9, AVAILABLE, 1), (10, 19, ACKED, 1)]
    assert merge_batches(old, [(5, 12, ARCHIVED, 2)], 3) == [(3, 4, AVAILABLE, 1), (5, 12, ARCHIVED, 2), (13, 19, ACKED, 1)]
    assert merge_batches(old, [], 15) == [(15, 19, ACKED, 1)]
    assert merge_batches([(0, 4, ACKED, 1)], [(5, 9, ACKED, 1)], 0) == [(0, 9, ACKED, 1)]  # neighbours joined
    assert merge_batches(old, [(0, 30, ACKED, 3)], 0) == [(0, 30, ACKED, 3)]


def test_share_state_keys_are_group_topic_id_partition():
    topic = uuid.uuid4()
    assert parse_state_key(f"a:b:{topic}:3") == ("a:b", topic, 3)  # a group id may hold colons
    for bad in ("", "g", f"g:{topic}", f":{topic}:0", "g:nope:0", f"g:{topic}:x", f"g:{topic}:-1"):
        with pytest.raises(errors.InvalidRequestError):
            parse_state_key(bad)
