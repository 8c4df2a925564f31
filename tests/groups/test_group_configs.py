"""Group configs (GROUP resources) and share-group membership kept in __consumer_offsets, both
surviving a broker restart."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from group_raw import RawClient
from support import set_group_configs, started_broker, wait_until

from odradek.protocol.errors import ErrorCode

OVERRIDES = {
    "group.coordinator.rebalance.protocols": "classic,consumer,share",
    "group.consumer.min.session.timeout.ms": 1000,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.share.heartbeat.interval.ms": 300,
    "group.share.session.timeout.ms": 20000,
}


@pytest.fixture
def broker(tmp_path):
    yield from started_broker(tmp_path / "data", OVERRIDES)


def find_coordinator(raw, group: str) -> None:
    wait_until(lambda: raw.request(10, 3, {"key": group, "key_type": 0}).error_code == ErrorCode.none, 15, "a coordinator")


def consumer_heartbeat(raw, group: str, member: str, topic: str):
    return raw.request(68, 1, {
        "group_id": group, "member_id": member, "member_epoch": 0, "instance_id": None, "rack_id": None,
        "rebalance_timeout": 30000, "subscribed_topic_names": [topic], "subscribed_topic_regex": None,
        "server_assignor": None, "topic_partitions": []})


def share_heartbeat(raw, group: str, member: str, epoch: int, topics=None):
    return raw.request(76, 1, {"group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": None,
                               "subscribed_topic_names": topics})


def share_describe(raw, group: str):
    return raw.request(77, 1, {"group_ids": [group], "include_authorized_operations": False}).groups[0]


def test_group_configs_survive_a_restart_and_apply_to_their_groups(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    topic = f"gc-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    set_group_configs(admin, "cg", consumer_session_timeout_ms="1500", consumer_heartbeat_interval_ms="150")
    set_group_configs(admin, "sg", share_auto_offset_reset="earliest")
    # bad values and unknown keys: INVALID_CONFIG, naming the bounds; nothing is stored
    for key, value in (("consumer.session.timeout.ms", "999999"), ("consumer.heartbeat.interval.ms", "50"),
                       ("share.auto.offset.reset", "none"), ("no.such.key", "1")):
        bad = ConfigResource(ResourceType.GROUP, "cg", incremental_configs=[
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
        with pytest.raises(KafkaException) as refused:
            admin.incremental_alter_configs([bad])[bad].result(10)
        assert refused.value.args[0].code() == ErrorCode.invalid_config, key

    broker.stop()
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    resource = ConfigResource(ResourceType.GROUP, "cg")
    described = admin.describe_configs([resource])[resource].result(10)
    assert described["consumer.session.timeout.ms"].value == "1500"
    assert described["consumer.session.timeout.ms"].source == ConfigSource.GROUP_CONFIG.value
    assert described["consumer.heartbeat.interval.ms"].value == "150"
    assert described["share.auto.offset.reset"].value == "latest"  # not set on cg: the default
    assert described["share.auto.offset.reset"].source == ConfigSource.DEFAULT_CONFIG.value

    with RawClient(broker) as raw:
        find_coordinator(raw, "cg")
        joined = consumer_heartbeat(raw, "cg", "m1", topic)
        assert joined.error_code == ErrorCode.none and joined.heartbeat_interval.total_seconds() == 0.15
        # the group's 1.5 s session (the broker's is 45 s) fences the silent member
        wait_until(
            lambda: not raw.request(69, 1, {"group_ids": ["cg"], "include_authorized_operations": False})
            .groups[0].members,
            15,
            "the silent member fenced",
        )

    # the share group starts at the earliest offset, as its (restored) config says
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    values = {f"v{i}".encode() for i in range(5)}
    for v in sorted(values):
        p.produce(topic, value=v)
    assert p.flush(10) == 0
    c = ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "sg"})
    c.subscribe([topic])
    read: list[bytes] = []
    try:
        wait_until(lambda: set(read) >= values, 20, "the records produced before the group joined",
                   step=lambda: read.extend(m.value() for m in c.poll(0.2) or [] if m.error() is None))
    finally:
        c.close()
    assert sorted(read) == sorted(values)


def test_share_group_members_and_deletion_survive_a_coordinator_restart(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    topic = f"gm-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
    group = "sg-members"
    with RawClient(broker) as raw:
        find_coordinator(raw, group)
        m1 = share_heartbeat(raw, group, "m1", 0, [topic])
        m2 = share_heartbeat(raw, group, "m2", 0, [topic])
        assert m1.error_code == m2.error_code == ErrorCode.none and m2.member_epoch > m1.member_epoch
        assert share_heartbeat(raw, group, "m2", -1).error_code == ErrorCode.none  # m2 leaves
    broker.stop()
    broker.start()
    with RawClient(broker) as raw:
        find_coordinator(raw, group)
        described = share_describe(raw, group)
        assert described.error_code == ErrorCode.none
        assert [(m.member_id, m.member_epoch) for m in described.members] == [("m1", m1.member_epoch)]
        assert sorted(described.members[0].assignment.topic_partitions[0].partitions) == [0, 1]
        # m1 goes on heartbeating with its epoch: no rejoin
        again = share_heartbeat(raw, group, "m1", m1.member_epoch)
        assert again.error_code == ErrorCode.none and again.member_epoch == m1.member_epoch
        assert share_heartbeat(raw, group, "m1", -1).error_code == ErrorCode.none
        deleted = raw.request(42, 2, {"groups_names": [group]}).results[0]
        assert deleted.error_code == ErrorCode.none
    broker.stop()
    broker.start()
    with RawClient(broker) as raw:
        find_coordinator(raw, group)
        assert share_describe(raw, group).error_code == ErrorCode.group_id_not_found
