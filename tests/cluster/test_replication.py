"""Replication between real brokers: the test sends LeaderAndIsr as the controller would.

Followers copy their leader byte for byte, the leader's high watermark follows the ISR,
acks=all waits for the ISR, the ISR shrinks and expands, leader epochs drive truncation."""

from __future__ import annotations

import time

import confluent_kafka
import pytest

from odradek.protocol import errors
from odradek.protocol.errors import ErrorCode
from tests.cluster.replication_support import (
    ReplicaSet,
    fetch_one,
    leader_and_isr_request,
    partition_state,
    send,
    wait_for,
)


def _produce(bootstrap: str, topic: str, values, acks="all", **extra) -> list:
    """Send ``values`` idempotently; returns the delivery reports (error, offset) in order."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, "message.timeout.ms": 15000, **extra}
    )
    reports = []

    def done(err, msg):
        reports.append((err, msg.offset() if err is None else None))

    for v in values:
        producer.produce(topic, v, partition=0, on_delivery=done)
        producer.poll(0)
    producer.flush(20)
    return reports


def _consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False}
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    out = []
    # A deadline in time, not a number of polls: each record takes a poll of its own, so a
    # count of 200 polls for 200 records lost the last ones to any empty poll (a fetch in flight).
    deadline = time.monotonic() + 30
    while len(out) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.1)
        if msg is not None and msg.error() is None:
            out.append(msg.value())
    consumer.close()
    return out


@pytest.fixture
def three():
    with ReplicaSet(3) as rs:
        yield rs


def _lead(rs, topic, leader, epoch, isr=(1, 2, 3), replicas=(1, 2, 3)):
    return rs.leader_and_isr([partition_state(topic, 0, leader, epoch, isr, replicas)])


def test_followers_copy_the_leader_byte_for_byte_and_acks_all_waits_for_them(three):
    rs = three
    rs.create_topic("t", {0: [1, 2, 3]}, {"min.insync.replicas": 2})
    results = _lead(rs, "t", 1, 1)
    assert all(r == (0, [("t", 0, 0)]) for r in results.values()), results
    values = [b"v%d" % i for i in range(200)]
    reports = _produce(rs.bootstrap(1), "t", values, **{"enable.idempotence": True})
    assert [e for e, _ in reports if e is not None] == []
    assert [o for _, o in reports] == list(range(200))
    # acks=all answered: the high watermark passed every record, on the leader at once
    assert rs.partition(1, "t").hw == 200
    wait_for(lambda: all(rs.partition(i, "t").hw == 200 for i in (1, 2, 3)), what="followers' HW")
    leader_bytes = rs.batches(1, "t")
    assert rs.batches(2, "t") == leader_bytes
    assert rs.batches(3, "t") == leader_bytes
    assert _consume(rs.bootstrap(1), "t", 200) == values


def test_a_follower_refuses_produce_and_consumer_fetch(three):
    rs = three
    rs.create_topic("t", {0: [1, 2, 3]})
    _lead(rs, "t", 1, 1)

    def try_append(broker):
        try:
            broker.replica_manager.append("t", 0, b"", 1)
        except errors.NotLeaderOrFollowerError:
            return "refused"
        return "appended"

    assert rs.brokers[2].call(try_append) == "refused"
    topics, _, had_error = rs.brokers[2].call(lambda b: b.replica_manager.read([("t", 0, 0, 1024, -1)], 1024, 0))
    assert had_error and topics[0][1][0][1] == ErrorCode.not_leader_or_follower
    # a Fetch v11+ consumer may read the follower (KIP-392)
    topics, _, had_error = rs.brokers[2].call(
        lambda b: b.replica_manager.read([("t", 0, 0, 1024, -1)], 1024, 0, follower_reads=True)
    )
    assert not had_error


def test_stale_controller_and_leader_epochs_are_refused(three):
    rs = three
    rs.create_topic("t", {0: [1, 2, 3]})
    _lead(rs, "t", 1, 5)
    assert _lead(rs, "t", 2, 4)[2] == (0, [("t", 0, ErrorCode.stale_controller_epoch)])
    assert rs.partition(1, "t").leader == 1
    rs.controller_epoch = 0
    assert _lead(rs, "t", 2, 6)[1] == (ErrorCode.stale_controller_epoch, [])  # an older controller: nothing applied
    assert rs.partition(1, "t").leader_epoch == 5


def test_isr_shrinks_when_a_follower_stops_and_expands_when_it_is_back(three):
    rs = three
    rs.create_topic("t", {0: [1, 2, 3]}, {"min.insync.replicas": 2})
    _lead(rs, "t", 1, 1)
    assert not [e for e, _ in _produce(rs.bootstrap(1), "t", [b"a"] * 10) if e]
    rs.brokers[3].stop()
    wait_for(lambda: rs.partition(1, "t").isr == [1, 2], what="ISR without broker 3")
    reports = _produce(rs.bootstrap(1), "t", [b"b"] * 10)
    assert not [e for e, _ in reports if e]  # 2 in sync >= min.insync.replicas
    rs.start(3)
    rs.register_brokers()
    rs.create_topic("t", {0: [1, 2, 3]})
    rs.leader_and_isr([partition_state("t", 0, 1, 1, [1, 2], [1, 2, 3])], to=[3])
    wait_for(lambda: rs.partition(1, "t").isr == [1, 2, 3], what="broker 3 back in the ISR")
    counts = rs.brokers[1].call(lambda b: (b.replica_manager.replica_metrics.isr_shrinks, b.replica_manager.replica_metrics.isr_expands))
    assert counts == (1, 1)  # kafka_server_replicamanager_isrshrinks / isrexpands
    wait_for(lambda: rs.partition(3, "t").hw == 20, what="broker 3 caught up")
    assert rs.batches(3, "t") == rs.batches(1, "t")


def test_acks_all_is_refused_below_min_insync_replicas(three):
    rs = three
    rs.create_topic("t", {0: [1, 2, 3]}, {"min.insync.replicas": 3})
    rs.brokers[3].stop()
    _lead(rs, "t", 1, 1, isr=(1, 2))
    reports = _produce(rs.bootstrap(1), "t", [b"x"], **{"message.timeout.ms": 2000, "retries": 0})
    assert reports[0][0].code() == confluent_kafka.KafkaError.NOT_ENOUGH_REPLICAS
    reports = _produce(rs.bootstrap(1), "t", [b"y"], acks="1")
    assert reports == [(None, 0)]


def test_new_leader_truncates_the_old_leaders_unreplicated_tail(three):
    """Broker 1 leads and writes records only it has (the followers are not fetching);
    broker 2 becomes leader with epoch 2 and takes writes; broker 1, now a follower, asks
    OffsetForLeaderEpoch, cuts its divergent tail and copies broker 2's log exactly."""
    rs = three
    rs.create_topic("t", {0: [1, 2, 3]})
    _lead(rs, "t", 1, 1)
    assert not [e for e, _ in _produce(rs.bootstrap(1), "t", [b"a"] * 5) if e]
    wait_for(lambda: rs.partition(2, "t").leo == 5 and rs.partition(3, "t").leo == 5, what="replicated")
    # the followers stop fetching (the controller tells them: no leader), broker 1 writes alone
    rs.leader_and_isr([partition_state("t", 0, -1, 2, [1], [1, 2, 3])], to=[2, 3], metadata=False)
    assert _produce(rs.bootstrap(1), "t", [b"lost"] * 3, acks="1") == [(None, 5), (None, 6), (None, 7)]
    assert rs.partition(1, "t").leo == 8
    # broker 2 takes over with epoch 3; 1 and 3 follow it
    rs.leader_and_isr([partition_state("t", 0, 2, 3, [2, 3], [1, 2, 3])])
    assert not [e for e, _ in _produce(rs.bootstrap(2), "t", [b"new"] * 4) if e]
    wait_for(lambda: rs.partition(1, "t").leo == 9, what="broker 1 truncated and caught up")
    assert rs.batches(1, "t") == rs.batches(2, "t")
    values = _consume(rs.bootstrap(2), "t", 9)
    assert values == [b"a"] * 5 + [b"new"] * 4


