"""Reading the records inside v2 batches, for the few storage features that need more than
the 61-byte header: the key check on compacted topics and per-record errors (KIP-467),
ListOffsets by timestamp, recompression and the cleaner.

Two ways in, both bounded by a ``limit`` on the decompressed size of one batch (past it,
``compression.DecompressedTooLargeError``, Kafka's MESSAGE_TOO_LARGE):

* :func:`iter_record_heads` streams each record's offset delta, timestamp delta and
  whether its key is null out of the decompressing payload, skipping keys, values and
  headers, so it holds one decompressed piece (``compression.CHUNK_BYTES``) however far the
  batch expands; :func:`null_key_indices` and :func:`iter_record_timestamps` are built on it;
* :func:`batch_records_buffer` gives the whole decompressed records section, for callers
  that copy records out (the cleaner, recompression), with
  :func:`odradek.protocol.records.scan_records` to find them; :func:`build_batch` wraps
  records copied out into a new batch.

:func:`end_txn_marker` reads the transaction marker of a control batch.

A v2 record (after the batch header, possibly compressed; see protocol.records)::

    length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
    keyLength varint, key, valueLength varint, value, headerCount varint, headers

Pure functions over bytes; thread-safe. Called by the log validator (owner thread), the
segment's timestamp search and the cleaner (its thread or worker process).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator

import crc32c

from ..protocol import batch as batch_format
from ..protocol import compression as codecs
from ..protocol import errors
from ..protocol.records import scan_records
from ..protocol.varint import VarintError, decode_varint, decode_varlong

# A record's length, attributes, timestamp delta, offset delta and key length take at most
# 5 + 1 + 10 + 5 + 5 bytes.
_HEAD_MAX = 26
_MIN_RECORD_LENGTH = 6  # after the length: attributes and four one-byte varints
_LIMIT_RATIO = 64
_HEADER = struct.Struct(">qiibIhiqqqhii")
_UINT32 = struct.Struct(">I")


def decompressed_batch_limit(max_message_bytes: int) -> int:
    """The most the broker decompresses of one batch of a topic: 64 times its
    ``max.message.bytes``, and at least 64 MiB (why: see log_validator)."""
    return _LIMIT_RATIO * max(max_message_bytes, 1 << 20)


DEFAULT_LIMIT = decompressed_batch_limit(1 << 20)


def batch_records_buffer(
    buf, rel: int, header: batch_format.BatchHeader, limit: int
) -> tuple[bytes, int, int]:
    """The records section of the batch at ``buf[rel:]``, decompressed (at most ``limit``
    bytes): ``(data, start, end)``."""
    start = rel + batch_format.HEADER_SIZE
    end = rel + header.size
    codec = header.attributes & batch_format.COMPRESSION_MASK
    if codec:
        data = codecs.decompress(codec, memoryview(buf)[start:end], max_size=limit)
        return data, 0, len(data)
    if not isinstance(buf, bytes):
        return bytes(memoryview(buf)[start:end]), 0, end - start
    return buf, start, end


def iter_record_heads(buf, rel: int, header: batch_format.BatchHeader, limit: int) -> Iterable[tuple]:
    """Each record of the batch at ``buf[rel:]`` as a tuple starting ``(offset_delta,
    timestamp_delta, key)``, ``key`` None for a null key (and not necessarily the key's bytes
    otherwise). InvalidRecordError if the records do not fill the section exactly."""
    count = header.record_count
    codec = header.attributes & batch_format.COMPRESSION_MASK
    if not codec:
        data, start, end = batch_records_buffer(buf, rel, header, limit)
        return scan_records(data, start, end, count)
    payload = memoryview(buf)[rel + batch_format.HEADER_SIZE : rel + header.size]
    pieces = codecs.iter_decompressed(codec, payload, max_size=limit)
    first = next(pieces, b"")
    second = next(pieces, None)
    if second is None:  # the usual case: everything in one piece
        return scan_records(first, 0, len(first), count)
    return _stream_heads(first + second, pieces, count)


def _stream_heads(data: bytes, pieces: Iterator[bytes], count: int) -> Iterator[tuple]:
    """Record heads from a stream of pieces; holds the current piece plus one record head."""
    pos = 0
    try:
        for _ in range(count):
            if len(data) - pos < _HEAD_MAX:
                data = data[pos:] + b"".join(_take(pieces, _HEAD_MAX))
                pos = 0
            length, pos = decode_varint(data, pos)
            record_end = pos + length
            if length < _MIN_RECORD_LENGTH:
                raise errors.InvalidRecordError(f"invalid record size {length}")
            ts_delta, p = decode_varlong(data, pos + 1)
            offset_delta, p = decode_varint(data, p)
            key_length, p = decode_varint(data, p)
            if p > record_end or key_length > record_end - p:
                raise errors.InvalidRecordError(f"invalid record size {length}: its key runs past it")
            yield offset_delta, ts_delta, None if key_length < 0 else b""
            # Skip the rest of the record, reading on as far as it goes.
            while record_end > len(data):
                record_end -= len(data)
                piece = next(pieces, None)
                if piece is None:
                    raise errors.InvalidRecordError("the records section ends inside a record")
                data = piece
            pos = record_end
    except VarintError as exc:
        raise errors.InvalidRecordError(f"found invalid record structure: {exc}") from None
    left = len(data) - pos + sum(len(piece) for piece in pieces)
    if left:
        raise errors.InvalidRecordError(
            f"incorrect declared batch size, {left} bytes remain after {count} records"
        )


def _take(pieces: Iterator[bytes], n: int) -> Iterator[bytes]:
    """Pieces from ``pieces`` until they hold at least ``n`` bytes (fewer at the end)."""
    got = 0
    while got < n:
        piece = next(pieces, None)
        if piece is None:
            return
        got += len(piece)
        yield piece


def null_key_indices(buf, rel: int, header: batch_format.BatchHeader, limit: int) -> list[int]:
    """The indexes, within the v2 batch at ``buf[rel:]``, of its records with a null key."""
    return [i for i, head in enumerate(iter_record_heads(buf, rel, header, limit)) if head[2] is None]


def iter_record_timestamps(
    buf, rel: int, header: batch_format.BatchHeader, limit: int
) -> Iterator[tuple[int, int]]:
    """``(offset, timestamp)`` of each record of the v2 batch at ``buf[rel:]``, in order. In a
    LogAppendTime batch every record has the batch's max timestamp (nothing is decompressed)."""
    base = header.base_offset
    if header.attributes & batch_format.TIMESTAMP_TYPE_BIT:
        ts = header.max_timestamp
        for i in range(header.last_offset_delta + 1):
            yield base + i, ts
        return
    base_ts = header.base_timestamp
    for head in iter_record_heads(buf, rel, header, limit):
        yield base + head[0], base_ts + head[1]


