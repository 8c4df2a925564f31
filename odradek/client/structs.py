"""Plain value types shared by the producer, the consumer and the admin client."""

from __future__ import annotations

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


class ConsumerRecord:
    """One record returned by ``Consumer.poll``."""

    __slots__ = (
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestamp_type",
        "key",
        "value",
        "headers",
        "leader_epoch",
    )

    def __init__(self, topic, partition, offset, timestamp, timestamp_type, key, value, headers, leader_epoch=-1):
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = headers
        self.leader_epoch = leader_epoch

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def __repr__(self) -> str:
        return (
            f"ConsumerRecord(topic={self.topic!r}, partition={self.partition}, offset={self.offset}, "
            f"timestamp={self.timestamp}, key={self.key!r}, value={self.value!r}, headers={self.headers!r})"
        )

    def __eq__(self, other) -> bool:
        if not isinstance(other, ConsumerRecord):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    __hash__ = None


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


class ConfigResource(NamedTuple):
    """``resource_type`` is "topic" or "broker" (or Kafka's numeric type)."""

    resource_type: str | int
    name: str


class GroupListing(NamedTuple):
    group_id: str
    protocol_type: str
    state: str | None = None


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


class DeletedRecords(NamedTuple):
    low_watermark: int
