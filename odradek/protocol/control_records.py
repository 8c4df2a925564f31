"""Control records: the transaction markers (ABORT, COMMIT) a transaction coordinator writes.

A control batch (attributes bit 5) holds one record whose key is ``version int16, type
int16`` and, for a transaction marker, whose value is ``version int16, coordinatorEpoch
int32`` (Kafka's ``ControlRecordType`` and ``EndTransactionMarker``). Consumers skip control
batches; read_committed consumers use the ABORT markers to drop aborted records.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from odradek.protocol import errors
from odradek.protocol.batch_builder import encode_batch, now_ms
from odradek.protocol.records import Record

ABORT = 0
COMMIT = 1
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TXN_MARKER = struct.Struct(">hi")  # version, coordinator epoch


class EndTxnMarker(NamedTuple):
    """The content of a transaction marker's control record."""

    control_type: int  # ABORT or COMMIT
    coordinator_epoch: int


def encode_control_key(control_type: int, version: int = 0) -> bytes:
    return _CONTROL_KEY.pack(version, control_type)


def decode_control_key(key: bytes | None) -> tuple[int, int]:
    """``(version, type)`` of a control record key."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise errors.InvalidRecordError("control record key is too short")
    version, control_type = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise errors.InvalidRecordError(f"invalid control record key version {version}")
    return version, control_type


def encode_end_txn_marker(coordinator_epoch: int, version: int = 0) -> bytes:
    return _END_TXN_MARKER.pack(version, coordinator_epoch)


def decode_end_txn_marker(value: bytes | None) -> tuple[int, int]:
    """``(version, coordinator_epoch)`` of a transaction marker's value."""
    if value is None or len(value) < _END_TXN_MARKER.size:
        raise errors.InvalidRecordError("end transaction marker value is too short")
    version, coordinator_epoch = _END_TXN_MARKER.unpack_from(value)
    if version < 0:
        raise errors.InvalidRecordError(f"invalid end transaction marker version {version}")
    return version, coordinator_epoch


def build_control_batch(
    control_type: int,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    base_offset: int = 0,
    timestamp: int | None = None,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transaction marker: a transactional control batch of one ABORT/COMMIT record."""
    if control_type not in (ABORT, COMMIT):
        raise ValueError(f"not a transaction marker type: {control_type}")
    if timestamp is None:
        timestamp = now_ms()
    record = Record(0, 0, encode_control_key(control_type), encode_end_txn_marker(coordinator_epoch), ())
    return encode_batch(
        [record],
        base_offset=base_offset,
        base_timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
