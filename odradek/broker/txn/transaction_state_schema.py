"""Keys and values of the records in ``__transaction_state``, byte-compatible with Kafka.

Schemas from Kafka's ``TransactionLogKey.json`` and ``TransactionLogValue.json``; the code
is ours. Pure functions over bytes::

    TransactionLogKey (version 0)
      int16 version, string transactionalId

    TransactionLogValue
      v0  int16 version, int64 producerId, int16 producerEpoch, int32 transactionTimeoutMs,
          int8 transactionStatus, [topic string, partitionIds [int32]] transactionPartitions
          (nullable), int64 transactionLastUpdateTimestampMs, int64 transactionStartTimestampMs
      v1  the same, flexible (compact strings and arrays, tagged fields), with tagged fields
          0 previousProducerId int64, 1 nextProducerId int64, 2 clientTransactionVersion int16

A null value is a tombstone: the transactional id expired. We write v0 (what Kafka 3.x
writes and every Kafka version reads) and read both.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from odradek.broker.record_reader import Reader, value_reader
from odradek.protocol import errors

KEY_VERSION = 0
VALUE_VERSION = 0

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_V0_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, status
_TIMES = struct.Struct(">qq")
_RECORD = "transaction log record"


class TxnLogValue(NamedTuple):
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: tuple[tuple[str, tuple[int, ...]], ...]  # (topic, partition ids), sorted
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1


def _string(s: str) -> bytes:
    data = s.encode()
    return _I16.pack(len(data)) + data


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


def decode_key(key: bytes | None) -> str:
    if key is None or len(key) < 4:
        raise errors.CorruptMessageError("transaction log key is too short")
    (version,) = _I16.unpack_from(key, 0)
    if version != KEY_VERSION:
        raise errors.CorruptMessageError(f"unknown transaction log key version {version}")
    r = Reader(key, 2, False, _RECORD)
    tid = r.string()
    if tid is None:
        raise errors.CorruptMessageError("transaction log key without a transactional id")
    return tid


def encode_value(value: TxnLogValue) -> bytes:
    parts = [
        _V0_HEAD.pack(VALUE_VERSION, value.producer_id, value.producer_epoch, value.timeout_ms, value.status)
    ]
    parts.append(_I32.pack(len(value.partitions)))
    for topic, ids in value.partitions:
        parts.append(_string(topic))
        parts.append(_I32.pack(len(ids)))
        parts.extend(_I32.pack(p) for p in ids)
    parts.append(_TIMES.pack(value.last_update_ms, value.start_ms))
    return b"".join(parts)


def decode_value(value: bytes) -> TxnLogValue:
    r, _ = value_reader(value, range(0, 2), "transaction log value", 1, _RECORD)
    pid = r.int64()
    epoch = r.int16()
    timeout = r.int32()
    status = r.int8()
    partitions = []
    for _ in range(r.array()):
        topic = r.string()
        ids = tuple(r.int32() for _ in range(r.array()))
        r.skip_tags()
        partitions.append((topic, ids))
    last_update = r.int64()
    start = r.int64()
    tags = r.tags()
    previous = _I64.unpack(tags[0])[0] if len(tags.get(0, b"")) == 8 else -1
    following = _I64.unpack(tags[1])[0] if len(tags.get(1, b"")) == 8 else -1
    return TxnLogValue(
        pid, epoch, timeout, status, tuple(partitions), last_update, start, previous, following
    )
