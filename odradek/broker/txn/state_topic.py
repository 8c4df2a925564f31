"""``__transaction_state`` as the transaction coordinator uses it: created on first use,
appended to, replayed.

Internal and compacted: each record's key is a transactional id, so compaction keeps the
latest state of each, and a tombstone forgets an expired id. Appends are coordinator
writes (``InternalTopic.append_batch``: acks=all in a cluster); replay reads a partition
from its start to its log end in chunks. Every method is called from the event loop.
"""

from __future__ import annotations

from collections.abc import Iterator

from odradek.broker.internal_topic import InternalTopic
from odradek.protocol.batch_builder import build_batch

TRANSACTION_STATE_TOPIC = "__transaction_state"


class TransactionStateTopic(InternalTopic):
    name = TRANSACTION_STATE_TOPIC
    replication_factor_config = "transaction.state.log.replication.factor"

    def __init__(
        self, broker, *, num_partitions: int, replication_factor: int, segment_bytes: int, min_isr: int
    ):
        super().__init__(
            broker,
            num_partitions=num_partitions,
            replication_factor=replication_factor,
            segment_bytes=segment_bytes,
        )
        self.min_isr = min_isr

    def topic_configs(self, replication_factor: int) -> dict[str, str]:
        return {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "segment.bytes": str(self.segment_bytes),
            "min.insync.replicas": str(max(1, min(self.min_isr, replication_factor))),
            "unclean.leader.election.enable": "false",
        }

    def append(self, partition: int, key: bytes, value: bytes | None, now_ms: int) -> None:
        """Append one record; raises KafkaError."""
        batch = build_batch([(key, value, (), now_ms)])
        self.append_batch(partition, batch, now_ms)

    def replay(self, partition: int, chunk_bytes: int) -> Iterator[list[tuple[bytes | None, bytes | None]]]:
        """The partition's records, ``(key, value)``, one list per chunk read from the log."""
        for offset, batches in self.read_chunks(partition, chunk_bytes):
            yield [
                (rec.key, rec.value)
                for batch in batches
                if not batch.is_control
                for rec in batch.records()
                if rec.offset >= offset
            ]
