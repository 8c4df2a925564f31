"""Coordinator writes wait for the ISR, as Kafka's do: what a client was told survives the
kill -9 of its coordinator, and a coordinator partition below ``min.insync.replicas``
answers the coordinator error instead of succeeding.

Real ZooKeeper, three broker processes, confluent-kafka clients. The followers here lag on
purpose (``replica.fetch.min.bytes`` of 1 MB held up to ``replica.fetch.wait.max.ms``), so
an answer given before the followers have a coordinator's records would be lost with the
coordinator's broker."""

from __future__ import annotations

import os
import signal
import threading
import time

import confluent_kafka
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kio.schema.errors import ErrorCode

from odradek.protocol.messages import build_request
from tests.cluster.control_support import cluster_on, request
from tests.support import wait_until

SESSION_TIMEOUT_MS = 4000
LAGGING_FOLLOWERS = {
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.num.partitions": 1,
    "replica.fetch.min.bytes": 1 << 20,
    "replica.fetch.wait.max.ms": 400,
    "request.timeout.ms": 8000,
}
TXN_STATE = "__transaction_state"
# what a coordinator that does not know the group's generation answers a commit
FORGOTTEN = (
    confluent_kafka.KafkaError.ILLEGAL_GENERATION,
    confluent_kafka.KafkaError.UNKNOWN_MEMBER_ID,
    confluent_kafka.KafkaError.REBALANCE_IN_PROGRESS,
)


def _cluster(zookeeper, tmp_path):
    """Three brokers; their logs stay in ``tmp_path`` for a failing test's report."""
    return cluster_on(
        zookeeper, 3, session_timeout_ms=SESSION_TIMEOUT_MS, overrides=LAGGING_FOLLOWERS, data_dir=tmp_path / "cluster"
    )


def _partition(cluster, topic: str, index: int = 0):
    """``topic``-``index`` as the metadata shows it, or None (not there, or a broker just died)."""
    try:
        return cluster.metadata([topic]).topics[topic].get(index)
    except Exception:
        return None


def _leader_when_in_sync(cluster, topic: str) -> int:
    """The leader of ``topic``-0 once all three replicas are in its ISR."""
    view = wait_until(
        lambda: (p := _partition(cluster, topic)) is not None and len(p.isr) == 3 and p,
        30,
        f"{topic} with three in-sync replicas",
        interval=0.1,
    )
    return view.leader


def _create(cluster, name: str, replicas: list[int], partitions: int = 1) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.running_bootstrap_servers())
    try:
        admin.create_topics(
            [NewTopic(name, replica_assignments=dict.fromkeys(range(partitions), replicas), topic_configs={"min.insync.replicas": "2"})]
        )
    finally:
        admin.close()
    wait_until(
        lambda: all((p := _partition(cluster, name, i)) is not None and p.leader == replicas[0] for i in range(partitions)),
        20,
        f"{name} led by broker {replicas[0]}",
        interval=0.1,
    )


def _read_committed(bootstrap: str, topic: str, count: int, timeout: float) -> list[bytes]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "isolation.level": "read_committed"}
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                out.append(msg.value())
    finally:
        consumer.close()
    return out


def test_a_committed_transaction_survives_kill_9_of_its_coordinator(zookeeper, tmp_path):
    """EndTxn is answered only once PrepareCommit is in the ISR of __transaction_state, so
    the coordinator elected after a kill -9 right after commit_transaction() completes the
    commit: a read_committed consumer sees every record."""
    with _cluster(zookeeper, tmp_path) as cluster:
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "survivor", "linger.ms": 0}
        )
        producer.init_transactions(30)
        coordinator = _leader_when_in_sync(cluster, TXN_STATE)
        others = [b for b in cluster.brokers if b != coordinator]
        _create(cluster, "paid", others + [coordinator])  # its leader survives the kill
        producer.begin_transaction()
        for i in range(20):
            producer.produce("paid", b"order-%d" % i, partition=0)
        producer.commit_transaction(30)
        cluster.kill(coordinator)
        values = _read_committed(cluster.running_bootstrap_servers(), "paid", 20, 60)
        assert values == [b"order-%d" % i for i in range(20)]


