"""Batch builders for the storage tests: kafka-python's builder as the oracle, plus a hand-rolled
struct + crc32c builder for fields kafka-python will not set (control bit, odd timestamps).
"""

from __future__ import annotations

import struct
import time

import crc32c
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def now_ms() -> int:
    return int(time.time() * 1000)


def kbatch(
    n: int = 1,
    *,
    value: bytes = b"v" * 50,
    ts: int | None = None,
    ts_step: int = 0,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    codec: int = 0,
    transactional: bool = False,
) -> bytes:
    """A real v2 batch from kafka-python: ``n`` records, timestamps ts, ts+step, ..."""
    b = DefaultRecordBatchBuilder(2, codec, transactional, pid, epoch, seq, 1 << 24)
    ts = now_ms() if ts is None else ts
    for i in range(n):
        b.append(i, ts + i * ts_step, b"k%d" % i, value, [])
    return bytes(b.build())


def _varint(v: int) -> bytes:
    v = (v << 1) ^ (v >> 63)
    out = bytearray()
    while v & ~0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def hbatch(
    timestamps: list[int],
    *,
    base_offset: int = 0,
    attributes: int = 0,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    leader_epoch: int = -1,
    record_count: int | None = None,
    last_offset_delta: int | None = None,
    magic: int = 2,
    codec: int = 0,
    xerial: bool = False,
) -> bytes:
    """A hand-built v2 batch, one record per timestamp; ``codec`` compresses it with cramjam
    (snappy raw, or xerial-framed as the Java client writes it)."""
    base_ts = timestamps[0]
    records = bytearray()
    for i, ts in enumerate(timestamps):
        body = b"\x00" + _varint(ts - base_ts) + _varint(i) + _varint(-1) + _varint(3) + b"abc" + _varint(0)
        records += _varint(len(body)) + body
    if codec:
        records = _compress(codec, bytes(records), xerial)
        attributes |= codec
    count = len(timestamps) if record_count is None else record_count
    delta = len(timestamps) - 1 if last_offset_delta is None else last_offset_delta
    after_crc = (
        struct.pack(">hiqqqhii", attributes, delta, base_ts, max(timestamps), pid, epoch, seq, count)
        + records
    )
    crc = crc32c.crc32c(after_crc)
    length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", base_offset, length, leader_epoch, magic, crc) + after_crc


def _compress(codec: int, data: bytes, xerial: bool) -> bytes:
    import cramjam

    if codec == 1:
        return bytes(cramjam.gzip.compress(data))
    if codec == 2:
        raw = bytes(cramjam.snappy.compress_raw(data))
        if xerial:
            return b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(raw)) + raw
        return raw
    if codec == 3:  # independent blocks, as Kafka's clients write (and its readers insist on)
        compressor = cramjam.lz4.Compressor(block_linked=False)
        compressor.compress(data)
        return bytes(compressor.finish())
    return bytes(cramjam.zstd.compress(data))


def parse(data: bytes) -> list[DefaultRecordBatch]:
    """Batches of a fetched slice, parsed by kafka-python (the oracle)."""
    mr = MemoryRecords(data)
    out = []
    while True:
        batch = mr.next_batch()
        if batch is None:
            return out
        out.append(batch)


def offsets_of(data: bytes) -> list[int]:
    return [r.offset for b in parse(data) for r in b]


def zeros_batch(value_size: int, *, key: bytes | None = b"k", ts: int = 1_700_000_000_000) -> bytes:
    """A zstd v2 batch of one record whose value is ``value_size`` zeros: a few KB that
    decompress to ``value_size`` bytes and more. Compressed 1 MiB at a time, so building a
    300 MB one costs the test no 300 MB."""
    import zstandard

    key_part = _varint(-1) if key is None else _varint(len(key)) + key
    body_head = b"\x00" + _varint(0) + _varint(0) + key_part + _varint(value_size)
    body_len = len(body_head) + value_size + 1  # + the header count
    compressor = zstandard.ZstdCompressor().compressobj()
    parts = [compressor.compress(_varint(body_len) + body_head)]
    chunk = bytes(min(value_size, 1 << 20))
    left = value_size
    while left:
        n = min(left, len(chunk))
        parts.append(compressor.compress(chunk[:n]))
        left -= n
    parts.append(compressor.compress(_varint(0)))
    parts.append(compressor.flush())
    records = b"".join(parts)
    after_crc = struct.pack(">hiqqqhii", CODECS["zstd"], 0, ts, ts, -1, -1, -1, 1) + records
    length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", 0, length, -1, 2, crc32c.crc32c(after_crc)) + after_crc
