"""ControllerContext: the controller's view of brokers, topics, leadership and states."""

from __future__ import annotations

import uuid

import pytest

from odradek.cluster.controller_context import ControllerContext
from odradek.cluster.lifecycle_states import PartitionLifecycle, ReplicaLifecycle
from odradek.cluster.partitions import (
    EPOCH_DURING_DELETE,
    NO_EPOCH,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)
from odradek.cluster.zk_data import BrokerEndpoint, BrokerRegistration

T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


def registration(broker_id: int, rack: str | None = None) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (BrokerEndpoint("PLAINTEXT", "h", 9000 + broker_id),), rack)


def context() -> ControllerContext:
    ctx = ControllerContext(epoch=3, epoch_zk_version=2)
    ctx.set_live_brokers({b: (registration(b), 1000 + b) for b in (1, 2, 3)})
    ctx.set_all_topics(["orders", "logs"])
    ctx.update_partition_full_replica_assignment(T0, ReplicaAssignment((1, 2, 3)))
    ctx.update_partition_full_replica_assignment(T1, ReplicaAssignment((2, 3, 4)))
    ctx.update_partition_full_replica_assignment(TopicPartition("logs", 0), ReplicaAssignment((3,)))
    return ctx


def leadership(leader: int, isr: tuple[int, ...], epoch: int = 0) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, epoch, isr), 3)


def test_live_brokers_epochs_and_shutting_down():
    ctx = context()
    assert ctx.live_broker_ids == {1, 2, 3} and ctx.live_broker_epochs[2] == 1002
    ctx.shutting_down_broker_ids.add(2)
    assert ctx.live_broker_ids == {1, 3}
    assert ctx.live_or_shutting_down_broker_ids == {1, 2, 3}
    assert not ctx.is_replica_online(2, T0)
    assert ctx.is_replica_online(2, T0, include_shutting_down=True)
    # A broker that re-registers gets a new epoch (the czxid of its new znode).
    ctx.add_live_brokers({2: (registration(2, "rack-b"), 2002)})
    assert ctx.live_broker_epochs[2] == 2002 and ctx.live_brokers[2].rack == "rack-b"
    ctx.remove_live_brokers([2, 7])
    assert ctx.live_or_shutting_down_broker_ids == {1, 3}


def test_replicas_on_an_offline_log_dir_are_not_online():
    ctx = context()
    ctx.replicas_on_offline_dirs[1] = {T0}
    assert not ctx.is_replica_online(1, T0)
    assert ctx.live_replicas(T0) == {2, 3}
    assert ctx.live_replicas(T1) == {2, 3}  # broker 4 is not registered


def test_assignment_queries():
    ctx = context()
    assert ctx.all_partitions == {T0, T1, TopicPartition("logs", 0)}
    assert ctx.partitions_for_topic("orders") == {T0, T1}
    assert ctx.partition_replica_assignment(TopicPartition("nope", 0)) == ()
    assert ctx.partitions_on_broker(1) == {T0}
    assert ctx.partition_replica_assignment_for_topic("orders") == {T0: (1, 2, 3), T1: (2, 3, 4)}
    assert ctx.replicas_on_brokers([4]) == {PartitionAndReplica(T1, 4)}
    assert len(ctx.replicas_for_topic("orders")) == 6
    assert ctx.replicas_for_partitions([T0]) == {PartitionAndReplica(T0, r) for r in (1, 2, 3)}
    online, offline = ctx.online_and_offline_replicas()
    assert offline == {PartitionAndReplica(T1, 4)} and len(online) == 6


def test_topic_ids_must_stay_consistent():
    ctx = context()
    first, second = uuid.uuid4(), uuid.uuid4()
    ctx.add_topic_id("orders", first)
    ctx.add_topic_id("orders", first)
    assert ctx.topic_names[first] == "orders"
    with pytest.raises(ValueError, match="already has id"):
        ctx.add_topic_id("orders", second)
    with pytest.raises(ValueError, match="already belongs to orders"):
        ctx.add_topic_id("logs", first)
    with pytest.raises(ValueError, match="not among"):
        ctx.add_topic_id("unknown", second)


