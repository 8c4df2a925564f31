"""``__consumer_offsets`` as the coordinator uses it: created on first use, appended to, replayed.

The topic is internal and compacted: a record's key names an offset (group, topic,
partition) or a group, so compaction keeps the latest of each, and a null value (a
tombstone) deletes it. Transactional offset commits (TxnOffsetCommit) are transactional
batches of the producer's id and epoch; they take effect at the transaction's COMMIT
marker, which the transaction coordinator writes here too. Appends are coordinator writes
(``InternalTopic.append_batch``: acks=all in a cluster); replay
reads the partition's log from its start to its log end in chunks, so a large
partition can be loaded without holding the event loop for long.

Every method is called from the event loop.
"""

from __future__ import annotations

from collections.abc import Iterator

from odradek.broker.group.partitioning import OFFSETS_TOPIC
from odradek.broker.internal_topic import COORDINATOR_APPEND_ERRORS, InternalTopic
from odradek.protocol import errors
from odradek.protocol.batch_builder import build_batch
from odradek.protocol.control_records import COMMIT
from odradek.protocol.errors import ErrorCode

# Records too large for the topic; any other error maps as for every coordinator.
_TOO_LARGE = (ErrorCode.message_too_large, ErrorCode.record_list_too_large, ErrorCode.invalid_fetch_size)


def group_append_error(code) -> int:
    """The error a group request answers when writing the group failed with ``code``."""
    code = ErrorCode(int(code))
    if code in _TOO_LARGE:
        return int(ErrorCode.unknown_server_error)
    return int(COORDINATOR_APPEND_ERRORS.get(code, code))


def commit_append_error(code) -> int:
    """The error an offset commit answers when writing the offsets failed with ``code``."""
    code = ErrorCode(int(code))
    if code in _TOO_LARGE:
        return int(ErrorCode.invalid_commit_offset_size)
    return int(COORDINATOR_APPEND_ERRORS.get(code, code))


class OffsetsTopic(InternalTopic):
    name = OFFSETS_TOPIC
    replication_factor_config = "offsets.topic.replication.factor"

    @property
    def node_id(self) -> int:
        return self.broker.node_id

    def topic_configs(self, replication_factor: int) -> dict[str, str]:
        return {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(self.segment_bytes),
        }

    def log_size(self, partition: int) -> int:
        try:
            return self.broker.replica_manager.get_partition(OFFSETS_TOPIC, partition).log_size
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
        batch = build_batch(
            [(key, value, (), now_ms) for key, value in entries],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=0 if producer_id >= 0 else -1,
            transactional=producer_id >= 0,
        )
        origin = "coordinator" if producer_id >= 0 else "client"
        self.append_batch(partition, batch, now_ms, origin)

    def replay(self, partition: int, chunk_bytes: int) -> Iterator[list[tuple]]:
        """The partition's records, one list per chunk read from the log, as
        ``(key, value, producer_id, committed)``: producer id -1 for plain records, the
        producer's for transactional ones; a transaction marker is ``(None, None,
        producer_id, True for COMMIT / False for ABORT)``, else ``committed`` is None."""
        for offset, batches in self.read_chunks(partition, chunk_bytes):
            chunk = []
            for batch in batches:
                if batch.is_control:
                    marker = batch.end_txn_marker()
                    if marker is not None:
                        chunk.append((None, None, batch.producer_id, marker.control_type == COMMIT))
                    continue
                pid = batch.producer_id if getattr(batch, "is_transactional", False) else -1
                for rec in batch.records():
                    if rec.offset >= offset:
                        chunk.append((rec.key, rec.value, pid, None))
            yield chunk
