"""The record codec: v2 batches both ways, legacy message sets, validation, recompression.

kafka-python and aiokafka (its Cython and pure-Python builders) serve as independent
oracles: they parse what we build and we parse what they build.
"""

from __future__ import annotations

import random
import struct
import zlib

import pytest
from aiokafka.record import default_records as aio_default
from aiokafka.record import legacy_records as aio_legacy
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder

from odradek.protocol import batch as b
from odradek.protocol import compression as codecs
from odradek.protocol import errors
from odradek.protocol.batch_builder import BatchBuilder, build_batch, encode_batch
from odradek.protocol.batch_checks import validate_batch
from odradek.protocol.control_records import (
    ABORT,
    COMMIT,
    EndTxnMarker,
    build_control_batch,
    decode_control_key,
    decode_end_txn_marker,
)
from odradek.protocol.legacy_records import LegacyBatch, convert_legacy_to_v2, validate_legacy
from odradek.protocol.record_batch import (
    RecordBatch,
    decode_batch,
    iter_batches,
    iter_records,
    recompress_batch,
    records_have_null_keys,
)
from odradek.protocol.record_decoders import _decode_fast, _decode_uniform, decode_records
from odradek.protocol.records import (
    DecodedRecord,
    NewRecord,
    Record,
    decode_records_one_by_one,
    encode_record,
    estimate_record_size,
)

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


# -- v2 round trips -----------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_codec(codec):
    records = sample()
    data = build_batch(records, compression=codec, base_offset=1000)
    batch = decode_batch(data)
    assert isinstance(batch, RecordBatch)
    assert batch.compression == codec
    assert batch.header.record_count == len(records)
    assert batch.base_offset == 1000 and batch.last_offset == 1000 + len(records) - 1
    assert batch.header.base_timestamp == records[0][3]
    assert batch.max_timestamp == max(t for *_, t in records)
    decoded = batch.records()
    assert [d.offset for d in decoded] == list(range(1000, 1000 + len(records)))
    assert as_plain(decoded) == expected(records)
    raw = batch.raw_records()
    assert [x.offset_delta for x in raw] == list(range(len(records)))
    assert any(x.timestamp_delta < 0 for x in raw)


def test_batch_header_fields():
    data = build_batch(
        [(b"k", b"v", (), T0)],
        base_offset=42,
        producer_id=77,
        producer_epoch=3,
        base_sequence=9,
        transactional=True,
        partition_leader_epoch=5,
        timestamp_type=b.LOG_APPEND_TIME,
        compression=codecs.LZ4,
    )
    h = b.read_header(data)
    assert h.size == len(data) and h.magic == 2
    assert (h.base_offset, h.partition_leader_epoch, h.last_offset_delta, h.record_count) == (42, 5, 0, 1)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (77, 3, 9)
    assert h.is_transactional and not h.is_control
    assert h.compression == codecs.LZ4 and h.timestamp_type == b.LOG_APPEND_TIME
    assert b.crc_is_valid(data, 0, h)


def test_large_batch_and_varint_boundaries():
    records = [(b"k" * (i % 200), b"v" * (i * 37 % 20_000), (), T0 + i * 1000) for i in range(10_000)]
    data = build_batch(records, compression=codecs.ZSTD)
    decoded = decode_batch(data).records()
    assert len(decoded) == 10_000
    assert decoded[-1].offset == 9_999 and decoded[-1].timestamp == T0 + 9_999_000
    assert as_plain(decoded) == expected(records)


def test_timestamps_default_to_now_and_base_timestamp_is_honoured():
    data = build_batch(
        [NewRecord(b"a", b"1"), NewRecord(b"b", b"2", timestamp=T0)], base_timestamp=T0 - 5
    )
    h = b.read_header(data)
    assert h.base_timestamp == T0 - 5
    first, second = decode_batch(data).records()
    assert first.timestamp > T0 and second.timestamp == T0
    assert h.max_timestamp == first.timestamp


def test_empty_build_is_an_error_but_empty_encode_is_not():
    with pytest.raises(ValueError):
        build_batch([])
    data = encode_batch(
        [], base_offset=10, last_offset_delta=4, producer_id=1, producer_epoch=0, base_sequence=3
    )
    h = b.read_header(data)
    assert (h.record_count, h.last_offset_delta, h.next_offset) == (0, 4, 15)
    assert decode_batch(data).records() == []
    validate_batch(data, max_message_bytes=1 << 20, from_client=False)


