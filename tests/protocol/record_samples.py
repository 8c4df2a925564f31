"""Records and batches shared by the record codec tests (tests/protocol/test_record_*.py etc.)."""

from __future__ import annotations

import struct
import zlib

from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder

from odradek.protocol import batch as b
from odradek.protocol import compression as codecs

CODECS = [codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD]
T0 = 1_700_000_000_000


def sample(n: int = 40) -> list[tuple]:
    """Records with every feature: null keys and values, headers (null values too),
    timestamps going backwards from the first (negative deltas), empty bytes."""
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else b"key-%d" % i
        value = None if i % 11 == 5 else (b"" if i % 13 == 0 else bytes([i % 256]) * (i * 9))
        headers = (
            [("trace", b"t%d" % i), ("empty", b""), ("none", None), ("ünï", b"\x00")] if i % 4 == 1 else []
        )
        out.append((key, value, headers, T0 + ((i * 7919 + 1000) % 2000) - 1000))
    return out


def as_plain(records) -> list[tuple]:
    return [(rec.key, rec.value, [tuple(h) for h in rec.headers], rec.timestamp) for rec in records]


def expected(records) -> list[tuple]:
    return [(k, v, [tuple(h) for h in hs], t) for k, v, hs, t in records]


def patched(data: bytes, fmt: str, offset: int, value, fix_crc: bool = True) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    if fix_crc:
        b.write_crc(out)
    return bytes(out)


def patch_records(data: bytes, records_bytes: bytes, count: int | None = None) -> bytes:
    out = bytearray(data[: b.HEADER_SIZE] + records_bytes)
    struct.pack_into(">i", out, 8, len(out) - 12)
    if count is not None:
        struct.pack_into(">i", out, 57, count)
    b.write_crc(out)
    return bytes(out)


def legacy(offset, value, key=None, *, magic=1, attributes=0, timestamp=T0, crc=None) -> bytes:
    """A legacy message built by hand (an oracle independent of the code under test)."""

    def sized(x):
        return struct.pack(">i", -1) if x is None else struct.pack(">i", len(x)) + x

    body = struct.pack(">bb", magic, attributes) + (struct.pack(">q", timestamp) if magic else b"")
    body += sized(key) + sized(value)
    message = struct.pack(">I", zlib.crc32(body) if crc is None else crc) + body
    return struct.pack(">qi", offset, len(message)) + message


def kp_legacy(magic, codec, records, builder_cls=KpLegacyBuilder) -> bytes:
    builder = builder_cls(magic, codec, 1 << 20)
    for i, (k, v, t) in enumerate(records):
        builder.append(i, timestamp=t, key=k, value=v)
    return bytes(builder.build())


LEGACY_RECORDS = [(b"k%d" % i if i % 3 else None, b"v" * i if i % 4 else None, T0 + i) for i in range(12)]


def check_batch(data, *, from_client: bool = True):
    """The produce path's checks of one v2 batch (storage's LogValidator, 1 MiB limit); its header."""
    from odradek.storage import LogConfig
    from odradek.storage.log_validator import LogValidator

    validator = LogValidator(LogConfig.from_dict({"max.message.bytes": str(1 << 20)}), "t-0")
    return validator.check_batch(data, from_client=from_client)
