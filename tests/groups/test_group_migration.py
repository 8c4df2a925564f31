"""Online migration between classic and consumer groups (KIP-848, ``group.consumer.migration.policy``):
a consumer-protocol member joining a classic group with members converts it, the classic members
go on speaking JoinGroup/SyncGroup/Heartbeat inside the consumer group, and the group goes back to
classic when the last consumer-protocol member leaves; both conversions survive a restart."""

from __future__ import annotations

import uuid

import pytest
from group_raw import RawClient
from support import started_broker, wait_until
from test_consumer_protocol import OVERRIDES, describe, find_coordinator, heartbeat, new_topic

from odradek.client.consumer.consumer_protocol import (
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from odradek.client.structs import TopicPartition
from odradek.protocol.errors import ErrorCode
from odradek.testing.process import BrokerProcess


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    yield from started_broker(tmp_path_factory.mktemp("migration") / "data", OVERRIDES)


def group_types(raw) -> dict[str, str]:
    return {g.group_id: g.group_type for g in raw.request(16, 5, {"states_filter": [], "types_filter": []}).groups}


class ClassicMember:
    """A hand-driven classic consumer: JoinGroup v5, SyncGroup v5, Heartbeat v4, OffsetCommit v8."""

    def __init__(self, raw, group: str, topic: str, instance_id: str | None = None, rebalance_timeout: int = 10000):
        self.raw, self.group, self.topic, self.instance_id = raw, group, topic, instance_id
        self.rebalance_timeout = rebalance_timeout
        self.member_id = ""
        self.generation = -1
        self.owned: set[int] = set()

    def join(self):
        metadata = encode_subscription([self.topic], None, [TopicPartition(self.topic, p) for p in self.owned])
        while True:
            answer = self.raw.request(11, 5, {
                "group_id": self.group, "session_timeout": 10000, "rebalance_timeout": self.rebalance_timeout,
                "member_id": self.member_id, "group_instance_id": self.instance_id, "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": metadata}],
            })
            self.member_id = answer.member_id
            if answer.error_code != ErrorCode.member_id_required:
                break
        if answer.error_code == ErrorCode.none:
            self.generation = answer.generation_id
        return answer

    def sync(self, assignments: dict[str, bytes] | None = None):
        answer = self.raw.request(14, 5, {
            "group_id": self.group, "generation_id": self.generation, "member_id": self.member_id,
            "group_instance_id": self.instance_id, "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()],
        })
        if answer.error_code == ErrorCode.none:
            self.owned = {tp.partition for tp in decode_assignment(answer.assignment)[0]}
        return answer

    def heartbeat(self, generation: int | None = None) -> int:
        return self.raw.request(12, 4, {
            "group_id": self.group, "generation_id": self.generation if generation is None else generation,
            "member_id": self.member_id, "group_instance_id": self.instance_id,
        }).error_code

    def commit(self, generation: int) -> int:
        answer = self.raw.request(8, 8, {
            "group_id": self.group, "generation_id_or_member_epoch": generation, "member_id": self.member_id,
            "group_instance_id": None, "retention_time_ms": -1,
            "topics": [{"name": self.topic, "partitions": [{"partition_index": 0, "committed_offset": 3,
                                                             "committed_leader_epoch": -1, "committed_metadata": ""}]}],
        })
        return answer.topics[0].partitions[0].error_code


def lone_classic_member(raw, group: str, topic: str, partitions: int, **options) -> ClassicMember:
    """A classic group of one member that assigned itself every partition of ``topic``."""
    find_coordinator(raw, group)
    a = ClassicMember(raw, group, topic, **options)
    assert a.join().error_code == ErrorCode.none
    everything = encode_assignment([TopicPartition(topic, p) for p in range(partitions)])
    assert a.sync({a.member_id: everything}).error_code == ErrorCode.none
    return a


def partitions_of(assignment) -> set[int]:
    return {p for t in (assignment.topic_partitions if assignment else ()) for p in t.partitions}


