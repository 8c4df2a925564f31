"""Legacy message sets (magic 0 and 1): read, validated and converted to v2 batches.

Kafka still accepts them from old producers (Produce v0-v2, librdkafka before 2.11), and
old logs may hold them. Odradek reads them and converts what it is sent to v2
(:func:`convert_legacy_to_v2`); it never writes them.

A legacy message (one entry of a message set)::

    offset int64, size int32 (bytes after it), crc uint32 (zlib CRC-32 of magic..end),
    magic int8, attributes int8 (bits 0-2 codec, bit 3 LogAppendTime in magic 1),
    timestamp int64 (magic 1 only), key int32-length bytes, value int32-length bytes

A compressed legacy message (a "wrapper") holds a whole inner message set, compressed,
as its value. Inner offsets of a magic 1 wrapper are relative (0..n-1) and the
wrapper's offset is the absolute offset of the last inner message; magic 0 inner
offsets are absolute.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

from odradek.protocol import compression as codecs
from odradek.protocol import errors
from odradek.protocol.batch import (
    COMPRESSION_MASK,
    CREATE_TIME,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_BIT,
)
from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.records import DecodedRecord, Record, as_bytes

_OFFSET_AND_SIZE = struct.Struct(">qi")
_LEGACY_HEAD = struct.Struct(">IbB")  # crc, magic, attributes (after offset and size)
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_INT32_MAX = (1 << 31) - 1
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
# Fewest bytes after the size field: crc, magic, attributes, [timestamp], key and value lengths.
MIN_MESSAGE_SIZE_V0 = 14
MIN_MESSAGE_SIZE_V1 = 22


class LegacyBatch:
    """One top-level message of a magic 0/1 message set; a wrapper when compressed.

    Offers the reading side of :class:`RecordBatch`: iterate for :class:`DecodedRecord`.
    """

    __slots__ = ("_buf", "_pos", "size", "offset", "crc", "magic", "attributes", "timestamp", "key", "value")
    is_control = False
    is_transactional = False
    producer_id = -1
    producer_epoch = -1
    base_sequence = -1

    def __init__(
        self,
        buf: bytes,
        pos: int,
        size: int,
        offset: int,
        crc: int,
        magic: int,
        attributes: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
    ):
        self._buf = buf
        self._pos = pos
        self.size = size
        self.offset = offset
        self.crc = crc
        self.magic = magic
        self.attributes = attributes
        self.timestamp = timestamp
        self.key = key
        self.value = value

    def __repr__(self) -> str:
        return (
            f"LegacyBatch(offset={self.offset}, magic={self.magic}, "
            f"codec={codecs.CODEC_NAMES.get(self.compression, self.compression)}, size={self.size})"
        )

    @property
    def data(self) -> bytes:
        return self._buf[self._pos : self._pos + self.size]

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        if self.magic > 0 and self.attributes & TIMESTAMP_TYPE_BIT:
            return LOG_APPEND_TIME
        return CREATE_TIME

    @property
    def last_offset(self) -> int:
        return self.offset

    @property
    def next_offset(self) -> int:
        return self.offset + 1

    @property
    def base_offset(self) -> int:
        if not self.compression:
            return self.offset
        records = self.records()
        return records[0].offset if records else self.offset

    @property
    def max_timestamp(self) -> int:
        return self.timestamp

    def crc_is_valid(self) -> bool:
        return zlib.crc32(memoryview(self._buf)[self._pos + MAGIC_OFFSET : self._pos + self.size]) == self.crc

    def inner(self) -> list[LegacyBatch]:
        """The inner messages of a compressed wrapper, as stored (relative offsets in magic 1)."""
        if not self.compression:
            return [self]
        if self.value is None:
            raise errors.CorruptMessageError("compressed legacy message without a value")
        data = codecs.decompress(self.compression, self.value, magic=self.magic)
        messages = []
        pos = 0
        end = len(data)
        while pos < end:
            message = read_legacy_message(data, pos, end)
            if message is None:
                raise errors.CorruptMessageError("truncated message inside a compressed legacy message")
            messages.append(message)
            pos += message.size
        return messages

    def records(self) -> list[DecodedRecord]:
        if not self.compression:
            return [DecodedRecord(self.offset, self.timestamp, self.key, self.value, ())]
        inner = self.inner()
        if not inner:
            return []
        if any(m.compression for m in inner):
            raise errors.InvalidRecordError("compressed legacy message inside a compressed message")
        base = 0
        if self.magic > 0:
            base = self.offset - inner[-1].offset
            if base < 0:  # wrapper offset not set by the producer: keep the relative offsets
                base = 0
        log_append = self.timestamp_type == LOG_APPEND_TIME
        return [
            DecodedRecord(base + m.offset, self.timestamp if log_append else m.timestamp, m.key, m.value, ())
            for m in inner
        ]

    def __iter__(self) -> Iterator[DecodedRecord]:
        return iter(self.records())


def read_legacy_message(data: bytes, pos: int, end: int) -> LegacyBatch | None:
    """Parse the legacy message at ``pos``; None when it does not fit before ``end``.

    CorruptMessageError when it is too small, of another magic, or its key and value do not
    fill its declared size."""
    if pos + LOG_OVERHEAD > end:
        return None
    offset, length = _OFFSET_AND_SIZE.unpack_from(data, pos)
    message_end = pos + LOG_OVERHEAD + length
    if length < MIN_MESSAGE_SIZE_V0:
        raise errors.CorruptMessageError(
            f"message size {length} is less than the minimum message overhead {MIN_MESSAGE_SIZE_V0}"
        )
    if message_end > end:
        return None
    crc, magic, attributes = _LEGACY_HEAD.unpack_from(data, pos + LOG_OVERHEAD)
    if magic not in (0, 1):
        raise errors.CorruptMessageError(f"invalid magic byte {magic} in a legacy message set")
    p = pos + MAGIC_OFFSET + 2
    if magic == 1:
        if length < MIN_MESSAGE_SIZE_V1:
            raise errors.CorruptMessageError(f"magic 1 message size {length} is too small")
        (timestamp,) = _INT64.unpack_from(data, p)
        p += 8
    else:
        timestamp = NO_TIMESTAMP
    key, p = _legacy_bytes(data, p, message_end)
    value, p = _legacy_bytes(data, p, message_end)
    if p != message_end:
        raise errors.CorruptMessageError(f"legacy message declares {length} bytes but holds {p - pos - 12}")
    return LegacyBatch(
        data, pos, LOG_OVERHEAD + length, offset, crc, magic, attributes, timestamp, key, value
    )


def _legacy_bytes(data: bytes, p: int, end: int) -> tuple[bytes | None, int]:
    if p + 4 > end:
        raise errors.CorruptMessageError("legacy message too short for its key or value length")
    (n,) = _INT32.unpack_from(data, p)
    p += 4
    if n < 0:
        return None, p
    if p + n > end:
        raise errors.CorruptMessageError("legacy message key or value runs past the message")
    return data[p : p + n], p + n


def _legacy_messages(buf, pos: int, end: int | None) -> Iterator[LegacyBatch]:
    """The top-level messages of a legacy message set; the set must be complete."""
    data, pos, end = as_bytes(buf, pos, end)
    while pos < end:
        if pos + MAGIC_OFFSET + 1 <= end and data[pos + MAGIC_OFFSET] == 2:
            raise errors.InvalidRecordError("a v2 record batch inside a legacy message set")
        message = read_legacy_message(data, pos, end)
        if message is None:
            raise errors.CorruptMessageError("legacy message set ends inside a message")
        yield message
        pos += message.size


def validate_legacy(
    buf, pos: int = 0, end: int | None = None, *, max_message_bytes: int | None = None
) -> int:
    """Check a whole magic 0/1 message set, inner messages included; returns its record count.

    CorruptMessageError for bad CRCs (outer or inner) and malformed messages,
    InvalidRecordError for nested compression or inner magic mismatches,
    UnsupportedCompressionTypeError for zstd or unknown codecs, MessageTooLargeError
    for a top-level message over ``max_message_bytes``.
    """
    count = 0
    for message in _legacy_messages(buf, pos, end):
        if max_message_bytes is not None and message.size > max_message_bytes:
            raise errors.MessageTooLargeError(
                f"the message is {message.size} bytes, over the maximum of {max_message_bytes}"
            )
        if not message.crc_is_valid():
            raise errors.CorruptMessageError(f"message at offset {message.offset} fails its CRC")
        codec = message.compression
        if codec == codecs.ZSTD:
            raise errors.UnsupportedCompressionTypeError("zstd needs message format v2")
        if codec > codecs.ZSTD:
            raise errors.UnsupportedCompressionTypeError(f"unknown compression codec id {codec}")
        if not codec:
            count += 1
            continue
        inner = message.inner()
        for m in inner:
            if not m.crc_is_valid():
                raise errors.CorruptMessageError(f"inner message at offset {m.offset} fails its CRC")
            if m.compression:
                raise errors.InvalidRecordError("compressed legacy message inside a compressed message")
            if m.magic != message.magic:
                raise errors.InvalidRecordError(
                    f"inner message magic {m.magic} does not match wrapper magic {message.magic}"
                )
        count += len(inner)
    return count


def _v2_from_absolute(
    records: list[DecodedRecord], *, compression: int, timestamp_type: int, max_timestamp: int | None
) -> bytes:
    """A v2 batch of records given with absolute offsets.

    Offsets are kept when they increase strictly and fit the int32 deltas, else
    numbered from the first. Timestamps must differ by what a varlong holds.
    """
    base_offset = records[0].offset
    keep = all(a.offset < b.offset for a, b in zip(records, records[1:], strict=False))
    keep = keep and records[-1].offset - base_offset <= _INT32_MAX
    base_timestamp = records[0].timestamp
    deltas = [
        Record((r.offset - base_offset) if keep else i, r.timestamp - base_timestamp, r.key, r.value, ())
        for i, r in enumerate(records)
    ]
    if any(not _INT64_MIN <= d.timestamp_delta <= _INT64_MAX for d in deltas):
        raise errors.InvalidTimestampError("legacy message timestamps too far apart for one v2 batch")
    return encode_batch(
        deltas,
        base_offset=base_offset,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp if max_timestamp is not None else max(r.timestamp for r in records),
        compression=compression,
        timestamp_type=timestamp_type,
    )


def convert_legacy_to_v2(buf, pos: int = 0, end: int | None = None) -> bytes:
    """Equivalent v2 batches for a complete magic 0/1 message set (validated first).

    Each compressed wrapper becomes one batch with the same codec; runs of uncompressed
    messages with the same timestamp type become one uncompressed batch. Offsets are
    kept when they increase strictly, otherwise numbered from the first; magic 0
    timestamps stay -1 (no timestamp); LogAppendTime wrappers keep their time.
    """
    validate_legacy(buf, pos, end)
    batches: list[bytes] = []
    pending: list[DecodedRecord] = []
    pending_type = CREATE_TIME

    def flush() -> None:
        if pending:
            batches.append(
                _v2_from_absolute(
                    pending, compression=codecs.NONE, timestamp_type=pending_type, max_timestamp=None
                )
            )
            pending.clear()

    for message in _legacy_messages(buf, pos, end):
        if message.compression:
            flush()
            records = message.records()
            if records:
                log_append = message.timestamp_type == LOG_APPEND_TIME
                batches.append(
                    _v2_from_absolute(
                        records,
                        compression=message.compression,
                        timestamp_type=message.timestamp_type,
                        max_timestamp=message.timestamp if log_append else None,
                    )
                )
            continue
        if pending and message.timestamp_type != pending_type:
            flush()
        pending_type = message.timestamp_type
        pending.extend(message.records())
    flush()
    return b"".join(batches)
