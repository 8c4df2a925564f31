"""Legacy message sets (magic 0 and 1, ``legacy_records``): read from real clients' bytes,
validated, converted to v2."""

from __future__ import annotations

import struct

import pytest
from aiokafka.record import default_records as aio_default
from aiokafka.record import legacy_records as aio_legacy
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder
from record_samples import (
    LEGACY_RECORDS,
    T0,
    check_batch,
    kp_legacy,
    legacy,
)

from odradek.protocol import batch as b
from odradek.protocol import compression as codecs
from odradek.protocol import errors
from odradek.protocol.batch_builder import build_batch
from odradek.protocol.legacy_records import LegacyBatch, convert_legacy_to_v2, validate_legacy
from odradek.protocol.record_batch import (
    decode_batch,
    iter_batches,
)

LEGACY_CASES = [
    (magic, codec, builder_cls)
    for magic in (0, 1)
    for codec, builder_cls in [
        (codecs.NONE, KpLegacyBuilder),
        (codecs.GZIP, KpLegacyBuilder),
        (codecs.SNAPPY, aio_legacy._LegacyRecordBatchBuilderPy),
        (codecs.LZ4, aio_legacy._LegacyRecordBatchBuilderPy),
    ]
    if not (magic == 0 and codec == codecs.LZ4)  # clients refuse; see test_legacy_lz4_magic_0
]


@pytest.mark.parametrize(("magic", "codec", "builder_cls"), LEGACY_CASES)
def test_legacy_from_real_clients(magic, codec, builder_cls):
    data = kp_legacy(magic, codec, LEGACY_RECORDS, builder_cls)
    assert validate_legacy(data) == len(LEGACY_RECORDS)
    decoded = [rec for batch in iter_batches(data) for rec in batch]
    want_ts = [t if magic else -1 for *_, t in LEGACY_RECORDS]
    assert [(d.key, d.value, d.timestamp) for d in decoded] == [
        (k, v, t) for (k, v, _), t in zip(LEGACY_RECORDS, want_ts, strict=True)
    ]
    assert [d.offset for d in decoded] == list(range(len(LEGACY_RECORDS)))

    converted = convert_legacy_to_v2(data)
    batches = list(iter_batches(converted))
    assert len(batches) == 1 and batches[0].compression == codec
    check_batch(converted)
    assert [(d.offset, d.key, d.value, d.timestamp) for d in batches[0]] == [
        (d.offset, d.key, d.value, d.timestamp) for d in decoded
    ]
    theirs = list(aio_default.DefaultRecordBatch(converted))
    assert [(t.key, t.value, t.timestamp) for t in theirs] == [(d.key, d.value, d.timestamp) for d in decoded]


def test_legacy_wrapper_offsets_and_log_append_time():
    inner = b"".join(legacy(i, b"v%d" % i, timestamp=T0 + i) for i in range(3))
    lat = b.TIMESTAMP_TYPE_BIT
    wrapper = legacy(
        1002, codecs.compress(codecs.GZIP, inner), attributes=codecs.GZIP | lat, timestamp=T0 + 99
    )
    (batch,) = iter_batches(wrapper)
    assert isinstance(batch, LegacyBatch) and batch.base_offset == 1000 and batch.last_offset == 1002
    assert [(d.offset, d.timestamp) for d in batch] == [(1000, T0 + 99), (1001, T0 + 99), (1002, T0 + 99)]
    converted = decode_batch(convert_legacy_to_v2(wrapper))
    assert converted.timestamp_type == b.LOG_APPEND_TIME and converted.max_timestamp == T0 + 99
    assert [(d.offset, d.timestamp) for d in converted] == [(1000, T0 + 99), (1001, T0 + 99), (1002, T0 + 99)]


def test_legacy_magic_0_wrapper_has_absolute_offsets():
    inner = b"".join(legacy(10 + i, b"v", magic=0) for i in range(3))
    wrapper = legacy(12, codecs.compress(codecs.SNAPPY, inner), magic=0, attributes=codecs.SNAPPY)
    assert [d.offset for d in decode_batch(wrapper)] == [10, 11, 12]


