"""Partition and replica state machines: Kafka's transition tables, every legal and illegal
pair, and the scenarios the controller will drive (creation, broker failure, controlled
shutdown, preferred election, reassignment, unclean election, topic deletion)."""

from __future__ import annotations

import itertools
import logging

import pytest

from odradek.cluster.controller_context import ControllerContext
from odradek.cluster.lifecycle_states import PartitionLifecycle, ReplicaLifecycle
from odradek.cluster.partitions import (
    NO_LEADER,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)
from odradek.cluster.state_machines import (
    VALID_PREVIOUS_PARTITION_STATES,
    VALID_PREVIOUS_REPLICA_STATES,
    ElectionStrategy,
    IllegalStateTransitionError,
    PartitionStateMachine,
    ReplicaStateMachine,
    StateChangeLogger,
    check_partition_transition,
    check_replica_transition,
    remove_replica_from_isr,
)
from odradek.cluster.zk_data import BrokerEndpoint, BrokerRegistration

P, R = PartitionLifecycle, ReplicaLifecycle
T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


def test_partition_transitions_are_kafkas():
    assert {t: {s.value for s in prev} for t, prev in VALID_PREVIOUS_PARTITION_STATES.items()} == {
        P.NEW: {"NonExistentPartition"},
        P.ONLINE: {"NewPartition", "OnlinePartition", "OfflinePartition"},
        P.OFFLINE: {"NewPartition", "OnlinePartition", "OfflinePartition"},
        P.NON_EXISTENT: {"OfflinePartition"},
    }


def test_replica_transitions_are_kafkas():
    assert {t: {s.value for s in prev} for t, prev in VALID_PREVIOUS_REPLICA_STATES.items()} == {
        R.NEW: {"NonExistentReplica"},
        R.ONLINE: {"NewReplica", "OnlineReplica", "OfflineReplica", "ReplicaDeletionIneligible"},
        R.OFFLINE: {"NewReplica", "OnlineReplica", "OfflineReplica", "ReplicaDeletionIneligible"},
        R.DELETION_STARTED: {"OfflineReplica"},
        R.DELETION_SUCCESSFUL: {"ReplicaDeletionStarted"},
        R.DELETION_INELIGIBLE: {"OfflineReplica", "ReplicaDeletionStarted"},
        R.NON_EXISTENT: {"ReplicaDeletionSuccessful"},
    }


def test_every_partition_state_pair_is_checked():
    for current, target in itertools.product(PartitionLifecycle, repeat=2):
        if current in VALID_PREVIOUS_PARTITION_STATES[target]:
            check_partition_transition(T0, current, target)
        else:
            with pytest.raises(IllegalStateTransitionError) as info:
                check_partition_transition(T0, current, target)
            message = str(info.value)
            assert f"Partition {T0}" in message and f"moving to {target} state" in message
            assert f"Instead it is in {current} state" in message


def test_every_replica_state_pair_is_checked():
    replica = PartitionAndReplica(T0, 3)
    legal = 0
    for current, target in itertools.product(ReplicaLifecycle, repeat=2):
        if current in VALID_PREVIOUS_REPLICA_STATES[target]:
            check_replica_transition(replica, current, target)
            legal += 1
        else:
            with pytest.raises(IllegalStateTransitionError, match=f"Instead it is in {current} state"):
                check_replica_transition(replica, current, target)
    assert legal == 14


# ---------------------------------------------------------------- scenarios


def registration(broker_id: int) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id),))


def cluster(*live: int, epoch: int = 5) -> ControllerContext:
    ctx = ControllerContext(epoch=epoch, epoch_zk_version=epoch - 1)
    ctx.set_live_brokers({b: (registration(b), 100 + b) for b in live})
    return ctx


def add_topic(ctx: ControllerContext, topic: str, assignment: dict[int, tuple[int, ...]]) -> None:
    ctx.all_topics.add(topic)
    for p, replicas in assignment.items():
        ctx.update_partition_full_replica_assignment(TopicPartition(topic, p), ReplicaAssignment(replicas))


def machines(ctx: ControllerContext):
    log = StateChangeLogger(1, lambda: ctx.epoch)
    return PartitionStateMachine(ctx, log), ReplicaStateMachine(ctx, log)


