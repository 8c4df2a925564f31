"""``__transaction_state`` as the transaction coordinator uses it: created on first use,
appended to, replayed.

Internal and compacted: each record's key is a transactional id, so compaction keeps the
latest state of each, and a tombstone forgets an expired id. Appends are local leader
appends through the ReplicaManager; replay reads a partition from its start to its high
watermark in chunks. Every method is called from the event loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from odradek.broker.group.partitioning import partition_for
from odradek.protocol import errors, records

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"


class TransactionStateTopic:
    def __init__(
        self, broker, *, num_partitions: int, replication_factor: int, segment_bytes: int, min_isr: int
    ):
        self.broker = broker
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.segment_bytes = segment_bytes
        self.min_isr = min_isr

    def partition_count(self) -> int | None:
        info = self.broker.image.topics.get(TRANSACTION_STATE_TOPIC)
        return len(info.partitions) if info is not None else None

    def partition_for(self, transactional_id: str) -> int | None:
        count = self.partition_count()
        return None if count is None else partition_for(transactional_id, count)

    def ensure_created(self) -> int:
        """Create the topic if it does not exist yet; return its partition count."""
        count = self.partition_count()
        if count is not None:
            return count
        live = len(self.broker.image.brokers)
        capped = getattr(self.broker.config, "internal_topic_replication_factor", None)
        if capped is not None:
            rf = capped("transaction.state.log.replication.factor", live)
        else:
            rf = max(1, min(self.replication_factor, live))
        configs = {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "segment.bytes": str(self.segment_bytes),
            "min.insync.replicas": str(max(1, min(self.min_isr, rf))),
            "unclean.leader.election.enable": "false",
        }
        t0 = time.perf_counter()
        try:
            self.broker.controller.create_topic(
                TRANSACTION_STATE_TOPIC, self.num_partitions, rf, None, configs, internal=True
            )
        except errors.TopicAlreadyExistsError:
            pass
        log.info(
            "created %s with %d partitions, replication factor %d, in %.0f ms",
            TRANSACTION_STATE_TOPIC,
            self.num_partitions,
            rf,
            (time.perf_counter() - t0) * 1000,
        )
        return self.partition_count() or self.num_partitions

    def leader(self, partition: int) -> int | None:
        info = self.broker.image.topics.get(TRANSACTION_STATE_TOPIC)
        if info is None or partition not in info.partitions:
            return None
        leader = info.partitions[partition].leader
        return leader if leader is not None and leader >= 0 else None

    def led_partitions(self) -> dict[int, int]:
        """The partitions led by this broker, with their leader epochs (the coordinator epochs)."""
        return {
            index: p.leader_epoch
            for (topic, index), p in self.broker.replica_manager.partitions.items()
            if topic == TRANSACTION_STATE_TOPIC and p.is_leader
        }

    def append(self, partition: int, key: bytes, value: bytes | None, now_ms: int) -> None:
        """Append one record; raises KafkaError."""
        batch = records.build_batch([(key, value, (), now_ms)])
        self.broker.replica_manager.append(TRANSACTION_STATE_TOPIC, partition, batch, 1, now_ms)

    def replay(self, partition: int, chunk_bytes: int) -> Iterator[list[tuple[bytes | None, bytes | None]]]:
        """The partition's records, ``(key, value)``, one list per chunk read from the log."""
        p = self.broker.replica_manager.get_partition(TRANSACTION_STATE_TOPIC, partition)
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
                if batch.is_control:
                    continue
                for rec in batch.records():
                    if rec.offset >= offset:
                        chunk.append((rec.key, rec.value))
            if next_offset <= offset:
                raise errors.CorruptMessageError(
                    f"{TRANSACTION_STATE_TOPIC}-{partition}: no progress reading at {offset}"
                )
            offset = next_offset
            yield chunk
