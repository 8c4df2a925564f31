"""``__consumer_offsets`` as the coordinator uses it: created on first use, appended to, replayed.

The topic is internal and compacted: a record's key names an offset (group, topic,
partition) or a group, so compaction keeps the latest of each, and a null value (a
tombstone) deletes it. Transactional offset commits (TxnOffsetCommit) are transactional
batches of the producer's id and epoch; they take effect at the transaction's COMMIT
marker, which the transaction coordinator writes here too. Appends go through the ReplicaManager as leader appends; replay
reads the partition's log from its start to its high watermark in chunks, so a large
partition can be loaded without holding the event loop for long.

Every method is called from the event loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from odradek.broker.group.partitioning import OFFSETS_TOPIC, partition_for
from odradek.protocol import errors, records

log = logging.getLogger(__name__)


class OffsetsTopic:
    def __init__(self, broker, *, num_partitions: int, replication_factor: int, segment_bytes: int):
        self.broker = broker
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.segment_bytes = segment_bytes

    @property
    def node_id(self) -> int:
        return self.broker.node_id

    def partition_count(self) -> int | None:
        """The topic's partition count, or None before it exists."""
        info = self.broker.image.topics.get(OFFSETS_TOPIC)
        return len(info.partitions) if info is not None else None

    def partition_for(self, group_id: str) -> int | None:
        count = self.partition_count()
        return None if count is None else partition_for(group_id, count)

    def ensure_created(self) -> int:
        """Create the topic if it does not exist yet; return its partition count."""
        count = self.partition_count()
        if count is not None:
            return count
        live = len(self.broker.image.brokers)
        capped = getattr(self.broker.config, "internal_topic_replication_factor", None)
        if capped is not None:  # logs a warning when it has to cap
            rf = capped("offsets.topic.replication.factor", live)
        else:
            rf = max(1, min(self.replication_factor, live))
        configs = {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(self.segment_bytes),
        }
        t0 = time.perf_counter()
        try:
            self.broker.controller.create_topic(
                OFFSETS_TOPIC, self.num_partitions, rf, None, configs, internal=True
            )
        except errors.TopicAlreadyExistsError:
            pass
        log.info(
            "created %s with %d partitions, replication factor %d, in %.0f ms",
            OFFSETS_TOPIC,
            self.num_partitions,
            rf,
            (time.perf_counter() - t0) * 1000,
        )
        return self.partition_count() or self.num_partitions

    def leader(self, partition: int) -> int | None:
        info = self.broker.image.topics.get(OFFSETS_TOPIC)
        if info is None or partition not in info.partitions:
            return None
        leader = info.partitions[partition].leader
        return leader if leader is not None and leader >= 0 else None

    def led_partitions(self) -> set[int]:
        """The partitions whose leader replica is on this broker."""
        return {
            index
            for (topic, index), p in self.broker.replica_manager.partitions.items()
            if topic == OFFSETS_TOPIC and p.is_leader
        }

    def log_size(self, partition: int) -> int:
        try:
            return self.broker.replica_manager.get_partition(OFFSETS_TOPIC, partition).log.size
        except errors.KafkaError:
            return 0

    def append(
        self,
        partition: int,
        entries: list[tuple[bytes, bytes | None]],
        now_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> None:
        """Append ``(key, value)`` records as one batch; raises KafkaError. With a producer id
        the batch is transactional (TxnOffsetCommit): it counts once its COMMIT marker lands."""
        batch = records.build_batch(
            [(key, value, (), now_ms) for key, value in entries],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=0 if producer_id >= 0 else -1,
            transactional=producer_id >= 0,
        )
        origin = "coordinator" if producer_id >= 0 else "client"
        self.broker.replica_manager.append(OFFSETS_TOPIC, partition, batch, 1, now_ms, origin=origin)

    def replay(self, partition: int, chunk_bytes: int) -> Iterator[list[tuple]]:
        """The partition's records, one list per chunk read from the log, as
        ``(key, value, producer_id, committed)``: producer id -1 for plain records, the
        producer's for transactional ones; a transaction marker is ``(None, None,
        producer_id, True for COMMIT / False for ABORT)``, else ``committed`` is None."""
        p = self.broker.replica_manager.get_partition(OFFSETS_TOPIC, partition)
        plog = p.log
        offset = plog.log_start_offset
        end = p.high_watermark
        while offset < end:
            result = plog.read(offset, chunk_bytes, max_offset=end, min_one_message=True)
            if result.records is None or result.records.size == 0:
                break
            data = result.records.read()
            chunk = []
            next_offset = offset
            for batch in records.iter_batches(data):
                next_offset = max(next_offset, batch.next_offset)
                if batch.next_offset <= offset:
                    continue
                if batch.is_control:
                    marker = batch.end_txn_marker()
                    if marker is not None:
                        chunk.append((None, None, batch.producer_id, marker.control_type == records.COMMIT))
                    continue
                pid = batch.producer_id if getattr(batch, "is_transactional", False) else -1
                for rec in batch.records():
                    if rec.offset >= offset:
                        chunk.append((rec.key, rec.value, pid, None))
            if next_offset <= offset:
                raise errors.CorruptMessageError(
                    f"{OFFSETS_TOPIC}-{partition}: no progress reading at {offset}"
                )
            offset = next_offset
            yield chunk