def bring_online(psm: PartitionStateMachine, partitions, reason="test"):
    planned, failed = psm.plan_new_partition_leaders(partitions)
    for tp, leadership in planned.items():
        psm.mark_online(tp, leadership, reason)
    return planned, failed


def test_new_topic_comes_online_with_first_live_replica_leading(caplog):
    ctx = cluster(2, 3)
    add_topic(ctx, "orders", {0: (1, 2, 3), 1: (2, 3, 1)})
    psm, _ = machines(ctx)
    with caplog.at_level(logging.INFO, logger="odradek.state.change"):
        assert psm.set_state([T0, T1], P.NEW, "topic created") == [T0, T1]
        planned, failed = bring_online(psm, [T0, T1])
    assert not failed
    assert ctx.partition_leader_and_isr(T0) == LeaderAndIsr(2, 0, (2, 3))  # broker 1 is down
    assert ctx.partition_leader_and_isr(T1) == LeaderAndIsr(2, 0, (2, 3))
    assert planned[T0].controller_epoch == 5
    assert ctx.partition_state(T0) is P.ONLINE
    lines = [r.getMessage() for r in caplog.records if r.name == "odradek.state.change"]
    assert (
        "[Controller id=1 epoch=5] Changed partition orders-0 state from NonExistentPartition to NewPartition "
        "with assigned replicas [1, 2, 3] (topic created)"
    ) in lines
    assert any(
        "orders-0 from NewPartition to OnlinePartition with leader 2, leader epoch 0, ISR [2, 3]" in m
        for m in lines
    )
    assert len(lines) == 4  # one line per decision


def test_new_partition_without_live_replicas_stays_new():
    ctx = cluster(3)
    add_topic(ctx, "orders", {0: (1, 2)})
    psm, _ = machines(ctx)
    psm.set_state([T0], P.NEW, "topic created")
    planned, failed = bring_online(psm, [T0])
    assert not planned and "no assigned replica of orders-0 is alive" in failed[T0]
    assert ctx.partition_state(T0) is P.NEW
    assert psm.partitions_to_bring_online() == [T0]


def test_leader_failure_moves_leadership_within_the_isr():
    ctx = cluster(1, 2, 3)
    add_topic(ctx, "orders", {0: (1, 2, 3)})
    psm, _ = machines(ctx)
    psm.set_state([T0], P.NEW, "topic created")
    bring_online(psm, [T0])
    ctx.remove_live_brokers([1])
    assert ctx.partitions_with_offline_leader() == {T0}
    psm.set_state([T0], P.OFFLINE, "broker 1 failed")
    results, failed = psm.plan_elections(psm.partitions_to_bring_online(), ElectionStrategy.OFFLINE)
    assert not failed
    new = results[T0].leader_and_isr
    assert new == LeaderAndIsr(2, 1, (2, 3), zk_version=0)
    psm.mark_online(T0, LeaderIsrAndControllerEpoch(new.with_zk_version(1), ctx.epoch), "broker 1 failed")
    assert ctx.partition_state(T0) is P.ONLINE and ctx.partitions_with_offline_leader() == set()


def test_offline_partition_without_in_sync_replicas_waits_unless_unclean_is_allowed(caplog):
    ctx = cluster(1, 2, 3)
    add_topic(ctx, "orders", {0: (1, 2, 3)})
    ctx.put_partition_leadership(T0, LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 4, (1,), zk_version=9), 5))
    ctx.partition_states[T0] = P.ONLINE
    psm, _ = machines(ctx)
    ctx.remove_live_brokers([1])
    psm.set_state([T0], P.OFFLINE, "broker 1 failed")
    results, failed = psm.plan_elections([T0], ElectionStrategy.OFFLINE)
    assert (
        not results and "no eligible leader for orders-0 under the offline partition strategy" in failed[T0]
    )
    results, failed = psm.plan_elections(
        [T0], ElectionStrategy.OFFLINE, unclean_allowed=lambda t: t == "orders"
    )
    result = results[T0]
    assert result.unclean
    assert result.leader_and_isr == LeaderAndIsr(2, 5, (2,), LeaderRecoveryState.RECOVERING, zk_version=9)
    with caplog.at_level(logging.INFO, logger="odradek.state.change"):
        psm.mark_online(T0, LeaderIsrAndControllerEpoch(result.leader_and_isr, 5), "unclean election")
    assert "RECOVERING after an unclean election" in caplog.text


