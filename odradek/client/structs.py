"""Plain value types shared by the producer, the consumer and the admin client."""

from __future__ import annotations

from operator import itemgetter
from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class RecordMetadata(NamedTuple):
    """Where an acknowledged record landed.

    ``offset`` is -1 when the broker did not say (acks=0). ``timestamp`` is the record's
    create time, or the broker's append time for topics with LogAppendTime.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int = -1
    serialized_value_size: int = -1

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class ConsumerRecord(tuple):
    """One record returned by ``Consumer.poll``.

    A tuple ``(offset, timestamp, key, value, headers)``; ``topic``, ``partition`` and
    ``timestamp_type`` live on a small per-partition subclass, so the record decoder builds
    these directly, one allocation per record. ``headers`` is a tuple of ``(str, bytes)``.
    """

    __slots__ = ()
    topic: str = ""
    partition: int = -1
    timestamp_type: int = 0  # 0 CreateTime, 1 LogAppendTime
    leader_epoch: int = -1

    offset = property(itemgetter(0))
    timestamp = property(itemgetter(1))
    key = property(itemgetter(2))
    value = property(itemgetter(3))
    headers = property(itemgetter(4))

    def __new__(cls, topic, partition, offset, timestamp, timestamp_type, key, value, headers=()):
        sub = record_class(topic, partition, timestamp_type)
        return tuple.__new__(sub, (offset, timestamp, key, value, tuple(headers or ())))

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def __repr__(self) -> str:
        return (
            f"ConsumerRecord(topic={self.topic!r}, partition={self.partition}, offset={self[0]}, "
            f"timestamp={self[1]}, key={self[2]!r}, value={self[3]!r}, headers={self[4]!r})"
        )

    def __eq__(self, other) -> bool:
        if not isinstance(other, ConsumerRecord):
            return NotImplemented
        return (self.topic, self.partition) == (other.topic, other.partition) and tuple.__eq__(self, other)

    def __ne__(self, other) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash((self.topic, self.partition, self[0]))

    def __reduce__(self):
        return (ConsumerRecord, (self.topic, self.partition, *self[:2], self.timestamp_type, *self[2:]))


_record_classes: dict[tuple[str, int, int], type] = {}


def record_class(topic: str, partition: int, timestamp_type: int = 0) -> type:
    """The ConsumerRecord subclass for one partition (cached)."""
    key = (topic, partition, timestamp_type)
    cls = _record_classes.get(key)
    if cls is None:
        cls = type(
            "ConsumerRecord",
            (ConsumerRecord,),
            {"__slots__": (), "topic": topic, "partition": partition, "timestamp_type": timestamp_type},
        )
        cls.__module__ = __name__
        _record_classes[key] = cls
    return cls


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int
    leader_epoch: int = -1


class NewTopic(NamedTuple):
    """A topic to create: ``num_partitions``/``replication_factor`` of -1 take the broker's default."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] | None = None
    replica_assignments: dict[int, list[int]] | None = None


class NewPartitions(NamedTuple):
    total_count: int
    new_assignments: list[list[int]] | None = None


class BrokerInfo(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None = None


class PartitionInfo(NamedTuple):
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


class TopicDescription(NamedTuple):
    name: str
    topic_id: object
    is_internal: bool
    partitions: list[PartitionInfo]


class ClusterDescription(NamedTuple):
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerInfo]


class ConfigEntry(NamedTuple):
    name: str
    value: str | None
    read_only: bool = False
    is_default: bool = False
    is_sensitive: bool = False
    source: int = -1
    documentation: str | None = None  # asked for with describe_configs(include_documentation=True)


class ConfigResource(NamedTuple):
    """``resource_type`` is "topic" or "broker" (or Kafka's numeric type)."""

    resource_type: str | int
    name: str


class GroupListing(NamedTuple):
    group_id: str
    protocol_type: str
    state: str | None = None
    group_type: str = "classic"  # or "consumer" (KIP-848)


class MemberDescription(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: set[TopicPartition]


class GroupDescription(NamedTuple):
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]
    error_code: int = 0
    group_type: str = "classic"  # or "consumer" (KIP-848): protocol is then the server-side assignor


class DeletedRecords(NamedTuple):
    low_watermark: int


class ReplicaLogDirInfo(NamedTuple):
    """One partition replica in a log dir (DescribeLogDirs)."""

    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool


class LogDirDescription(NamedTuple):
    """One log dir of a broker: its path, error (a Kafka error code, 0 if none), replicas
    and its volume's total and usable bytes (-1 if unknown)."""

    path: str
    error_code: int
    replicas: list[ReplicaLogDirInfo]
    total_bytes: int
    usable_bytes: int
