"""The consumer rebalance protocol (KIP-848) with confluent-kafka's ``group.protocol=consumer``,
and hand-made ConsumerGroupHeartbeats for the errors a real client does not provoke."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from group_raw import RawClient
from support import started_broker, wait_until

from odradek.protocol.errors import ErrorCode
from odradek.testing.process import BrokerProcess

OVERRIDES = {
    "group.consumer.heartbeat.interval.ms": 200,
    "group.consumer.session.timeout.ms": 2500,
    "group.initial.rebalance.delay.ms": 100,
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    yield from started_broker(tmp_path_factory.mktemp("kip848") / "data", OVERRIDES)


def new_topic(broker, partitions: int, name: str | None = None) -> str:
    name = name or f"kip848-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    return name


def produce(broker, topic: str, count: int, partitions: int) -> set[bytes]:
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    values = {f"v{i}".encode() for i in range(count)}
    for i, v in enumerate(sorted(values)):
        p.produce(topic, value=v, partition=i % partitions)
    assert p.flush(15) == 0
    return values


def consumer(broker, group: str, **conf) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 100,
            "topic.metadata.refresh.interval.ms": 500,
            **conf,
        }
    )


class Members:
    """Consumers polled together; each remembers what it read."""

    def __init__(self, *consumers: Consumer):
        self.consumers = list(consumers)
        self.read: dict[int, list[bytes]] = {id(c): [] for c in consumers}

    def add(self, c: Consumer) -> None:
        self.consumers.append(c)
        self.read[id(c)] = []

    def poll(self) -> None:
        for c in self.consumers:
            m = c.poll(0.05)
            if m is not None and not m.error():
                self.read[id(c)].append(m.value())

    def values(self) -> list[bytes]:
        return [v for vs in self.read.values() for v in vs]

    def assignments(self) -> list[set[tuple[str, int]]]:
        return [{(tp.topic, tp.partition) for tp in c.assignment()} for c in self.consumers]

    def close(self) -> None:
        for c in self.consumers:
            c.close()


def describe(broker, group: str):
    with RawClient(broker) as raw:
        answer = raw.request(69, 1, {"group_ids": [group], "include_authorized_operations": False})
    return answer.groups[0]


def split_evenly(assignments, total: int) -> bool:
    flat = [tp for a in assignments for tp in a]
    sizes = sorted(len(a) for a in assignments)
    return len(flat) == total and len(set(flat)) == total and sizes[-1] - sizes[0] <= 1


def test_members_join_share_partitions_and_read_everything_once(broker):
    topic = new_topic(broker, 6)
    values = produce(broker, topic, 60, 6)
    group = f"g-{uuid.uuid4().hex[:6]}"
    first = consumer(broker, group)
    first.subscribe([topic])
    members = Members(first)
    wait_until(lambda: len(members.assignments()[0]) == 6, 20, "the first member gets all 6", step=members.poll)
    second = consumer(broker, group)
    second.subscribe([topic])
    members.add(second)
    wait_until(lambda: split_evenly(members.assignments(), 6), 20, "3 partitions each", step=members.poll)
    wait_until(lambda: set(members.values()) >= values, 20, "every record read", step=members.poll)
    assert len(members.values()) == len(set(members.values()))  # no partition read twice
    described = describe(broker, group)
    assert described.error_code == ErrorCode.none
    assert described.group_state == "Stable"
    assert described.assignor_name == "uniform"
    assert len(described.members) == 2
    assert all(m.member_epoch == described.assignment_epoch for m in described.members)
    # a member leaving hands its partitions to the other
    second.close()
    members.consumers.remove(second)
    wait_until(lambda: len(members.assignments()[0]) == 6, 20, "the survivor gets all 6", step=members.poll)
    members.close()


MEMBER_SCRIPT = textwrap.dedent(
    """
    import sys
    from confluent_kafka import Consumer
    bootstrap, group, topic, instance = sys.argv[1:5]
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest"}
    if instance != "-":
        conf["group.instance.id"] = instance
    c = Consumer(conf)
    c.subscribe([topic])
    while True:
        c.poll(0.1)
        if c.assignment():
            print("assigned", flush=True)
    """
)


def member_process(broker, group: str, topic: str, instance: str = "-") -> subprocess.Popen:
    """A consumer in a child process (to be killed with SIGKILL); prints ``assigned`` when it is."""
    return subprocess.Popen(
        [sys.executable, "-c", MEMBER_SCRIPT, broker.bootstrap_servers, group, topic, instance],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )


def test_killed_member_is_fenced_after_its_session_and_its_partitions_move(broker):
    topic = new_topic(broker, 4)
    group = f"g-{uuid.uuid4().hex[:6]}"
    proc = member_process(broker, group, topic)
    try:
        assert proc.stdout.readline().strip() == b"assigned"
        survivor = consumer(broker, group)
        survivor.subscribe([topic])
        members = Members(survivor)
        wait_until(lambda: len(members.assignments()[0]) == 2, 20, "2 partitions each", step=members.poll)
        proc.kill()  # kill -9: no leave heartbeat
        proc.wait()
        wait_until(lambda: len(members.assignments()[0]) == 4, 20, "the survivor gets all 4", step=members.poll)
        assert len(describe(broker, group).members) == 1
        members.close()
    finally:
        proc.kill()
        proc.wait()


def test_added_partitions_are_assigned(broker):
    topic = new_topic(broker, 2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = consumer(broker, group)
    c.subscribe([topic])
    members = Members(c)
    wait_until(lambda: len(members.assignments()[0]) == 2, 20, "2 partitions", step=members.poll)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(15)
    wait_until(lambda: len(members.assignments()[0]) == 5, 20, "the 3 new partitions", step=members.poll)
    members.close()


def test_regex_subscription_picks_up_a_matching_topic_created_later(broker):
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    first = new_topic(broker, 2, f"{prefix}-a")
    new_topic(broker, 1, f"other-{prefix}")
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = consumer(broker, group)
    c.subscribe([f"^{prefix}-.*"])
    members = Members(c)
    wait_until(lambda: members.assignments()[0] == {(first, 0), (first, 1)}, 20, "the matching topic", step=members.poll)
    second = new_topic(broker, 2, f"{prefix}-b")
    want = {(first, 0), (first, 1), (second, 0), (second, 1)}
    wait_until(lambda: members.assignments()[0] == want, 20, "the new matching topic", step=members.poll)
    assert describe(broker, group).members[0].subscribed_topic_regex == f"(^{prefix}-.*)"  # as librdkafka sends it
    members.close()


def test_static_member_restarting_gets_its_partitions_back(broker):
    topic = new_topic(broker, 4)
    group = f"g-{uuid.uuid4().hex[:6]}"
    other = consumer(broker, group, **{"group.instance.id": "other"})
    static = consumer(broker, group, **{"group.instance.id": "static-1"})
    other.subscribe([topic])
    static.subscribe([topic])
    members = Members(other, static)
    wait_until(lambda: split_evenly(members.assignments(), 4), 20, "2 partitions each", step=members.poll)
    before = {m.instance_id: m for m in describe(broker, group).members}
    static.close()  # a static member leaves with epoch -2: it keeps its place for its session
    members.consumers.remove(static)
    left = {m.instance_id: m for m in describe(broker, group).members}
    assert left["static-1"].member_epoch == -2
    back = consumer(broker, group, **{"group.instance.id": "static-1"})
    back.subscribe([topic])
    members.add(back)
    wait_until(lambda: len(members.assignments()[1]) == 2, 20, "the static member back", step=members.poll)
    after = {m.instance_id: m for m in describe(broker, group).members}
    assert set(after) == {"other", "static-1"}
    assert after["static-1"].member_id != before["static-1"].member_id
    assert after["static-1"].assignment == before["static-1"].assignment
    assert after["other"].assignment == before["other"].assignment  # nothing moved
    assert after["static-1"].member_epoch == before["static-1"].member_epoch
    members.close()


def test_members_epochs_and_offsets_survive_a_coordinator_restart(tmp_path):
    proc = BrokerProcess(tmp_path / "data", overrides=OVERRIDES).start()
    try:
        topic = new_topic(proc, 3)
        values = produce(proc, topic, 30, 3)
        group = f"g-{uuid.uuid4().hex[:6]}"
        c = consumer(proc, group)
        c.subscribe([topic])
        members = Members(c)
        wait_until(lambda: set(members.values()) >= values, 20, "every record read", step=members.poll)
        c.commit(asynchronous=False)
        before = describe(proc, group)
        assert before.group_state == "Stable"
        proc.stop()
        proc.start()
        after = describe(proc, group)  # replayed from __consumer_offsets
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
        assert [(m.member_id, m.member_epoch) for m in after.members] == [
            (m.member_id, m.member_epoch) for m in before.members
        ]
        assert after.members[0].assignment == before.members[0].assignment
        p = Producer({"bootstrap.servers": proc.bootstrap_servers})
        more = {b"w%d" % i for i in range(9)}
        for i, v in enumerate(sorted(more)):
            p.produce(topic, value=v, partition=i % 3)
        assert p.flush(10) == 0
        # the same member carries on after the restart, from its committed offsets
        wait_until(lambda: set(members.values()) >= more, 30, "the new records", step=members.poll)
        assert sorted(members.values()) == sorted(values | more)
        assert describe(proc, group).members[0].member_id == before.members[0].member_id
        members.close()
    finally:
        proc.stop()


# -- hand-made requests: the errors ---------------------------------------------------------


def heartbeat(raw, group: str, member_id: str, epoch: int, **fields):
    body = {
        "group_id": group,
        "member_id": member_id,
        "member_epoch": epoch,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": 30000 if epoch == 0 else -1,
        "subscribed_topic_names": None,
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": [] if epoch == 0 else None,
        **fields,
    }
    return raw.request(68, 1, body)


def find_coordinator(raw, group: str) -> None:
    """Creates __consumer_offsets on first use, as a client's FindCoordinator does."""
    wait_until(lambda: raw.request(10, 3, {"key": group, "key_type": 0}).error_code == ErrorCode.none, 10, "a coordinator")


