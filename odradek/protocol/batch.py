"""RecordBatch v2 headers, read and patched as bytes.

This is the hot-path view of a record batch: the broker, the storage layer and the client
look at the fixed 61-byte header only, never at the records inside. Whole batches are
written by ``batch_builder.py``, read by ``record_batch.py`` and checked by ``batch_checks.py``;
one record is ``records.py``; legacy message sets are ``legacy_records.py``.

Layout of a v2 batch (all big-endian)::

    0  baseOffset            int64
    8  batchLength           int32   bytes after this field (size of the batch - 12)
    12 partitionLeaderEpoch  int32   not covered by the CRC
    16 magic                 int8    2
    17 crc                   uint32  CRC-32C of bytes 21..end
    21 attributes            int16   bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control
    23 lastOffsetDelta       int32
    27 baseTimestamp         int64
    35 maxTimestamp          int64
    43 producerId            int64
    51 producerEpoch         int16
    53 baseSequence          int32
    57 recordCount           int32
    61 records...

Legacy message sets (magic 0 and 1) share the first 17 bytes' shape: offset int64,
size int32, crc int32, magic int8 at byte 16, so ``magic_at`` works for both.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: bytes before the length-counted part
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

CREATE_TIME = 0
LOG_APPEND_TIME = 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies in a log or a request."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_BIT else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def read_header(buf, pos: int = 0) -> BatchHeader:
    """Parse the v2 header at ``pos``; the caller has checked that 61 bytes are there."""
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


# header_fields(buf, pos=0): the v2 header at ``pos`` as a plain tuple, in BatchHeader's
# order; cheaper than read_header where a hot path reads a field or two.
header_fields = _HEADER.unpack_from


def magic_at(buf, pos: int = 0) -> int:
    return buf[pos + MAGIC_OFFSET]


def read_offset_and_size(buf, pos: int = 0) -> tuple[int, int]:
    """Base offset and total size of the batch (any magic) starting at ``pos``."""
    offset, length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
    return offset, length + LOG_OVERHEAD


def compute_crc(buf, pos: int, size: int) -> int:
    """CRC-32C over the CRC-covered part of the batch at ``pos`` of ``size`` bytes."""
    view = memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size]
    return crc32c.crc32c(view)


def crc_is_valid(buf, pos: int, header: BatchHeader) -> bool:
    return compute_crc(buf, pos, header.size) == header.crc


def write_crc(buf: bytearray, pos: int = 0) -> None:
    """Recompute and store the CRC of the batch at ``pos`` (after patching covered fields)."""
    (length,) = _INT32.unpack_from(buf, pos + 8)
    _UINT32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, length + LOG_OVERHEAD))


def set_base_offset(buf: bytearray, pos: int, base_offset: int) -> None:
    """Offsets are outside the CRC: assigning them never needs a new checksum."""
    _INT64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray, pos: int, epoch: int) -> None:
    _INT32.pack_into(buf, pos + 12, epoch)


def set_log_append_time(buf: bytearray, pos: int, timestamp_ms: int) -> None:
    """Mark the batch LogAppendTime with ``timestamp_ms`` as its max timestamp; fixes the CRC."""
    (attributes,) = _INT16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_BIT)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    write_crc(buf, pos)


def iter_headers(buf, start: int = 0, end: int | None = None):
    """Yield ``(position, BatchHeader)`` for each complete v2 batch in ``buf[start:end]``.

    Stops silently at an incomplete tail (a fetch response may end with a partial batch).
    Legacy batches are yielded too, as ``(position, None)``, for the caller to convert.
    """
    if end is None:
        end = len(buf)
    pos = start
    while pos + LOG_OVERHEAD <= end:
        _, size = read_offset_and_size(buf, pos)
        if size < LOG_OVERHEAD + 5 or pos + size > end:
            return
        if buf[pos + MAGIC_OFFSET] == 2:
            if size < HEADER_SIZE:
                return
            yield pos, read_header(buf, pos)
        else:
            yield pos, None
        pos += size
