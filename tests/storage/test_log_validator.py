"""LogValidator, the one check of record batches on the produce path: each rule with Kafka's
error, what it rewrites (offsets, LogAppendTime, codec), what it reads inside a batch (keys
of compacted topics, out-of-bounds timestamps) and the decompression limit."""

from __future__ import annotations

import logging
import struct

import crc32c
import pytest
from storage_batches import hbatch, kbatch, zeros_batch

from odradek.protocol import batch as batch_format
from odradek.protocol import batch_builder, control_records, errors, record_batch, records
from odradek.protocol import compression as codecs
from odradek.storage import LogConfig
from odradek.storage.log_validator import LogValidator

NOW = 1_700_000_000_000


def validator(**cfg) -> LogValidator:
    return LogValidator(LogConfig.from_dict(cfg), "t-0")


def validate(buf, v: LogValidator | None = None, *, first_offset: int = 0, from_client: bool = True):
    return (v or validator()).validate(buf, first_offset, 7, NOW, from_client=from_client)


def written(result) -> bytes:
    return b"".join(bytes(part) for part in result.parts)


def patched(batch: bytes, fmt: str, at: int, value: int) -> bytes:
    """``batch`` with one header field changed and its CRC fixed, so only that field is wrong."""
    data = bytearray(batch)
    struct.pack_into(fmt, data, at, value)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def flipped(batch: bytes, at: int) -> bytes:
    data = bytearray(batch)
    data[at] ^= 1
    return bytes(data)


GOOD = kbatch(3, ts=NOW)


@pytest.mark.parametrize(
    ("make", "error"),
    [
        pytest.param(lambda: hbatch([NOW], magic=1), errors.UnsupportedForMessageFormatError, id="magic-1"),
        pytest.param(lambda: patched(GOOD, ">b", 16, 3), errors.CorruptMessageError, id="magic-3"),
        pytest.param(lambda: flipped(GOOD, len(GOOD) - 1), errors.CorruptMessageError, id="crc"),
        pytest.param(lambda: GOOD[:-5], errors.CorruptMessageError, id="truncated"),
        pytest.param(lambda: GOOD + b"junk", errors.CorruptMessageError, id="trailing-bytes"),
        pytest.param(lambda: GOOD[:40], errors.CorruptMessageError, id="shorter-than-a-header"),
        pytest.param(lambda: b"", errors.CorruptMessageError, id="empty"),
        pytest.param(lambda: patched(GOOD, ">i", 8, 40), errors.CorruptMessageError, id="length-below-header"),
        pytest.param(lambda: GOOD + flipped(GOOD, 70), errors.CorruptMessageError, id="second-batch-corrupt"),
        pytest.param(lambda: patched(GOOD, ">h", 21, 5), errors.UnsupportedCompressionTypeError, id="codec-5"),
        pytest.param(lambda: hbatch([1, 2, 3], record_count=2), errors.InvalidRecordError, id="count-vs-delta"),
        pytest.param(lambda: patched(GOOD, ">i", 57, 0), errors.InvalidRecordError, id="count-zero"),
        pytest.param(lambda: hbatch([NOW], attributes=batch_format.CONTROL_BIT), errors.InvalidRecordError, id="control"),
        pytest.param(lambda: hbatch([NOW], pid=5, epoch=0, seq=-1), errors.InvalidRecordError, id="no-sequence"),
        pytest.param(
            lambda: hbatch([NOW], attributes=batch_format.TRANSACTIONAL_BIT), errors.InvalidRecordError, id="txn-without-pid"
        ),
        pytest.param(lambda: kbatch(30, value=b"m" * 100), errors.MessageTooLargeError, id="max-message-bytes"),
    ],
)
def test_invalid_batches(make, error):
    with pytest.raises(error) as exc:
        validate(make(), validator(**{"max.message.bytes": "2000"}))
    assert type(exc.value) is error


def test_max_message_bytes_is_inclusive():
    assert validate(GOOD, validator(**{"max.message.bytes": str(len(GOOD))})).total == len(GOOD)
    with pytest.raises(errors.MessageTooLargeError):
        validate(GOOD, validator(**{"max.message.bytes": str(len(GOOD) - 1)}))