def test_heartbeat_errors_are_kafkas(broker):
    topic = new_topic(broker, 2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    with RawClient(broker) as raw:
        find_coordinator(raw, group)
        joined = heartbeat(raw, group, "m1", 0, subscribed_topic_names=[topic])
        assert joined.error_code == ErrorCode.none and joined.member_epoch == 1
        assert sorted(joined.assignment.topic_partitions[0].partitions) == [0, 1]
        assert heartbeat(raw, group, "m1", 5).error_code == ErrorCode.fenced_member_epoch
        assert heartbeat(raw, group, "nobody", 1).error_code == ErrorCode.unknown_member_id
        assert heartbeat(raw, group, "m2", 0, subscribed_topic_names=[topic], server_assignor="sticky").error_code == (
            ErrorCode.unsupported_assignor
        )
        assert heartbeat(raw, group, "m2", 0, subscribed_topic_regex="(unclosed").error_code == (
            ErrorCode.invalid_regular_expression
        )
        assert heartbeat(raw, group, "m2", 0).error_code == ErrorCode.invalid_request  # no subscription
        assert heartbeat(raw, group, "", 0, subscribed_topic_names=[topic]).error_code == ErrorCode.invalid_request
        assert heartbeat(raw, group, "m1", -2).error_code == ErrorCode.invalid_request  # -2 without instance id
        # a static member still in the group blocks another with its instance id
        s1 = heartbeat(raw, group, "s1", 0, subscribed_topic_names=[topic], instance_id="inst")
        assert s1.error_code == ErrorCode.none
        dup = heartbeat(raw, group, "s2", 0, subscribed_topic_names=[topic], instance_id="inst")
        assert dup.error_code == ErrorCode.unreleased_instance_id
        # OffsetCommit v9 checks the member epoch
        commit = {
            "group_id": group,
            "generation_id_or_member_epoch": 99,
            "member_id": "m1",
            "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                        "committed_leader_epoch": -1, "committed_metadata": ""}]}],
        }
        stale = raw.request(8, 9, commit)
        assert stale.topics[0].partitions[0].error_code == ErrorCode.stale_member_epoch
        commit["generation_id_or_member_epoch"] = 1
        assert raw.request(8, 9, commit).topics[0].partitions[0].error_code == ErrorCode.none
        commit["member_id"] = "nobody"
        assert raw.request(8, 9, commit).topics[0].partitions[0].error_code == ErrorCode.unknown_member_id
        # a classic member of another protocol type cannot join a consumer group
        join = raw.request(11, 5, {
            "group_id": group, "session_timeout": 10000, "rebalance_timeout": 10000, "member_id": "",
            "group_instance_id": None, "protocol_type": "connect",
            "protocols": [{"name": "range", "metadata": b""}],
        })
        assert join.error_code == ErrorCode.inconsistent_group_protocol
        # DescribeGroups is for classic groups, ConsumerGroupDescribe for consumer groups
        described = raw.request(15, 5, {"groups": [group], "include_authorized_operations": False}).groups[0]
        assert described.error_code == ErrorCode.group_id_not_found
        # leaving
        left = heartbeat(raw, group, "m1", -1)
        assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
        assert heartbeat(raw, group, "m1", 1).error_code == ErrorCode.unknown_member_id


def test_list_groups_shows_both_types_and_an_empty_classic_group_upgrades(broker):
    topic = new_topic(broker, 1)
    classic = f"c-{uuid.uuid4().hex[:6]}"
    modern = f"m-{uuid.uuid4().hex[:6]}"
    # a classic group that only holds committed offsets
    admin_commit = {
        "group_id": classic, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 7,
                                                    "committed_leader_epoch": -1, "committed_metadata": ""}]}],
    }
    with RawClient(broker) as raw:
        find_coordinator(raw, classic)
        assert raw.request(8, 9, admin_commit).topics[0].partitions[0].error_code == ErrorCode.none
        assert heartbeat(raw, modern, "m1", 0, subscribed_topic_names=[topic]).error_code == ErrorCode.none
        listed = {g.group_id: g.group_type for g in raw.request(16, 5, {"states_filter": [], "types_filter": []}).groups}
        assert listed[classic] == "classic" and listed[modern] == "consumer"
        only = raw.request(16, 5, {"states_filter": [], "types_filter": ["consumer"]}).groups
        assert modern in {g.group_id for g in only} and classic not in {g.group_id for g in only}
        # the empty classic group becomes a consumer group; its offsets stay
        up = heartbeat(raw, classic, "u1", 0, subscribed_topic_names=[topic])
        assert up.error_code == ErrorCode.none
        listed = {g.group_id: g.group_type for g in raw.request(16, 5, {"states_filter": [], "types_filter": []}).groups}
        assert listed[classic] == "consumer"
        fetched = raw.request(9, 9, {"groups": [{"group_id": classic, "member_id": "u1", "member_epoch": up.member_epoch,
                                                  "topics": [{"name": topic, "partition_indexes": [0]}]}],
                                     "require_stable": False})
        assert fetched.groups[0].topics[0].partitions[0].committed_offset == 7
        stale = raw.request(9, 9, {"groups": [{"group_id": classic, "member_id": "u1", "member_epoch": 42,
                                                "topics": [{"name": topic, "partition_indexes": [0]}]}],
                                   "require_stable": False})
        assert stale.groups[0].error_code == ErrorCode.stale_member_epoch


