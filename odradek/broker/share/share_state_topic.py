"""``__share_group_state``: where share-partition state survives a restart (KIP-932).

One compacted record per (share group, topic id, partition), Kafka's ShareSnapshot (key type
0: group id, topic id, partition; value v0: snapshot epoch uint16, state epoch, leader epoch,
start offset, then state batches of ``(first offset, last offset, delivery state, delivery
count)`` for the records from the start offset on that are not simply available). Acquired
records are written as available: after a restart nobody holds them.

The partition of a key is ``hash("group:topic id:partition")`` as for the other internal
topics. The share-partition leader writes the snapshot after each fetch or acknowledgement
that changed the state, and reads the latest one when it first serves the share partition;
it can do so only where it also leads the state partition (a single broker, or a lucky
cluster layout: Kafka's share coordinator and its Read/WriteShareGroupState are not here).
"""

from __future__ import annotations

import logging
import struct
import uuid

from odradek.broker.internal_topic import InternalTopic
from odradek.broker.record_reader import Reader, Writer, value_reader
from odradek.broker.share.share_partition import ACQUIRED, AVAILABLE, InFlight, SharePartition
from odradek.protocol import errors
from odradek.protocol.batch_builder import build_batch

log = logging.getLogger(__name__)

STATE_TOPIC = "__share_group_state"
SHARE_SNAPSHOT = 0
_RECORD = "share-group state record"
_U16 = struct.Struct(">H")


def encode_key(group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    w = Writer(SHARE_SNAPSHOT, False)
    w.string(group_id)
    w.uuid(topic_id)
    w.int32(partition)
    return w.getvalue()


def decode_key(key: bytes) -> tuple[str, uuid.UUID, int] | None:
    if len(key) < 2 or int.from_bytes(key[:2], "big", signed=True) != SHARE_SNAPSHOT:
        return None
    r = Reader(key, 2, record=_RECORD)
    return r.string() or "", r.uuid(), r.int32()


def encode_snapshot(sp: SharePartition, snapshot_epoch: int) -> bytes:
    batches: list[list[int]] = []
    for offset in sorted(sp.records):
        r = sp.records[offset]
        state = AVAILABLE if r.state == ACQUIRED else r.state
        if state == AVAILABLE and r.delivery_count == 0:
            continue
        last = batches[-1] if batches else None
        if last is not None and last[1] == offset - 1 and last[2] == state and last[3] == r.delivery_count:
            last[1] = offset
        else:
            batches.append([offset, offset, state, r.delivery_count])
    w = Writer(0, True)
    w.parts.append(_U16.pack(snapshot_epoch & 0xFFFF))
    w.int32(0)  # state epoch
    w.int32(-1)  # leader epoch
    w.int64(sp.start_offset)
    w.array(len(batches))
    for first, last, state, count in batches:
        w.int64(first)
        w.int64(last)
        w.int8(state)
        w.int16(count)
        w.tags()
    w.tags()
    return w.getvalue()


def decode_snapshot(value: bytes) -> SharePartition:
    r, _ = value_reader(value, range(0, 1), "ShareSnapshot value", 0, _RECORD)
    r.pos += 2  # snapshot epoch
    r.int32()
    r.int32()
    sp = SharePartition(r.int64())
    for _ in range(r.array()):
        first, last, state, count = r.int64(), r.int64(), r.int8(), r.int16()
        r.skip_tags()
        for offset in range(first, last + 1):
            sp.records[offset] = InFlight(state, count)
        sp.end_offset = max(sp.end_offset, last + 1)
    return sp


class ShareStateTopic(InternalTopic):
    name = STATE_TOPIC
    replication_factor_config = "share.coordinator.state.topic.replication.factor"

    def topic_configs(self, replication_factor: int) -> dict[str, str]:
        return {"cleanup.policy": "compact", "segment.bytes": str(self.segment_bytes)}

    def _partition(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int | None:
        self.ensure_created()
        index = self.partition_for(f"{group_id}:{topic_id}:{partition}")
        if index is None or index not in self.led_partitions():
            return None
        return index

    def persists(self, group_id: str, topic_id: uuid.UUID, partition: int) -> bool:
        """Whether this broker saves (and can load back) the share partition's state."""
        return self._partition(group_id, topic_id, partition) is not None

    def load(self, group_id: str, topic_id: uuid.UUID, partition: int) -> SharePartition | None:
        """The latest snapshot of the share partition, or None."""
        index = self._partition(group_id, topic_id, partition)
        if index is None:
            return None
        wanted = encode_key(group_id, topic_id, partition)
        latest = None
        for _, batches in self.read_chunks(index, 1 << 20):
            for batch in batches:
                if batch.is_control:
                    continue
                for rec in batch.records():
                    if rec.key == wanted:
                        latest = rec.value
        if latest is None:
            return None
        try:
            return decode_snapshot(latest)
        except errors.CorruptMessageError as exc:
            log.warning("share state of %s %s-%d unreadable (%s); starting afresh", group_id, topic_id, partition, exc)
            return None

    def forget(self, group_id: str, topic_id: uuid.UUID, partition: int, now_ms: int) -> None:
        """A tombstone for the share partition's state (its group was deleted)."""
        self._append(group_id, topic_id, partition, None, now_ms)

    def save(self, group_id: str, topic_id: uuid.UUID, partition: int, sp: SharePartition, now_ms: int) -> None:
        index = self._partition(group_id, topic_id, partition)
        if index is None:
            return
        sp.snapshot_epoch += 1
        self._append(group_id, topic_id, partition, encode_snapshot(sp, sp.snapshot_epoch), now_ms, index)

    def _append(self, group_id, topic_id, partition: int, value: bytes | None, now_ms: int, index=None) -> None:
        if index is None:
            index = self._partition(group_id, topic_id, partition)
            if index is None:
                return
        batch = build_batch([(encode_key(group_id, topic_id, partition), value, (), now_ms)])
        try:
            self.broker.replica_manager.append(STATE_TOPIC, index, batch, 1, now_ms, origin="client")
        except errors.KafkaError as exc:
            log.warning("writing the share state of %s %s-%d failed: %s", group_id, topic_id, partition, exc)