def test_leader_and_isr_and_stop_replica_over_the_wire(three):
    """The controller's requests as bytes on a socket: LeaderAndIsr v7 makes broker 2 the
    leader and 1, 3 its followers; StopReplica with delete removes broker 3's replica."""
    import uuid

    from odradek.protocol.inter_broker import stop_replica_schema as stop_replica

    rs = three
    rs.create_topic("w", {0: [1, 2, 3]})
    topic_id = uuid.uuid4()
    states = [partition_state("w", 0, 2, 1, [1, 2, 3], [1, 2, 3])]
    request = leader_and_isr_request(states, {2: rs.brokers[2].port}, topic_ids={"w": topic_id})
    for node_id in (1, 2, 3):
        response = send(rs.bootstrap(node_id), 4, request, 7)
        assert response.error_code == 0
        assert [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partition_errors]) for t in response.topics] == [
            (topic_id, [(0, 0)])
        ]
    rs.update_metadata(states)
    assert not [e for e, _ in _produce(rs.bootstrap(2), "w", [b"z"] * 7) if e]
    wait_for(lambda: rs.partition(3, "w").hw == 7 and rs.partition(1, "w").hw == 7, what="followers caught up")
    stop = stop_replica.StopReplicaRequest(
        controller_id=0,
        controller_epoch=1,
        topic_states=(
            stop_replica.StopReplicaTopicState(
                topic_name="w",
                partition_states=(stop_replica.StopReplicaPartitionState(partition_index=0, delete_partition=True),),
            ),
        ),
    )
    response = send(rs.bootstrap(3), 5, stop, 4)
    assert response.error_code == 0 and [(p.topic_name, p.error_code) for p in response.partition_errors] == [("w", 0)]
    assert rs.partition(3, "w") is None
    stale = leader_and_isr_request(states, {2: rs.brokers[2].port}, controller_epoch=0)
    assert send(rs.bootstrap(1), 4, stale, 7).error_code == ErrorCode.stale_controller_epoch