def test_offsets_go_in_a_new_prefix_and_the_batch_is_not_copied():
    buf = bytearray(GOOD + kbatch(2, ts=NOW + 5))
    result = validate(buf, first_offset=100)
    assert (result.first_offset, result.last_offset, result.record_count) == (100, 104, 5)
    assert (result.max_timestamp, result.offset_of_max_timestamp) == (NOW + 5, 104)
    assert [info[:2] for info in result.infos] == [(len(GOOD), 102), (len(buf) - len(GOOD), 104)]
    assert result.total == len(buf) and result.log_append_time == -1
    assert all(isinstance(part, memoryview) and part.obj is buf for part in result.parts[1::2])
    batches = list(record_batch.iter_batches(written(result)))
    assert [(b.base_offset, b.header.partition_leader_epoch) for b in batches] == [(100, 7), (103, 7)]
    assert buf == GOOD + kbatch(2, ts=NOW + 5)  # the request's bytes are untouched


def test_producer_batches_and_transaction_markers_for_the_log():
    idempotent = hbatch([NOW], pid=9, epoch=1, seq=0)
    result = validate(GOOD + idempotent)
    ((h, base, marker),) = result.producer_batches
    assert (h.producer_id, base, marker) == (9, 3, None)
    commit = control_records.build_control_batch(control_records.COMMIT, producer_id=9, producer_epoch=1, coordinator_epoch=4)
    with pytest.raises(errors.InvalidRecordError):
        validate(commit)  # clients may not write control batches
    result = validate(commit, from_client=False)
    assert result.producer_batches[0][2] == (control_records.COMMIT, 4)
    not_a_marker = hbatch([NOW], attributes=batch_format.CONTROL_BIT | batch_format.TRANSACTIONAL_BIT, pid=9, epoch=1, seq=0)
    with pytest.raises(errors.InvalidRecordError):
        validate(not_a_marker, from_client=False)


@pytest.mark.parametrize("codec", [codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD])
def test_a_compacted_topic_refuses_records_without_a_key_naming_each(codec):
    v = validator(**{"cleanup.policy": "compact"})
    keyed = batch_builder.build_batch([records.NewRecord(b"k%d" % i, b"v") for i in range(4)], compression=codec)
    assert validate(keyed, v).record_count == 4
    mixed = batch_builder.build_batch([records.NewRecord(None if i in (1, 3) else b"k", b"v") for i in range(4)], compression=codec)
    with pytest.raises(errors.InvalidRecordError) as exc:
        validate(mixed, v)
    assert [i for i, _ in exc.value.context["record_errors"]] == [1, 3]
    assert "Compacted topic cannot accept message without key in topic partition t-0" in str(exc.value)
    # Control batches have keys of their own kind: not checked.
    commit = control_records.build_control_batch(control_records.COMMIT, producer_id=1, producer_epoch=0)
    assert validate(commit, v, from_client=False).record_count == 1


def test_timestamps_out_of_bounds_name_each_record():
    v = validator(**{"message.timestamp.before.max.ms": "1000", "message.timestamp.after.max.ms": "500"})
    assert validate(hbatch([NOW - 1000, NOW + 500]), v).record_count == 2
    with pytest.raises(errors.InvalidTimestampError) as exc:
        validate(hbatch([NOW, NOW - 5000, NOW + 10, NOW + 501], codec=codecs.ZSTD), v)
    assert [i for i, _ in exc.value.context["record_errors"]] == [1, 3]
    # The header says out of bounds although no record is: the batch is refused as a whole.
    forged = patched(hbatch([NOW, NOW + 10]), ">q", 35, NOW + 9999)
    with pytest.raises(errors.InvalidTimestampError) as exc:
        validate(forged, v)
    assert "record_errors" not in exc.value.context
    # message.timestamp.difference.max.ms bounds the past too.
    v = validator(**{"message.timestamp.difference.max.ms": "1000"})
    with pytest.raises(errors.InvalidTimestampError):
        validate(hbatch([NOW - 5000]), v)
    # LogAppendTime topics replace timestamps: nothing to check.
    v = validator(**{"message.timestamp.type": "LogAppendTime", "message.timestamp.before.max.ms": "1"})
    assert validate(hbatch([1]), v).record_count == 1


def test_log_append_time_rewrites_a_copy():
    buf = kbatch(2, ts=1000)
    result = validate(buf, validator(**{"message.timestamp.type": "LogAppendTime"}))
    assert result.log_append_time == NOW and result.max_timestamp == NOW
    (batch,) = record_batch.iter_batches(written(result))
    assert batch.timestamp_type == batch_format.LOG_APPEND_TIME and batch.crc_is_valid()
    assert [r.timestamp for r in batch] == [NOW, NOW]
    assert buf == kbatch(2, ts=1000)