def test_controlled_shutdown_moves_leaders_off_the_broker():
    ctx = cluster(1, 2, 3)
    add_topic(ctx, "orders", {0: (1, 2, 3), 1: (2, 3, 1)})
    add_topic(ctx, "single", {0: (1,)})
    psm, _ = machines(ctx)
    all_partitions = sorted(ctx.all_partitions)
    psm.set_state(all_partitions, P.NEW, "topics created")
    bring_online(psm, all_partitions)
    ctx.shutting_down_broker_ids.add(1)
    # A single-replica partition has nowhere to go, so it is not asked to move.
    assert ctx.partition_leaders_on_broker(1) == {T0}
    results, failed = psm.plan_elections([T0], ElectionStrategy.CONTROLLED_SHUTDOWN)
    assert results[T0].leader_and_isr == LeaderAndIsr(2, 1, (2, 3))
    assert results[T0].recipients == (1, 2, 3)


def test_preferred_replica_election_restores_the_first_replica():
    ctx = cluster(1, 2, 3)
    add_topic(ctx, "orders", {0: (1, 2, 3)})
    ctx.put_partition_leadership(
        T0, LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 3, (2, 3, 1), zk_version=4), 4)
    )
    ctx.partition_states[T0] = P.ONLINE
    assert ctx.preferred_replica_imbalance_count == 1
    psm, _ = machines(ctx)
    results, _ = psm.plan_elections([T0], ElectionStrategy.PREFERRED_REPLICA)
    assert results[T0].leader_and_isr == LeaderAndIsr(1, 4, (2, 3, 1), zk_version=4)
    psm.mark_online(T0, LeaderIsrAndControllerEpoch(results[T0].leader_and_isr, 5), "preferred election")
    assert ctx.preferred_replica_imbalance_count == 0


def test_reassignment_elects_from_the_target_replicas():
    ctx = cluster(1, 2, 3, 4, 5)
    add_topic(ctx, "orders", {0: (1, 2, 3)})
    moving = ctx.partition_full_replica_assignment(T0).reassign_to([4, 5, 1])
    ctx.update_partition_full_replica_assignment(T0, moving)
    ctx.partitions_being_reassigned.add(T0)
    ctx.put_partition_leadership(T0, LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 0, (1, 2, 3, 4, 5)), 5))
    ctx.partition_states[T0] = P.ONLINE
    psm, _ = machines(ctx)
    results, _ = psm.plan_elections([T0], ElectionStrategy.REASSIGNMENT)
    assert results[T0].leader_and_isr.leader == 4
    assert results[T0].recipients == (4, 5, 1)


def test_a_newer_controllers_state_aborts_the_election():
    ctx = cluster(1, 2, 3, epoch=5)
    add_topic(ctx, "orders", {0: (1, 2, 3)})
    psm, _ = machines(ctx)
    fresh_from_zookeeper = {T0: LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 3, (1, 2, 3)), 6)}
    results, failed = psm.plan_elections(
        [T0], ElectionStrategy.PREFERRED_REPLICA, current=fresh_from_zookeeper
    )
    assert not results and "newer than ours (5)" in failed[T0]
    assert "has no leader and ISR" in psm.plan_elections([T1], ElectionStrategy.OFFLINE)[1][T1]


def test_illegal_partition_changes_are_refused_and_logged(caplog):
    ctx = cluster(1)
    add_topic(ctx, "orders", {0: (1,)})
    psm, _ = machines(ctx)
    with caplog.at_level(logging.INFO, logger="odradek.state.change"):
        assert psm.set_state([T0], P.NON_EXISTENT, "bogus") == []
    assert "should be in one of OfflinePartition states before moving to NonExistentPartition" in caplog.text
    with pytest.raises(IllegalStateTransitionError):
        psm.mark_online(T0, LeaderIsrAndControllerEpoch(LeaderAndIsr(1), 5), "skipping NewPartition")
    with pytest.raises(ValueError, match="plan_"):
        psm.set_state([T0], P.ONLINE, "no leader given")