def test_api_versions_advertises_the_consumer_protocol_only_when_enabled(broker, tmp_path):
    with RawClient(broker) as raw:
        keys = {k.api_key: (k.min_version, k.max_version) for k in raw.request(18, 3, {
            "client_software_name": "t", "client_software_version": "1"}).api_keys}
    assert keys[68] == (0, 1) and keys[69] == (0, 1)
    assert {76, 77, 78, 79} <= set(keys)  # share groups are on by default, as in Kafka 4.2
    with BrokerProcess(tmp_path / "data", overrides={"group.coordinator.rebalance.protocols": "classic"}) as classic_only:
        with RawClient(classic_only) as raw:
            keys = {k.api_key for k in raw.request(18, 3, {
                "client_software_name": "t", "client_software_version": "1"}).api_keys}
            assert not {68, 69, 76, 77, 78, 79} & keys
            find_coordinator(raw, "g")
            refused = heartbeat(raw, "g", "m1", 0, subscribed_topic_names=["t"])
            assert refused.error_code == ErrorCode.unsupported_version


def test_odradek_consumer_with_group_protocol_consumer(broker):
    from odradek import Consumer as OdradekConsumer

    topic = new_topic(broker, 4)
    values = produce(broker, topic, 40, 4)
    group = f"g-{uuid.uuid4().hex[:6]}"

    def member():
        c = OdradekConsumer(
            bootstrap_servers=broker.bootstrap_servers, group_id=group, group_protocol="consumer",
            auto_offset_reset="earliest", auto_commit_interval_ms=100,
        )
        c.subscribe([topic])
        return c

    first = member()
    read: list[bytes] = []

    def poll_first():
        read.extend(r.value for r in first.poll(0.1))

    wait_until(lambda: set(read) >= values, 20, "every record", step=poll_first)
    assert len(first.assignment()) == 4
    second = confluent = consumer(broker, group)  # librdkafka in the same group
    second.subscribe([topic])

    def poll_both():
        poll_first()
        confluent.poll(0.05)

    wait_until(lambda: len(first.assignment()) == 2 and len(confluent.assignment()) == 2, 20, "2 each", step=poll_both)
    first.commit()
    first.close()
    wait_until(lambda: len(confluent.assignment()) == 4, 20, "librdkafka gets all 4", step=lambda: confluent.poll(0.1))
    confluent.close()
    assert len(read) == len(set(read))


