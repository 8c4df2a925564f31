"""An internal compacted topic that a coordinator keeps its state in.

``__consumer_offsets`` (the group coordinator's) and ``__transaction_state`` (the
transaction coordinator's) are both created on first use, keyed by a hash of a group or
transactional id, led partition by partition, and read back from the log in chunks when
a broker becomes their leader. This module owns that common part; what the records mean,
how they are appended and the topic's configs stay with each subclass.

Every method is called from the event loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from odradek.broker.group.partitioning import partition_for
from odradek.protocol import errors
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import iter_batches

log = logging.getLogger(__name__)

# Errors of an append to a coordinator's topic, as the coordinator's clients should see them
# (Kafka's mapping, in both coordinators): the partition is not ready here, or not here.
COORDINATOR_APPEND_ERRORS = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
}


class InternalTopic:
    name: str  # the topic's name
    replication_factor_config: str  # the broker setting for its replication factor

    def __init__(self, broker, *, num_partitions: int, replication_factor: int, segment_bytes: int):
        self.broker = broker
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.segment_bytes = segment_bytes

    def topic_configs(self, replication_factor: int) -> dict[str, str]:
        """The configs the topic is created with."""
        raise NotImplementedError

    def partition_count(self) -> int | None:
        """The topic's partition count, or None before it exists."""
        info = self.broker.image.topics.get(self.name)
        return len(info.partitions) if info is not None else None

    def partition_for(self, key: str) -> int | None:
        count = self.partition_count()
        return None if count is None else partition_for(key, count)

    def ensure_created(self) -> int:
        """Create the topic if it does not exist yet; return its partition count."""
        count = self.partition_count()
        if count is not None:
            return count
        live = len(self.broker.image.brokers)
        capped = getattr(self.broker.config, "internal_topic_replication_factor", None)
        if capped is not None:  # logs a warning when it has to cap
            rf = capped(self.replication_factor_config, live)
        else:
            rf = max(1, min(self.replication_factor, live))
        t0 = time.perf_counter()
        try:
            self.broker.controller.create_topic(
                self.name, self.num_partitions, rf, None, self.topic_configs(rf), internal=True
            )
        except errors.TopicAlreadyExistsError:
            pass
        log.info(
            "created %s with %d partitions, replication factor %d, in %.0f ms",
            self.name,
            self.num_partitions,
            rf,
            (time.perf_counter() - t0) * 1000,
        )
        return self.partition_count() or self.num_partitions

    def leader(self, partition: int) -> int | None:
        info = self.broker.image.topics.get(self.name)
        if info is None or partition not in info.partitions:
            return None
        leader = info.partitions[partition].leader
        return leader if leader is not None and leader >= 0 else None

    def led_partitions(self) -> dict[int, int]:
        """The partitions whose leader replica is on this broker, with their leader epochs."""
        return {
            index: p.leader_epoch
            for (topic, index), p in self.broker.replica_manager.partitions.items()
            if topic == self.name and p.is_leader
        }

    def read_chunks(self, partition: int, chunk_bytes: int) -> Iterator[tuple[int, list]]:
        """The partition's log from its start to its log end, one chunk at a time, as
        ``(offset, batches)``: the chunk's first offset and the batches that reach it (a
        batch's records before ``offset`` were in the chunk before). Raises KafkaError.

        To the log end, not the high watermark, as Kafka's coordinators load: a new leader's
        high watermark lags until its followers fetch, and the records above it were
        acknowledged by the old leader (a commit missed here would be lost)."""
        p = self.broker.replica_manager.get_partition(self.name, partition)
        offset = p.log_start_offset
        end = p.log_end_offset
        while offset < end:
            result = p.read_up_to(offset, chunk_bytes, end)
            if result.records is None or result.records.size == 0:
                break
            batches = []
            next_offset = offset
            for batch in iter_batches(result.records.read()):
                next_offset = max(next_offset, batch.next_offset)
                if batch.next_offset > offset:
                    batches.append(batch)
            if next_offset <= offset:
                raise errors.CorruptMessageError(f"{self.name}-{partition}: no progress reading at {offset}")
            yield offset, batches
            offset = next_offset