def test_encode_batch_with_gaps_keeps_deltas():
    records = [
        Record(0, 0, b"a", b"1"),
        Record(5, -3, b"b", None, [("h", b"x")]),
        Record(9, 12, None, b"3"),
    ]
    data = encode_batch(records, base_offset=100, base_timestamp=T0)
    batch = decode_batch(data)
    assert batch.header.last_offset_delta == 9 and batch.header.record_count == 3
    assert batch.max_timestamp == T0 + 12
    assert [(d.offset, d.timestamp) for d in batch] == [(100, T0), (105, T0 - 3), (109, T0 + 12)]
    assert batch.raw_records()[1].headers == (("h", b"x"),)


def test_batch_builder_matches_build_batch():
    records = sample(100)
    builder = BatchBuilder(codecs.SNAPPY)
    sizes = b.HEADER_SIZE
    for i, (k, v, hs, t) in enumerate(records):
        assert builder.append(k, v, hs, t) == i
        assert builder.size_in_bytes > sizes
        sizes = builder.size_in_bytes
    assert len(builder) == 100
    built = builder.build(base_offset=7, producer_id=1, producer_epoch=2, base_sequence=3)
    assert built == build_batch(
        records, compression=codecs.SNAPPY, base_offset=7, producer_id=1, producer_epoch=2, base_sequence=3
    )
    uncompressed = BatchBuilder()
    for k, v, hs, t in records:
        uncompressed.append(k, v, hs, t)
    assert uncompressed.size_in_bytes == len(uncompressed.build())


def test_estimate_record_size_is_an_upper_bound():
    for k, v, hs, _ in sample(60):
        exact = len(encode_record(Record(2**31 - 1, -(2**62), k, v, hs)))
        assert exact <= estimate_record_size(k, v, hs)


def test_encode_record_bytes():
    # length 7 | attrs 0 | ts delta 1 -> 02 | offset delta 2 -> 04 | key "k" | value null | no headers
    assert (
        encode_record(Record(2, 1, b"k", None)).hex()
        == "0e" + "00" + "02" + "04" + "02" + "6b" + "01" + "00"
    )


# -- oracles ------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [codecs.NONE, codecs.GZIP])
def test_kafka_python_reads_ours(codec):
    records = sample()
    data = build_batch(
        records, compression=codec, base_offset=5, producer_id=9, producer_epoch=1, base_sequence=0
    )
    theirs = KpBatch(bytearray(data))
    assert theirs.validate_crc()
    assert (theirs.base_offset, theirs.producer_id, theirs.base_sequence) == (5, 9, 0)
    got = list(theirs)
    assert [g.offset for g in got] == list(range(5, 5 + len(records)))
    assert as_plain(got) == expected(records)


@pytest.mark.parametrize("codec", [codecs.NONE, codecs.GZIP])
def test_we_read_kafka_python(codec):
    records = sample()
    builder = KpBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, (k, v, hs, t) in enumerate(records):
        builder.append(i, timestamp=t, key=k, value=v, headers=hs)
    data = bytes(builder.build())
    validate_batch(data, max_message_bytes=1 << 20)
    assert as_plain(decode_batch(data)) == expected(records)


AIO_BUILDERS = [aio_default.DefaultRecordBatchBuilder, aio_default._DefaultRecordBatchBuilderPy]
AIO_READERS = [aio_default.DefaultRecordBatch, aio_default._DefaultRecordBatchPy]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("builder_cls", AIO_BUILDERS, ids=["cython", "python"])
def test_we_read_aiokafka(codec, builder_cls):
    records = sample()
    builder = builder_cls(2, codec, 0, 3, 4, 5, 1 << 20)
    for i, (k, v, hs, t) in enumerate(records):
        builder.append(i, timestamp=t, key=k, value=v, headers=hs)
    data = bytes(builder.build())
    h = validate_batch(data, max_message_bytes=1 << 20)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (3, 4, 5)
    assert as_plain(decode_batch(data)) == expected(records)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("reader_cls", AIO_READERS, ids=["cython", "python"])
