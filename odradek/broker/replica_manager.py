"""ReplicaManager: the partitions this broker hosts, and appends and reads across them.

It keeps ``Partition`` objects in step with the metadata image (creating and deleting
logs through the LogManager), applies produce requests partition by partition, reads
for fetches, and wakes delayed fetches after each append. Handlers call it; it never
sees a socket. Called only from the event loop.
"""

from __future__ import annotations

import logging
import time

from odradek.broker.metrics import BrokerTopicMetrics, ReplicaMetrics
from odradek.broker.partition import Partition
from odradek.protocol import errors

log = logging.getLogger(__name__)


class ReplicaManager:
    def __init__(self, node_id: int, log_manager, store, log_config_for, on_append=None):
        self.node_id = node_id
        self.log_manager = log_manager
        self.store = store
        self.log_config_for = log_config_for  # topic name -> LogConfig
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.on_append = on_append or (lambda key: 0)  # (topic, partition) appended to
        self.topic_metrics = BrokerTopicMetrics()
        self.replica_metrics = ReplicaMetrics()

    # -- keeping in step with metadata ------------------------------------------------------

    def sync_topic(self, name: str) -> None:
        """Create or refresh the local replicas of ``name`` from the metadata image."""
        topic = self.store.image.topics.get(name)
        if topic is None:
            self.remove_topic(name)
            return
        config = self.log_config_for(name)
        for index, state in topic.partitions.items():
            if self.node_id not in state.replicas:
                continue
            key = (name, index)
            partition = self.partitions.get(key)
            if partition is None:
                plog = self.log_manager.get_or_create_log(name, index, config)
                partition = Partition(name, index, plog, state, self.node_id, config)
                partition.counters = self.topic_metrics.for_topic(name)
                self.partitions[key] = partition
                if partition.is_leader:
                    partition.become_leader(state)
            else:
                partition.log_config = config
                partition.log.update_config(config)

    def sync_all(self) -> None:
        for name in list(self.store.image.topics):
            self.sync_topic(name)

    def remove_topic(self, name: str) -> None:
        for key in [k for k in self.partitions if k[0] == name]:
            self.partitions.pop(key)
            self.log_manager.delete_log(*key)
        self.topic_metrics.remove_topic(name)

    # -- access ----------------------------------------------------------------------------

    def get_partition(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None:
            raise errors.UnknownTopicOrPartitionError(f"this broker has no partition {topic}-{index}")
        return partition

    def high_watermarks(self) -> dict[tuple[str, int], int]:
        return {key: p.high_watermark for key, p in self.partitions.items()}

    # -- produce ---------------------------------------------------------------------------

    def append(
        self,
        topic: str,
        index: int,
        records,
        required_acks: int,
        now_ms: int | None = None,
        origin: str = "client",
    ):
        """Append to one partition as leader; raises KafkaError on failure. ``origin``
        "coordinator" lets the group and transaction coordinators write transaction markers."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            partition = self.get_partition(topic, index)  # raises
        counters = partition.counters
        counters.produce_requests += 1
        try:
            info = partition.append_as_leader(
                records, required_acks, int(time.time() * 1000) if now_ms is None else now_ms, origin
            )
        except errors.KafkaError:
            counters.failed_produce_requests += 1
            raise
        counters.messages_in += info.record_count
        counters.bytes_in += len(records)
        self.on_append((topic, index))
        return partition, info

    # -- delete records ------------------------------------------------------------------

    def delete_records(self, topic: str, index: int, offset: int) -> int:
        """Move a partition's log start offset up to ``offset`` (-1: the high watermark), as
        DeleteRecords does; returns the new log start offset. Raises KafkaError. Internal
        topics are refused (INVALID_TOPIC_EXCEPTION), as in Kafka."""
        info = self.store.image.topics.get(topic)
        if info is not None and info.internal:
            raise errors.InvalidTopicExceptionError(
                f"records of internal topic '{topic}' cannot be deleted: they are its coordinator's state"
            )
        partition = self.get_partition(topic, index)
        partition.check_leader()
        high_watermark = partition.high_watermark
        if offset == -1:
            offset = high_watermark
        if offset < 0 or offset > high_watermark:
            raise errors.OffsetOutOfRangeError(
                f"offset {offset} is outside [0, {high_watermark}] of {partition}"
            )
        partition.log.maybe_increment_log_start_offset(offset)
        return partition.log_start_offset