def test_initialize_after_election_and_topics_queued_for_deletion():
    ctx = cluster(1, 2)
    add_topic(ctx, "orders", {0: (1, 2), 1: (3, 2)})
    add_topic(ctx, "doomed", {0: (3,)})
    ctx.put_partition_leadership(T0, LeaderIsrAndControllerEpoch(LeaderAndIsr(1, isr=(1, 2)), 4))
    ctx.put_partition_leadership(T1, LeaderIsrAndControllerEpoch(LeaderAndIsr(3, isr=(3,)), 4))
    psm, rsm = machines(ctx)
    psm.initialize()
    doomed = TopicPartition("doomed", 0)
    assert (ctx.partition_state(T0), ctx.partition_state(T1), ctx.partition_state(doomed)) == (
        P.ONLINE,
        P.OFFLINE,
        P.NEW,
    )
    ctx.queue_topic_deletion(["doomed"])
    assert psm.partitions_to_bring_online() == [T1]
    assert psm.partitions_to_bring_online("orders") == [T1]
    assert ctx.offline_partition_count == 1
    rsm.initialize()
    assert ctx.replica_state(PartitionAndReplica(T1, 2)) is R.ONLINE
    assert ctx.replica_state(PartitionAndReplica(T1, 3)) is R.DELETION_INELIGIBLE


def test_replica_lifecycle_through_topic_deletion():
    ctx = cluster(1, 2)
    add_topic(ctx, "orders", {0: (1, 2)})
    _, rsm = machines(ctx)
    rsm.initialize()
    replicas = sorted(ctx.replicas_for_topic("orders"))
    assert rsm.set_state(replicas, R.DELETION_STARTED, "delete topic") == []  # must go offline first
    for target in (R.OFFLINE, R.DELETION_STARTED, R.DELETION_SUCCESSFUL):
        assert rsm.set_state(replicas, target, "delete topic") == replicas
    assert ctx.are_all_replicas_in_state("orders", R.DELETION_SUCCESSFUL)
    assert rsm.set_state(replicas, R.ONLINE, "resurrect") == []
    rsm.set_state(replicas, R.NON_EXISTENT, "delete topic")
    assert ctx.partition_replica_assignment(T0) == () and not ctx.replica_states


def test_failed_replica_deletion_is_retried_from_ineligible():
    ctx = cluster(1, 2)
    add_topic(ctx, "orders", {0: (1, 2)})
    _, rsm = machines(ctx)
    rsm.initialize()
    replica = PartitionAndReplica(T0, 2)
    for target in (R.OFFLINE, R.DELETION_STARTED, R.DELETION_INELIGIBLE, R.OFFLINE, R.DELETION_STARTED):
        assert rsm.set_state([replica], target, "broker 2 flapping") == [replica]


def test_new_replica_joins_the_assignment_when_it_comes_online():
    ctx = cluster(1, 2, 3)
    add_topic(ctx, "orders", {0: (1, 2)})
    _, rsm = machines(ctx)
    new = PartitionAndReplica(T0, 3)
    rsm.set_state([new], R.NEW, "reassignment adds broker 3")
    assert ctx.partition_replica_assignment(T0) == (1, 2)
    rsm.set_state([new], R.ONLINE, "reassignment adds broker 3")
    assert ctx.partition_replica_assignment(T0) == (1, 2, 3)


@pytest.mark.parametrize(
    "current, replica, expected",
    [
        (LeaderAndIsr(1, 4, (1, 2, 3)), 2, LeaderAndIsr(1, 5, (1, 3))),
        (LeaderAndIsr(1, 4, (1, 2, 3)), 1, LeaderAndIsr(NO_LEADER, 5, (2, 3))),
        (LeaderAndIsr(1, 4, (1,)), 1, LeaderAndIsr(NO_LEADER, 5, (1,))),  # the last ISR member stays
        (LeaderAndIsr(1, 4, (1, 2)), 3, None),  # not in the ISR: nothing to write
    ],
)
def test_remove_replica_from_isr(current, replica, expected):
    assert remove_replica_from_isr(current, replica) == expected
