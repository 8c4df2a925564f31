"""The share coordinator in a real 3-broker cluster (KIP-932): a share partition's state is kept
by the leader of its __share_group_state partition, which may be another broker than the
share-partition leader; acknowledged records stay acknowledged through kill -9 of the share
coordinator and of the share-partition leader (the state partition is replicated, and the
new share-partition leader reads the state back with ReadShareGroupState)."""

from __future__ import annotations

import time

from confluent_kafka import AcknowledgeType, KafkaError, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode
from tests.cluster.control_support import cluster_on, request
from tests.support import set_group_configs, wait_until

STATE_TOPIC = "__share_group_state"
OVERRIDES = {
    "group.coordinator.rebalance.protocols": "classic,consumer,share",
    "group.share.heartbeat.interval.ms": 300,
    "group.share.session.timeout.ms": 6000,
    "group.share.record.lock.duration.ms": 15000,
    "share.coordinator.state.topic.num.partitions": 3,
    "offsets.topic.num.partitions": 3,
}
TOPIC = "jobs"


def _topic_id(cluster, node: int, topic: str):
    md = request(cluster, node, 3, 12, messages.build_request(3, 12, {
        "topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }))  # fmt: skip
    return md.topics[0].topic_id


def _share_coordinator(cluster, node: int, key: str) -> int | None:
    """FindCoordinator v6, key type 2, asked of broker ``node``."""
    answer = request(cluster, node, 10, 6, messages.build_request(10, 6, {"key_type": 2, "coordinator_keys": [key]}))
    found = answer.coordinators[0]
    return found.node_id if found.error_code == ErrorCode.none else None


def _start_offset(cluster, node: int, group: str, topic_id) -> int:
    """The share partition's start offset as its share coordinator on ``node`` keeps it
    (ReadShareGroupStateSummary)."""
    body = {"group_id": group, "topics": [{"topic_id": topic_id, "partitions": [{"partition": 0, "leader_epoch": 0}]}]}
    result = request(cluster, node, 87, 1, messages.build_request(87, 1, body)).results[0].partitions[0]
    assert result.error_code == ErrorCode.none, result
    return result.start_offset


def _group_coordinator(cluster, node: int, group: str) -> int | None:
    answer = request(cluster, node, 10, 3, messages.build_request(10, 3, {"key": group, "key_type": 0}))
    return answer.node_id if answer.error_code == ErrorCode.none else None


def _reset_to_earliest(cluster, group: str) -> int:
    """AlterShareGroupOffsets to offset 0, sent to the group's coordinator; its error code."""
    coordinator = wait_until(lambda: _group_coordinator(cluster, _live(cluster)[0], group), 30, "a group coordinator")
    body = {"group_id": group, "topics": [{"topic_name": TOPIC, "partitions": [{"partition_index": 0, "start_offset": 0}]}]}
    answer = request(cluster, coordinator, 91, 0, messages.build_request(91, 0, body))
    return answer.error_code or answer.responses[0].partitions[0].error_code


def _live(cluster) -> list[int]:
    return [b for b, p in cluster.brokers.items() if p.proc is not None and p.proc.poll() is None]


def _coordinator_of(cluster, key: str, not_on: int | None = None) -> int:
    def found():
        for node in _live(cluster):
            try:
                got = _share_coordinator(cluster, node, key)
            except Exception:
                continue
            if got is not None and got != not_on and got in _live(cluster):
                return got
        return None

    return wait_until(found, 40, f"a live share coordinator for {key}", interval=0.2)


def _all_in_sync(cluster) -> None:
    live = set(_live(cluster))
    cluster.wait_for(
        lambda md: all(
            set(p.isr) == live and p.leader in live
            for t in (TOPIC, STATE_TOPIC)
            for p in md.topics.get(t, {}).values()
        ) and TOPIC in md.topics and STATE_TOPIC in md.topics,
        60,
        "every replica of the topic and of __share_group_state in sync",
    )


def _produce(cluster, values: list[bytes]) -> None:
    p = Producer(cluster.client_config(**{"acks": "all", "linger.ms": 5}))
    for v in values:
        p.produce(TOPIC, value=v)
    assert p.flush(30) == 0


def _read_and_accept(cluster, group: str, expected: set[bytes]) -> list[bytes]:
    """A fresh share consumer reads until it has ``expected`` (and whatever else comes), accepts
    each record and commits the acknowledgements."""
    c = ShareConsumer(cluster.client_config(**{"group.id": group, "share.acknowledgement.mode": "explicit"}))
    c.subscribe([TOPIC])
    read: list[bytes] = []

    def step():
        for m in c.poll(0.5) or []:
            if m.error() is None:
                read.append(m.value())
                c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync()

    try:
        wait_until(lambda: set(read) >= expected, 60, f"{len(expected)} records", step=step)
        end = time.monotonic() + 1.5  # anything more would come now
        while time.monotonic() < end:
            step()
    finally:
        c.close()
    return read


def test_acknowledged_records_stay_acknowledged_through_kill_9_of_the_coordinator_and_the_leader(zookeeper):
    with cluster_on(zookeeper, 3, overrides=OVERRIDES) as cluster:
        admin = AdminClient(cluster.client_config())
        admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
        leader = cluster.wait_for(lambda md: TOPIC in md.topics and md.topics[TOPIC][0].leader > 0, 30).topics[TOPIC][0].leader
        topic_id = wait_until(
            lambda: (t := _topic_id(cluster, leader, TOPIC)) is not None and t.int != 0 and t, 20, "the leader to know the topic"
        )

        # a group whose share-partition leader, share coordinator and group coordinator are three brokers
        group = key = None
        for i in range(100):
            group, key = f"workers-{i}", f"workers-{i}:{topic_id}:0"
            group_coordinator = wait_until(lambda g=group: _group_coordinator(cluster, leader, g), 30, "a group coordinator")
            if len({leader, _coordinator_of(cluster, key), group_coordinator}) == 3:
                break
        coordinator = _coordinator_of(cluster, key)
        assert len({leader, coordinator, group_coordinator}) == 3
        set_group_configs(admin, group, timeout=15, share_auto_offset_reset="earliest")

        (configs,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, STATE_TOPIC)]).values()
        assert configs.result(15)["min.insync.replicas"].value == "2"  # share.coordinator.state.topic.min.isr

        first = [f"a{i}".encode() for i in range(40)]
        _produce(cluster, first)
        assert sorted(_read_and_accept(cluster, group, set(first))) == sorted(first)
        assert _start_offset(cluster, coordinator, group, topic_id) == 40  # kept by the other broker
        _all_in_sync(cluster)

        # kill -9 the share coordinator: the state it wrote is on the other replicas
        cluster.kill(coordinator)
        moved_to = _coordinator_of(cluster, key, not_on=coordinator)
        second = [f"b{i}".encode() for i in range(20)]
        _produce(cluster, second)
        got = _read_and_accept(cluster, group, set(second))
        assert sorted(got) == sorted(second), "accepted records came again after the coordinator died"
        assert _start_offset(cluster, moved_to, group, topic_id) == 60

        cluster.start_broker(coordinator)
        _all_in_sync(cluster)

        # reset to the earliest offset by the group coordinator, another broker than the leader:
        # the leader reads the new state when the next member opens its share session
        assert _group_coordinator(cluster, leader, group) == group_coordinator
        wait_until(lambda: _reset_to_earliest(cluster, group) == ErrorCode.none, 30, "the offsets reset (the group empty)")
        got = _read_and_accept(cluster, group, set(first + second))
        assert sorted(got) == sorted(first + second), "a reset to the earliest offset did not deliver everything again"

        # kill -9 the share-partition leader: the new leader reads the state back
        cluster.kill(leader)
        cluster.wait_for(lambda md: md.topics[TOPIC][0].leader not in (leader, -1), 40, "a new leader of the topic")
        third = [f"c{i}".encode() for i in range(20)]
        _produce(cluster, third)
        got = _read_and_accept(cluster, group, set(third))
        assert sorted(got) == sorted(third), "accepted records came again after the share-partition leader died"
        assert _start_offset(cluster, _coordinator_of(cluster, key), group, topic_id) == 80
        assert moved_to != coordinator

        for node in _live(cluster):
            log = cluster.log_text(node)
            assert "Traceback" not in log, f"broker {node} logged a traceback:\n{log[-4000:]}"


def test_a_leadership_that_moves_away_and_back_serves_no_stale_share_state(zookeeper):
    """One share consumer reads on while the partition's leadership goes 1 → 2 → 1 (reassignment
    and preferred elections, no restart): broker 1 must not serve the state it had before
    broker 2 led, or records accepted on broker 2 would come again."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic as KafkaNewTopic
    from kafka.structs import TopicPartition as KafkaTopicPartition

    with cluster_on(zookeeper, 2, overrides={**OVERRIDES, "share.coordinator.state.topic.replication.factor": 2}) as cluster:
        kadmin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            kadmin.create_topics([KafkaNewTopic(TOPIC, replica_assignments={0: [1, 2]})])
            cluster.wait_for(lambda md: TOPIC in md.topics and md.topics[TOPIC][0].isr == (1, 2), 30, "the topic online")
            group = "movers"
            admin = AdminClient(cluster.client_config())
            set_group_configs(admin, group, timeout=15, share_auto_offset_reset="earliest")

            c = ShareConsumer(cluster.client_config(**{"group.id": group, "share.acknowledgement.mode": "explicit"}))
            c.subscribe([TOPIC])
            read: list[bytes] = []

            def step():
                for m in c.poll(0.5) or []:
                    if m.error() is None:
                        read.append(m.value())
                        c.acknowledge(m, AcknowledgeType.ACCEPT)
                c.commit_sync()

            def move_leader(to: int, replicas: list[int]) -> None:
                kadmin.alter_partition_reassignments({KafkaTopicPartition(TOPIC, 0): replicas})
                cluster.wait_for(lambda md: md.topics[TOPIC][0].replicas == tuple(replicas), 30, "the new replica order")
                kadmin.elect_leaders(election_type=0, topic_partitions={TOPIC: [0]})
                cluster.wait_for(lambda md: md.topics[TOPIC][0].leader == to, 30, f"broker {to} leading")

            try:
                expected: list[bytes] = []
                for round_, leader in (("a", None), ("b", 2), ("c", 1)):
                    if leader is not None:
                        move_leader(leader, [leader, 3 - leader])
                    batch = [f"{round_}{i}".encode() for i in range(10)]
                    _produce(cluster, batch)
                    expected += batch
                    wait_until(lambda want=set(expected): set(read) >= want, 60, f"round {round_}", step=step)
                end = time.monotonic() + 1.5
                while time.monotonic() < end:
                    step()
            finally:
                c.close()
            assert sorted(read) == sorted(expected), "records accepted while broker 2 led came again"
        finally:
            kadmin.close()


def _latest_states(cluster) -> dict:
    """The last value of each key in __share_group_state, read like any topic (None: a tombstone)."""
    from confluent_kafka import Consumer, TopicPartition

    from odradek.broker.share.share_state_topic import decode_key

    c = Consumer(cluster.client_config(**{"group.id": "state-reader", "enable.auto.commit": False}))
    parts = [TopicPartition(STATE_TOPIC, i, 0) for i in range(OVERRIDES["share.coordinator.state.topic.num.partitions"])]
    ends = {p.partition: c.get_watermark_offsets(p, timeout=15)[1] for p in parts}
    c.assign(parts)
    latest: dict = {}
    done = {p for p, end in ends.items() if end == 0}
    while len(done) < len(parts):
        m = c.poll(1.0)
        if m is None or m.error() is not None:
            continue
        latest[decode_key(m.key())] = m.value()
        if m.offset() + 1 >= ends[m.partition()]:
            done.add(m.partition())
    c.close()
    return latest


def test_deleting_a_topic_deletes_its_share_state_on_the_share_coordinator(zookeeper):
    with cluster_on(zookeeper, 3, overrides=OVERRIDES) as cluster:
        admin = AdminClient(cluster.client_config())
        admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
        leader = cluster.wait_for(lambda md: TOPIC in md.topics and md.topics[TOPIC][0].leader > 0, 30).topics[TOPIC][0].leader
        old_id = wait_until(lambda: (t := _topic_id(cluster, leader, TOPIC)) is not None and t.int != 0 and t, 20, "the topic id")
        group = "recreated"
        set_group_configs(admin, group, timeout=15, share_auto_offset_reset="earliest")
        _produce(cluster, [b"old0", b"old1"])
        c = ShareConsumer(cluster.client_config(**{"group.id": group, "share.acknowledgement.mode": "explicit"}))
        c.subscribe([TOPIC])
        counts: list[int] = []

        def release_all():
            for m in c.poll(0.5) or []:
                if m.error() is None:
                    counts.append(m.delivery_count())
                    c.acknowledge(m, AcknowledgeType.RELEASE)

        try:
            wait_until(lambda: 2 in counts, 60, "a second delivery", step=release_all)
        finally:
            c.close()
        assert (group, old_id, 0) in wait_until(lambda: _latest_states(cluster), 30, "the share state written")

        admin.delete_topics([TOPIC])[TOPIC].result(30)
        cluster.wait_for(lambda md: TOPIC not in md.topics, 60, "the topic gone everywhere")
        wait_until(lambda: _latest_states(cluster).get((group, old_id, 0), b"") is None, 60,
                   "a tombstone for the deleted topic's share state")

        def created() -> bool:  # the controller finishes the deletion (replicas, znodes) first
            try:
                admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    logs = "\n".join(f"--- broker {n}\n{cluster.log_text(n)[-3000:]}" for n in _live(cluster))
                    raise AssertionError(f"CreateTopics failed: {exc}\n{logs}") from exc
                return False
            return True

        wait_until(created, 60, "the topic made anew", interval=0.5)
        cluster.wait_for(lambda md: TOPIC in md.topics and md.topics[TOPIC][0].leader > 0, 30)
        _produce(cluster, [b"new0", b"new1"])
        again = ShareConsumer(cluster.client_config(**{"group.id": group}))
        again.subscribe([TOPIC])
        got: list = []
        try:
            wait_until(lambda: len(got) >= 2, 60, "the new topic's records", step=lambda: got.extend(
                m for m in again.poll(0.5) or [] if m.error() is None))
        finally:
            again.close()
        assert sorted((m.value(), m.delivery_count()) for m in got) == [(b"new0", 1), (b"new1", 1)]
        for node in _live(cluster):
            log = cluster.log_text(node)
            assert "Traceback" not in log, f"broker {node} logged a traceback:\n{log[-4000:]}"
