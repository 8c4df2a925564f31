"""Everything the active controller knows about the cluster, in one object (Kafka's ControllerContext).

Live brokers and their epochs (the czxid of their ``/brokers/ids/<id>`` registration, which
changes each time a broker re-registers), brokers in controlled shutdown, topics and their
ids, each partition's replica assignment, leader-and-ISR (with the state znode's version),
partition and replica states, topics queued for deletion, reassignments in progress, and the
controller's own epoch with the version of ``/controller_epoch`` that fences its writes.

Plain in-memory state with no I/O and no locking: the controller's single event-loop task
owns it (STYLE 6, 15), fills it from ZooKeeper when it is elected, and updates it after each
successful ZooKeeper write. The state machines and election functions read it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from odradek.cluster.election import has_preferred_leader
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
from odradek.cluster.zk_data import BrokerRegistration

INITIAL_CONTROLLER_EPOCH = 0
INITIAL_CONTROLLER_EPOCH_ZK_VERSION = 0


@dataclass
class ControllerContext:
    epoch: int = INITIAL_CONTROLLER_EPOCH
    epoch_zk_version: int = INITIAL_CONTROLLER_EPOCH_ZK_VERSION

    live_brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    live_broker_epochs: dict[int, int] = field(default_factory=dict)
    shutting_down_broker_ids: set[int] = field(default_factory=set)

    all_topics: set[str] = field(default_factory=set)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    topic_names: dict[uuid.UUID, str] = field(default_factory=dict)
    partition_assignments: dict[str, dict[int, ReplicaAssignment]] = field(default_factory=dict)
    partition_leadership: dict[TopicPartition, LeaderIsrAndControllerEpoch] = field(default_factory=dict)
    partitions_being_reassigned: set[TopicPartition] = field(default_factory=set)
    partition_states: dict[TopicPartition, PartitionLifecycle] = field(default_factory=dict)
    replica_states: dict[PartitionAndReplica, ReplicaLifecycle] = field(default_factory=dict)
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)

    topics_to_be_deleted: set[str] = field(default_factory=set)
    # Topics whose deletion has actually begun (no reassignment can touch them any more).
    topics_with_deletion_started: set[str] = field(default_factory=set)
    topics_ineligible_for_deletion: set[str] = field(default_factory=set)

    # ------------------------------------------------------------ brokers

    def set_live_brokers(self, brokers: dict[int, tuple[BrokerRegistration, int]]) -> None:
        """Replace the live brokers: id → (registration, broker epoch)."""
        self.live_brokers.clear()
        self.live_broker_epochs.clear()
        self.add_live_brokers(brokers)

    def add_live_brokers(self, brokers: dict[int, tuple[BrokerRegistration, int]]) -> None:
        for broker_id, (registration, broker_epoch) in brokers.items():
            self.live_brokers[broker_id] = registration
            self.live_broker_epochs[broker_id] = broker_epoch

    def remove_live_brokers(self, broker_ids: Iterable[int]) -> None:
        for broker_id in broker_ids:
            self.live_brokers.pop(broker_id, None)
            self.live_broker_epochs.pop(broker_id, None)

    @property
    def live_broker_ids(self) -> set[int]:
        """Registered brokers that are not shutting down: the ones that may lead."""
        return set(self.live_broker_epochs) - self.shutting_down_broker_ids

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self.live_broker_epochs)

    def is_replica_online(
        self, broker_id: int, tp: TopicPartition, *, include_shutting_down: bool = False
    ) -> bool:
        brokers = self.live_or_shutting_down_broker_ids if include_shutting_down else self.live_broker_ids
        return broker_id in brokers and tp not in self.replicas_on_offline_dirs.get(broker_id, ())

    def live_replicas(self, tp: TopicPartition, *, include_shutting_down: bool = False) -> set[int]:
        """The partition's replicas that are online (what the election functions call "live")."""
        return {
            r
            for r in self.partition_replica_assignment(tp)
            if self.is_replica_online(r, tp, include_shutting_down=include_shutting_down)
        }

    # ------------------------------------------------------------ topics and assignments

    def add_topic_id(self, topic: str, topic_id: uuid.UUID) -> None:
        if topic not in self.all_topics:
            raise ValueError(f"topic {topic} is not among the controller's topics")
        existing = self.topic_ids.get(topic)
        if existing is not None and existing != topic_id:
            raise ValueError(f"topic {topic} already has id {existing}, not {topic_id}")
        named = self.topic_names.get(topic_id)
        if named is not None and named != topic:
            raise ValueError(f"topic id {topic_id} already belongs to {named}, not {topic}")
        self.topic_ids[topic] = topic_id
        self.topic_names[topic_id] = topic

    def set_all_topics(self, topics: Iterable[str]) -> None:
        self.all_topics = set(topics)

    def partition_full_replica_assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        return self.partition_assignments.get(tp.topic, {}).get(tp.partition, ReplicaAssignment(()))

    def partition_replica_assignment(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.partition_full_replica_assignment(tp).replicas

    def update_partition_full_replica_assignment(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> None:
        self.partition_assignments.setdefault(tp.topic, {})[tp.partition] = assignment

    def partition_replica_assignment_for_topic(self, topic: str) -> dict[TopicPartition, tuple[int, ...]]:
        return {
            TopicPartition(topic, p): a.replicas for p, a in self.partition_assignments.get(topic, {}).items()
        }

    def partitions_for_topic(self, topic: str) -> set[TopicPartition]:
        return {TopicPartition(topic, p) for p in self.partition_assignments.get(topic, {})}

    @property
    def all_partitions(self) -> set[TopicPartition]:
        return {TopicPartition(t, p) for t, parts in self.partition_assignments.items() for p in parts}

    def partitions_on_broker(self, broker_id: int) -> set[TopicPartition]:
        return {
            TopicPartition(t, p)
            for t, parts in self.partition_assignments.items()
            for p, a in parts.items()
            if broker_id in a.replicas
        }

    def replicas_on_brokers(self, broker_ids: Iterable[int]) -> set[PartitionAndReplica]:
        wanted = set(broker_ids)
        return {
            PartitionAndReplica(TopicPartition(t, p), r)
            for t, parts in self.partition_assignments.items()
            for p, a in parts.items()
            for r in a.replicas
            if r in wanted
        }

    def replicas_for_topic(self, topic: str) -> set[PartitionAndReplica]:
        return {
            PartitionAndReplica(TopicPartition(topic, p), r)
            for p, a in self.partition_assignments.get(topic, {}).items()
            for r in a.replicas
        }

    def replicas_for_partitions(self, partitions: Iterable[TopicPartition]) -> set[PartitionAndReplica]:
        return {
            PartitionAndReplica(tp, r) for tp in partitions for r in self.partition_replica_assignment(tp)
        }

    def online_and_offline_replicas(self) -> tuple[set[PartitionAndReplica], set[PartitionAndReplica]]:
        online, offline = set(), set()
        for tp in self.all_partitions:
            for r in self.partition_replica_assignment(tp):
                (online if self.is_replica_online(r, tp) else offline).add(PartitionAndReplica(tp, r))
        return online, offline

    def remove_topic(self, topic: str) -> None:
        """Forget a topic entirely (its deletion finished)."""
        self.topics_to_be_deleted.discard(topic)
        self.topics_with_deletion_started.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)
        self.all_topics.discard(topic)
        topic_id = self.topic_ids.pop(topic, None)
        if topic_id is not None:
            self.topic_names.pop(topic_id, None)
        for partition in self.partition_assignments.pop(topic, {}):
            tp = TopicPartition(topic, partition)
            self.partition_leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
            self.partitions_being_reassigned.discard(tp)
        self.replica_states = {
            r: s for r, s in self.replica_states.items() if r.topic_partition.topic != topic
        }

    # ------------------------------------------------------------ topic deletion

    def queue_topic_deletion(self, topics: Iterable[str]) -> None:
        self.topics_to_be_deleted.update(topics)

    def begin_topic_deletion(self, topics: Iterable[str]) -> None:
        self.topics_with_deletion_started.update(topics)

    def is_topic_deletion_in_progress(self, topic: str) -> bool:
        return topic in self.topics_with_deletion_started

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def is_topic_eligible_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted and topic not in self.topics_ineligible_for_deletion

    # ------------------------------------------------------------ leadership

    def put_partition_leadership(self, tp: TopicPartition, leadership: LeaderIsrAndControllerEpoch) -> None:
        self.partition_leadership[tp] = leadership

    def partition_leader_and_isr(self, tp: TopicPartition) -> LeaderAndIsr | None:
        leadership = self.partition_leadership.get(tp)
        return leadership.leader_and_isr if leadership is not None else None

    def leader_epoch(self, tp: TopicPartition) -> int:
        """The leader epoch to send for a partition (-2 while its topic is queued for deletion)."""
        if self.is_topic_queued_up_for_deletion(tp.topic):
            return EPOCH_DURING_DELETE
        lai = self.partition_leader_and_isr(tp)
        return lai.leader_epoch if lai is not None else NO_EPOCH

    def partitions_with_offline_leader(self) -> set[TopicPartition]:
        return {
            tp
            for tp, leadership in self.partition_leadership.items()
            if not self.is_replica_online(leadership.leader_and_isr.leader, tp)
            and not self.is_topic_queued_up_for_deletion(tp.topic)
        }

    def partition_leaders_on_broker(self, broker_id: int) -> set[TopicPartition]:
        """Partitions led by ``broker_id`` that have another replica to move leadership to."""
        return {
            tp
            for tp, leadership in self.partition_leadership.items()
            if leadership.leader_and_isr.leader == broker_id
            and not self.is_topic_queued_up_for_deletion(tp.topic)
            and len(self.partition_replica_assignment(tp)) > 1
        }

    # ------------------------------------------------------------ states

    def partition_state(self, tp: TopicPartition) -> PartitionLifecycle:
        return self.partition_states.get(tp, PartitionLifecycle.NON_EXISTENT)

    def replica_state(self, replica: PartitionAndReplica) -> ReplicaLifecycle:
        return self.replica_states.get(replica, ReplicaLifecycle.NON_EXISTENT)

    def partitions_in_state(self, state: PartitionLifecycle, topic: str | None = None) -> set[TopicPartition]:
        return {
            tp
            for tp, s in self.partition_states.items()
            if s is state and (topic is None or tp.topic == topic)
        }

    def replicas_in_state(self, topic: str, state: ReplicaLifecycle) -> set[PartitionAndReplica]:
        return {r for r in self.replicas_for_topic(topic) if self.replica_state(r) is state}

    def are_all_replicas_in_state(self, topic: str, state: ReplicaLifecycle) -> bool:
        return all(self.replica_state(r) is state for r in self.replicas_for_topic(topic))

    def is_any_replica_in_state(self, topic: str, state: ReplicaLifecycle) -> bool:
        return any(self.replica_state(r) is state for r in self.replicas_for_topic(topic))

    # ------------------------------------------------------------ health figures (Kafka's controller metrics)

    @property
    def offline_partition_count(self) -> int:
        return sum(
            1
            for tp, state in self.partition_states.items()
            if state is PartitionLifecycle.OFFLINE and not self.is_topic_deletion_in_progress(tp.topic)
        )

    @property
    def preferred_replica_imbalance_count(self) -> int:
        return sum(
            1
            for tp, leadership in self.partition_leadership.items()
            if not self.is_topic_queued_up_for_deletion(tp.topic)
            and not has_preferred_leader(
                self.partition_full_replica_assignment(tp), leadership.leader_and_isr
            )
        )

    def reset(self) -> None:
        """Forget everything (the controller resigned); the next election reloads from ZooKeeper."""
        self.__init__()
