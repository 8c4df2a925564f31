"""The metadata image: brokers, topics, partitions, leaders, ISR and epochs.

The image is what every handler reads to answer Metadata, route requests and validate
topics. It changes only through a ``MetadataStore`` (local files for a single node;
ZooKeeper for a cluster), which persists the change first and then updates the image.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field


@dataclass
class BrokerInfo:
    """A broker; ``host``/``port`` is its first advertised listener, ``endpoints`` every
    advertised listener by name (clients are given the one they connected through)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: dict[str, tuple[str, int]] = field(default_factory=dict)

    def address(self, listener: str) -> tuple[str, int]:
        return self.endpoints.get(listener, (self.host, self.port))


@dataclass
class PartitionState:
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    partition_epoch: int = 0
    offline: list[int] = field(default_factory=list)  # replicas in a failed log dir (UpdateMetadata's offline replicas)

    def to_json(self) -> dict:
        return {
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "replicas": self.replicas,
            "isr": self.isr,
            "partition_epoch": self.partition_epoch,
        }

    @classmethod
    def from_json(cls, data: dict) -> PartitionState:
        return cls(
            data["leader"],
            data["leader_epoch"],
            list(data["replicas"]),
            list(data["isr"]),
            data.get("partition_epoch", 0),
        )


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionState]
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False

    def to_json(self) -> dict:
        return {
            "topic_id": str(self.topic_id),
            "partitions": {str(i): p.to_json() for i, p in self.partitions.items()},
            "configs": self.configs,
            "internal": self.internal,
        }

    @classmethod
    def from_json(cls, name: str, data: dict) -> TopicInfo:
        return cls(
            name,
            uuid.UUID(data["topic_id"]),
            {int(i): PartitionState.from_json(p) for i, p in data["partitions"].items()},
            dict(data.get("configs", {})),
            data.get("internal", False),
        )


@dataclass
class MetadataImage:
    cluster_id: str
    controller_id: int
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        for topic in self.topics.values():
            if topic.topic_id == topic_id:
                return topic
        return None