def test_aiokafka_reads_ours(codec, reader_cls):
    records = sample()
    data = build_batch(records, compression=codec, base_offset=3)
    theirs = reader_cls(data)
    assert theirs.validate_crc()
    got = list(theirs)
    assert [g.offset for g in got] == list(range(3, 3 + len(records)))
    assert as_plain(got) == expected(records)


# -- log append time, corruption, truncation ----------------------------------------------


def test_log_append_time_overrides_record_timestamps():
    data = bytearray(build_batch(sample(5)))
    b.set_log_append_time(data, 0, T0 + 123)
    batch = decode_batch(bytes(data))
    assert {d.timestamp for d in batch} == {T0 + 123}
    assert [d.timestamp_delta for d in batch.raw_records()] == [
        x.timestamp_delta for x in decode_batch(build_batch(sample(5))).raw_records()
    ]


def test_crc_corruption_detected():
    data = bytearray(build_batch(sample(), compression=codecs.GZIP))
    data[-5] ^= 0x40
    with pytest.raises(errors.CorruptMessageError):
        decode_batch(bytes(data))
    with pytest.raises(errors.CorruptMessageError):
        validate_batch(data, max_message_bytes=1 << 20)
    with pytest.raises(errors.CorruptMessageError):
        list(iter_batches(bytes(data)))
    # the offset prefix and the leader epoch are outside the CRC
    ok = bytearray(build_batch(sample()))
    b.set_base_offset(ok, 0, 999)
    b.set_partition_leader_epoch(ok, 0, 12)
    assert decode_batch(ok).base_offset == 999


def test_iter_batches_tolerates_a_partial_tail():
    batches = [build_batch(sample(3 + i), base_offset=100 * i, compression=CODECS[i]) for i in range(4)]
    whole = b"".join(batches)
    for cut in (len(whole) - 1, len(whole) - len(batches[-1]) + 30, len(whole) - len(batches[-1]) + 5):
        got = list(iter_batches(whole[:cut]))
        assert [x.base_offset for x in got] == [0, 100, 200]
    got = list(iter_batches(whole))
    assert [x.base_offset for x in got] == [0, 100, 200, 300]
    assert len(list(iter_records(bytearray(whole)))) == 3 + 4 + 5 + 6
    assert list(iter_batches(memoryview(whole)[: len(batches[0])]))[0].data == batches[0]
    with pytest.raises(errors.CorruptMessageError):
        decode_batch(whole[: len(batches[0]) - 1])


def _patched(data: bytes, fmt: str, offset: int, value, fix_crc: bool = True) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    if fix_crc:
        b.write_crc(out)
    return bytes(out)


def _patch_records(data: bytes, records_bytes: bytes, count: int | None = None) -> bytes:
    out = bytearray(data[: b.HEADER_SIZE] + records_bytes)
    struct.pack_into(">i", out, 8, len(out) - 12)
    if count is not None:
        struct.pack_into(">i", out, 57, count)
    b.write_crc(out)
    return bytes(out)


def test_malformed_records_are_invalid_records():
    data = build_batch([(b"k", b"value", [("h", b"x")], T0), (b"k2", b"v2", (), T0)])
    body = data[b.HEADER_SIZE :]
    first = encode_record(Record(0, 0, b"k", b"value", [("h", b"x")]))
    cases = {
        "count too high": _patch_records(data, body, count=3),
        "count too low": _patch_records(data, body, count=1),
        "trailing bytes": _patch_records(data, body + b"\x00"),
        "cut record": _patch_records(data, body[:-2]),
        "length too long": _patch_records(data, bytes([first[0] + 2]) + body[1:]),
        "length too short": _patch_records(data, bytes([first[0] - 2]) + body[1:]),
        "negative header count": _patch_records(data, first[:-5] + b"\x03" + first[-4:] + body[len(first) :]),
        "bad header key utf-8": _patch_records(data, first[:-3] + b"\xff" + first[-2:] + body[len(first) :]),
        "negative header key length": _patch_records(
            data, first[:-4] + b"\x03" + first[-3:] + body[len(first) :]
        ),
        "overlong varint": _patch_records(data, b"\xff\xff\xff\xff\xff\xff\x01" + body[7:]),
    }
    for name, bad in cases.items():
        batch = decode_batch(bad)  # the CRC is fine
        with pytest.raises(errors.InvalidRecordError):
            batch.records()
            pytest.fail(name)


