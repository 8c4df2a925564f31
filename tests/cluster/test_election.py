"""Leader election strategies: hand-written tables of Kafka's behaviour, then every combination of
assignment, ISR and live brokers over four brokers checked against the rules."""

from __future__ import annotations

import itertools

import pytest

from odradek.cluster.election import (
    controlled_shutdown_leader,
    elect_for_controlled_shutdown,
    elect_for_offline_partition,
    elect_for_reassignment,
    elect_preferred_replica,
    has_preferred_leader,
    initial_leader_and_isr,
    offline_partition_leader,
    preferred_replica_leader,
    reassignment_leader,
)
from odradek.cluster.partitions import LeaderAndIsr, LeaderRecoveryState, ReplicaAssignment

# (assignment, isr, live, unclean allowed) → (leader, unclean)
OFFLINE_CASES = [
    ([1, 2, 3], [1, 2, 3], {1, 2, 3}, False, (1, False)),
    ([1, 2, 3], [1, 2, 3], {2, 3}, False, (2, False)),
    ([1, 2, 3], [3, 2], {1, 2, 3}, False, (2, False)),  # assignment order, not ISR order
    ([1, 2, 3], [1], {2, 3}, False, (None, False)),  # the only in-sync replica is dead
    ([1, 2, 3], [1], {2, 3}, True, (2, True)),  # ... unless unclean election is allowed
    ([1, 2, 3], [1, 3], {2, 3}, True, (3, False)),  # a clean leader wins even when unclean is allowed
    ([1, 2, 3], [], {1, 2, 3}, False, (None, False)),
    ([1, 2, 3], [], {3}, True, (3, True)),
    ([1, 2, 3], [1, 2, 3], set(), True, (None, False)),  # nobody alive: no leader either way
    ([3, 1, 2], [1, 2, 3], {1, 2, 3}, False, (3, False)),
]


@pytest.mark.parametrize("assignment, isr, live, unclean, expected", OFFLINE_CASES)
def test_offline_partition_leader_table(assignment, isr, live, unclean, expected):
    assert offline_partition_leader(assignment, isr, live, unclean) == expected


def test_reassignment_preferred_and_controlled_shutdown_tables():
    # Reassignment picks from the target replicas, in target order.
    assert reassignment_leader([4, 5, 6], [1, 2, 3, 4, 5, 6], {1, 2, 3, 4, 5, 6}) == 4
    assert reassignment_leader([4, 5, 6], [1, 2, 3, 5], {1, 2, 3, 4, 5, 6}) == 5
    assert reassignment_leader([4, 5, 6], [1, 2, 3, 4], {1, 2, 3, 5, 6}) is None
    # Preferred: the first replica or nothing.
    assert preferred_replica_leader([2, 1, 3], [1, 2, 3], {1, 2, 3}) == 2
    assert preferred_replica_leader([2, 1, 3], [1, 3], {1, 2, 3}) is None
    assert preferred_replica_leader([2, 1, 3], [1, 2, 3], {1, 3}) is None
    assert preferred_replica_leader([], [], set()) is None
    # Controlled shutdown: skip the brokers going down.
    assert controlled_shutdown_leader([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1}) == 2
    assert controlled_shutdown_leader([1, 2, 3], [1, 3], {1, 2, 3}, {1}) == 3
    assert controlled_shutdown_leader([1, 2, 3], [1], {1, 2, 3}, {1}) is None


def test_offline_election_clean():
    current = LeaderAndIsr(1, 7, (1, 2, 3), zk_version=12)
    result = elect_for_offline_partition([1, 2, 3], current, {2, 3}, unclean_allowed=False)
    assert result.leader_and_isr == LeaderAndIsr(2, 8, (2, 3), zk_version=12)
    assert result.recipients == (2, 3) and not result.unclean and result.elected


def test_offline_election_unclean_marks_the_leader_recovering():
    current = LeaderAndIsr(1, 7, (1,))
    result = elect_for_offline_partition([1, 2, 3], current, {3}, unclean_allowed=True)
    assert result.unclean
    assert result.leader_and_isr == LeaderAndIsr(3, 8, (3,), LeaderRecoveryState.RECOVERING)
    refused = elect_for_offline_partition([1, 2, 3], current, {3}, unclean_allowed=False)
    assert (refused.leader_and_isr, refused.recipients) == (None, (3,))


def test_reassignment_and_preferred_keep_the_isr():
    current = LeaderAndIsr(1, 3, (1, 2, 3, 4))
    reassigned = elect_for_reassignment([4, 5], current, {1, 2, 3, 4, 5})
    assert reassigned.leader_and_isr == LeaderAndIsr(4, 4, (1, 2, 3, 4))
    assert reassigned.recipients == (4, 5)
    preferred = elect_preferred_replica([2, 1, 3], LeaderAndIsr(1, 3, (1, 2, 3)), {1, 2, 3})
    assert preferred.leader_and_isr == LeaderAndIsr(2, 4, (1, 2, 3))
    assert preferred.recipients == (2, 1, 3)
    assert not elect_preferred_replica([2, 1, 3], LeaderAndIsr(1, 3, (1, 3)), {1, 2, 3}).elected


