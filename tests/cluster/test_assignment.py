"""Replica assignment: Kafka's documented example outputs, its rack-aware distribution checks
(AdminRackAwareTest) over every start index, and the errors Kafka gives."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from odradek.cluster.assignment import (
    IncompleteRackInformationError,
    RackAwareMode,
    assign_new_partitions,
    assign_replicas,
    brokers_for_assignment,
    rack_alternated_brokers,
)
from odradek.protocol import errors


def unracked(*ids):
    return [(b, None) for b in ids]


def racked(mapping):
    return sorted(mapping.items())


def test_kafkas_rack_unaware_example():
    # AdminUtils' documented table: 5 brokers, 10 partitions, 3 replicas, start index 0.
    assert assign_replicas(unracked(0, 1, 2, 3, 4), 10, 3, start_index=0) == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


def test_kafkas_rack_aware_example():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_brokers({b: r for b, r in racks.items() if b != 5}) == [0, 3, 1, 4, 2]
    assert assign_replicas(racked(racks), 7, 3, start_index=0) == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],  # the followers shift once every broker has led a partition
    }


def test_rack_alternated_list_with_uneven_racks():
    layout = {0: "r1", 1: "r1", 2: "r1", 3: "r2", 4: "r2", 5: "r2", 6: "r3", 7: "r3", 8: "r3"}
    assert rack_alternated_brokers(layout) == [0, 3, 6, 1, 4, 7, 2, 5, 8]
    assert rack_alternated_brokers({0: "a", 1: "a", 5: "a", 2: "b", 3: "c", 4: "c"}) == [0, 2, 3, 1, 4, 5]


def distribution(assignment, racks):
    leaders = Counter(replicas[0] for replicas in assignment.values())
    replicas = Counter(b for rs in assignment.values() for b in rs)
    partition_racks = {p: [racks[b] for b in rs] for p, rs in assignment.items()}
    return leaders, replicas, partition_racks


# (rack layout, partitions, replication factor, check leaders even, check replicas even) from AdminRackAwareTest
RACK_CASES = [
    ({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 6, 3, True, True),
    ({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 13, 3, False, False),
    ({0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 12, 3, True, False),
    ({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 12, 2, True, True),
    ({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 6, 2, True, True),
    ({0: "rack1", 1: "rack2", 4: "rack3"}, 3, 2, True, True),
    (
        {i: r for i, r in enumerate("1 2 2 3 3 1 1 2 2 3 1 3".split())},
        96,
        3,
        True,
        True,
    ),
]


@pytest.mark.parametrize("racks, partitions, rf, even_leaders, even_replicas", RACK_CASES)
def test_rack_aware_distribution_for_every_start_index(racks, partitions, rf, even_leaders, even_replicas):
    n_racks = len(set(racks.values()))
    for start in range(len(racks)):
        assignment = assign_replicas(racked(racks), partitions, rf, start_index=start)
        assert sorted(assignment) == list(range(partitions))
        leaders, replicas, partition_racks = distribution(assignment, racks)
        for p, replica_racks in partition_racks.items():
            assert len(set(assignment[p])) == rf  # no broker twice
            assert len(set(replica_racks)) == min(rf, n_racks), (start, p, assignment[p])
        if even_leaders:
            assert set(leaders.values()) == {partitions // len(racks)}, (start, leaders)
        if even_replicas:
            assert set(replicas.values()) == {partitions * rf // len(racks)}, (start, replicas)


def test_rack_aware_random_start_is_deterministic_given_the_rng():
    racks = racked({0: "a", 1: "b", 2: "b", 3: "c", 4: "c", 5: "a"})
    first = assign_replicas(racks, 6, 3, rng=random.Random(7))
    assert first == assign_replicas(racks, 6, 3, rng=random.Random(7))
    starts = {tuple(assign_replicas(racks, 6, 3, rng=random.Random(seed))[0]) for seed in range(30)}
    assert len(starts) > 1  # the start really is random across seeds


def test_more_and_fewer_replicas_than_racks():
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    for rng_seed in range(20):
        more = assign_replicas(racked(racks), 6, 5, rng=random.Random(rng_seed))
        assert all(len({racks[b] for b in rs}) == 3 and len(set(rs)) == 5 for rs in more.values())
        fewer = assign_replicas(racked(racks), 6, 2, rng=random.Random(rng_seed))
        assert all(len({racks[b] for b in rs}) == 2 for rs in fewer.values())


def test_single_rack_spreads_leaders_evenly():
    racks = dict.fromkeys(range(6), "rack1")
    assignment = assign_replicas(racked(racks), 6, 3, rng=random.Random(1))
    leaders, _, _ = distribution(assignment, racks)
    assert set(leaders.values()) == {1}


def test_skips_brokers_already_holding_a_replica():
    racks = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}
    assignment = assign_replicas(racked(racks), 6, 4, start_index=2)
    assert all(len(set(rs)) == 4 and {racks[b] for b in rs} == {"a", "b", "c"} for rs in assignment.values())


@pytest.mark.parametrize("n_brokers", [1, 2, 3, 5])
@pytest.mark.parametrize("rf", [1, 2, 3])
def test_rack_unaware_spread_is_even(n_brokers, rf):
    if rf > n_brokers:
        return
    brokers = unracked(*range(100, 100 + n_brokers))
    partitions = n_brokers * 4
    for seed in range(10):
        assignment = assign_replicas(brokers, partitions, rf, rng=random.Random(seed))
        leaders = Counter(rs[0] for rs in assignment.values())
        replicas = Counter(b for rs in assignment.values() for b in rs)
        assert all(len(set(rs)) == rf for rs in assignment.values())
        assert set(leaders.values()) == {4}
        assert set(replicas.values()) == {4 * rf}


def test_errors_match_kafka():
    with pytest.raises(
        errors.InvalidReplicationFactorError, match="Replication factor: 4 larger than available brokers: 3."
    ):
        assign_replicas(unracked(1, 2, 3), 1, 4)
    with pytest.raises(errors.InvalidReplicationFactorError, match="larger than 0"):
        assign_replicas(unracked(1, 2, 3), 1, 0)
    with pytest.raises(errors.InvalidPartitionsError, match="larger than 0"):
        assign_replicas(unracked(1, 2, 3), 0, 1)
    with pytest.raises(IncompleteRackInformationError) as info:
        assign_replicas([(1, "a"), (2, None)], 1, 1)
    assert info.value.code == errors.ErrorCode.unknown_server_error


def test_rack_aware_modes():
    brokers = {3: "a", 1: None, 2: "b"}
    with pytest.raises(IncompleteRackInformationError, match=r"no broker.rack on brokers \[1\]"):
        brokers_for_assignment(brokers)
    assert brokers_for_assignment(brokers, RackAwareMode.SAFE) == [(1, None), (2, None), (3, None)]
    assert brokers_for_assignment({2: "b", 1: "a"}, RackAwareMode.DISABLED) == [(1, None), (2, None)]
    assert brokers_for_assignment({2: "b", 1: "a"}) == [(1, "a"), (2, "b")]
    assert brokers_for_assignment({2: None, 1: None}) == [(1, None), (2, None)]


def test_new_partitions_continue_from_partition_zeros_leader():
    brokers = unracked(0, 1, 2, 3, 4)
    existing = assign_replicas(brokers, 3, 3, start_index=2)
    assert existing[0][0] == 2
    added = assign_new_partitions(brokers, existing, 8, topic="orders")
    assert sorted(added) == [3, 4, 5, 6, 7]
    assert all(len(rs) == 3 and len(set(rs)) == 3 for rs in added.values())
    # Continuing with the same start index, the whole topic looks as if created with 8 partitions at once.
    assert {**existing, **added} == assign_replicas(brokers, 8, 3, start_index=2)
    with pytest.raises(
        errors.InvalidPartitionsError, match="currently has 3 partitions, 3 would not be an increase"
    ):
        assign_new_partitions(brokers, existing, 3, topic="orders")
    with pytest.raises(errors.InvalidReplicationFactorError):
        assign_new_partitions(unracked(0, 1), existing, 5)