def test_a_classic_group_upgrades_online_keeps_its_classic_member_and_downgrades_through_restarts(tmp_path):
    proc = BrokerProcess(tmp_path / "data", overrides=OVERRIDES).start()
    try:
        topic = new_topic(proc, 4)
        group = f"mig-{uuid.uuid4().hex[:6]}"
        with RawClient(proc) as raw:
            a = lone_classic_member(raw, group, topic, 4)
            assert a.generation == 1 and a.owned == {0, 1, 2, 3}
            assert group_types(raw)[group] == "classic"

            # a consumer-protocol member joins: the group becomes a consumer group at once
            c1 = heartbeat(raw, group, "c1", 0, subscribed_topic_names=[topic])
            assert c1.error_code == ErrorCode.none and c1.member_epoch == 2
            assert partitions_of(c1.assignment) == set()  # a classic member still owns them
            assert group_types(raw)[group] == "consumer"
            assert a.heartbeat() == ErrorCode.rebalance_in_progress
            assert a.heartbeat(generation=7) == ErrorCode.illegal_generation

            # the classic member rejoins owning everything: it keeps half, at its old generation
            assert a.join().error_code == ErrorCode.none and a.generation == 1
            assert a.sync().error_code == ErrorCode.none and len(a.owned) == 2
            assert a.heartbeat() == ErrorCode.rebalance_in_progress  # revoked: rejoin without them
            assert a.join().error_code == ErrorCode.none and a.generation == 2
            assert a.sync().error_code == ErrorCode.none and len(a.owned) == 2
            assert a.heartbeat() == ErrorCode.none
            assert a.commit(2) == ErrorCode.none and a.commit(1) == ErrorCode.illegal_generation

            c1 = heartbeat(raw, group, "c1", 2)
            assert c1.error_code == ErrorCode.none
            assert partitions_of(c1.assignment) == {0, 1, 2, 3} - a.owned
            described = describe(proc, group)
            assert {m.member_id: m.member_type for m in described.members} == {a.member_id: 0, "c1": 1}

        proc.stop()
        proc.start()
        with RawClient(proc) as raw:
            a.raw = raw
            assert group_types(raw)[group] == "consumer"
            described = describe(proc, group)
            assert {(m.member_id, m.member_type, m.member_epoch) for m in described.members} == {
                (a.member_id, 0, 2), ("c1", 1, 2)
            }
            assert a.heartbeat() == ErrorCode.none
            # the consumer-protocol member leaves: only a classic member is left, the group is classic again
            assert heartbeat(raw, group, "c1", -1).error_code == ErrorCode.none
            assert group_types(raw)[group] == "classic"
            assert a.heartbeat() == ErrorCode.rebalance_in_progress
            joined = a.join()
            assert joined.error_code == ErrorCode.none and joined.leader == a.member_id and a.generation == 3
            everything = encode_assignment([TopicPartition(topic, p) for p in range(4)])
            assert a.sync({a.member_id: everything}).error_code == ErrorCode.none and a.owned == {0, 1, 2, 3}

        proc.stop()
        proc.start()
        with RawClient(proc) as raw:
            a.raw = raw
            assert group_types(raw)[group] == "classic"
            assert a.heartbeat() == ErrorCode.none
    finally:
        proc.stop()
    assert "Traceback" not in proc.log_text()


def test_a_static_member_back_with_the_classic_protocol_downgrades_the_group_keeping_its_partitions(broker):
    topic = new_topic(broker, 4)
    group = f"mig-{uuid.uuid4().hex[:6]}"
    with RawClient(broker) as raw:
        a = lone_classic_member(raw, group, topic, 4)
        s = heartbeat(raw, group, "s1", 0, subscribed_topic_names=[topic], instance_id="inst")
        assert s.error_code == ErrorCode.none and group_types(raw)[group] == "consumer"
        # the classic member gives up half; the static consumer-protocol member takes it
        assert a.heartbeat() == ErrorCode.rebalance_in_progress
        a.join()
        a.sync()
        assert a.heartbeat() == ErrorCode.rebalance_in_progress
        a.join()
        a.sync()
        assert a.heartbeat() == ErrorCode.none and len(a.owned) == 2
        s = heartbeat(raw, group, "s1", s.member_epoch, instance_id="inst")
        held = partitions_of(s.assignment)
        assert held == {0, 1, 2, 3} - a.owned
        # "inst" restarts speaking the classic protocol: it takes s1's place and the group is classic again
        back = ClassicMember(raw, group, topic, instance_id="inst")
        joined = back.join()
        assert joined.error_code == ErrorCode.none and group_types(raw)[group] == "classic"
        assert back.sync().error_code == ErrorCode.none and back.owned == held  # no rebalance
        assert a.heartbeat() == ErrorCode.none and back.heartbeat() == ErrorCode.none
        described = raw.request(15, 5, {"groups": [group], "include_authorized_operations": False}).groups[0]
        assert described.group_state == "Stable" and len(described.members) == 2