def test_leadership_queries_and_epochs():
    ctx = context()
    ctx.put_partition_leadership(T0, leadership(1, (1, 2, 3), epoch=7))
    ctx.put_partition_leadership(T1, leadership(4, (4,)))
    ctx.put_partition_leadership(TopicPartition("logs", 0), leadership(3, (3,)))
    assert ctx.leader_epoch(T0) == 7
    assert ctx.leader_epoch(TopicPartition("orders", 9)) == NO_EPOCH
    assert ctx.partitions_with_offline_leader() == {T1}
    assert ctx.partition_leaders_on_broker(3) == set()  # logs-0 has a single replica
    assert ctx.partition_leaders_on_broker(1) == {T0}
    ctx.queue_topic_deletion(["orders"])
    assert ctx.leader_epoch(T0) == EPOCH_DURING_DELETE
    assert ctx.partitions_with_offline_leader() == set()
    assert ctx.partition_leaders_on_broker(1) == set()


def test_topic_deletion_bookkeeping_and_removal():
    ctx = context()
    ctx.queue_topic_deletion(["orders"])
    ctx.topics_ineligible_for_deletion.add("orders")
    assert ctx.is_topic_queued_up_for_deletion("orders") and not ctx.is_topic_eligible_for_deletion("orders")
    ctx.topics_ineligible_for_deletion.discard("orders")
    assert ctx.is_topic_eligible_for_deletion("orders")
    ctx.begin_topic_deletion(["orders"])
    assert ctx.is_topic_deletion_in_progress("orders")
    topic_id = uuid.uuid4()
    ctx.add_topic_id("orders", topic_id)
    ctx.put_partition_leadership(T0, leadership(1, (1,)))
    ctx.partition_states[T0] = PartitionLifecycle.OFFLINE
    ctx.replica_states[PartitionAndReplica(T0, 1)] = ReplicaLifecycle.DELETION_SUCCESSFUL
    ctx.replica_states[PartitionAndReplica(TopicPartition("logs", 0), 3)] = ReplicaLifecycle.ONLINE
    assert ctx.offline_partition_count == 0  # deletion in progress: not counted as offline
    ctx.remove_topic("orders")
    assert "orders" not in ctx.all_topics and topic_id not in ctx.topic_names
    assert ctx.partitions_for_topic("orders") == set() and T0 not in ctx.partition_leadership
    assert list(ctx.replica_states) == [PartitionAndReplica(TopicPartition("logs", 0), 3)]
    assert not ctx.is_topic_queued_up_for_deletion("orders") and not ctx.is_topic_deletion_in_progress(
        "orders"
    )


def test_state_queries_and_health_figures():
    ctx = context()
    ctx.partition_states.update({T0: PartitionLifecycle.ONLINE, T1: PartitionLifecycle.OFFLINE})
    assert ctx.partitions_in_state(PartitionLifecycle.OFFLINE) == {T1}
    assert ctx.partitions_in_state(PartitionLifecycle.ONLINE, "logs") == set()
    assert ctx.partition_state(TopicPartition("logs", 0)) is PartitionLifecycle.NON_EXISTENT
    assert ctx.offline_partition_count == 1
    for replica in ctx.replicas_for_topic("orders"):
        ctx.replica_states[replica] = ReplicaLifecycle.ONLINE
    ctx.replica_states[PartitionAndReplica(T1, 4)] = ReplicaLifecycle.OFFLINE
    assert ctx.replicas_in_state("orders", ReplicaLifecycle.OFFLINE) == {PartitionAndReplica(T1, 4)}
    assert ctx.is_any_replica_in_state("orders", ReplicaLifecycle.OFFLINE)
    assert not ctx.are_all_replicas_in_state("orders", ReplicaLifecycle.ONLINE)
    ctx.put_partition_leadership(T0, leadership(2, (1, 2, 3)))
    ctx.put_partition_leadership(T1, leadership(2, (2, 3)))
    assert ctx.preferred_replica_imbalance_count == 1  # orders-0 is led by 2, not its preferred 1


def test_reset_forgets_everything():
    ctx = context()
    ctx.put_partition_leadership(T0, leadership(1, (1,)))
    ctx.reset()
    assert ctx == ControllerContext()
