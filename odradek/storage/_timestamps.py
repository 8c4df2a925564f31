"""Per-record (offset, timestamp) of one v2 batch: only for ListOffsets by timestamp.

The append and read paths never look inside a batch. Finding the first record with a
timestamp >= T (or the record holding the max timestamp) needs each record's timestamp
delta and offset delta, so this rare path decodes just those two varints per record,
decompressing first when the batch is compressed (gzip, snappy with or without xerial
framing, lz4 frame, zstd; via cramjam). Storage keeps this to itself so it does not depend
on ``odradek.protocol.record_batch``.
"""

from __future__ import annotations

import struct

from ..protocol import batch as B

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_INT32 = struct.Struct(">i")


def _decompress(codec: int, data: bytes) -> bytes:
    import cramjam

    if codec == 1:
        return bytes(cramjam.gzip.decompress(data))
    if codec == 2:
        if data[:8] == _XERIAL_MAGIC:
            out = []
            pos = 16
            while pos + 4 <= len(data):
                (n,) = _INT32.unpack_from(data, pos)
                pos += 4
                out.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + n])))
                pos += n
            return b"".join(out)
        return bytes(cramjam.snappy.decompress_raw(data))
    if codec == 3:
        return bytes(cramjam.lz4.decompress(data))
    if codec == 4:
        return bytes(cramjam.zstd.decompress(data))
    raise ValueError(f"Unknown compression codec {codec}")


def _varint(buf, pos: int) -> tuple[int, int]:
    shift = 0
    value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7


def record_timestamps(buf, pos: int = 0) -> list[tuple[int, int]]:
    """[(offset, timestamp)] of every record in the v2 batch at ``buf[pos:]``."""
    h = B.read_header(buf, pos)
    if h.timestamp_type == B.LOG_APPEND_TIME:
        return [(h.base_offset + i, h.max_timestamp) for i in range(h.last_offset_delta + 1)]
    body = bytes(memoryview(buf)[pos + B.HEADER_SIZE : pos + h.size])
    if h.compression:
        body = _decompress(h.compression, body)
    out = []
    p = 0
    end = len(body)
    for _ in range(h.record_count):
        if p >= end:
            break
        length, p = _varint(body, p)
        record_end = p + length
        p += 1  # attributes
        ts_delta, p = _varint(body, p)
        off_delta, p = _varint(body, p)
        out.append((h.base_offset + off_delta, h.base_timestamp + ts_delta))
        p = record_end
    return out