def test_a_classic_member_that_does_not_rejoin_or_sync_in_time_is_fenced_and_its_partitions_move(broker):
    topic = new_topic(broker, 4)
    group = f"mig-{uuid.uuid4().hex[:6]}"
    with RawClient(broker) as raw:
        a = lone_classic_member(raw, group, topic, 4, rebalance_timeout=1500)
        c1 = heartbeat(raw, group, "c1", 0, subscribed_topic_names=[topic])
        assert a.heartbeat() == ErrorCode.rebalance_in_progress  # told to rejoin, it never does

        def c1_partitions() -> set[int]:
            nonlocal c1
            c1 = heartbeat(raw, group, "c1", c1.member_epoch, topic_partitions=[])
            assert c1.error_code == ErrorCode.none
            return partitions_of(c1.assignment) if c1.assignment is not None else set()

        owned: set[int] = set()
        wait_until(lambda: owned.update(c1_partitions()) or owned == {0, 1, 2, 3}, 20, "c1 owning every partition")
        assert a.heartbeat() == ErrorCode.unknown_member_id
        assert group_types(raw)[group] == "consumer"  # a fenced classic member does not downgrade it
        # joins again (its old id makes it a new member) but never sends SyncGroup: fenced again
        assert a.join().error_code == ErrorCode.none
        wait_until(lambda: a.heartbeat() == ErrorCode.unknown_member_id, 20, "the member fenced for not syncing",
                   step=c1_partitions)  # c1 stays
        assert group_types(raw)[group] == "consumer"


def test_a_migration_policy_without_upgrade_keeps_a_classic_group_with_members_classic(tmp_path):
    overrides = {**OVERRIDES, "group.consumer.migration.policy": "downgrade"}
    with BrokerProcess(tmp_path / "data", overrides=overrides) as proc:
        topic = new_topic(proc, 2)
        group = f"mig-{uuid.uuid4().hex[:6]}"
        with RawClient(proc) as raw:
            a = lone_classic_member(raw, group, topic, 2)
            refused = heartbeat(raw, group, "c1", 0, subscribed_topic_names=[topic])
            assert refused.error_code == ErrorCode.group_id_not_found
            assert group_types(raw)[group] == "classic" and a.heartbeat() == ErrorCode.none


# -- real clients ---------------------------------------------------------------------------


class Readers:
    """Consumers polled in turn; each record is committed (synchronously) before the next poll,
    so a partition moving between members never loses or repeats a record."""

    def __init__(self):
        self.consumers: list = []
        self.read: list[bytes] = []

    def add(self, c) -> None:
        self.consumers.append(c)

    def poll(self) -> None:
        for c in self.consumers:
            m = c.poll(0.05)
            if m is not None and not m.error():
                self.read.append(m.value())
                c.commit(message=m, asynchronous=False)

    def assignments(self) -> list[set[int]]:
        return [{tp.partition for tp in c.assignment()} for c in self.consumers]


def covers_disjointly(assignments: list[set[int]], partitions: int) -> bool:
    flat = [p for a in assignments for p in a]
    return all(assignments) and sorted(flat) == list(range(partitions))


def confluent(broker, group: str, protocol: str):
    from confluent_kafka import Consumer

    conf = {
        "bootstrap.servers": broker.bootstrap_servers, "group.id": group, "group.protocol": protocol,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "topic.metadata.refresh.interval.ms": 500,
    }
    if protocol == "classic":
        conf |= {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300}
    return Consumer(conf)


def produce_batch(broker, topic: str, prefix: str, count: int, partitions: int) -> list[bytes]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    values = [f"{prefix}-{i}".encode() for i in range(count)]
    for i, v in enumerate(values):
        p.produce(topic, value=v, partition=i % partitions)
    assert p.flush(15) == 0
    return values


def test_librdkafka_classic_members_stay_through_an_upgrade_and_a_downgrade_reading_each_record_once(broker):
    partitions = 6
    topic = new_topic(broker, partitions)
    group = f"mig-{uuid.uuid4().hex[:6]}"
    readers = Readers()
    sent = produce_batch(broker, topic, "a", 120, partitions)
    classics = [confluent(broker, group, "classic") for _ in range(2)]
    for c in classics:
        c.subscribe([topic])
        readers.add(c)
    wait_until(lambda: covers_disjointly(readers.assignments(), partitions), 30, "two classic members", step=readers.poll)
    with RawClient(broker) as raw:
        assert group_types(raw)[group] == "classic"
        sent += produce_batch(broker, topic, "b", 120, partitions)
        modern = confluent(broker, group, "consumer")
        modern.subscribe([topic])
        readers.add(modern)
        wait_until(
            lambda: group_types(raw)[group] == "consumer" and covers_disjointly(readers.assignments(), partitions),
            45, "three members of a consumer group sharing the partitions", step=readers.poll,
        )
        sent += produce_batch(broker, topic, "c", 120, partitions)
        wait_until(lambda: len(readers.read) >= len(sent), 30, "every record", step=readers.poll)
        assert {m.member_type for m in describe(broker, group).members} == {0, 1}

        modern.close()
        readers.consumers.remove(modern)
        wait_until(
            lambda: group_types(raw)[group] == "classic" and covers_disjointly(readers.assignments(), partitions),
            45, "the two classic members back in a classic group", step=readers.poll,
        )
        sent += produce_batch(broker, topic, "d", 120, partitions)
        wait_until(lambda: len(readers.read) >= len(sent), 30, "every record", step=readers.poll)
    for c in classics:
        c.close()
    assert sorted(readers.read) == sorted(sent)  # nothing lost, nothing read twice


