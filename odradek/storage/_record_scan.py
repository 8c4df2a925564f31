"""Record-level scanning of v2 batches for compaction and for the key check on compacted topics.

A v2 record (see ``odradek.protocol.records``) is ``length varint, attributes int8,
timestampDelta varlong, offsetDelta varint, keyLength varint, key, valueLength varint, value,
headers``. The cleaner needs each record's offset and timestamp deltas, its key, whether its
value is null (a tombstone) and where its bytes start and end, so a retained record can be
copied into a new batch unchanged. Values and headers are skipped, never copied.

Pure functions over bytes; thread-safe.
"""

from __future__ import annotations

from ..protocol import batch as B
from ..protocol import compression as codecs
from ..protocol import errors
from ..protocol.varint import VarintError, read_raw


def batch_records_buffer(buf, rel: int, header: B.BatchHeader) -> tuple[bytes, int, int]:
    """The records section of the batch at ``buf[rel:]``, decompressed: ``(data, start, end)``."""
    start = rel + B.HEADER_SIZE
    end = rel + header.size
    codec = header.attributes & B.COMPRESSION_MASK
    if codec:
        data = codecs.decompress(codec, memoryview(buf)[start:end])
        return data, 0, len(data)
    if not isinstance(buf, bytes):
        return bytes(memoryview(buf)[start:end]), 0, end - start
    return buf, start, end


def scan_records(data: bytes, pos: int, end: int, count: int) -> list[tuple]:
    """``count`` records of ``data[pos:end]`` as ``(offset_delta, timestamp_delta, key or None,
    value_is_null, start, end)`` tuples, ``data[start:end]`` being the record's whole encoding
    (length prefix included). Raises InvalidRecordError if they do not parse."""
    out = []
    append = out.append
    try:
        for _ in range(count):
            start = pos
            b = data[pos]
            if b < 0x80:
                z = b
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (b & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                z, pos = read_raw(data, pos, 5)
            length = (z >> 1) ^ -(z & 1)
            record_end = pos + length
            if length < 6 or record_end > end:
                raise errors.InvalidRecordError(f"invalid record length {length} at byte {start}")
            pos += 1  # attributes
            b = data[pos]
            if b < 0x80:
                z = b
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (b & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                z, pos = read_raw(data, pos, 10)
            ts_delta = (z >> 1) ^ -(z & 1)
            b = data[pos]
            if b < 0x80:
                z = b
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (b & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                z, pos = read_raw(data, pos, 5)
            offset_delta = (z >> 1) ^ -(z & 1)
            b = data[pos]
            if b < 0x80:
                z = b
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (b & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                z, pos = read_raw(data, pos, 5)
            n = (z >> 1) ^ -(z & 1)
            if n < 0:
                key = None
            else:
                key = data[pos : pos + n]
                pos += n
            b = data[pos]
            value_null = b == 1  # zigzag(-1): the only negative length a record may have
            append((offset_delta, ts_delta, key, value_null, start, record_end))
            pos = record_end
    except (IndexError, VarintError) as exc:
        raise errors.InvalidRecordError(f"found invalid record structure: {exc}") from None
    if pos != end:
        raise errors.InvalidRecordError(f"{end - pos} bytes remain after {count} records")
    return out


def batch_has_null_key(buf, rel: int, header: B.BatchHeader) -> bool:
    """Whether any record of the v2 batch at ``buf[rel:]`` has a null key."""
    data, start, end = batch_records_buffer(buf, rel, header)
    return any(r[2] is None for r in scan_records(data, start, end, header.record_count))