def test_a_completed_transaction_survives_kill_9_of_its_partition_leader(zookeeper, tmp_path):
    """The coordinator writes CompleteCommit only once the COMMIT marker is in the ISR of the
    transaction's partition, so killing that partition's leader right after the transaction
    completed loses no marker: a read_committed consumer sees every record."""
    with _cluster(zookeeper, tmp_path) as cluster:
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "marked", "linger.ms": 0}
        )
        producer.init_transactions(30)
        coordinator = _leader_when_in_sync(cluster, TXN_STATE)
        others = [b for b in cluster.brokers if b != coordinator]
        _create(cluster, "shipped", others + [coordinator])
        producer.begin_transaction()
        for i in range(20):
            producer.produce("shipped", b"parcel-%d" % i, partition=0)
        producer.commit_transaction(30)
        describe = build_request(65, 0, {"transactional_ids": ["marked"]})
        wait_until(
            lambda: request(cluster, coordinator, 65, 0, describe).transaction_states[0].transaction_state
            == "CompleteCommit",
            30,
            "the transaction complete",
            interval=0.01,
        )
        cluster.kill(others[0])  # the leader of shipped-0
        values = _read_committed(cluster.running_bootstrap_servers(), "shipped", 20, 60)
        assert values == [b"parcel-%d" % i for i in range(20)]


def test_a_synced_group_survives_kill_9_of_its_coordinator(zookeeper, tmp_path):
    """SyncGroup is answered only once the group's generation is in the ISR of
    __consumer_offsets: after its coordinator is killed the next coordinator knows the
    members, so there is no new rebalance and a commit with the old generation succeeds."""
    with _cluster(zookeeper, tmp_path) as cluster:
        AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics(timeout=10)
        _create(cluster, "work", [1, 2, 3], partitions=2)
        assigned: dict[str, list] = {"a": [], "b": []}
        consumers = {}
        for name in assigned:
            consumers[name] = confluent_kafka.Consumer(
                {
                    "bootstrap.servers": cluster.bootstrap_servers,
                    "group.id": "steady",
                    "enable.auto.commit": False,
                    "session.timeout.ms": 45000,
                }
            )
            consumers[name].subscribe(
                ["work"], on_assign=lambda c, parts, name=name: assigned[name].append(sorted(p.partition for p in parts))
            )

        def both_hold_one() -> bool:
            for c in consumers.values():
                c.poll(0.1)
            return all(a and len(a[-1]) == 1 for a in assigned.values())

        try:
            wait_until(both_hold_one, 60, "each consumer assigned one partition")
            coordinator = _leader_when_in_sync(cluster, "__consumer_offsets")
            cluster.kill(coordinator)
            rounds = {name: len(a) for name, a in assigned.items()}
            wait_until(
                lambda: (p := _partition(cluster, "__consumer_offsets")) is not None and p.leader not in (-1, coordinator),
                30,
                "a new leader of __consumer_offsets",
                interval=0.1,
            )
            a_partition = assigned["a"][-1][0]

            def committed_with_old_generation() -> bool:
                for c in consumers.values():
                    c.poll(0.1)
                try:
                    consumers["a"].commit(
                        offsets=[confluent_kafka.TopicPartition("work", a_partition, 0)], asynchronous=False
                    )
                except confluent_kafka.KafkaException as exc:
                    assert exc.args[0].code() not in FORGOTTEN, exc  # timeouts, NOT_COORDINATOR: try again
                    return False
                return True

            wait_until(committed_with_old_generation, 60, "a commit accepted by the new coordinator")
            assert {name: len(a) for name, a in assigned.items()} == rounds  # nobody rebalanced
        finally:
            for c in consumers.values():
                c.close()


def _init_producer_id(cluster, broker_id: int, transactional_id: str):
    body = build_request(
        22, 4, {"transactional_id": transactional_id, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1}
    )
    return request(cluster, broker_id, 22, 4, body)


