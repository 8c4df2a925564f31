"""No client can damage the coordinators' internal topics.

Guards issue 12's item 8: CreatePartitions on ``__consumer_offsets`` (committed offsets were
lost after a restart: a group's partition is a hash modulo the count), IncrementalAlterConfigs
``cleanup.policy=delete, retention.ms=1`` on it, and DeleteRecords on it all succeeded.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

OFFSETS = "__consumer_offsets"


def admin(proc) -> AdminClient:
    return AdminClient({"bootstrap.servers": proc.bootstrap_servers})


def kafka_error(future, timeout: float = 30) -> KafkaError:
    with pytest.raises(Exception) as info:
        future.result(timeout)
    return info.value.args[0]


def commit_offsets(proc, group: str, topic: str, offsets: dict[int, int]) -> None:
    c = Consumer({"bootstrap.servers": proc.bootstrap_servers, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        c.close()


def committed(proc, group: str, topic: str, partitions) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": proc.bootstrap_servers, "group.id": group, "enable.auto.commit": False})
    try:
        return {tp.partition: tp.offset for tp in c.committed([TopicPartition(topic, p) for p in partitions], 30)}
    finally:
        c.close()


@pytest.fixture
def with_offsets(own_broker):
    """A broker whose __consumer_offsets exists and holds commits of 20 groups."""
    proc = own_broker()
    client = admin(proc)
    client.create_topics([NewTopic("orders", 3, 1)])["orders"].result(30)
    p = Producer({"bootstrap.servers": proc.bootstrap_servers})
    for i in range(30):
        p.produce("orders", b"x", partition=i % 3)
    assert p.flush(30) == 0
    groups = {f"group-{i}": {0: i + 1, 1: 2 * i + 1, 2: 3} for i in range(20)}
    for group, offsets in groups.items():
        commit_offsets(proc, group, "orders", offsets)
    return proc, groups


def test_partition_count_of_consumer_offsets_cannot_change_and_commits_survive_restart(with_offsets):
    proc, groups = with_offsets
    client = admin(proc)
    before = len(client.list_topics(OFFSETS, timeout=10).topics[OFFSETS].partitions)
    (future,) = client.create_partitions([NewPartitions(OFFSETS, before + 7)]).values()
    err = kafka_error(future)
    assert err.code() == KafkaError.INVALID_REQUEST and "partition count" in err.str(), err
    proc.restart()
    client = admin(proc)
    assert len(client.list_topics(OFFSETS, timeout=10).topics[OFFSETS].partitions) == before
    for group, offsets in groups.items():
        assert committed(proc, group, "orders", offsets) == offsets, group


def test_cleanup_policy_of_consumer_offsets_cannot_change(with_offsets):
    proc, groups = with_offsets
    client = admin(proc)
    resource = ConfigResource(ConfigResource.Type.TOPIC, OFFSETS)
    resource.add_incremental_config(ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SET))
    resource.add_incremental_config(ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET))
    (future,) = client.incremental_alter_configs([resource]).values()
    err = kafka_error(future)
    assert err.code() == KafkaError.INVALID_CONFIG and "must stay compact" in err.str(), err
    # Deleting the override would bring the broker default (delete) in: refused too.
    resource = ConfigResource(ConfigResource.Type.TOPIC, OFFSETS)
    resource.add_incremental_config(ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE))
    (future,) = client.incremental_alter_configs([resource]).values()
    assert kafka_error(future).code() == KafkaError.INVALID_CONFIG
    # AlterConfigs replaces every override: without cleanup.policy=compact it is refused.
    (future,) = client.alter_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, OFFSETS, set_config={"retention.ms": "1"})]
    ).values()
    assert kafka_error(future).code() == KafkaError.INVALID_CONFIG
    # What keeps it compacted is still allowed.
    resource = ConfigResource(ConfigResource.Type.TOPIC, OFFSETS)
    resource.add_incremental_config(
        ConfigEntry("min.cleanable.dirty.ratio", "0.3", incremental_operation=AlterConfigOpType.SET)
    )
    (future,) = client.incremental_alter_configs([resource]).values()
    future.result(30)
    (described,) = client.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, OFFSETS)]).values()
    assert described.result(30)["cleanup.policy"].value == "compact"
    for group, offsets in list(groups.items())[:3]:
        assert committed(proc, group, "orders", offsets) == offsets


def test_delete_records_and_delete_topic_on_consumer_offsets_are_refused(with_offsets):
    proc, groups = with_offsets
    client = admin(proc)
    futures = client.delete_records([TopicPartition(OFFSETS, p, -1) for p in range(3)])
    for future in futures.values():
        assert kafka_error(future).code() == KafkaError.TOPIC_EXCEPTION
    (future,) = client.delete_topics([OFFSETS]).values()
    assert kafka_error(future).code() == KafkaError.INVALID_REQUEST
    for group, offsets in groups.items():
        assert committed(proc, group, "orders", offsets) == offsets, group


def test_clients_cannot_create_an_internal_topic_their_way(own_broker):
    proc = own_broker()
    client = admin(proc)
    for name in (OFFSETS, "__transaction_state"):
        future = client.create_topics(
            [NewTopic(name, 1, 1, config={"cleanup.policy": "delete", "retention.ms": "1"})]
        )[name]
        err = kafka_error(future)
        assert err.code() == KafkaError.INVALID_REQUEST and "internal topic" in err.str(), err
    # The broker still creates __consumer_offsets its own way when a group needs it.
    client.create_topics([NewTopic("plain", 1, 1)])["plain"].result(30)
    commit_offsets(proc, "g", "plain", {0: 0})
    (described,) = client.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, OFFSETS)]).values()
    assert described.result(30)["cleanup.policy"].value == "compact"
