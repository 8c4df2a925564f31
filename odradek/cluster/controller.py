"""The controller: decides topic layouts and applies them through the metadata store.

On a single node the broker is its own controller. Topic creation validates names,
partition counts, replication factors and configs, assigns replicas round-robin over the
live brokers (starting at a random broker, as Kafka does), then persists through the
store. Brokers learn about changes through listeners (``on_change``), so this module
knows nothing of logs or sockets.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from odradek.cluster.metadata import TopicInfo
from odradek.cluster.store import MetadataStore, validate_topic_name
from odradek.protocol import errors

INTERNAL_TOPICS = {"__consumer_offsets", "__transaction_state"}


class Controller:
    def __init__(
        self,
        store: MetadataStore,
        *,
        default_partitions: int,
        default_replication_factor: int,
        validate_configs: Callable[[dict[str, str]], dict[str, str]],
    ):
        self.store = store
        self.default_partitions = default_partitions
        self.default_replication_factor = default_replication_factor
        self.validate_configs = validate_configs
        self.listeners: list[Callable[[str, str], None]] = []

    @property
    def image(self):
        return self.store.image

    def on_change(self, listener: Callable[[str, str], None]) -> None:
        """``listener(event, topic)`` with event in created, deleted, partitions, configs."""
        self.listeners.append(listener)

    def _notify(self, event: str, topic: str) -> None:
        for listener in self.listeners:
            listener(event, topic)

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
        validate_topic_name(name)
        if name in self.image.topics:
            raise errors.TopicAlreadyExistsError(f"topic '{name}' already exists")
        configs = self.validate_configs(configs or {})
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise errors.InvalidRequestError(
                    "give either replica assignments or partitions/replication factor, not both"
                )
            self._check_assignments(assignments, 0, len(assignments))
        else:
            count = self.default_partitions if num_partitions == -1 else num_partitions
            if count < 1:
                raise errors.InvalidPartitionsError(f"number of partitions must be at least 1, got {count}")
            rf = self.default_replication_factor if replication_factor == -1 else replication_factor
            assignments = self._assign(range(count), rf)
        if validate_only:
            return None
        topic = self.store.create_topic(
            name, len(assignments), assignments, configs, internal or name in INTERNAL_TOPICS
        )
        self._notify("created", name)
        return topic

    def delete_topic(self, name: str) -> None:
        if name not in self.image.topics:
            raise errors.UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
        self.store.delete_topic(name)
        self._notify("deleted", name)

    def create_partitions(
        self,
        name: str,
        count: int,
        assignments: list[list[int]] | None = None,
        *,
        validate_only: bool = False,
    ) -> None:
        topic = self.image.topics.get(name)
        if topic is None:
            raise errors.UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
        current = len(topic.partitions)
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
            new = self._assign(range(current, count), rf)
        if validate_only:
            return
        self.store.add_partitions(name, new)
        self._notify("partitions", name)

    def alter_topic_configs(self, name: str, configs: dict[str, str], *, validate_only: bool = False) -> None:
        topic = self.image.topics.get(name)
        if topic is None:
            raise errors.UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
        configs = self.validate_configs(configs)
        if validate_only:
            return
        self.store.set_topic_configs(name, configs)
        self._notify("configs", name)