def test_kafka_python_is_a_classic_member_of_a_consumer_group(broker):
    from kafka import KafkaConsumer

    partitions = 4
    topic = new_topic(broker, partitions)
    group = f"mig-{uuid.uuid4().hex[:6]}"
    readers = Readers()
    modern = confluent(broker, group, "consumer")
    modern.subscribe([topic])
    readers.add(modern)
    wait_until(lambda: readers.assignments() == [set(range(partitions))], 30, "the first member", step=readers.poll)
    kp = KafkaConsumer(
        topic, bootstrap_servers=broker.bootstrap_servers, group_id=group, auto_offset_reset="earliest",
        enable_auto_commit=False, heartbeat_interval_ms=300, session_timeout_ms=6000,
    )
    kp_read: list[bytes] = []

    def poll_both() -> None:
        readers.poll()
        for records in kp.poll(timeout_ms=50).values():
            kp_read.extend(r.value for r in records)
        kp.commit()

    def shared() -> bool:
        mine = {tp.partition for tp in kp.assignment()}
        return bool(mine) and covers_disjointly(readers.assignments() + [mine], partitions)

    wait_until(shared, 45, "kafka-python and librdkafka sharing the partitions", step=poll_both)
    with RawClient(broker) as raw:
        assert group_types(raw)[group] == "consumer"
    members = describe(broker, group).members
    assert sorted(m.member_type for m in members) == [0, 1]
    sent = produce_batch(broker, topic, "k", 80, partitions)
    wait_until(lambda: len(readers.read) + len(kp_read) >= len(sent), 30, "every record", step=poll_both)
    assert sorted(readers.read + kp_read) == sorted(sent)
    assert kp_read and readers.read
    kp.close()
    wait_until(lambda: readers.assignments() == [set(range(partitions))], 30, "the partitions back", step=readers.poll)
    modern.close()


# -- the bytes ------------------------------------------------------------------------------


def test_consumer_protocol_bytes_and_the_classic_member_record_read_back_as_written():
    from odradek.broker.group import consumer_offsets_schema as schema
    from odradek.broker.group import modern_group_records as records
    from odradek.client.consumer.consumer_protocol import decode_assignment as client_decode

    for version in (0, 1, 3):
        data = encode_subscription(["t", "u"], b"x", [TopicPartition("t", 2), TopicPartition("t", 0)], version)
        sub = schema.decode_subscription(data)
        assert (sub.version, sub.topics) == (version, ("t", "u"))
        assert sub.owned == ({} if version == 0 else {"t": frozenset({0, 2})})
    data = schema.encode_assignment({"t": frozenset({1, 3}), "u": frozenset()}, 1)
    assert client_decode(data) == ({TopicPartition("t", 1), TopicPartition("t", 3)}, None)
    assert schema.decode_assignment(data) == {"t": frozenset({1, 3})}

    classic = records.ClassicMemberMetadata(6000, (("range", b"\x00\x01"), ("roundrobin", b"")))
    value = records.ConsumerMemberValue(None, "r1", "c", "/h", ("t",), None, 30000, None, classic)
    encoded = records.encode_value(records.CONSUMER_GROUP_MEMBER_METADATA, value)
    assert records.decode_value(records.CONSUMER_GROUP_MEMBER_METADATA, encoded) == value
    plain = value._replace(classic=None)
    assert records.decode_value(
        records.CONSUMER_GROUP_MEMBER_METADATA, records.encode_value(records.CONSUMER_GROUP_MEMBER_METADATA, plain)
    ) == plain
    with pytest.raises(Exception) as refused:
        schema.decode_subscription(b"\x00\x00\x00\x00\x00\x05")
    assert "truncated" in str(refused.value)