def test_a_single_node_broker_refuses_leader_and_isr():
    from odradek.testing import EmbeddedBroker

    with EmbeddedBroker() as b:
        b.create_topic("s")
        request = leader_and_isr_request([partition_state("s", 0, 0, 5, [0], [0])], {0: b.port})
        response = send(b.bootstrap_servers, 4, request, 7)
        assert response.error_code == ErrorCode.invalid_request
        assert b.call(lambda broker: broker.replica_manager.partitions[("s", 0)].leader_epoch) == 0


def test_group_coordinator_moves_with_leadership_of_consumer_offsets(three):
    """Offsets committed on broker 1 (leader of __consumer_offsets) are replicated; when
    broker 2 becomes leader it loads them and serves the group, broker 1 unloads."""
    rs = three
    rs.create_topic("t", {0: [1, 2, 3]})
    rs.create_topic("__consumer_offsets", {p: [1, 2, 3] for p in range(5)}, {"cleanup.policy": "compact"}, internal=True)
    rs.leader_and_isr(
        [partition_state("t", 0, 1, 1, [1, 2, 3], [1, 2, 3])]
        + [partition_state("__consumer_offsets", p, 1, 1, [1, 2, 3], [1, 2, 3]) for p in range(5)]
    )
    _produce(rs.bootstrap(1), "t", [b"m"] * 10)

    def commit(bootstrap, offset):
        c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False})
        c.commit(offsets=[confluent_kafka.TopicPartition("t", 0, offset)], asynchronous=False)
        c.close()

    def committed(bootstrap):
        c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "g"})
        try:
            return c.committed([confluent_kafka.TopicPartition("t", 0)], timeout=10)[0].offset
        finally:
            c.close()

    commit(rs.bootstrap(1), 7)
    assert committed(rs.bootstrap(1)) == 7
    wait_for(
        lambda: all(rs.partition(2, "__consumer_offsets", p).hw == rs.partition(1, "__consumer_offsets", p).leo for p in range(5)),
        what="offsets replicated to broker 2",
    )
    rs.leader_and_isr([partition_state("__consumer_offsets", p, 2, 2, [1, 2, 3], [1, 2, 3]) for p in range(5)])
    assert rs.brokers[1].call(lambda b: sorted(b.group_coordinator.shards)) == []
    assert committed(rs.bootstrap(3)) == 7
    commit(rs.bootstrap(3), 9)
    assert committed(rs.bootstrap(1)) == 9