def test_corrupt_compressed_payload():
    data = build_batch(sample(), compression=codecs.ZSTD)
    bad = _patch_records(data, data[b.HEADER_SIZE : -10] + b"\x00" * 10)
    with pytest.raises(errors.CorruptMessageError):
        decode_batch(bad).records()


# -- validation ---------------------------------------------------------------------------


def test_validate_batch_accepts_good_batches():
    data = build_batch(
        sample(), compression=codecs.SNAPPY, producer_id=1, producer_epoch=0, base_sequence=0
    )
    h = validate_batch(data, max_message_bytes=len(data))
    assert h == b.read_header(data)
    padded = b"\x00" * 7 + data
    assert validate_batch(padded, 7, b.read_header(padded, 7), max_message_bytes=len(data)) == h


def test_validate_batch_errors():
    data = build_batch(sample(3), producer_id=1, producer_epoch=0, base_sequence=0)
    mb = 1 << 20
    cases = [
        (_patched(data, ">b", 16, 3, fix_crc=False), errors.CorruptMessageError),  # unknown magic
        (_patched(data, ">b", 16, 1, fix_crc=False), errors.InvalidRecordError),  # legacy magic
        (data[:-1], errors.CorruptMessageError),  # truncated
        (_patched(data, ">i", 8, 40), errors.CorruptMessageError),  # shorter than a header
        (_patched(data, ">i", 57, 2), errors.InvalidRecordError),  # count != lastOffsetDelta + 1
        (_patched(data, ">i", 57, 0), errors.InvalidRecordError),  # empty from a client
        (_patched(data, ">i", 23, -1), errors.InvalidRecordError),  # invalid offset range
        (_patched(data, ">h", 21, 5), errors.UnsupportedCompressionTypeError),
        (_patched(data, ">h", 21, b.CONTROL_BIT), errors.InvalidRecordError),  # control from a client
        (_patched(data, ">i", 53, -1), errors.InvalidRecordError),  # producer id without sequence
        (data[:40], errors.CorruptMessageError),
    ]
    for bad, error in cases:
        with pytest.raises(error):
            validate_batch(bad, max_message_bytes=mb)
    with pytest.raises(errors.MessageTooLargeError):
        validate_batch(data, max_message_bytes=len(data) - 1)
    # the broker's own batches (replication, recovery) may have compaction gaps
    gappy = _patched(data, ">i", 57, 2)
    assert validate_batch(gappy, max_message_bytes=mb, from_client=False).record_count == 2
    with pytest.raises(errors.InvalidRecordError):
        validate_batch(_patched(data, ">i", 57, 4), max_message_bytes=mb, from_client=False)


# -- control batches ----------------------------------------------------------------------


@pytest.mark.parametrize("control_type", [ABORT, COMMIT])
def test_control_batches(control_type):
    data = build_control_batch(
        control_type, producer_id=11, producer_epoch=2, coordinator_epoch=7, base_offset=50, timestamp=T0
    )
    batch = decode_batch(data)
    assert batch.is_control and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (11, 2, -1)
    assert batch.end_txn_marker() == EndTxnMarker(control_type, 7)
    (record,) = batch.records()
    assert record.offset == 50 and record.timestamp == T0
    assert decode_control_key(record.key) == (0, control_type)
    assert decode_end_txn_marker(record.value) == (0, 7)
    assert record.key == struct.pack(">hh", 0, control_type)
    assert record.value == struct.pack(">hi", 0, 7)
    (theirs,) = list(KpBatch(bytearray(data)))  # kafka-python sees a ControlRecord
    assert theirs.type == control_type and (theirs.commit if control_type else theirs.abort)
    validate_batch(data, max_message_bytes=1 << 20, from_client=False)
    with pytest.raises(errors.InvalidRecordError):
        validate_batch(data, max_message_bytes=1 << 20)


def test_iter_records_skips_control_batches():
    stream = (
        build_batch(
            [(b"a", b"1", (), T0)], base_offset=0, producer_id=1, producer_epoch=0, transactional=True
        )
        + build_control_batch(COMMIT, producer_id=1, producer_epoch=0, base_offset=1)
        + build_batch([(b"b", b"2", (), T0)], base_offset=2)
    )
    assert [x.offset for x in iter_records(stream)] == [0, 2]
    assert [x.offset for x in iter_records(stream, include_control=True)] == [0, 1, 2]
    assert decode_batch(stream).end_txn_marker() is None


