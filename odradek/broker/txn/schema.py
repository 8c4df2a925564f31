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

from odradek.protocol import errors
from odradek.protocol.varint import decode_unsigned_varint

KEY_VERSION = 0
VALUE_VERSION = 0

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_V0_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, status
_TIMES = struct.Struct(">qq")


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
    r = _Reader(key, 2, False)
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
    if value is None or len(value) < 2:
        raise errors.CorruptMessageError("transaction log value is too short")
    (version,) = _I16.unpack_from(value, 0)
    if version not in (0, 1):
        raise errors.CorruptMessageError(f"unknown transaction log value version {version}")
    r = _Reader(value, 2, version >= 1)
    pid = r.fixed(_I64)
    epoch = r.fixed(_I16)
    timeout = r.fixed(_I32)
    status = r.fixed(_I8)
    partitions = []
    for _ in range(r.array()):
        topic = r.string()
        ids = tuple(r.fixed(_I32) for _ in range(r.array()))
        r.skip_tags()
        partitions.append((topic, ids))
    last_update = r.fixed(_I64)
    start = r.fixed(_I64)
    tags = r.tags()
    previous = _I64.unpack(tags[0])[0] if len(tags.get(0, b"")) == 8 else -1
    following = _I64.unpack(tags[1])[0] if len(tags.get(1, b"")) == 8 else -1
    return TxnLogValue(
        pid, epoch, timeout, status, tuple(partitions), last_update, start, previous, following
    )


class _Reader:
    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: bytes, pos: int, flexible: bool):
        self.buf = buf
        self.pos = pos
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise errors.CorruptMessageError("transaction log record is truncated")
        out = self.buf[self.pos : end]
        self.pos = end
        return out

    def fixed(self, st: struct.Struct) -> int:
        return st.unpack(self._take(st.size))[0]

    def _uvarint(self) -> int:
        try:
            value, self.pos = decode_unsigned_varint(self.buf, self.pos)
        except (ValueError, IndexError) as exc:
            raise errors.CorruptMessageError(f"bad varint in a transaction log record: {exc}") from exc
        return value

    def string(self) -> str | None:
        n = self._uvarint() - 1 if self.flexible else self.fixed(_I16)
        return None if n < 0 else self._take(n).decode()

    def array(self) -> int:
        n = self._uvarint() - 1 if self.flexible else self.fixed(_I32)
        return max(n, 0)

    def tags(self) -> dict[int, bytes]:
        out: dict[int, bytes] = {}
        if self.flexible:
            for _ in range(self._uvarint()):
                tag = self._uvarint()
                out[tag] = self._take(self._uvarint())
        return out

    def skip_tags(self) -> None:
        self.tags()
