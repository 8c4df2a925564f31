"""Writing v2 record batches (Kafka's ``MemoryRecordsBuilder``): records in, batch bytes out.

* :func:`build_batch`: a whole list of new records at once (offset deltas 0, 1, 2, …);
* :class:`BatchBuilder`: record by record, with sizes for a producer's accumulator;
* :func:`encode_batch`: records given with their deltas, gaps and empty batches allowed
  (what compaction, recompression and legacy conversion need), every header field
  settable.

Each returns the batch's bytes, compressed if asked, with its CRC-32C. Pure functions,
except that a record given no timestamp gets the current time, as Kafka's producer does.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Sequence

import crc32c

from odradek.protocol import compression as codecs
from odradek.protocol import errors
from odradek.protocol.batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_BIT,
    CREATE_TIME,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
)
from odradek.protocol.records import Header, NewRecord, Record, append_record

# The whole v2 header in one pack (the layout in batch.py's docstring).
_V2_HEADER = struct.Struct(">qiibIhiqqqhii")
_UINT32 = struct.Struct(">I")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def batch_attributes(compression: int, timestamp_type: int, transactional: bool, control: bool) -> int:
    """The attributes field of a v2 batch; UnsupportedCompressionTypeError for an unknown codec."""
    if not 0 <= compression <= codecs.ZSTD:
        raise errors.UnsupportedCompressionTypeError(f"unknown compression codec id {compression}")
    attributes = compression
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_BIT
    if transactional:
        attributes |= TRANSACTIONAL_BIT
    if control:
        attributes |= CONTROL_BIT
    return attributes


def _assemble(
    body,
    *,
    count: int,
    attributes: int,
    base_offset: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
    compression_level: int | None = None,
) -> bytes:
    """Header + (compressed) records, with the CRC-32C filled in."""
    codec = attributes & COMPRESSION_MASK
    payload = codecs.compress(codec, body, compression_level) if codec else body
    header = bytearray(
        _V2_HEADER.pack(
            base_offset,
            HEADER_SIZE - LOG_OVERHEAD + len(payload),
            partition_leader_epoch,
            2,
            0,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
    )
    crc = crc32c.crc32c(payload, crc32c.crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
    _UINT32.pack_into(header, 17, crc)
    return b"".join((header, payload))


def build_batch(
    records: Iterable[NewRecord | tuple],
    *,
    base_offset: int = 0,
    compression: int = codecs.NONE,
    timestamp_type: int = CREATE_TIME,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
    base_timestamp: int | None = None,
    compression_level: int | None = None,
) -> bytes:
    """A v2 batch of ``records``, each ``(key, value, headers, timestamp_ms | None)``.

    Offset deltas are 0, 1, 2, …; the base timestamp is ``base_timestamp`` or the first
    record's (as Kafka's producer does); records without a timestamp get the current
    time. Raises ValueError for an empty list (use :func:`encode_batch` for the empty
    batches compaction leaves).
    """
    parts: list = []
    offset_delta = 0
    max_timestamp = NO_TIMESTAMP
    now = None
    for key, value, headers, timestamp in records:
        if timestamp is None:
            if now is None:
                now = now_ms()
            timestamp = now
        if base_timestamp is None:
            base_timestamp = timestamp
        if timestamp > max_timestamp:
            max_timestamp = timestamp
        append_record(parts, offset_delta, timestamp - base_timestamp, key, value, headers)
        offset_delta += 1
    if not offset_delta or base_timestamp is None:  # no records (then no base timestamp either)
        raise ValueError("a record batch needs at least one record")
    return _assemble(
        b"".join(parts),
        count=offset_delta,
        attributes=batch_attributes(compression, timestamp_type, transactional, control),
        base_offset=base_offset,
        last_offset_delta=offset_delta - 1,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
        compression_level=compression_level,
    )


def encode_batch(
    records: Iterable[Record],
    *,
    base_offset: int = 0,
    base_timestamp: int = NO_TIMESTAMP,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    compression: int = codecs.NONE,
    timestamp_type: int = CREATE_TIME,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
    compression_level: int | None = None,
    attributes: int | None = None,
) -> bytes:
    """A v2 batch of records given with their deltas (gaps allowed, empty allowed).

    ``max_timestamp`` defaults to the largest record timestamp (``base_timestamp`` for an
    empty batch); ``last_offset_delta`` to the largest offset delta (0 when empty).
    ``attributes``, when given, replaces the flags built from ``compression``,
    ``timestamp_type``, ``transactional`` and ``control`` (to carry bits over verbatim).
    """
    parts: list = []
    count = 0
    top_delta = -1
    top_timestamp_delta = None
    for offset_delta, timestamp_delta, key, value, headers in records:
        append_record(parts, offset_delta, timestamp_delta, key, value, headers)
        count += 1
        if offset_delta > top_delta:
            top_delta = offset_delta
        if top_timestamp_delta is None or timestamp_delta > top_timestamp_delta:
            top_timestamp_delta = timestamp_delta
    if max_timestamp is None:
        max_timestamp = base_timestamp + (top_timestamp_delta or 0)
    if last_offset_delta is None:
        last_offset_delta = max(top_delta, 0)
    if attributes is None:
        attributes = batch_attributes(compression, timestamp_type, transactional, control)
    return _assemble(
        b"".join(parts),
        count=count,
        attributes=attributes,
        base_offset=base_offset,
        last_offset_delta=last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
        compression_level=compression_level,
    )


class BatchBuilder:
    """Accumulates records for one v2 batch, one ``append`` at a time.

    For the producer's accumulator: it appends while ``size_in_bytes`` plus
    :func:`estimate_record_size` of the next record fits ``batch.size``, then calls
    :meth:`build` with the producer fields known at send time. Sizes are uncompressed.
    Not thread-safe; one owner.
    """

    __slots__ = ("_parts", "_count", "_size", "_base_timestamp", "_max_timestamp", "compression")

    def __init__(self, compression: int = codecs.NONE):
        if not 0 <= compression <= codecs.ZSTD:
            raise errors.UnsupportedCompressionTypeError(f"unknown compression codec id {compression}")
        self.compression = compression
        self._parts: list = []
        self._count = 0
        self._size = HEADER_SIZE
        self._base_timestamp: int | None = None
        self._max_timestamp = NO_TIMESTAMP

    def __len__(self) -> int:
        return self._count

    @property
    def size_in_bytes(self) -> int:
        """Bytes of the batch so far, before compression."""
        return self._size

    def append(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] = (),
        timestamp: int | None = None,
    ) -> int:
        """Add a record; returns its offset delta (its index in the batch)."""
        if timestamp is None:
            timestamp = now_ms()
        if self._base_timestamp is None:
            self._base_timestamp = timestamp
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        offset_delta = self._count
        self._size += append_record(
            self._parts, offset_delta, timestamp - self._base_timestamp, key, value, headers
        )
        self._count = offset_delta + 1
        return offset_delta

    def build(
        self,
        *,
        base_offset: int = 0,
        timestamp_type: int = CREATE_TIME,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        transactional: bool = False,
        partition_leader_epoch: int = -1,
        compression_level: int | None = None,
    ) -> bytes:
        base_timestamp = self._base_timestamp  # set by the first append
        if base_timestamp is None:
            raise ValueError("a record batch needs at least one record")
        return _assemble(
            b"".join(self._parts),
            count=self._count,
            attributes=batch_attributes(self.compression, timestamp_type, transactional, False),
            base_offset=base_offset,
            last_offset_delta=self._count - 1,
            base_timestamp=base_timestamp,
            max_timestamp=self._max_timestamp,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            partition_leader_epoch=partition_leader_epoch,
            compression_level=compression_level,
        )