def test_legacy_lz4_magic_0():
    inner = legacy(0, b"old lz4", magic=0)
    frame = bytearray(codecs.compress(codecs.LZ4, inner))
    frame[6] = (codecs.xxh32_short(bytes(frame[:6])) >> 8) & 0xFF  # Kafka 0.8's checksum
    wrapper = legacy(0, bytes(frame), magic=0, attributes=codecs.LZ4)
    assert [d.value for d in decode_batch(wrapper)] == [b"old lz4"]
    assert validate_legacy(wrapper) == 1


def test_convert_mixed_legacy_set():
    data = (
        legacy(0, b"a", magic=0)
        + legacy(1, b"b", timestamp=T0)
        + legacy(2, b"c", attributes=b.TIMESTAMP_TYPE_BIT, timestamp=T0 + 1)
        + legacy(4, codecs.compress(codecs.GZIP, legacy(0, b"d") + legacy(1, b"e")), attributes=codecs.GZIP)
        + legacy(0, b"f")  # producers often leave offsets at 0: renumbered
        + legacy(0, b"g")
    )
    converted = list(iter_batches(convert_legacy_to_v2(data)))
    assert [(x.compression, x.timestamp_type) for x in converted] == [
        (0, b.CREATE_TIME),
        (0, b.LOG_APPEND_TIME),
        (codecs.GZIP, b.CREATE_TIME),
        (0, b.CREATE_TIME),
    ]
    rows = [(d.offset, d.value, d.timestamp) for x in converted for d in x]
    assert rows == [
        (0, b"a", -1),
        (1, b"b", T0),
        (2, b"c", T0 + 1),
        (3, b"d", T0),
        (4, b"e", T0),
        (0, b"f", T0),
        (1, b"g", T0),
    ]


def test_validate_legacy_errors():
    good = legacy(0, b"x")
    with pytest.raises(errors.CorruptMessageError):
        validate_legacy(legacy(0, b"x", crc=123))
    with pytest.raises(errors.CorruptMessageError):
        validate_legacy(good[:-1])
    with pytest.raises(errors.CorruptMessageError):
        validate_legacy(good[:16] + b"\x07" + good[17:])  # unknown magic
    with pytest.raises(errors.MessageTooLargeError):
        validate_legacy(good, max_message_bytes=len(good) - 1)
    bad_inner = legacy(0, codecs.compress(codecs.GZIP, legacy(0, b"x", crc=1)), attributes=codecs.GZIP)
    with pytest.raises(errors.CorruptMessageError):
        validate_legacy(bad_inner)
    nested = legacy(0, codecs.compress(codecs.GZIP, legacy(0, b"zz", attributes=codecs.GZIP)), attributes=1)
    with pytest.raises(errors.InvalidRecordError):
        validate_legacy(nested)
    mixed_magic = legacy(0, codecs.compress(codecs.GZIP, legacy(0, b"x", magic=0)), attributes=codecs.GZIP)
    with pytest.raises(errors.InvalidRecordError):
        validate_legacy(mixed_magic)
    with pytest.raises(errors.UnsupportedCompressionTypeError):
        validate_legacy(legacy(0, codecs.compress(codecs.ZSTD, good), attributes=codecs.ZSTD))
    with pytest.raises(errors.UnsupportedCompressionTypeError):
        validate_legacy(legacy(0, b"x", attributes=6))
    with pytest.raises(errors.InvalidRecordError):
        validate_legacy(good + build_batch([(b"k", b"v", (), T0)]))
    short = struct.pack(">qiIbb", 0, 6, 0, 0, 0)
    with pytest.raises(errors.CorruptMessageError):
        validate_legacy(short)
    with pytest.raises(errors.CorruptMessageError):
        decode_batch(legacy(0, b"x", crc=5))
