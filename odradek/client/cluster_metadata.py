"""An immutable snapshot of cluster metadata: brokers, topics, partitions and leaders.

A new snapshot replaces the old one on every Metadata response, so code on any thread
(the blocking producer's ``send`` runs on the caller's thread) can read the current one
without a lock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.client.structs import BrokerInfo, PartitionInfo, TopicPartition


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    error_code: int
    topic_id: object
    is_internal: bool
    partitions: tuple[PartitionInfo, ...]
    # partition ids that have a leader right now
    available: tuple[int, ...] = ()
    ids: tuple[int, ...] = ()  # all partition ids, in order
    tps: dict = field(default_factory=dict)  # partition id -> TopicPartition (shared objects)


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    cluster_id: str | None = None
    controller_id: int = -1
    leaders: dict[TopicPartition, int] = field(default_factory=dict)
    leader_epochs: dict[TopicPartition, int] = field(default_factory=dict)
    # topics the last response reported with an error (unknown topic, not authorized, ...)
    topic_errors: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_response(cls, resp, previous: ClusterMetadata | None = None, all_topics: bool = False):
        brokers = {
            int(b.node_id): BrokerInfo(int(b.node_id), b.host, int(b.port), b.rack) for b in resp.brokers
        }
        topics = {}
        errors = {}
        if previous is not None and not all_topics:
            topics.update(previous.topics)
        for t in resp.topics:
            name = t.name
            if t.error_code:
                errors[name] = int(t.error_code)
                topics.pop(name, None)
                if not t.partitions:
                    continue
            parts = tuple(
                sorted(
                    (
                        PartitionInfo(
                            name,
                            int(p.partition_index),
                            int(p.leader_id),
                            int(getattr(p, "leader_epoch", -1)),
                            tuple(int(r) for r in p.replica_nodes),
                            tuple(int(r) for r in p.isr_nodes),
                            tuple(int(r) for r in getattr(p, "offline_replicas", ())),
                            int(p.error_code),
                        )
                        for p in t.partitions
                    ),
                    key=lambda p: p.partition,
                )
            )
            available = tuple(p.partition for p in parts if p.leader >= 0 and p.leader in brokers)
            ids = tuple(p.partition for p in parts)
            topics[name] = TopicInfo(
                name,
                int(t.error_code),
                getattr(t, "topic_id", None),
                bool(getattr(t, "is_internal", False)),
                parts,
                available,
                ids,
                {i: TopicPartition(name, i) for i in ids},
            )
        leaders = {}
        epochs = {}
        for t in topics.values():
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition)
                leaders[tp] = p.leader
                epochs[tp] = p.leader_epoch
        return cls(
            brokers=brokers,
            topics=topics,
            cluster_id=getattr(resp, "cluster_id", None),
            controller_id=int(getattr(resp, "controller_id", -1)),
            leaders=leaders,
            leader_epochs=epochs,
            topic_errors=errors,
        )

    def leader_for(self, tp: TopicPartition) -> int:
        """Node id of the partition's leader, or -1 when unknown."""
        return self.leaders.get(tp, -1)

    def partitions_for(self, topic: str) -> tuple[int, ...] | None:
        t = self.topics.get(topic)
        if t is None:
            return None
        return tuple(p.partition for p in t.partitions)

    def partition_count(self, topic: str) -> int | None:
        t = self.topics.get(topic)
        return None if t is None else len(t.partitions)

    def available_partitions(self, topic: str) -> tuple[int, ...]:
        t = self.topics.get(topic)
        return () if t is None else t.available
