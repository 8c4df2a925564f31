"""The controller's partition and replica state machines (Kafka's PartitionStateMachine and
ReplicaStateMachine), kept pure: they read and update the ControllerContext and say what to
write and send, and the controller does the ZooKeeper writes and broker requests.

Theory of operation. Every partition and every replica has a lifecycle state in the context
(the enums of ``lifecycle_states``). A state change is legal only from the previous states
listed below (as data, from Kafka); an illegal one is refused with IllegalStateTransitionError
naming both states, and the controller logs it and skips that partition. Partition states:

    NonExistentPartition → NewPartition           replicas assigned, no leader yet
    New/Online/OfflinePartition → OnlinePartition  a leader was elected (and written to ZooKeeper)
    New/Online/OfflinePartition → OfflinePartition the leader died
    OfflinePartition → NonExistentPartition        the topic was deleted

Bringing a partition online is the one transition that needs ZooKeeper, so it comes in two
halves: ``plan_*`` computes the new leader and ISR (NewPartition: first live replica, all live
replicas in the ISR; otherwise one of the election strategies), the controller writes it to the
state znode (creating it, or conditionally on its version and fenced by the controller epoch),
and ``mark_online`` records the result. Replica states, and what the controller does for each:

    NonExistentReplica → NewReplica         send LeaderAndIsr (is_new) to it if the partition has a leader
    New/Online/Offline/DeletionIneligible → OnlineReplica
                                            from New: add it to the assignment; otherwise send it LeaderAndIsr
    New/Online/Offline/DeletionIneligible → OfflineReplica
                                            StopReplica (keep data); remove it from the ISR (remove_replica_from_isr,
                                            written to ZooKeeper) and send the new ISR to the other replicas
    OfflineReplica → ReplicaDeletionStarted             StopReplica with deletion
    ReplicaDeletionStarted → ReplicaDeletionSuccessful  the broker confirmed the deletion
    Offline/DeletionStarted → ReplicaDeletionIneligible the deletion failed (broker down); retried later
    ReplicaDeletionSuccessful → NonExistentReplica      remove it from the assignment

Every change is logged once at INFO, with its reason, on the ``odradek.state.change`` logger
(Kafka's state-change.log): the first thing to read after an incident.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from enum import Enum

from odradek.cluster import election
from odradek.cluster.controller_context import ControllerContext
from odradek.cluster.lifecycle_states import PartitionLifecycle, ReplicaLifecycle
from odradek.cluster.partitions import (
    NO_LEADER,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    TopicPartition,
)

P, R = PartitionLifecycle, ReplicaLifecycle

# target state → the states a partition may move to it from
VALID_PREVIOUS_PARTITION_STATES: dict[PartitionLifecycle, frozenset[PartitionLifecycle]] = {
    P.NEW: frozenset({P.NON_EXISTENT}),
    P.ONLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
    P.OFFLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
    P.NON_EXISTENT: frozenset({P.OFFLINE}),
}

# target state → the states a replica may move to it from
VALID_PREVIOUS_REPLICA_STATES: dict[ReplicaLifecycle, frozenset[ReplicaLifecycle]] = {
    R.NEW: frozenset({R.NON_EXISTENT}),
    R.ONLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.OFFLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.DELETION_STARTED: frozenset({R.OFFLINE}),
    R.DELETION_SUCCESSFUL: frozenset({R.DELETION_STARTED}),
    R.DELETION_INELIGIBLE: frozenset({R.OFFLINE, R.DELETION_STARTED}),
    R.NON_EXISTENT: frozenset({R.DELETION_SUCCESSFUL}),
}


class IllegalStateTransitionError(Exception):
    """A partition or replica was asked to move to a state it cannot reach from its current one."""


def _names(states: Iterable[Enum]) -> str:
    return ",".join(sorted(str(s) for s in states))


def _check_transition(kind: str, subject, current: Enum, target: Enum, table: Mapping) -> None:
    allowed = table[target]
    if current not in allowed:
        raise IllegalStateTransitionError(
            f"{kind} {subject} should be in one of {_names(allowed)} states before moving to {target} state. "
            f"Instead it is in {current} state"
        )


def check_partition_transition(
    tp: TopicPartition, current: PartitionLifecycle, target: PartitionLifecycle
) -> None:
    _check_transition("Partition", tp, current, target, VALID_PREVIOUS_PARTITION_STATES)


def check_replica_transition(
    replica: PartitionAndReplica, current: ReplicaLifecycle, target: ReplicaLifecycle
) -> None:
    _check_transition("Replica", replica, current, target, VALID_PREVIOUS_REPLICA_STATES)


def _split_legal(
    items: Iterable, target: Enum, current_of: Callable, check: Callable, log
) -> tuple[list, list]:
    """(legal, illegal) moves to ``target``; each illegal one is logged as an error and skipped."""
    legal, illegal = [], []
    for item in items:
        try:
            check(item, current_of(item), target)
            legal.append(item)
        except IllegalStateTransitionError as exc:
            log.error(str(exc))
            illegal.append(item)
    return legal, illegal


class StateChangeLogger:
    """Kafka's state-change logger: one line per controller decision, prefixed with who decided."""

    logger = logging.getLogger("odradek.state.change")

    def __init__(self, controller_id: int, epoch: Callable[[], int]):
        self.controller_id = controller_id
        self._epoch = epoch

    def _prefix(self) -> str:
        return f"[Controller id={self.controller_id} epoch={self._epoch()}] "

    def info(self, message: str) -> None:
        self.logger.info("%s%s", self._prefix(), message)

    def error(self, message: str) -> None:
        self.logger.error("%s%s", self._prefix(), message)