def test_leader_records_isr_changes_in_zookeeper_with_conditional_writes(zk_connect, caplog):
    """The shrink is written to the state znode (version checked) with an ISR change
    notification; a znode changed by someone else (the controller) is not overwritten."""
    import asyncio

    from odradek.cluster import zk_data
    from odradek.cluster.partitions import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
    from odradek.cluster.zk_client import ZkClient

    tp = TopicPartition("z", 0)
    path = zk_data.partition_state_path(tp)

    async def zk_do(fn):
        async with ZkClient(zk_connect) as zk:
            return await fn(zk)

    async def seed(zk):
        state = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 1, (1, 2, 3)), 1)
        await zk.create(path, zk_data.encode_partition_state(state), makepath=True)
        await zk.ensure_path(zk_data.ISR_CHANGE_NOTIFICATION_PATH)

    async def read(zk):
        data, stat = await zk.get(path)
        notes = await zk.get_children(zk_data.ISR_CHANGE_NOTIFICATION_PATH)
        return zk_data.decode_partition_state(tp, data, stat.version), notes

    asyncio.run(zk_do(seed))
    with ReplicaSet(3, zk_connect=zk_connect) as rs:
        rs.create_topic("z", {0: [1, 2, 3]})
        rs.leader_and_isr([partition_state("z", 0, 1, 1, [1, 2, 3], [1, 2, 3], zk_version=0)])
        rs.stop(3)
        wait_for(lambda: rs.partition(1, "z").isr == [1, 2], what="ISR shrunk on the leader")
        state, notes = asyncio.run(zk_do(read))
        assert state.leader_and_isr.isr == (1, 2) and state.leader_and_isr.zk_version == 1
        assert state.leader_and_isr.leader_epoch == 1 and state.controller_epoch == 1
        wait_for(lambda: asyncio.run(zk_do(read))[1], what="an ISR change notification")

        async def controller_write(zk):  # the controller changes the state meanwhile
            s = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 1, (1,)), 2)
            await zk.set(path, zk_data.encode_partition_state(s), version=1)

        asyncio.run(zk_do(controller_write))
        rs.stop(2)
        # the leader's shrink to [1] meets version 2, not 1: refused, the local ISR stays
        wait_for(lambda: "could not record ISR [1]" in caplog.text, what="the refused write")
        assert rs.partition(1, "z").isr == [1, 2]
        state, _ = asyncio.run(zk_do(read))
        assert state.controller_epoch == 2 and state.leader_and_isr.zk_version == 2


def test_idempotent_producer_keeps_its_sequence_across_a_leader_change(three):
    """Producer state is rebuilt on followers from the replicated batches: after the leader
    moves, the same idempotent producer goes on without duplicates or sequence errors."""
    rs = three
    rs.create_topic("t", {0: [1, 2, 3]}, {"min.insync.replicas": 2})
    _lead(rs, "t", 1, 1)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": rs.bootstrap(1), "enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": 20000}
    )
    reports = []

    def done(err, msg):
        reports.append((err, msg.value(), msg.offset() if err is None else None))

    for i in range(50):
        producer.produce("t", b"%d" % i, partition=0, on_delivery=done)
    producer.flush(20)
    wait_for(lambda: rs.partition(2, "t").leo == 50, what="broker 2 caught up")
    assert rs.brokers[2].call(lambda b: b.replica_manager.partitions[("t", 0)].log.producer_state.producers) != {}
    rs.leader_and_isr([partition_state("t", 0, 2, 2, [1, 2, 3], [1, 2, 3])])
    for i in range(50, 100):
        producer.produce("t", b"%d" % i, partition=0, on_delivery=done)
    producer.flush(30)
    assert [e for e, _, _ in reports if e] == []
    assert sorted(o for *_, o in reports) == list(range(100))
    assert _consume(rs.bootstrap(2), "t", 100) == [b"%d" % i for i in range(100)]


