"""Replica placement for new topics and new partitions: Kafka's AdminUtils.assignReplicasToBrokers.

Goals, in Kafka's words: spread replicas evenly over brokers; spread the other replicas of a
broker's partitions over the other brokers; with rack information, put a partition's replicas
on distinct racks where there are enough racks.

Rack-unaware: partition ``p``'s first replica is broker ``(p + start) % n`` of the brokers
sorted by id; the others follow at an increasing shift, bumped once every ``n`` partitions so
that the same replica sequences do not repeat. Rack-aware: the same round robin over a
"rack-alternated" broker list (one broker from each rack in turn), skipping a broker whose
rack (or itself) already holds a replica of the partition while some rack (or broker) holds
none.

The random start index and shift are Kafka's; here they come from the ``rng`` argument (or a
fixed ``start_index``), so tests are deterministic. Pure functions: the controller calls them
for CreateTopics and CreatePartitions and then writes the result to ZooKeeper.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from enum import Enum

from odradek.protocol import errors


class RackAwareMode(Enum):
    """Kafka's RackAwareMode. ENFORCED (CreateTopics, kafka-topics): brokers with and without a
    rack cannot be mixed. SAFE: mixed racks fall back to rack-unaware placement (auto-created
    topics). DISABLED: racks are ignored (kafka-topics --disable-rack-aware)."""

    ENFORCED = "enforced"
    SAFE = "safe"
    DISABLED = "disabled"


class IncompleteRackInformationError(errors.UnknownServerErrorError):
    """Some brokers have ``broker.rack`` and some do not (Kafka answers UNKNOWN_SERVER_ERROR)."""


def brokers_for_assignment(
    brokers: Mapping[int, str | None], mode: RackAwareMode = RackAwareMode.ENFORCED
) -> list[tuple[int, str | None]]:
    """``(broker id, rack)`` sorted by id, with racks dropped as ``mode`` says (Kafka's
    AdminZkClient.getBrokerMetadatas)."""
    with_rack = [b for b, rack in brokers.items() if rack is not None]
    partial = 0 < len(with_rack) < len(brokers)
    if mode is RackAwareMode.ENFORCED and partial:
        missing = sorted(b for b, rack in brokers.items() if rack is None)
        raise IncompleteRackInformationError(
            f"Not all brokers have rack information (no broker.rack on brokers {missing}); "
            "set broker.rack on every broker, or assign replicas without rack awareness"
        )
    keep_racks = mode is not RackAwareMode.DISABLED and not partial
    return sorted((b, rack if keep_racks else None) for b, rack in brokers.items())


def rack_alternated_brokers(broker_racks: Mapping[int, str]) -> list[int]:
    """One broker from each rack in turn, racks in name order, brokers of a rack in id order:
    ``{0: r1, 1: r1, 2: r1, 3: r2, 4: r2, 5: r2}`` → ``[0, 3, 1, 4, 2, 5]``."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(broker_racks.items()):
        by_rack.setdefault(rack, []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    longest = max((len(c) for c in columns), default=0)
    return [column[i] for i in range(longest) for column in columns if i < len(column)]


def _replica_index(first_index: int, shift: int, replica: int, n_brokers: int) -> int:
    return (first_index + 1 + (shift + replica) % (n_brokers - 1)) % n_brokers


def assign_replicas(
    brokers: Sequence[tuple[int, str | None]],
    partitions: int,
    replication_factor: int,
    *,
    start_index: int | None = None,
    start_partition_id: int = 0,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Replicas for partitions ``start_partition_id ..``; ``brokers`` as from brokers_for_assignment.

    ``start_index`` fixes both the first broker and the replica shift (Kafka's fixedStartIndex);
    otherwise both are drawn from ``rng``."""
    if partitions <= 0:
        raise errors.InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise errors.InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise errors.InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}."
        )
    racks = {broker: rack for broker, rack in brokers}
    if all(rack is None for rack in racks.values()):
        broker_list = [broker for broker, _ in brokers]
        rack_of = None
    elif any(rack is None for rack in racks.values()):
        raise IncompleteRackInformationError(
            "Not all brokers have rack information for replica rack aware assignment."
        )
    else:
        broker_list = rack_alternated_brokers(racks)
        rack_of = racks
    n = len(broker_list)
    rng = rng or random.Random()
    first = start_index if start_index is not None else rng.randrange(n)
    shift = start_index if start_index is not None else rng.randrange(n)

    assignment: dict[int, list[int]] = {}
    for partition in range(max(0, start_partition_id), max(0, start_partition_id) + partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first_index = (partition + first) % n
        if rack_of is None:
            replicas = [broker_list[first_index]]
            replicas += [
                broker_list[_replica_index(first_index, shift, j, n)] for j in range(replication_factor - 1)
            ]
        else:
            replicas = _rack_aware_replicas(broker_list, rack_of, first_index, shift, replication_factor)
        assignment[partition] = replicas
    return assignment


def _rack_aware_replicas(
    broker_list: list[int], rack_of: Mapping[int, str], first_index: int, shift: int, replication_factor: int
) -> list[int]:
    n = len(broker_list)
    n_racks = len(set(rack_of.values()))
    leader = broker_list[first_index]
    replicas, racks_used, brokers_used = [leader], {rack_of[leader]}, {leader}
    k = 0
    while len(replicas) < replication_factor:
        broker = broker_list[_replica_index(first_index, shift * n_racks, k, n)]
        rack = rack_of[broker]
        k += 1
        # Skip a broker on a rack that already has a replica while some rack has none, and a
        # broker that already has one while some broker has none.
        if rack in racks_used and len(racks_used) < n_racks:
            continue
        if broker in brokers_used and len(brokers_used) < n:
            continue
        replicas.append(broker)
        racks_used.add(rack)
        brokers_used.add(broker)
    return replicas


def assign_new_partitions(
    brokers: Sequence[tuple[int, str | None]],
    existing: Mapping[int, Sequence[int]],
    total_partitions: int,
    *,
    topic: str = "",
) -> dict[int, list[int]]:
    """Replicas for the partitions CreatePartitions adds (Kafka's createNewPartitionsAssignment):
    same replication factor as partition 0, continuing the round robin from partition 0's leader."""
    if 0 not in existing:
        raise errors.InvalidReplicaAssignmentError(
            f"topic {topic!r} has no partition 0 in its current assignment {dict(existing)}"
        )
    to_add = total_partitions - len(existing)
    if to_add <= 0:
        raise errors.InvalidPartitionsError(
            f"Topic {topic} currently has {len(existing)} partitions, {total_partitions} would not be an increase."
        )
    first_of_partition0 = existing[0][0]
    start_index = next((i for i, (broker, _) in enumerate(brokers) if broker >= first_of_partition0), 0)
    return assign_replicas(
        brokers, to_add, len(existing[0]), start_index=start_index, start_partition_id=len(existing)
    )