class ElectionStrategy(Enum):
    OFFLINE = "offline partition"
    REASSIGNMENT = "reassignment"
    PREFERRED_REPLICA = "preferred replica"
    CONTROLLED_SHUTDOWN = "controlled shutdown"


def remove_replica_from_isr(current: LeaderAndIsr, replica: int) -> LeaderAndIsr | None:
    """The leader-and-ISR after ``replica`` goes offline (None if it was not in the ISR). A leader
    that goes leaves no leader; the last ISR member stays, so the ISR still names who has all the data."""
    if replica not in current.isr:
        return None
    isr = current.isr if len(current.isr) == 1 else tuple(r for r in current.isr if r != replica)
    leader = NO_LEADER if current.leader == replica else current.leader
    return current.new_leader_and_isr(leader, isr)


class PartitionStateMachine:
    def __init__(self, context: ControllerContext, log: StateChangeLogger):
        self.context = context
        self.log = log

    def initialize(self) -> None:
        """On election: Online if the recorded leader is alive, Offline if not, New without a leader."""
        ctx = self.context
        for tp in ctx.all_partitions:
            leadership = ctx.partition_leadership.get(tp)
            if leadership is None:
                ctx.partition_states[tp] = P.NEW
            elif ctx.is_replica_online(leadership.leader_and_isr.leader, tp):
                ctx.partition_states[tp] = P.ONLINE
            else:
                ctx.partition_states[tp] = P.OFFLINE

    def partitions_to_bring_online(self, topic: str | None = None) -> list[TopicPartition]:
        """New and Offline partitions, except those of topics queued for deletion."""
        ctx = self.context
        return sorted(
            tp
            for tp, state in ctx.partition_states.items()
            if state in (P.NEW, P.OFFLINE)
            and (topic is None or tp.topic == topic)
            and not ctx.is_topic_queued_up_for_deletion(tp.topic)
        )

    def split_valid(
        self, partitions: Iterable[TopicPartition], target: PartitionLifecycle
    ) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """(legal, illegal) for moving to ``target``; each illegal one is logged as an error."""
        return _split_legal(
            partitions, target, self.context.partition_state, check_partition_transition, self.log
        )

    def set_state(
        self, partitions: Iterable[TopicPartition], target: PartitionLifecycle, reason: str
    ) -> list:
        """Move to New, Offline or NonExistent (no ZooKeeper write needed); returns those moved."""
        if target is P.ONLINE:
            raise ValueError(
                "bring partitions online with plan_* and mark_online, which carry the new leader"
            )
        valid, _ = self.split_valid(partitions, target)
        for tp in valid:
            previous = self.context.partition_state(tp)
            if target is P.NON_EXISTENT:
                self.context.partition_states.pop(tp, None)
            else:
                self.context.partition_states[tp] = target
            detail = ""
            if target is P.NEW:
                detail = f" with assigned replicas {list(self.context.partition_replica_assignment(tp))}"
            self.log.info(f"Changed partition {tp} state from {previous} to {target}{detail} ({reason})")
        return valid

    def plan_new_partition_leaders(
        self, partitions: Iterable[TopicPartition]
    ) -> tuple[dict[TopicPartition, LeaderIsrAndControllerEpoch], dict[TopicPartition, str]]:
        """For NewPartition → OnlinePartition: the state znodes to create, and why others cannot start."""
        ctx = self.context
        planned, failed = {}, {}
        for tp in partitions:
            replicas = ctx.partition_replica_assignment(tp)
            first = election.initial_leader_and_isr(replicas, ctx.live_replicas(tp))
            if first is None:
                failed[tp] = (
                    f"no assigned replica of {tp} is alive (assigned replicas {list(replicas)}, "
                    f"live brokers {sorted(ctx.live_broker_ids)})"
                )
            else:
                planned[tp] = LeaderIsrAndControllerEpoch(first, ctx.epoch)
        return planned, failed

    def plan_elections(
        self,
        partitions: Iterable[TopicPartition],
        strategy: ElectionStrategy,
        *,
        unclean_allowed: Callable[[str], bool] = lambda topic: False,
        current: Mapping[TopicPartition, LeaderIsrAndControllerEpoch] | None = None,
    ) -> tuple[dict[TopicPartition, election.ElectionResult], dict[TopicPartition, str]]:
        """For Online/OfflinePartition → OnlinePartition: a new leader per partition under ``strategy``.

        ``current`` is each partition's state as just read from ZooKeeper (default: the context's
        copy); the result's LeaderAndIsr keeps that znode version, which the conditional write
        must match. ``unclean_allowed(topic)`` is the topic's unclean.leader.election.enable."""
        ctx = self.context
        current = current if current is not None else ctx.partition_leadership
        results, failed = {}, {}
        for tp in partitions:
            leadership = current.get(tp)
            if leadership is None:
                failed[tp] = f"{tp} has no leader and ISR in ZooKeeper"
                continue
            if leadership.controller_epoch > ctx.epoch:
                failed[tp] = (
                    f"aborted leader election for {tp}: its state was written by a controller with epoch "
                    f"{leadership.controller_epoch}, newer than ours ({ctx.epoch})"
                )
                continue
            lai = leadership.leader_and_isr
            assignment = ctx.partition_full_replica_assignment(tp)
            if strategy is ElectionStrategy.OFFLINE:
                result = election.elect_for_offline_partition(
                    assignment.replicas, lai, ctx.live_replicas(tp), unclean_allowed(tp.topic)
                )
            elif strategy is ElectionStrategy.REASSIGNMENT:
                result = election.elect_for_reassignment(
                    assignment.target_replicas, lai, ctx.live_replicas(tp)
                )
            elif strategy is ElectionStrategy.PREFERRED_REPLICA:
                result = election.elect_preferred_replica(assignment.replicas, lai, ctx.live_replicas(tp))
            else:
                result = election.elect_for_controlled_shutdown(
                    assignment.replicas,
                    lai,
                    ctx.live_replicas(tp, include_shutting_down=True),
                    ctx.shutting_down_broker_ids,
                )
            if result.elected:
                results[tp] = result
            else:
                failed[tp] = (
                    f"no eligible leader for {tp} under the {strategy.value} strategy "
                    f"(replicas {list(assignment.replicas)}, ISR {list(lai.isr)}, "
                    f"live brokers {sorted(ctx.live_broker_ids)}, shutting down {sorted(ctx.shutting_down_broker_ids)})"
                )
        return results, failed

    def mark_online(self, tp: TopicPartition, leadership: LeaderIsrAndControllerEpoch, reason: str) -> None:
        """Record a leader-and-ISR the controller has written to ZooKeeper, and move to OnlinePartition."""
        check_partition_transition(tp, self.context.partition_state(tp), P.ONLINE)
        previous = self.context.partition_state(tp)
        self.context.put_partition_leadership(tp, leadership)
        self.context.partition_states[tp] = P.ONLINE
        lai = leadership.leader_and_isr
        self.log.info(
            f"Changed partition {tp} from {previous} to {P.ONLINE} with leader {lai.leader}, "
            f"leader epoch {lai.leader_epoch}, ISR {list(lai.isr)}"
            f"{', RECOVERING after an unclean election' if lai.leader_recovery_state else ''} ({reason})"
        )