def test_transaction_markers_reach_partitions_led_by_other_brokers(three):
    """The coordinator (broker 1) commits one transaction and aborts another over partitions
    led by brokers 2 and 3: WriteTxnMarkers goes to those leaders; read_committed readers
    see exactly the committed records."""
    rs = three
    rs.create_topic("a", {0: [1, 2, 3]})
    rs.create_topic("b", {0: [1, 2, 3]})
    rs.create_topic("__transaction_state", {p: [1, 2, 3] for p in range(5)}, {"cleanup.policy": "compact"}, internal=True)
    rs.leader_and_isr(
        [partition_state("a", 0, 2, 1, [1, 2, 3], [1, 2, 3]), partition_state("b", 0, 3, 1, [1, 2, 3], [1, 2, 3])]
        + [partition_state("__transaction_state", p, 1, 1, [1, 2, 3], [1, 2, 3]) for p in range(5)]
    )
    producer = confluent_kafka.Producer({"bootstrap.servers": rs.bootstrap(1), "transactional.id": "tx-1"})
    producer.init_transactions(20)
    producer.begin_transaction()
    for topic in ("a", "b"):
        producer.produce(topic, b"committed-" + topic.encode(), partition=0)
    producer.commit_transaction(20)
    producer.begin_transaction()
    for topic in ("a", "b"):
        producer.produce(topic, b"aborted-" + topic.encode(), partition=0)
    producer.flush(20)  # sent, so that the abort has markers to write
    producer.abort_transaction(20)
    for topic, leader in (("a", 2), ("b", 3)):
        # data, commit marker, data, abort marker: the last stable offset is past them all
        wait_for(lambda topic=topic, leader=leader: rs.partition(leader, topic).hw == 4, what=f"markers on {topic}")
        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": rs.bootstrap(1), "group.id": "r", "isolation.level": "read_committed"}
        )
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        seen = []
        for _ in range(50):
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                seen.append(msg.value())
            low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0), cached=True)
            if high == 4 and seen:
                break
        consumer.close()
        assert seen == [b"committed-" + topic.encode()]


def test_delete_records_waits_until_the_followers_moved_their_log_start(three):
    from confluent_kafka.admin import AdminClient

    rs = three
    rs.create_topic("t", {0: [1, 2, 3]})
    _lead(rs, "t", 1, 1)
    assert not [e for e, _ in _produce(rs.bootstrap(1), "t", [b"d"] * 30) if e]
    wait_for(lambda: rs.partition(3, "t").hw == 30, what="replicated")
    admin = AdminClient({"bootstrap.servers": rs.bootstrap(1)})
    futures = admin.delete_records([confluent_kafka.TopicPartition("t", 0, 20)], request_timeout=15)
    result = futures[confluent_kafka.TopicPartition("t", 0, 20)].result(15)
    assert result.low_watermark == 20  # the low watermark over the ISR: every replica already starts there
    assert [rs.partition(i, "t").log_start for i in (1, 2, 3)] == [20, 20, 20]


def test_a_consumer_reads_from_the_replica_in_its_rack():
    """KIP-392: with the rack-aware selector the leader (rack r1) names broker 3 (rack r3)
    to a consumer with client.rack=r3, which then fetches every record from broker 3."""
    selector = {"replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}
    with ReplicaSet(3, overrides=selector, racks=["r1", "r2", "r3"]) as rs:
        rs.create_topic("t", {0: [1, 2, 3]})
        _lead(rs, "t", 1, 1)
        values = [b"r%d" % i for i in range(40)]
        assert not [e for e, _ in _produce(rs.bootstrap(1), "t", values) if e]
        wait_for(lambda: rs.partition(3, "t").hw == 40, what="broker 3 caught up")

        def bytes_out(broker):
            counters = broker.replica_manager.topic_metrics.topics.get("t")
            return counters.bytes_out if counters is not None else 0

        before = rs.brokers[3].call(bytes_out)
        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": rs.bootstrap(1), "group.id": "racky", "client.rack": "r3", "enable.auto.commit": False}
        )
        consumer.assign([confluent_kafka.TopicPartition("t", 0, 0)])
        got = []
        for _ in range(200):
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
            if len(got) == 40:
                break
        consumer.close()
        assert got == values
        assert rs.brokers[3].call(bytes_out) - before >= sum(len(v) for v in values)


def test_an_unknown_replica_selector_class_is_refused():
    from odradek.broker.replica_selector import UnknownReplicaSelectorError, replica_selector

    with pytest.raises(UnknownReplicaSelectorError, match="replica.selector.class=com.example.Mine"):
        replica_selector("com.example.Mine", None)


