"""``__share_group_state``: where share-partition state survives a restart (KIP-932).

One compacted record per (share group, topic id, partition), Kafka's ShareSnapshot (key type
0: group id, topic id, partition; value v0: snapshot epoch uint16, state epoch, leader epoch,
start offset, then state batches of ``(first offset, last offset, delivery state, delivery
count)`` for the records from the start offset on that are not simply available). Acquired
records are written as available: after a restart nobody holds them.

The partition of a key is ``hash("group:topic id:partition")`` as for the other internal
topics; its leader is the key's share coordinator (``share_coordinator.py``), the only
writer. This module is the record format and the topic; ``ShareState`` is what a record
holds, ``state_batches`` and ``share_partition_of`` convert to and from the share-partition
leader's in-memory ``SharePartition``.
"""

from __future__ import annotations

import logging
import struct
import uuid
from dataclasses import dataclass, field

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


@dataclass
class ShareState:
    """What a ShareSnapshot record holds (and what Read/WriteShareGroupState carry)."""

    state_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = -1  # -1: not initialized yet (the leader applies share.auto.offset.reset)
    batches: list[tuple[int, int, int, int]] = field(default_factory=list)  # first, last, state, count
    snapshot_epoch: int = 0


def state_batches(sp: SharePartition) -> list[tuple[int, int, int, int]]:
    """The share partition's records that are not simply available, as state batches."""
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
    return [(a, b, c, d) for a, b, c, d in batches]


def share_partition_of(state: ShareState) -> SharePartition:
    """A share partition as the leader serves it from a read state (start offset set)."""
    sp = SharePartition(state.start_offset)
    sp.state_epoch = state.state_epoch
    for first, last, delivery_state, count in state.batches:
        for offset in range(max(first, state.start_offset), last + 1):
            sp.records[offset] = InFlight(delivery_state, count)
        sp.end_offset = max(sp.end_offset, last + 1)
    return sp


def merge_batches(old, new, start_offset: int) -> list[tuple[int, int, int, int]]:
    """``old`` state batches overwritten by ``new`` where they overlap, cut below the start
    offset, sorted, with neighbours of one state and count joined (a write may carry only
    part of the in-flight records, as Kafka's WriteShareGroupState may)."""
    pieces: list[tuple[int, int, int, int]] = []
    covered = sorted((first, last) for first, last, _, _ in new)
    for first, last, state, count in old:
        start = first
        for c_first, c_last in covered:
            if c_last < start or c_first > last:
                continue
            if c_first > start:
                pieces.append((start, c_first - 1, state, count))
            start = max(start, c_last + 1)
            if start > last:
                break
        if start <= last:
            pieces.append((start, last, state, count))
    pieces.extend(new)
    out: list[list[int]] = []
    for first, last, state, count in sorted(pieces):
        first = max(first, start_offset)
        if last < first:
            continue
        prev = out[-1] if out else None
        if prev is not None and prev[1] + 1 == first and prev[2] == state and prev[3] == count:
            prev[1] = last
        else:
            out.append([first, last, state, count])
    return [(a, b, c, d) for a, b, c, d in out]


def encode_snapshot(state: ShareState) -> bytes:
    w = Writer(0, True)
    w.parts.append(_U16.pack(state.snapshot_epoch & 0xFFFF))
    w.int32(state.state_epoch)
    w.int32(state.leader_epoch)
    w.int64(state.start_offset)
    w.array(len(state.batches))
    for first, last, delivery_state, count in state.batches:
        w.int64(first)
        w.int64(last)
        w.int8(delivery_state)
        w.int16(count)
        w.tags()
    w.tags()
    return w.getvalue()


def decode_snapshot(value: bytes) -> ShareState:
    r, _ = value_reader(value, range(0, 1), "ShareSnapshot value", 0, _RECORD)
    (snapshot_epoch,) = _U16.unpack_from(value, r.pos)
    r.pos += 2
    state = ShareState(r.int32(), r.int32(), r.int64(), [], snapshot_epoch)
    for _ in range(r.array()):
        state.batches.append((r.int64(), r.int64(), r.int8(), r.int16()))
        r.skip_tags()
    return state


class ShareStateTopic(InternalTopic):
    name = STATE_TOPIC
    replication_factor_config = "share.coordinator.state.topic.replication.factor"

    min_isr = 1  # share.coordinator.state.topic.min.isr, set by the share coordinator

    def topic_configs(self, replication_factor: int) -> dict[str, str]:
        return {
            "cleanup.policy": "compact",
            "segment.bytes": str(self.segment_bytes),
            "min.insync.replicas": str(max(1, min(self.min_isr, replication_factor))),
            "unclean.leader.election.enable": "false",
        }

    def load(self, index: int) -> dict[tuple[str, uuid.UUID, int], ShareState]:
        """Every share partition's latest state in partition ``index`` (read to its log end);
        raises KafkaError."""
        states: dict[tuple[str, uuid.UUID, int], ShareState] = {}
        for _, batches in self.read_chunks(index, 1 << 20):
            for batch in batches:
                if batch.is_control:
                    continue
                for rec in batch.records():
                    key = decode_key(rec.key) if rec.key else None
                    if key is None:
                        continue
                    if rec.value is None:
                        states.pop(key, None)
                        continue
                    try:
                        states[key] = decode_snapshot(rec.value)
                    except errors.CorruptMessageError as exc:
                        log.warning("share state of %s %s-%d unreadable (%s); skipped", *key, exc)
        return states

    def append(self, index: int, key: tuple[str, uuid.UUID, int], state: ShareState | None, now_ms: int):
        """Write the share partition's state (None: a tombstone) as leader of ``index``;
        returns the Partition written to. Raises KafkaError."""
        value = None if state is None else encode_snapshot(state)
        batch = build_batch([(encode_key(*key), value, (), now_ms)])
        partition, _ = self.broker.replica_manager.append(STATE_TOPIC, index, batch, 1, now_ms, origin="client")
        return partition
