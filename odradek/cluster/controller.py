"""The controller: decides topic layouts and applies them through the metadata store.

On a single node the broker is its own controller. Topic creation validates names,
partition counts, replication factors and configs, assigns replicas round-robin over the
live brokers (starting at a random broker, as Kafka does), then persists through the
store. Brokers learn about changes through listeners (``on_change``), so this module
knows nothing of logs or sockets.

Limits, checked before any replica is placed (so an absurd count costs nothing): one request
creates at most ``max_partitions_per_request`` partitions (INVALID_PARTITIONS; Kafka's
controller caps this at 10000), and no broker may host more replicas than
``broker_partition_limit(broker id)`` allows (POLICY_VIOLATION naming the limit and why),
except for the internal topics the coordinators create, without which groups and
transactions would stop working.

Internal topics (``__consumer_offsets``, ``__transaction_state``) hold coordinator state
keyed by a hash modulo their partition count: clients may not create them, change their
partition count, or make them anything but compacted (their records would be lost).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

from odradek.cluster.metadata_image import TopicInfo
from odradek.cluster.store import MetadataStore, validate_topic_name
from odradek.protocol import errors

INTERNAL_TOPICS = {"__consumer_offsets", "__transaction_state"}
MAX_PARTITIONS_PER_REQUEST = 10000  # Kafka's controller limit (QuorumController.MAX_RECORDS_PER_USER_OP)


class Controller:
    def __init__(
        self,
        store: MetadataStore,
        *,
        default_partitions: int,
        default_replication_factor: int,
        validate_configs: Callable[[dict[str, str]], dict[str, str]],
        max_partitions_per_request: int = MAX_PARTITIONS_PER_REQUEST,
        broker_partition_limit: Callable[[int], tuple[int, str]] | None = None,
    ):
        self.store = store
        self.default_partitions = default_partitions
        self.default_replication_factor = default_replication_factor
        self.validate_configs = validate_configs
        self.max_partitions_per_request = max_partitions_per_request
        self.broker_partition_limit = broker_partition_limit  # broker id -> (limit, where it comes from)
        self.listeners: list[Callable[[str, str], None]] = []

    @property
    def image(self):
        return self.store.image

    def on_change(self, listener: Callable[[str, str], None]) -> None:
        """``listener(event, topic)`` with event in created, deleted, partitions, configs."""
        self.listeners.append(listener)

    def notify(self, event: str, topic: str) -> None:
        """Tell every listener; events: created, deleted, partitions, configs, and ready (the
        broker's local logs of a topic created in the background now exist)."""
        for listener in self.listeners:
            listener(event, topic)

    # -- limits ---------------------------------------------------------------------------

    def check_request_size(self, name: str, count: int) -> None:
        if count > self.max_partitions_per_request:
            raise errors.InvalidPartitionsError(
                f"{count} partitions for '{name}' is more than one request may create "
                f"(max.partitions.per.request={self.max_partitions_per_request})"
            )

    def _check_broker_capacity(self, assignments: dict[int, list[int]]) -> None:
        if self.broker_partition_limit is None:
            return
        added = Counter(b for replicas in assignments.values() for b in replicas)
        hosted = Counter(b for t in self.image.topics.values() for p in t.partitions.values() for b in p.replicas)
        for broker, n in sorted(added.items()):
            limit, why = self.broker_partition_limit(broker)
            if hosted[broker] + n > limit:
                raise errors.PolicyViolationError(
                    f"broker {broker} hosts {hosted[broker]} partitions; {n} more would pass its limit "
                    f"of {limit} ({why})"
                )

    def _assign(self, partitions: range, replication_factor: int) -> dict[int, list[int]]:
        brokers = sorted(self.image.brokers)
        if replication_factor < 1:
            raise errors.InvalidReplicationFactorError("replication factor must be at least 1")
        if replication_factor > len(brokers):
            raise errors.InvalidReplicationFactorError(
                f"replication factor {replication_factor} is larger than the {len(brokers)} available brokers"
            )
        start = random.randrange(len(brokers))
        return {
            p: [brokers[(start + p + r) % len(brokers)] for r in range(replication_factor)]
            for p in partitions
        }

    def _check_assignments(self, assignments: dict[int, list[int]], first: int, count: int) -> None:
        if sorted(assignments) != list(range(first, first + count)):
            raise errors.InvalidReplicaAssignmentError(
                f"assignments must cover partitions {first}..{first + count - 1} exactly"
            )
        sizes = {len(r) for r in assignments.values()}
        if len(sizes) != 1:
            raise errors.InvalidReplicaAssignmentError("all partitions must have the same number of replicas")
        for p, replicas in assignments.items():
            if len(set(replicas)) != len(replicas):
                raise errors.InvalidReplicaAssignmentError(f"partition {p} lists a broker twice")
            unknown = [b for b in replicas if b not in self.image.brokers]
            if unknown:
                raise errors.InvalidReplicaAssignmentError(f"partition {p} names unknown brokers {unknown}")

    def plan_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        assignments: dict[int, list[int]] | None = None,
        configs: dict[str, str] | None = None,
        *,
        internal: bool = False,
    ) -> tuple[dict[int, list[int]], dict[str, str]]:
        """Every check of a topic creation, and its replica assignments and validated configs;
        raises KafkaError. Nothing is changed."""
        validate_topic_name(name)
        if name in INTERNAL_TOPICS and not internal:
            raise errors.InvalidRequestError(
                f"'{name}' is an internal topic: the broker creates it on first use, with the "
                "partitions and configs its coordinator needs"
            )
        if name in self.image.topics:
            raise errors.TopicAlreadyExistsError(f"topic '{name}' already exists")
        configs = self.validate_configs(configs or {})
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise errors.InvalidRequestError(
                    "give either replica assignments or partitions/replication factor, not both"
                )
            self.check_request_size(name, len(assignments))
            self._check_assignments(assignments, 0, len(assignments))
        else:
            count = self.default_partitions if num_partitions == -1 else num_partitions
            if count < 1:
                raise errors.InvalidPartitionsError(f"number of partitions must be at least 1, got {count}")
            self.check_request_size(name, count)
            rf = self.default_replication_factor if replication_factor == -1 else replication_factor
            assignments = self._assign(range(count), rf)
        if not internal:  # the coordinators' own topics are needed however full the broker is
            self._check_broker_capacity(assignments)
        return assignments, configs

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        assignments: dict[int, list[int]] | None = None,
        configs: dict[str, str] | None = None,
        *,
        validate_only: bool = False,
        internal: bool = False,
    ) -> TopicInfo | None:
        assignments, configs = self.plan_topic(
            name, num_partitions, replication_factor, assignments, configs, internal=internal
        )
        if validate_only:
            return None
        topic = self.store.create_topic(
            name, len(assignments), assignments, configs, internal or name in INTERNAL_TOPICS
        )
        self.notify("created", name)
        return topic

    def delete_topic(self, name: str) -> None:
        topic = self.image.topics.get(name)
        if topic is None:
            raise errors.UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
        if topic.internal:
            raise errors.InvalidRequestError(f"internal topic '{name}' cannot be deleted")
        self.store.delete_topic(name)
        self.notify("deleted", name)

    def plan_partitions(self, name: str, count: int, assignments: list[list[int]] | None = None) -> dict[int, list[int]]:
        """Every check of growing ``name`` to ``count`` partitions, and the new partitions'
        replicas; raises KafkaError. Nothing is changed."""
        topic = self.image.topics.get(name)
        if topic is None:
            raise errors.UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
        if topic.internal:
            raise errors.InvalidRequestError(
                f"the partition count of internal topic '{name}' cannot change: its coordinator finds "
                "each group's or transaction's records by a hash modulo that count, so they would be lost"
            )
        current = len(topic.partitions)
        if count > current:
            self.check_request_size(name, count - current)
        if count < current:
            raise errors.InvalidPartitionsError(
                f"topic '{name}' has {current} partitions; cannot shrink to {count}"
            )
        if count == current:
            raise errors.InvalidPartitionsError(f"topic '{name}' already has {count} partitions")
        rf = len(topic.partitions[0].replicas)
        if assignments:
            if len(assignments) != count - current:
                raise errors.InvalidReplicaAssignmentError(
                    f"{len(assignments)} assignments given for {count - current} new partitions"
                )
            new = {current + i: list(r) for i, r in enumerate(assignments)}
            self._check_assignments(new, current, count - current)
            if len(new[current]) != rf:
                raise errors.InvalidReplicaAssignmentError(f"new partitions must have {rf} replicas")
        else:
            new = self._assign_more(topic, count, rf)
        self._check_broker_capacity(new)
        return new

    def _assign_more(self, topic: TopicInfo, count: int, replication_factor: int) -> dict[int, list[int]]:
        return self._assign(range(len(topic.partitions), count), replication_factor)

    def create_partitions(
        self,
        name: str,
        count: int,
        assignments: list[list[int]] | None = None,
        *,
        validate_only: bool = False,
    ) -> None:
        new = self.plan_partitions(name, count, assignments)
        if validate_only:
            return
        self.store.add_partitions(name, new)
        self.notify("partitions", name)

    def alter_topic_configs(self, name: str, configs: dict[str, str], *, validate_only: bool = False) -> None:
        topic = self.image.topics.get(name)
        if topic is None:
            raise errors.UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
        configs = self.validate_configs(configs)
        if topic.internal:
            policy = configs.get("cleanup.policy")
            if policy is None or {p.strip() for p in policy.split(",") if p.strip()} != {"compact"}:
                raise errors.InvalidConfigError(
                    f"cleanup.policy of internal topic '{name}' must stay compact (asked: "
                    f"{policy if policy is not None else 'the broker default'}): its records are "
                    "its coordinator's state and deleting them loses it"
                )
        if validate_only:
            return
        self.store.set_topic_configs(name, configs)
        self.notify("configs", name)