def test_an_offset_commit_is_answered_only_once_the_isr_has_it(three):
    """The followers of __consumer_offsets stop fetching: the commit waits until the ISR has
    it, which here means until the leader drops them from the ISR (replica.lag.time.max.ms)."""
    rs = three
    rs.create_topic("t", {0: [1, 2, 3]})
    rs.create_topic("__consumer_offsets", {p: [1, 2, 3] for p in range(5)}, {"cleanup.policy": "compact"}, internal=True)
    offsets_states = [partition_state("__consumer_offsets", p, 1, 1, [1, 2, 3], [1, 2, 3]) for p in range(5)]
    rs.leader_and_isr([partition_state("t", 0, 1, 1, [1, 2, 3], [1, 2, 3])] + offsets_states)
    wait_for(lambda: rs.partition(1, "__consumer_offsets", 0).isr == [1, 2, 3], what="ready")
    rs.leader_and_isr(  # the followers stop fetching (no leader for them), the leader keeps its ISR
        [partition_state("__consumer_offsets", p, -1, 2, [1], [1, 2, 3]) for p in range(5)], to=[2, 3], metadata=False
    )
    c = confluent_kafka.Consumer({"bootstrap.servers": rs.bootstrap(1), "group.id": "slow", "enable.auto.commit": False})
    c.commit(offsets=[confluent_kafka.TopicPartition("t", 0, 3)], asynchronous=False)
    c.close()
    group_partition = rs.brokers[1].call(lambda b: b.group_coordinator.partition_of("slow"))
    assert rs.partition(1, "__consumer_offsets", group_partition).isr == [1]


def test_every_isr_change_gets_a_notification_even_while_one_is_being_written(zk_connect):
    """An ISR change made while a notification znode is being created goes out in the next
    one (the chaos run once left ISR expansions unannounced, and metadata stale)."""
    import asyncio

    from odradek.broker.isr_updater import NOTIFY_DELAY_S, IsrUpdater
    from odradek.cluster import zk_data
    from odradek.cluster.partitions import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
    from odradek.cluster.zk_client import ZkClient

    class SlowCreates:  # the real session, whose creates take a while (a busy ZooKeeper)
        def __init__(self, zk):
            self.zk = zk

        async def set(self, *args, **kwargs):
            return await self.zk.set(*args, **kwargs)

        async def create(self, *args, **kwargs):
            await asyncio.sleep(0.2)
            return await self.zk.create(*args, **kwargs)

    async def scenario():
        async with ZkClient(zk_connect) as zk:
            state = zk_data.encode_partition_state(LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 1, (1, 2)), 1))
            for p in range(2):
                await zk.create(zk_data.partition_state_path(TopicPartition("n", p)), state, makepath=True)
            updater = IsrUpdater(SlowCreates(zk))
            await updater.write("n", 0, 1, 1, [1, 2, 3], 1, 0)
            await asyncio.sleep(NOTIFY_DELAY_S + 0.05)  # the first notification is being created
            await updater.write("n", 1, 1, 1, [1, 2, 3], 1, 0)
            await updater.close()
            announced = set()
            for child in await zk.get_children(zk_data.ISR_CHANGE_NOTIFICATION_PATH):
                data, _ = await zk.get(f"{zk_data.ISR_CHANGE_NOTIFICATION_PATH}/{child}")
                announced |= zk_data.decode_isr_change(data)
            return announced

    assert asyncio.run(scenario()) == {TopicPartition("n", 0), TopicPartition("n", 1)}


def test_a_follower_fetch_from_an_unknown_replica_or_with_a_stale_epoch_is_refused(three):
    """Kafka's answers, no crash: NOT_LEADER_OR_FOLLOWER for a broker that is not a replica,
    FENCED_LEADER_EPOCH for an older leader epoch, UNKNOWN_LEADER_EPOCH for a newer one."""
    rs = three
    rs.create_topic("t", {0: [1, 2, 3]})
    _lead(rs, "t", 1, 4)
    assert not [e for e, _ in _produce(rs.bootstrap(1), "t", [b"q"] * 3) if e]

    def fetch(replica_id, epoch):
        p = fetch_one(rs.bootstrap(1), 11, replica_id, epoch, 0)
        return p.error_code, len(p.records or b"")

    assert fetch(9, 4) == (ErrorCode.not_leader_or_follower, 0)
    assert fetch(2, 3) == (ErrorCode.fenced_leader_epoch, 0)
    assert fetch(2, 5) == (ErrorCode.unknown_leader_epoch, 0)
    code, size = fetch(2, 4)
    assert code == 0 and size > 0