class ReplicaStateMachine:
    def __init__(self, context: ControllerContext, log: StateChangeLogger):
        self.context = context
        self.log = log

    def initialize(self) -> None:
        """On election: Online if the replica's broker is alive; otherwise DeletionIneligible, so that a
        topic deletion does not wait on a broker that cannot answer."""
        ctx = self.context
        for tp in ctx.all_partitions:
            for replica in ctx.partition_replica_assignment(tp):
                state = R.ONLINE if ctx.is_replica_online(replica, tp) else R.DELETION_INELIGIBLE
                ctx.replica_states[PartitionAndReplica(tp, replica)] = state

    def split_valid(
        self, replicas: Iterable[PartitionAndReplica], target: ReplicaLifecycle
    ) -> tuple[list[PartitionAndReplica], list[PartitionAndReplica]]:
        return _split_legal(replicas, target, self.context.replica_state, check_replica_transition, self.log)

    def set_state(
        self, replicas: Iterable[PartitionAndReplica], target: ReplicaLifecycle, reason: str
    ) -> list[PartitionAndReplica]:
        """Move legal replicas to ``target`` with the assignment bookkeeping Kafka does on the way;
        returns those moved (the controller sends the requests the module docstring lists)."""
        ctx = self.context
        valid, _ = self.split_valid(replicas, target)
        for replica in valid:
            previous = ctx.replica_state(replica)
            tp = replica.topic_partition
            assignment = ctx.partition_full_replica_assignment(tp)
            if target is R.ONLINE and previous is R.NEW and replica.replica not in assignment.replicas:
                ctx.update_partition_full_replica_assignment(
                    tp, replace(assignment, replicas=(*assignment.replicas, replica.replica))
                )
            if target is R.NON_EXISTENT:
                ctx.update_partition_full_replica_assignment(tp, assignment.remove_replica(replica.replica))
                ctx.replica_states.pop(replica, None)
            else:
                ctx.replica_states[replica] = target
            self.log.info(
                f"Changed state of replica {replica.replica} for partition {tp} from {previous} to {target} ({reason})"
            )
        return valid