def test_control_key_errors():
    with pytest.raises(errors.InvalidRecordError):
        decode_control_key(b"\x00")
    with pytest.raises(errors.InvalidRecordError):
        decode_control_key(struct.pack(">hh", -1, 0))
    with pytest.raises(errors.InvalidRecordError):
        decode_end_txn_marker(None)
    assert decode_control_key(struct.pack(">hhxx", 3, 1)) == (3, 1)  # newer versions still readable


# -- recompression and keys ---------------------------------------------------------------


@pytest.mark.parametrize("source", CODECS)
@pytest.mark.parametrize("target", CODECS)
def test_recompress_batch(source, target):
    records = sample(25)
    data = bytearray(
        build_batch(
            records,
            compression=source,
            base_offset=500,
            producer_id=8,
            producer_epoch=1,
            base_sequence=40,
            transactional=True,
            partition_leader_epoch=6,
        )
    )
    b.set_log_append_time(data, 0, T0 + 5000)
    out = recompress_batch(b"junk" + bytes(data), target, pos=4)
    before, after = b.read_header(data), b.read_header(out)
    assert after.compression == target
    assert after.attributes & ~b.COMPRESSION_MASK == before.attributes & ~b.COMPRESSION_MASK
    same = ("base_offset", "partition_leader_epoch", "last_offset_delta", "base_timestamp", "max_timestamp")
    same += ("producer_id", "producer_epoch", "base_sequence", "record_count")
    assert [getattr(after, f) for f in same] == [getattr(before, f) for f in same]
    assert decode_batch(out).raw_records() == decode_batch(bytes(data)).raw_records()
    validate_batch(out, max_message_bytes=1 << 20)


def test_recompress_refuses_corrupt_input():
    data = bytearray(build_batch(sample(5)))
    data[-1] ^= 1
    with pytest.raises(errors.CorruptMessageError):
        recompress_batch(data, codecs.GZIP)
    with pytest.raises(errors.UnsupportedCompressionTypeError):
        recompress_batch(build_batch(sample(5)), 6)


def test_records_have_null_keys():
    keyed = build_batch([(b"k", b"v", (), T0)] * 3, compression=codecs.LZ4)
    keyless = build_batch([(b"k", b"v", (), T0), (None, b"v", (), T0)], compression=codecs.LZ4)
    assert not records_have_null_keys(keyed)
    assert records_have_null_keys(keyless)
    assert records_have_null_keys(decode_batch(keyless))


# -- legacy message sets ------------------------------------------------------------------


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
    validate_batch(converted, max_message_bytes=1 << 20)
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


def test_mixed_fetch_response_of_legacy_and_v2():
    stream = (
        legacy(0, b"old") + build_batch([(b"k", b"new", (), T0)], base_offset=1) + legacy(2, b"cut")[:-3]
    )
    batches = list(iter_batches(stream))
    assert [type(x).__name__ for x in batches] == ["LegacyBatch", "RecordBatch"]
    assert [d.value for d in iter_records(stream)] == [b"old", b"new"]
    assert records_have_null_keys(batches[0])


def test_iter_batches_rejects_garbage_but_not_short_tails():
    data = build_batch(sample(3))
    assert list(iter_batches(data + data[:16])) != []  # too short to read the magic: a tail
    with pytest.raises(errors.CorruptMessageError):
        list(iter_batches(data + struct.pack(">qi", 0, 3) + b"\x00" * 60))  # length below any message
    with pytest.raises(errors.CorruptMessageError):
        list(iter_batches(data + _patched(data, ">b", 16, 9, fix_crc=False)))  # unknown magic
    with pytest.raises(errors.CorruptMessageError):
        list(iter_batches(_patched(data, ">i", 8, 30)))  # v2 batch smaller than its header
    assert len(list(iter_batches(data + b"\xff" * 11))) == 1