def test_controlled_shutdown_drops_the_shutting_down_brokers_from_the_isr():
    current = LeaderAndIsr(1, 5, (1, 2, 3))
    result = elect_for_controlled_shutdown([1, 2, 3], current, {1, 2, 3}, {1})
    assert result.leader_and_isr == LeaderAndIsr(2, 6, (2, 3))
    assert result.recipients == (1, 2, 3)  # the broker going down still hears it should stop leading


def test_new_partition_gets_the_first_live_replica_and_all_live_replicas_as_isr():
    assert initial_leader_and_isr([3, 1, 2], {1, 2, 3}) == LeaderAndIsr(3, 0, (3, 1, 2))
    assert initial_leader_and_isr([3, 1, 2], {1, 2}) == LeaderAndIsr(1, 0, (1, 2))
    assert initial_leader_and_isr([3, 1, 2], set()) is None


def test_has_preferred_leader():
    assert has_preferred_leader(ReplicaAssignment((1, 2)), LeaderAndIsr(1, isr=(1, 2)))
    assert not has_preferred_leader(ReplicaAssignment((1, 2)), LeaderAndIsr(2, isr=(1, 2)))
    # Reassigning to [3, 1]: 3 is being added; not imbalanced until it has caught up (joined the ISR).
    moving = ReplicaAssignment((1, 2)).reassign_to([3, 1])
    assert moving.replicas[0] == 3 and moving.adding_replicas == (3,)
    assert has_preferred_leader(moving, LeaderAndIsr(1, isr=(1, 2)))
    assert not has_preferred_leader(moving, LeaderAndIsr(1, isr=(1, 2, 3)))


# ---------------------------------------------------------------- every combination over 4 brokers

BROKERS = (1, 2, 3, 4)


def subsets(items):
    return [set(c) for n in range(len(items) + 1) for c in itertools.combinations(items, n)]


ASSIGNMENTS = [list(p) for n in (1, 2, 3) for p in itertools.permutations(BROKERS, n)]


def test_offline_election_rules_hold_for_every_combination():
    checked = 0
    for assignment in ASSIGNMENTS:
        for isr in subsets(assignment):
            for live in subsets(BROKERS):
                for unclean_allowed in (False, True):
                    current = LeaderAndIsr(
                        assignment[0], 10, tuple(r for r in assignment if r in isr), zk_version=3
                    )
                    result = elect_for_offline_partition(assignment, current, live, unclean_allowed)
                    clean_candidates = [r for r in assignment if r in live and r in isr]
                    live_replicas = [r for r in assignment if r in live]
                    assert result.recipients == tuple(live_replicas)
                    if clean_candidates:
                        lai = result.leader_and_isr
                        assert lai.leader == clean_candidates[0] and not result.unclean
                        assert set(lai.isr) == isr & live and lai.leader in lai.isr
                        assert lai.leader_recovery_state == LeaderRecoveryState.RECOVERED
                    elif unclean_allowed and live_replicas:
                        lai = result.leader_and_isr
                        assert result.unclean and lai.leader == live_replicas[0] and lai.isr == (lai.leader,)
                        assert lai.leader_recovery_state == LeaderRecoveryState.RECOVERING
                    else:
                        assert result.leader_and_isr is None and not result.unclean
                    if result.leader_and_isr is not None:
                        assert result.leader_and_isr.leader in live  # never a dead broker
                        assert result.leader_and_isr.leader_epoch == 11
                        assert result.leader_and_isr.zk_version == 3  # the znode version to write against
                    checked += 1
    assert checked == sum(2 ** len(a) for a in ASSIGNMENTS) * 16 * 2


def test_preferred_and_reassignment_rules_hold_for_every_combination():
    for assignment in ASSIGNMENTS:
        for isr in subsets(BROKERS):
            for live in subsets(BROKERS):
                current = LeaderAndIsr(1, 0, tuple(sorted(isr)))
                preferred = elect_preferred_replica(assignment, current, live)
                eligible = assignment[0] in live and assignment[0] in isr
                assert preferred.elected == eligible
                if eligible:
                    assert preferred.leader_and_isr.leader == assignment[0]
                    assert preferred.leader_and_isr.isr == current.isr
                reassigned = elect_for_reassignment(assignment, current, live)
                candidates = [r for r in assignment if r in live and r in isr]
                assert (reassigned.leader_and_isr.leader if reassigned.elected else None) == (
                    candidates[0] if candidates else None
                )


def test_controlled_shutdown_rules_hold_for_every_combination():
    for assignment in ASSIGNMENTS:
        for isr in subsets(assignment):
            for shutting_down in subsets(BROKERS):
                live_or_shutting_down = set(BROKERS)
                current = LeaderAndIsr(assignment[0], 2, tuple(r for r in assignment if r in isr))
                result = elect_for_controlled_shutdown(
                    assignment, current, live_or_shutting_down, shutting_down
                )
                candidates = [r for r in assignment if r in isr and r not in shutting_down]
                if candidates:
                    lai = result.leader_and_isr
                    assert lai.leader == candidates[0] and lai.leader not in shutting_down
                    assert not set(lai.isr) & shutting_down and set(lai.isr) == isr - shutting_down
                    assert lai.leader_epoch == 3
                else:
                    assert result.leader_and_isr is None