def test_coordinator_writes_below_min_insync_replicas_get_the_retriable_coordinator_error(zookeeper, tmp_path):
    """__transaction_state has min.insync.replicas 2: with both followers paused
    (SIGSTOP), InitProducerId and EndTxn answer COORDINATOR_NOT_AVAILABLE instead of
    succeeding, and succeed again once the followers are back (SIGCONT)."""
    with _cluster(zookeeper, tmp_path) as cluster:
        find = build_request(10, 3, {"key": "careful", "key_type": 1})
        request(cluster, 1, 10, 3, find)  # creates __transaction_state
        coordinator = _leader_when_in_sync(cluster, TXN_STATE)
        _create(cluster, "ledger", [coordinator] + [b for b in cluster.brokers if b != coordinator])
        ok = _init_producer_id(cluster, coordinator, "careful")
        assert ok.error_code == ErrorCode.none
        add = build_request(
            24,
            3,
            {
                "v3_and_below_transactional_id": "careful",
                "v3_and_below_producer_id": ok.producer_id,
                "v3_and_below_producer_epoch": ok.producer_epoch,
                "v3_and_below_topics": [{"name": "ledger", "partitions": [0]}],
            },
        )
        added = request(cluster, coordinator, 24, 3, add)
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == ErrorCode.none
        end = build_request(
            26,
            3,
            {"transactional_id": "careful", "producer_id": ok.producer_id, "producer_epoch": ok.producer_epoch, "committed": True},
        )
        followers = [cluster.brokers[b].proc.pid for b in cluster.brokers if b != coordinator]
        for pid in followers:
            os.kill(pid, signal.SIGSTOP)
        try:
            assert _init_producer_id(cluster, coordinator, "careful-2").error_code == ErrorCode.coordinator_not_available
            assert request(cluster, coordinator, 26, 3, end).error_code == ErrorCode.coordinator_not_available
        finally:
            for pid in followers:
                os.kill(pid, signal.SIGCONT)
        wait_until(
            lambda: request(cluster, coordinator, 26, 3, end).error_code == ErrorCode.none,
            90,
            "EndTxn accepted once the followers are back in the ISR",
            interval=0.5,
        )


def _commit(cluster, broker_id: int, group: str, topic: str, offset: int) -> int:
    """A standalone OffsetCommit (generation -1) of ``topic``-0; its error code."""
    body = build_request(
        8,
        8,
        {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1, "committed_metadata": ""}
                    ],
                }
            ],
        },
    )
    return request(cluster, broker_id, 8, 8, body).topics[0].partitions[0].error_code


def _fetched(cluster, broker_id: int, group: str, topic: str, require_stable: bool = False) -> int:
    """What OffsetFetch answers for ``topic``-0 of ``group`` (-1: no offset); with
    ``require_stable``, None for UNSTABLE_OFFSET_COMMIT."""
    body = build_request(
        9, 7, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}], "require_stable": require_stable}
    )
    answer = request(cluster, broker_id, 9, 7, body)
    assert answer.error_code == ErrorCode.none
    row = answer.topics[0].partitions[0]
    if require_stable and row.error_code == ErrorCode.unstable_offset_commit:
        return None
    assert row.error_code == ErrorCode.none
    return row.committed_offset


def test_an_offset_commit_is_fetched_only_once_replicated_and_a_failed_one_keeps_the_old_offset(zookeeper, tmp_path):
    """OffsetFetch answers committed offsets only: with the coordinator's followers paused
    (SIGSTOP) a commit waits for the ISR, and meanwhile another client still fetches the old
    offset; when the wait fails (``offsets.commit.timeout.ms``) the commit answers
    COORDINATOR_NOT_AVAILABLE and the old offset stays. Once the followers are back
    (SIGCONT) the retried commit is replicated and fetched."""
    overrides = {"offsets.topic.num.partitions": 1, "offsets.commit.timeout.ms": 2500}
    # a ZooKeeper session that outlives the pause: a follower must stay in the ISR meanwhile
    with cluster_on(zookeeper, 3, session_timeout_ms=20000, overrides=overrides, data_dir=tmp_path / "cluster") as cluster:
        _create(cluster, "orders", [1, 2, 3])
        request(cluster, 1, 10, 3, build_request(10, 3, {"key": "billing", "key_type": 0}))  # creates __consumer_offsets
        coordinator = _leader_when_in_sync(cluster, "__consumer_offsets")
        assert _commit(cluster, coordinator, "billing", "orders", 5) == ErrorCode.none
        assert _fetched(cluster, coordinator, "billing", "orders") == 5
        followers = [cluster.brokers[b].proc.pid for b in cluster.brokers if b != coordinator]
        answer: list[int] = []
        seen: list[int] = []
        for pid in followers:
            os.kill(pid, signal.SIGSTOP)
        try:
            committing = threading.Thread(target=lambda: answer.append(_commit(cluster, coordinator, "billing", "orders", 9)))
            committing.start()
            stable: list[int | None] = []
            while committing.is_alive():
                seen.append(_fetched(cluster, coordinator, "billing", "orders"))
                stable.append(_fetched(cluster, coordinator, "billing", "orders", require_stable=True))
                time.sleep(0.05)
            committing.join()
            assert answer == [ErrorCode.coordinator_not_available]
            assert set(seen) == {5} and len(seen) >= 5  # never the pending offset
            assert None in stable and 9 not in stable  # require_stable: UNSTABLE_OFFSET_COMMIT while pending
            assert _fetched(cluster, coordinator, "billing", "orders") == 5  # the failed commit left it
        finally:
            for pid in followers:
                os.kill(pid, signal.SIGCONT)
        wait_until(
            lambda: _commit(cluster, coordinator, "billing", "orders", 9) == ErrorCode.none,
            60,
            "the retried commit replicated",
            interval=0.2,
        )
        assert _fetched(cluster, coordinator, "billing", "orders") == 9