def test_a_new_coordinator_loads_commits_above_its_lagging_high_watermark(three):
    """A follower learns the high watermark one fetch late; when it becomes the leader of
    __consumer_offsets right then, the last acknowledged commits sit above its high
    watermark. It loads to its log end, as Kafka does (the chaos run lost a commit here)."""
    rs = three
    rs.create_topic("t", {0: [1, 2, 3]})
    rs.create_topic("__consumer_offsets", {p: [1, 2, 3] for p in range(5)}, {"cleanup.policy": "compact"}, internal=True)
    offsets_states = [partition_state("__consumer_offsets", p, 1, 1, [1, 2, 3], [1, 2, 3]) for p in range(5)]
    rs.leader_and_isr([partition_state("t", 0, 1, 1, [1, 2, 3], [1, 2, 3])] + offsets_states)
    c = confluent_kafka.Consumer({"bootstrap.servers": rs.bootstrap(1), "group.id": "lagging", "enable.auto.commit": False})
    c.commit(offsets=[confluent_kafka.TopicPartition("t", 0, 11)], asynchronous=False)
    c.close()
    group_partition = rs.brokers[1].call(lambda b: b.group_coordinator.partition_of("lagging"))
    leo = rs.partition(1, "__consumer_offsets", group_partition).leo
    wait_for(lambda: rs.partition(2, "__consumer_offsets", group_partition).leo == leo, what="broker 2 has the commit")

    def lag(broker):  # broker 2 has not heard of the last high watermark yet
        broker.replica_manager.partitions[("__consumer_offsets", group_partition)].log.high_watermark = 0

    rs.brokers[2].call(lag)
    rs.leader_and_isr([partition_state("__consumer_offsets", p, 2, 2, [1, 2, 3], [1, 2, 3]) for p in range(5)])
    c = confluent_kafka.Consumer({"bootstrap.servers": rs.bootstrap(2), "group.id": "lagging"})
    try:
        assert c.committed([confluent_kafka.TopicPartition("t", 0)], timeout=10)[0].offset == 11
    finally:
        c.close()


def test_a_broker_keeps_answering_while_a_leader_and_isr_creates_2000_logs():
    """LeaderAndIsr making this broker the replica of 2,000 new partitions creates their logs
    in slices that yield to the loop: ApiVersions sent meanwhile are answered while the
    logs are still being made (inline creation would answer at most the one in flight)."""
    import asyncio
    import threading

    from odradek.net.connection import Connection

    count = 2000
    with ReplicaSet(1) as rs:
        broker = rs.brokers[1]
        rs.create_topic("wide", {p: [1] for p in range(count)})
        states = [partition_state("wide", p, 1, 1, [1], [1]) for p in range(count)]
        request = leader_and_isr_request(states, {1: broker.port})
        logs = broker.call(lambda b: b.log_manager._logs)
        done = threading.Event()
        answered_midway = []

        async def probe():
            conn = Connection("127.0.0.1", broker.port, -1, "probe", 10000)
            await conn.connect(5)
            while not done.is_set():
                await conn.send(18, {"client_software_name": "probe", "client_software_version": "1"}, version=3)
                made = sum(1 for t, _ in list(logs) if t == "wide")
                if 0 < made < count:
                    answered_midway.append(made)
                await asyncio.sleep(0.01)  # a probe, not a busy loop taking the GIL from the broker
            conn.close()

        prober = threading.Thread(target=lambda: asyncio.run(probe()), daemon=True)
        prober.start()
        try:
            # Creating 2,000 logs takes seconds, many more on a loaded machine; the point is
            # the answers meanwhile, not the speed.
            response = send(rs.bootstrap(1), 4, request, 7, timeout_ms=120_000)
        finally:
            done.set()
            prober.join(10)
        assert response.error_code == 0
        assert all(p.error_code == 0 for t in response.topics for p in t.partition_errors)
        assert rs.partition(1, "wide", count - 1).leader == 1
        assert len(answered_midway) >= 3, answered_midway