def build_batch(
    h: batch_format.BatchHeader,
    attributes: int,
    base_timestamp: int,
    max_timestamp: int,
    count: int,
    body: bytes,
    level: int | None = None,
) -> bytes:
    """A v2 batch with ``h``'s offsets, producer fields and leader epoch around ``body`` (the
    uncompressed records), compressed here with the codec in ``attributes`` (at ``level``)."""
    codec = attributes & batch_format.COMPRESSION_MASK
    payload = codecs.compress(codec, body, level) if codec else body
    header = bytearray(
        _HEADER.pack(
            h.base_offset,
            batch_format.HEADER_SIZE - batch_format.LOG_OVERHEAD + len(payload),
            h.partition_leader_epoch,
            2,
            0,
            attributes,
            h.last_offset_delta,
            base_timestamp,
            max_timestamp,
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
            count,
        )
    )
    crc = crc32c.crc32c(payload, crc32c.crc32c(memoryview(header)[batch_format.ATTRIBUTES_OFFSET :]))
    _UINT32.pack_into(header, batch_format.CRC_OFFSET, crc)
    return bytes(header) + payload


def end_txn_marker(batch) -> tuple[int, int] | None:
    """``(control type, coordinator epoch)`` of the control batch ``batch`` (its bytes) if it
    holds a transaction marker (COMMIT or ABORT), else None."""
    from ..protocol import record_batch  # control batches are rare: decode them the simple way

    try:
        decoded = record_batch.decode_batch(bytes(batch), 0, check_crc=False)
        if not isinstance(decoded, record_batch.RecordBatch):
            return None  # a legacy message, never a control batch
        marker = decoded.end_txn_marker()
    except (errors.KafkaError, ValueError, IndexError):
        return None
    return None if marker is None else (marker.control_type, marker.coordinator_epoch)