def _join(cluster, broker_id: int, group: str, member_id: str = ""):
    body = build_request(
        11,
        5,
        {
            "group_id": group,
            "session_timeout": 30000,
            "rebalance_timeout": 10000,
            "member_id": member_id,
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
    )
    return request(cluster, broker_id, 11, 5, body)


def _sync(cluster, broker_id: int, group: str, generation: int, member_id: str, assignment: bytes):
    body = build_request(
        14,
        3,
        {
            "group_id": group,
            "generation_id": generation,
            "member_id": member_id,
            "group_instance_id": None,
            "assignments": [{"member_id": member_id, "assignment": assignment}],
        },
    )
    return request(cluster, broker_id, 14, 3, body)


def _described(cluster, broker_id: int, group: str) -> tuple[str, set[bytes]]:
    """DescribeGroups: the group's state and its members' assignments."""
    body = build_request(15, 5, {"groups": [group], "include_authorized_operations": False})
    g = request(cluster, broker_id, 15, 5, body).groups[0]
    return g.group_state, {bytes(m.member_assignment) for m in g.members}


def test_a_group_is_described_stable_only_once_its_assignment_is_replicated(zookeeper, tmp_path):
    """The leader's SyncGroup writes the assignment; with the coordinator's followers paused
    (SIGSTOP) DescribeGroups from another client keeps showing CompletingRebalance without
    the assignment, and when the write does not reach the ISR the leader is answered
    COORDINATOR_NOT_AVAILABLE and the group rebalances. After SIGCONT the rejoined group
    syncs, and is described Stable with the assignment."""
    overrides = {
        "offsets.topic.num.partitions": 1,
        "offsets.commit.timeout.ms": 2500,
        "group.initial.rebalance.delay.ms": 0,
    }
    with cluster_on(zookeeper, 3, session_timeout_ms=20000, overrides=overrides, data_dir=tmp_path / "cluster") as cluster:
        request(cluster, 1, 10, 3, build_request(10, 3, {"key": "planners", "key_type": 0}))  # creates __consumer_offsets
        coordinator = _leader_when_in_sync(cluster, "__consumer_offsets")
        member_id = _join(cluster, coordinator, "planners").member_id  # MEMBER_ID_REQUIRED
        joined = _join(cluster, coordinator, "planners", member_id)
        assert joined.error_code == ErrorCode.none and joined.leader == member_id
        followers = [cluster.brokers[b].proc.pid for b in cluster.brokers if b != coordinator]
        answer: list = []
        seen: list[tuple[str, set[bytes]]] = []
        for pid in followers:
            os.kill(pid, signal.SIGSTOP)
        try:
            syncing = threading.Thread(
                target=lambda: answer.append(_sync(cluster, coordinator, "planners", joined.generation_id, member_id, b"plan"))
            )
            syncing.start()
            while syncing.is_alive():
                seen.append(_described(cluster, coordinator, "planners"))
                time.sleep(0.05)
            syncing.join()
            assert answer[0].error_code == ErrorCode.coordinator_not_available
            # never Stable, never the assignment (PreparingRebalance once the write failed)
            assert len(seen) >= 5 and seen[0][0] == "CompletingRebalance", seen
            assert all(state != "Stable" and b"plan" not in parts for state, parts in seen), seen
            assert _described(cluster, coordinator, "planners")[0] == "PreparingRebalance"
        finally:
            for pid in followers:
                os.kill(pid, signal.SIGCONT)

        def synced() -> bool:
            rejoined = _join(cluster, coordinator, "planners", member_id)
            if rejoined.error_code != ErrorCode.none:
                return False
            return _sync(cluster, coordinator, "planners", rejoined.generation_id, member_id, b"plan").error_code == ErrorCode.none

        wait_until(synced, 60, "the group synced once the followers are back", interval=0.2)
        assert _described(cluster, coordinator, "planners") == ("Stable", {b"plan"})
