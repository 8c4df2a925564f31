"""Kafka's four partition leader election strategies, as pure functions.

Kafka's PartitionLeaderElectionAlgorithms (the choice of a leader) and Election.scala (the
new leader-and-ISR that follows), without the controller around them. The controller calls
one of the ``elect_*`` functions when it moves a partition to OnlinePartition, writes the
returned LeaderAndIsr to the partition's state znode (conditionally on its version), and sends
LeaderAndIsr requests to the returned ``recipients``.

* Offline partition (the leader died, or the partition is new or offline): the first replica
  in assignment order that is alive and in the ISR. If there is none and
  ``unclean.leader.election.enable`` is true, the first live replica, which then becomes the
  whole ISR and is marked RECOVERING (KIP-704) — records acknowledged by the old ISR may be lost.
* Reassignment: the first live, in-ISR replica of the target replica list.
* Preferred replica: the first replica of the assignment, only if it is alive and in the ISR.
* Controlled shutdown: the first live, in-ISR replica that is not shutting down; the brokers
  shutting down leave the ISR.

Every new leader gets the next leader epoch. "Live" means the broker is registered and not
shutting down, and the replica's log directory is online; the caller works that out.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from odradek.cluster.partitions import LeaderAndIsr, ReplicaAssignment

# ---------------------------------------------------------------- choosing a leader


def offline_partition_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int], unclean_allowed: bool
) -> tuple[int | None, bool]:
    """``(leader, unclean)``: the first live in-ISR replica, else (if allowed) the first live one."""
    for replica in assignment:
        if replica in live and replica in isr:
            return replica, False
    if unclean_allowed:
        for replica in assignment:
            if replica in live:
                return replica, True
    return None, False


def reassignment_leader(
    target_replicas: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    return next((r for r in target_replicas if r in live and r in isr), None)


def preferred_replica_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int], shutting_down: Collection[int]
) -> int | None:
    return next((r for r in assignment if r in live and r in isr and r not in shutting_down), None)


# ---------------------------------------------------------------- the new leader and ISR


@dataclass(frozen=True)
class ElectionResult:
    """The partition's next leader and ISR (None when no replica is eligible), the replicas that
    should hear about it, and whether the leader came from outside the ISR."""

    leader_and_isr: LeaderAndIsr | None
    recipients: tuple[int, ...]
    unclean: bool = False

    @property
    def elected(self) -> bool:
        return self.leader_and_isr is not None


def elect_for_offline_partition(
    assignment: Sequence[int], current: LeaderAndIsr, live_brokers: Collection[int], unclean_allowed: bool
) -> ElectionResult:
    live = tuple(r for r in assignment if r in live_brokers)
    leader, unclean = offline_partition_leader(assignment, current.isr, live, unclean_allowed)
    if leader is None:
        return ElectionResult(None, live)
    if unclean:
        return ElectionResult(current.new_recovering_leader_and_isr(leader, (leader,)), live, unclean=True)
    new_isr = tuple(r for r in current.isr if r in live_brokers)
    return ElectionResult(current.new_leader_and_isr(leader, new_isr), live)


def elect_for_reassignment(
    target_replicas: Sequence[int], current: LeaderAndIsr, live_brokers: Collection[int]
) -> ElectionResult:
    live = tuple(r for r in target_replicas if r in live_brokers)
    leader = reassignment_leader(target_replicas, current.isr, live)
    return ElectionResult(current.new_leader(leader) if leader is not None else None, tuple(target_replicas))


def elect_preferred_replica(
    assignment: Sequence[int], current: LeaderAndIsr, live_brokers: Collection[int]
) -> ElectionResult:
    live = tuple(r for r in assignment if r in live_brokers)
    leader = preferred_replica_leader(assignment, current.isr, live)
    return ElectionResult(current.new_leader(leader) if leader is not None else None, tuple(assignment))


def elect_for_controlled_shutdown(
    assignment: Sequence[int],
    current: LeaderAndIsr,
    live_or_shutting_down_brokers: Collection[int],
    shutting_down: Collection[int],
) -> ElectionResult:
    live = tuple(r for r in assignment if r in live_or_shutting_down_brokers)
    leader = controlled_shutdown_leader(assignment, current.isr, live, shutting_down)
    if leader is None:
        return ElectionResult(None, live)
    new_isr = tuple(r for r in current.isr if r not in shutting_down)
    return ElectionResult(current.new_leader_and_isr(leader, new_isr), live)


def initial_leader_and_isr(assignment: Sequence[int], live_brokers: Collection[int]) -> LeaderAndIsr | None:
    """A new partition (NewPartition → OnlinePartition): the first live replica leads, every
    live replica is in the ISR; None if no replica is alive."""
    live = tuple(r for r in assignment if r in live_brokers)
    return LeaderAndIsr(live[0], isr=live) if live else None


def has_preferred_leader(assignment: ReplicaAssignment, leader_and_isr: LeaderAndIsr) -> bool:
    """Kafka's test for the leader-imbalance check: the preferred (first) replica leads. While a
    reassignment adds the preferred replica, it counts as balanced until it joins the ISR."""
    if not assignment.replicas:
        return True
    preferred = assignment.replicas[0]
    if assignment.is_being_reassigned and preferred in assignment.adding_replicas:
        return preferred not in leader_and_isr.isr
    return leader_and_isr.leader == preferred