@pytest.mark.parametrize("target", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("source", [codecs.NONE, codecs.SNAPPY, codecs.ZSTD])
def test_recompression_to_the_topic_codec(source, target):
    recs = [records.NewRecord(b"k%d" % i, b"value-%d" % i * 20, (("h", b"x"),), NOW + i) for i in range(5)]
    batch = batch_builder.build_batch(recs, compression=source, producer_id=3, producer_epoch=1, base_sequence=10)
    result = validate(batch, validator(**{"compression.type": target}), first_offset=40)
    (out,) = record_batch.iter_batches(written(result))
    assert out.compression == codecs.codec_for_name(target) and out.crc_is_valid()
    before = record_batch.decode_batch(batch).header
    assert out.header._replace(crc=0, batch_length=0, attributes=0, base_offset=0, partition_leader_epoch=0) == (
        before._replace(crc=0, batch_length=0, attributes=0, partition_leader_epoch=0)
    )
    assert [(r.offset, r.key, r.value, r.headers) for r in out] == [
        (40 + i, r.key, r.value, (("h", b"x"),)) for i, r in enumerate(recs)
    ]
    # A batch already in the topic's codec goes as it came.
    same = batch_builder.build_batch(recs, compression=codecs.codec_for_name(target))
    assert written(validate(same, validator(**{"compression.type": target})))[16:] == same[16:]


def test_recompression_uses_the_topic_level_and_checks_the_records():
    data = b"level test " * 2000
    batch = batch_builder.build_batch([records.NewRecord(b"k", data)])
    fast = written(validate(batch, validator(**{"compression.type": "gzip", "compression.gzip.level": "1"})))
    best = written(validate(batch, validator(**{"compression.type": "gzip", "compression.gzip.level": "9"})))
    assert len(fast) > len(best)
    # Records that do not fill the section: found while recompressing.
    broken = hbatch([NOW, NOW + 1], codec=codecs.SNAPPY)
    broken = patched(broken, ">i", 57, 1)
    broken = patched(broken, ">i", 23, 0)
    with pytest.raises(errors.InvalidRecordError):
        validate(broken, validator(**{"compression.type": "gzip"}))


def test_the_decompression_limit_refuses_a_bomb(caplog):
    # 65 MiB of zeros in a few KB: refused where the broker would decompress it (a
    # compacted topic's key check, recompression), with a log line; accepted as bytes where
    # nothing looks inside.
    bomb = zeros_batch(65 << 20)
    assert len(bomb) < 16_000
    for cfg in ({"cleanup.policy": "compact"}, {"compression.type": "gzip"}):
        with pytest.raises(codecs.DecompressedTooLargeError) as exc:
            validate(bomb, validator(**cfg))
        assert exc.value.code == errors.MessageTooLargeError.code
    assert "Refused a batch for t-0" in caplog.text
    assert validate(bomb).record_count == 1
    # A topic that allows larger batches allows proportionally more.
    with caplog.at_level(logging.WARNING):
        big = validator(**{"cleanup.policy": "compact", "max.message.bytes": str(2 << 20)})
        assert big.decompressed_limit == 128 << 20
        assert validate(bomb, big).record_count == 1


def test_plain_batches_and_what_is_not_one():
    v = validator()
    assert v.plain
    parts, size, last, max_ts, count = v.plain_batch(GOOD, 10, 7)
    assert (size, last, max_ts, count) == (len(GOOD), 12, NOW, 3)
    assert b"".join(bytes(p) for p in parts) == written(validate(GOOD, first_offset=10))
    not_plain = [
        hbatch([NOW], pid=1, epoch=0, seq=0),
        hbatch([NOW], attributes=batch_format.TRANSACTIONAL_BIT),
        hbatch([NOW], attributes=batch_format.CONTROL_BIT),
        flipped(GOOD, 70),
        GOOD + GOOD,
        GOOD[:-1],
        hbatch([NOW], magic=1),
        hbatch([1, 2], record_count=1),
    ]
    assert [v.plain_batch(b, 0, 7) for b in not_plain] == [None] * len(not_plain)
    assert validator(**{"compression.type": "gzip"}).plain_batch(GOOD, 0, 7) is None
    assert validator(**{"max.message.bytes": "100"}).plain_batch(GOOD, 0, 7) is None
    assert validator(**{"compression.type": "gzip"}).plain_batch(kbatch(2, codec=1), 0, 7) is not None
    for cfg in (
        {"cleanup.policy": "compact"},
        {"message.timestamp.type": "LogAppendTime"},
        {"message.timestamp.after.max.ms": "3600000"},
    ):
        assert not validator(**cfg).plain