def test_mutated_input_raises_only_kafka_errors():
    """Hostile bytes must end in a Kafka error, never another exception."""
    rng = random.Random(1234)
    seeds = [build_batch(sample(6), compression=codec) for codec in CODECS]
    seeds += [kp_legacy(1, codecs.GZIP, LEGACY_RECORDS[:4]), legacy(0, b"v", b"k", magic=0)]
    for _ in range(3000):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.3:
            del data[rng.randrange(len(data)) :]
        if len(data) >= b.HEADER_SIZE and data[b.MAGIC_OFFSET] == 2 and rng.random() < 0.7:
            struct.pack_into(">i", data, 8, len(data) - 12)
            b.write_crc(data)  # get past the CRC into the records
        data = bytes(data)
        for attempt in ATTEMPTS:
            try:
                attempt(data)
            except errors.KafkaError:
                pass


ATTEMPTS = [
    lambda data: [list(x) for x in iter_batches(data, check_crc=False)],
    lambda data: list(decode_batch(data, check_crc=False)),
    lambda data: validate_batch(data, max_message_bytes=1 << 20),
    lambda data: validate_legacy(data),
    lambda data: convert_legacy_to_v2(data),
    lambda data: records_have_null_keys(data),
]


# -- the bulk decoders -------------------------------------------------------------------


class _MyRecord(tuple):
    __slots__ = ()


@pytest.mark.parametrize("size", [0, 1, 60, 61, 100, 1000, 8200])
@pytest.mark.parametrize("count", [1, 8, 9, 63, 64, 65, 400])
@pytest.mark.parametrize("spread", [0, 60, 9000])
def test_bulk_decoders_match_the_record_loop(size, count, spread):
    """The uniform (regex) and fast paths give exactly what the general loop gives."""
    rng = random.Random(size * 1000 + count + spread)
    value = rng.randbytes(size)
    data = build_batch([(None, value, (), T0 + rng.randrange(spread + 1)) for _ in range(count)])
    batch = decode_batch(data)
    h = batch.header
    payload, start, end = batch._payload()
    want = decode_records_one_by_one(payload, start, end, count, _MyRecord, 7, h.base_timestamp, None)
    assert decode_records(payload, start, end, count, _MyRecord, 7, h.base_timestamp) == want
    for decoder in (_decode_uniform, _decode_fast):
        got = decoder(payload, start, end, count, _MyRecord, 7, h.base_timestamp, None)
        assert got is None or got == want
    assert batch.records(_MyRecord) == [_MyRecord((o + h.base_offset - 7, *rest)) for o, *rest in want]
    assert all(type(x) is _MyRecord for x in batch.records(_MyRecord))
    # one corrupt byte: a bulk path either declines or agrees with the general loop
    for _ in range(30):
        bad = bytearray(payload)
        i = rng.randrange(start, end)
        bad[i] = rng.randrange(256)
        bad = bytes(bad)
        try:
            slow = decode_records_one_by_one(bad, start, end, count, _MyRecord, 7, h.base_timestamp, None)
        except errors.InvalidRecordError:
            slow = None
        for decoder in (_decode_uniform, _decode_fast):
            got = decoder(bad, start, end, count, _MyRecord, 7, h.base_timestamp, None)
            assert got is None or got == slow


def test_bulk_decoders_decline_mixed_batches():
    """Keys, headers, mixed value sizes and gaps in offsets fall back and still decode right."""
    recs = [
        (b"k", b"v" * 10, (), T0),
        (None, b"v" * 11, (("h", b"x"),), T0 + 1),
        (None, None, (), T0 + 2),
        (b"", b"", (), T0 + 3),
    ] * 5
    data = build_batch(recs)
    batch = decode_batch(data)
    payload, start, end = batch._payload()
    assert _decode_uniform(payload, start, end, len(recs), DecodedRecord, 0, T0, None) is None
    got = batch.records()
    assert [(x.key, x.value, tuple(x.headers)) for x in got] == [(k, v, h) for k, v, h, _ in recs]
    assert [x.offset for x in got] == list(range(len(recs)))
    gap = encode_batch([Record(i * 2, i, None, b"x" * 5) for i in range(20)], base_offset=100)
    gb = decode_batch(gap)
    assert [x.offset for x in gb.records()] == [100 + 2 * i for i in range(20)]


def test_bulk_decoder_log_append_time():
    data = build_batch(
        [(None, b"x" * 50, (), T0 + i) for i in range(100)], timestamp_type=b.LOG_APPEND_TIME
    )
    batch = decode_batch(data)
    got = batch.records()
    assert [x.timestamp for x in got] == [batch.max_timestamp] * 100
    assert [x.offset for x in got] == list(range(100))