def test_a_member_that_never_revokes_is_fenced_and_nobody_owns_a_partition_twice(broker):
    topic = new_topic(broker, 2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    with RawClient(broker) as raw:
        find_coordinator(raw, group)
        m1 = heartbeat(raw, group, "m1", 0, subscribed_topic_names=[topic], rebalance_timeout=1000)
        tid = m1.assignment.topic_partitions[0].topic_id
        owned = [{"topic_id": tid, "partitions": [0, 1]}]
        assert heartbeat(raw, group, "m1", 1, topic_partitions=owned).error_code == ErrorCode.none
        m2 = heartbeat(raw, group, "m2", 0, subscribed_topic_names=[topic])
        assert m2.error_code == ErrorCode.none and m2.assignment.topic_partitions == ()  # still m1's
        asked = heartbeat(raw, group, "m1", 1, topic_partitions=owned)  # told to give one up
        assert asked.member_epoch == 1 and len(asked.assignment.topic_partitions[0].partitions) == 1

        def m2_partitions():
            answer = heartbeat(raw, group, "m2", m2.member_epoch, topic_partitions=[])
            assert answer.error_code == ErrorCode.none
            return sum(len(t.partitions) for t in answer.assignment.topic_partitions) if answer.assignment else 0

        # m1 keeps heartbeating but never revokes: m2 gets nothing until m1's rebalance timeout fences it
        first = heartbeat(raw, group, "m1", 1, topic_partitions=owned)
        assert first.error_code == ErrorCode.none and m2_partitions() == 0
        wait_until(
            lambda: heartbeat(raw, group, "m1", 1, topic_partitions=owned).error_code == ErrorCode.unknown_member_id,
            10, "m1 fenced after its rebalance timeout", interval=0.2,
        )
        wait_until(lambda: m2_partitions() == 2, 10, "m2 gets both partitions", interval=0.2)


def test_delete_an_empty_consumer_group_and_a_classic_member_takes_over_an_empty_one(broker):
    topic = new_topic(broker, 1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    with RawClient(broker) as raw:
        find_coordinator(raw, group)
        assert heartbeat(raw, group, "m1", 0, subscribed_topic_names=[topic]).error_code == ErrorCode.none
        refused = raw.request(42, 2, {"groups_names": [group]}).results[0]
        assert refused.error_code == ErrorCode.non_empty_group
        assert heartbeat(raw, group, "m1", -1).error_code == ErrorCode.none
        assert raw.request(42, 2, {"groups_names": [group]}).results[0].error_code == ErrorCode.none
        assert describe(broker, group).error_code == ErrorCode.group_id_not_found
        # an empty consumer group becomes classic when a classic member joins
        assert heartbeat(raw, group, "m1", 0, subscribed_topic_names=[topic]).error_code == ErrorCode.none
        assert heartbeat(raw, group, "m1", -1).error_code == ErrorCode.none
        join = raw.request(11, 5, {
            "group_id": group, "session_timeout": 10000, "rebalance_timeout": 10000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        })
        assert join.error_code == ErrorCode.member_id_required  # the classic protocol's first answer
        listed = {g.group_id: g.group_type for g in raw.request(16, 5, {"states_filter": [], "types_filter": []}).groups}
        assert listed[group] == "classic"


def test_transactional_offset_commits_of_a_consumer_protocol_member(broker):
    """send_offsets_to_transaction with a group.protocol=consumer member: the offsets commit with
    the transaction (TxnOffsetCommit is checked against the member's epoch)."""
    from confluent_kafka import TopicPartition

    topic = new_topic(broker, 1)
    values = produce(broker, topic, 5, 1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = consumer(broker, group, **{"enable.auto.commit": False})
    c.subscribe([topic])
    members = Members(c)
    wait_until(lambda: set(members.values()) >= values, 20, "every record", step=members.poll)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"t-{group}"})
    p.init_transactions(15)
    p.begin_transaction()
    p.send_offsets_to_transaction([TopicPartition(topic, 0, 5)], c.consumer_group_metadata(), 15)
    p.commit_transaction(15)
    wait_until(lambda: c.committed([TopicPartition(topic, 0)], 10)[0].offset == 5, 15, "the committed offset")
    c.close()
