"""v2 record batches both ways (``batch_builder``, ``record_batch``): round trips with every codec,
real clients as oracles, corruption and truncation, recompression, hostile bytes.

kafka-python and aiokafka (its Cython and pure-Python builders) serve as independent
oracles: they parse what we build and we parse what they build.
"""

from __future__ import annotations

import random
import struct

import pytest
from aiokafka.record import default_records as aio_default
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from record_samples import (
    CODECS,
    LEGACY_RECORDS,
    T0,
    as_plain,
    check_batch,
    expected,
    kp_legacy,
    legacy,
    patch_records,
    patched,
    sample,
)

from odradek.protocol import batch as b
from odradek.protocol import compression as codecs
from odradek.protocol import errors
from odradek.protocol.batch_builder import BatchBuilder, build_batch, encode_batch
from odradek.protocol.legacy_records import convert_legacy_to_v2, validate_legacy
from odradek.protocol.record_batch import (
    RecordBatch,
    decode_batch,
    iter_batches,
    iter_records,
    recompress_batch,
    records_have_null_keys,
)
from odradek.protocol.records import (
    NewRecord,
    Record,
    encode_record,
    estimate_record_size,
)

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
    data = build_batch([NewRecord(b"a", b"1"), NewRecord(b"b", b"2", timestamp=T0)], base_timestamp=T0 - 5)
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
    check_batch(data, from_client=False)


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
        encode_record(Record(2, 1, b"k", None)).hex() == "0e" + "00" + "02" + "04" + "02" + "6b" + "01" + "00"
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
    check_batch(data)
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
    h = check_batch(data)
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
        check_batch(data)
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


def test_malformed_records_are_invalid_records():
    data = build_batch([(b"k", b"value", [("h", b"x")], T0), (b"k2", b"v2", (), T0)])
    body = data[b.HEADER_SIZE :]
    first = encode_record(Record(0, 0, b"k", b"value", [("h", b"x")]))
    cases = {
        "count too high": patch_records(data, body, count=3),
        "count too low": patch_records(data, body, count=1),
        "trailing bytes": patch_records(data, body + b"\x00"),
        "cut record": patch_records(data, body[:-2]),
        "length too long": patch_records(data, bytes([first[0] + 2]) + body[1:]),
        "length too short": patch_records(data, bytes([first[0] - 2]) + body[1:]),
        "negative header count": patch_records(data, first[:-5] + b"\x03" + first[-4:] + body[len(first) :]),
        "bad header key utf-8": patch_records(data, first[:-3] + b"\xff" + first[-2:] + body[len(first) :]),
        "negative header key length": patch_records(
            data, first[:-4] + b"\x03" + first[-3:] + body[len(first) :]
        ),
        "overlong varint": patch_records(data, b"\xff\xff\xff\xff\xff\xff\x01" + body[7:]),
    }
    for name, bad in cases.items():
        batch = decode_batch(bad)  # the CRC is fine
        with pytest.raises(errors.InvalidRecordError):
            batch.records()
            pytest.fail(name)


def test_corrupt_compressed_payload():
    data = build_batch(sample(), compression=codecs.ZSTD)
    bad = patch_records(data, data[b.HEADER_SIZE : -10] + b"\x00" * 10)
    with pytest.raises(errors.CorruptMessageError):
        decode_batch(bad).records()


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
    check_batch(out)


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


def test_mixed_fetch_response_of_legacy_and_v2():
    stream = legacy(0, b"old") + build_batch([(b"k", b"new", (), T0)], base_offset=1) + legacy(2, b"cut")[:-3]
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
        list(iter_batches(data + patched(data, ">b", 16, 9, fix_crc=False)))  # unknown magic
    with pytest.raises(errors.CorruptMessageError):
        list(iter_batches(patched(data, ">i", 8, 30)))  # v2 batch smaller than its header
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
    lambda data: check_batch(data),
    lambda data: validate_legacy(data),
    lambda data: convert_legacy_to_v2(data),
    lambda data: records_have_null_keys(data),
]
