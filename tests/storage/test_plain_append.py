"""The plain append (``Log._append_plain_batch``) against the general path of ``append_as_leader``.

Two logs get the same appends: one whose config lets the plain path run, one with a
harmless non-default setting (message.timestamp.before.max.ms huge but not LONG_MAX) that
turns it off. Whatever the plain path accepts must leave the same bytes on disk and return
the same LogAppendInfo; whatever it declines (invalid, idempotent, another codec, ...) must
end exactly as on the general path.
"""

from __future__ import annotations

import os
import struct

import crc32c
import pytest
from storage_batches import hbatch, kbatch, parse

from odradek.protocol import batch as batch_format
from odradek.protocol import errors
from odradek.protocol.record_batch import iter_batches, iter_records
from odradek.storage import Log, LogAppendInfo, LogConfig

NOW = 1_700_000_000_000
FORCE_GENERAL = {"message.timestamp.before.max.ms": str(10**15)}  # ~31,000 years: no real bound
INFO_FIELDS = LogAppendInfo.__slots__


class Spy:
    """Wraps ``Log._append_plain_batch`` on one log: remembers whether each call appended."""

    def __init__(self, log: Log):
        self.inner = log._append_plain_batch
        self.results: list[bool] = []
        log._append_plain_batch = self

    def __call__(self, *args):
        info = self.inner(*args)
        self.results.append(info is not None)
        return info


def fields(info) -> tuple:
    return tuple(getattr(info, name) for name in INFO_FIELDS)


class Pair:
    """A plain-path log and a general-path log with otherwise equal configs."""

    def __init__(self, tmp_path, **cfg):
        self.plain = Log(str(tmp_path / "plain-0"), LogConfig.from_dict(cfg))
        self.general = Log(str(tmp_path / "general-0"), LogConfig.from_dict({**cfg, **FORCE_GENERAL}))
        assert self.plain._plain_appends is True
        assert self.general._plain_appends is False
        self.plain_spy = Spy(self.plain)
        self.general_spy = Spy(self.general)

    def append(self, buf, epoch: int = 0):
        """Append ``buf`` to both; returns the plain log's info after checking both agree."""
        a = self.plain.append_as_leader(buf, epoch, now_ms=NOW)
        b = self.general.append_as_leader(buf, epoch, now_ms=NOW)
        assert fields(a) == fields(b)
        assert self.general_spy.results == [], "the general-path log must not try the plain path"
        return a

    def fails(self, buf, error: type[errors.KafkaError], epoch: int = 0) -> None:
        """Both logs raise ``error`` for ``buf`` and change nothing."""
        before = [self.state(log) for log in (self.plain, self.general)]
        with pytest.raises(error) as a:
            self.plain.append_as_leader(buf, epoch, now_ms=NOW)
        with pytest.raises(error) as b:
            self.general.append_as_leader(buf, epoch, now_ms=NOW)
        assert type(a.value) is type(b.value) is error
        assert [self.state(log) for log in (self.plain, self.general)] == before

    @staticmethod
    def state(log: Log):
        return (log.log_end_offset, log.size, len(log.segments), log.leader_epoch_cache.entries())

    def assert_same_files(self) -> None:
        self.plain.close()
        self.general.close()
        names = sorted(os.listdir(self.plain.dir))
        assert names == sorted(os.listdir(self.general.dir))
        assert any(n.endswith(".log") for n in names)
        for name in names:
            with open(os.path.join(self.plain.dir, name), "rb") as f:
                mine = f.read()
            with open(os.path.join(self.general.dir, name), "rb") as f:
                theirs = f.read()
            assert mine == theirs, f"{name} differs"


def _corrupt(batch: bytes, at: int) -> bytes:
    data = bytearray(batch)
    data[at] ^= 0x01
    return bytes(data)


def _set_count(batch: bytes, count: int) -> bytes:
    """Rewrite the record count and fix the CRC, so only the count is wrong."""
    data = bytearray(batch)
    struct.pack_into(">i", data, 57, count)
    _fix_crc(data)
    return bytes(data)


def _set_delta(batch: bytes, delta: int) -> bytes:
    data = bytearray(batch)
    struct.pack_into(">i", data, 23, delta)
    _fix_crc(data)
    return bytes(data)


def _fix_crc(data: bytearray) -> None:
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))


# ---- accepted batches: same bytes, same answers -----------------------------------------------


def _mixed_sequence():
    """(buffer, leader epoch, whether the plain path should take it)."""
    ts = NOW - 5000
    return [
        (kbatch(1, ts=ts), 0, True),
        (kbatch(5, ts=ts, ts_step=3), 0, True),
        (bytearray(kbatch(2, ts=ts + 10)), 0, True),
        (memoryview(kbatch(3, ts=ts + 20, value=b"w" * 400)), 0, True),
        (kbatch(3, ts=ts, codec=1), 0, True),  # compressed batches are written as they came
        (hbatch([ts] * 4, codec=2), 1, True),
        (hbatch([ts, ts + 1], codec=3), 1, True),
        (hbatch([ts + i for i in range(6)], codec=4), 1, True),
        (hbatch([ts + 100, ts + 50, ts + 75]), 1, True),  # max timestamp not the last record's
        (hbatch([-1]), 1, True),  # no timestamp
        (hbatch([-1, -1, -1]), 1, True),
        (hbatch([ts, ts + 1], attributes=batch_format.TIMESTAMP_TYPE_BIT), 1, True),  # client-set LogAppendTime bit
        (hbatch([ts] * 3, codec=2, xerial=True), 3, True),
        (kbatch(2, ts=ts) + kbatch(3, ts=ts), 3, False),  # two batches: general path
        (kbatch(3, ts=ts, pid=9, epoch=0, seq=0), 3, False),  # idempotent: general path
        (kbatch(200, ts=ts, value=b"big" * 10), 3, True),  # rolls a segment
        (kbatch(1, ts=ts + 3000), -1, True),  # no leader epoch
        (kbatch(2, ts=NOW + 60_000), 4, True),  # from the future: no bound on either path
        (kbatch(1, ts=0), 4, True),
        (kbatch(7, ts=ts, value=b""), 5, True),
    ]


def test_same_sequence_gives_identical_segments_and_infos(tmp_path):
    pair = Pair(tmp_path, **{"segment.bytes": "9000", "index.interval.bytes": "200"})
    sequence = _mixed_sequence()
    infos = [pair.append(buf, epoch) for buf, epoch, _ in sequence]
    assert pair.plain_spy.results == [plain for _, _, plain in sequence]
    # Concrete values, not just agreement: offsets follow each other.
    expected_first = 0
    for (buf, _, _), info in zip(sequence, infos, strict=True):
        count = sum(b.record_count for b in _headers(buf))
        assert (info.first_offset, info.last_offset, info.record_count) == (
            expected_first,
            expected_first + count - 1,
            count,
        )
        assert info.valid_bytes == len(buf) and not info.duplicate and info.log_append_time == -1
        expected_first += count
    assert infos[0].max_timestamp == NOW - 5000 and infos[0].offset_of_max_timestamp == 0
    assert infos[9].max_timestamp == -1 and infos[9].offset_of_max_timestamp == -1
    assert pair.plain.log_end_offset == pair.general.log_end_offset == expected_first
    assert len(pair.plain.segments) == len(pair.general.segments) > 1
    assert pair.plain.leader_epoch_cache.entries() == pair.general.leader_epoch_cache.entries()
    assert [e for e, _ in pair.plain.leader_epoch_cache.entries()] == [0, 1, 3, 4, 5]
    data = _read_all(pair.plain)
    offsets = [
        o for h in _headers(data) for o in range(h.base_offset, h.base_offset + h.last_offset_delta + 1)
    ]
    assert offsets == list(range(expected_first))
    assert all(b.crc_is_valid() for b in iter_batches(data))
    pair.assert_same_files()


def test_plain_path_keeps_the_batch_bytes(tmp_path):
    pair = Pair(tmp_path)
    batch = hbatch([NOW - 3, NOW, NOW - 1, NOW - 2], codec=4)
    pair.append(kbatch(2, ts=NOW))
    info = pair.append(batch, epoch=6)
    assert pair.plain_spy.results == [True, True]
    stored = _read_all(pair.plain, 2)
    assert len(stored) == len(batch)
    assert stored[16:] == batch[16:]  # untouched after the offset, length and epoch
    assert struct.unpack_from(">qii", stored) == (2, len(batch) - 12, 6)
    # The batch's max timestamp (its second record's) is credited to its last offset, as Kafka does.
    assert (info.first_offset, info.last_offset, info.max_timestamp, info.offset_of_max_timestamp) == (
        2,
        5,
        NOW,
        5,
    )


def test_negative_max_timestamp_gives_the_same_info(tmp_path):
    """A CreateTime batch whose max timestamp is negative but not -1 (the broker accepts it).
    The general path, as Kafka, keeps max_timestamp -1 / offset_of_max_timestamp -1 then."""
    pair = Pair(tmp_path)
    batch = hbatch([-5, -7])
    plain = pair.plain.append_as_leader(batch, 0, now_ms=NOW)
    general = pair.general.append_as_leader(batch, 0, now_ms=NOW)
    assert pair.plain_spy.results == [True]
    assert (general.max_timestamp, general.offset_of_max_timestamp) == (-1, -1)
    assert (plain.max_timestamp, plain.offset_of_max_timestamp) == (-1, -1)
    pair.assert_same_files()


# ---- declined batches: the same errors ---------------------------------------------------------


def _good() -> bytes:
    return kbatch(3, ts=NOW - 100, value=b"x" * 100)


@pytest.mark.parametrize(
    ("make", "error"),
    [
        pytest.param(lambda: _corrupt(_good(), 70), errors.CorruptMessageError, id="crc-in-records"),
        pytest.param(lambda: _corrupt(_good(), 22), errors.CorruptMessageError, id="crc-in-attributes"),
        pytest.param(lambda: _corrupt(_good(), 18), errors.CorruptMessageError, id="crc-field"),
        pytest.param(lambda: _set_count(_good(), 4), errors.InvalidRecordError, id="count-too-high"),
        pytest.param(lambda: _set_count(_good(), 0), errors.InvalidRecordError, id="count-zero"),
        pytest.param(lambda: _set_delta(_good(), 1), errors.InvalidRecordError, id="delta-too-low"),
        pytest.param(lambda: _set_delta(_good(), 5), errors.InvalidRecordError, id="delta-too-high"),
        pytest.param(
            lambda: hbatch([NOW, NOW], record_count=3), errors.InvalidRecordError, id="hbatch-count"
        ),
        pytest.param(
            lambda: kbatch(30, value=b"m" * 100), errors.MessageTooLargeError, id="over-max-message"
        ),
        pytest.param(
            lambda: hbatch([NOW], attributes=batch_format.CONTROL_BIT),
            errors.InvalidRecordError,
            id="control-from-client",
        ),
        pytest.param(
            lambda: hbatch([NOW], attributes=batch_format.CONTROL_BIT, pid=3, epoch=0, seq=0),
            errors.InvalidRecordError,
            id="control-with-pid",
        ),
        pytest.param(
            lambda: hbatch([NOW], attributes=batch_format.TRANSACTIONAL_BIT),
            errors.InvalidRecordError,
            id="txn-without-pid",
        ),
        pytest.param(lambda: hbatch([NOW], magic=1), errors.UnsupportedForMessageFormatError, id="magic-1"),
        pytest.param(lambda: _good()[:-1], errors.CorruptMessageError, id="truncated"),
        pytest.param(lambda: _good() + b"\x00", errors.CorruptMessageError, id="trailing-byte"),
        pytest.param(lambda: _good()[:40], errors.CorruptMessageError, id="shorter-than-header"),
        pytest.param(lambda: b"", errors.CorruptMessageError, id="empty"),
        pytest.param(
            lambda: _good() + _corrupt(_good(), 70), errors.CorruptMessageError, id="second-corrupt"
        ),
    ],
)
def test_invalid_batches_raise_the_same_error(tmp_path, make, error):
    pair = Pair(tmp_path, **{"max.message.bytes": "2000"})
    first = pair.append(_good())
    assert first.first_offset == 0
    pair.fails(make(), error)
    # The logs still take good batches, at the next offset.
    assert pair.append(_good()).first_offset == 3
    assert pair.plain_spy.results[0] is True and pair.plain_spy.results[-1] is True
    pair.assert_same_files()


def test_batch_over_segment_bytes_raises_on_both(tmp_path):
    pair = Pair(tmp_path, **{"segment.bytes": "1000", "max.message.bytes": "100000"})
    pair.append(kbatch(1, ts=NOW))
    pair.fails(kbatch(20, ts=NOW, value=b"q" * 100), errors.RecordListTooLargeError)
    pair.assert_same_files()


def test_max_message_bytes_boundary(tmp_path):
    batch = _good()
    pair = Pair(tmp_path, **{"max.message.bytes": str(len(batch))})
    assert pair.append(batch).first_offset == 0  # exactly the limit: accepted
    assert pair.plain_spy.results == [True]
    pair.fails(kbatch(3, ts=NOW - 100, value=b"x" * 101), errors.MessageTooLargeError)


# ---- codecs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("topic_codec", "codec_id"), [("gzip", 1), ("zstd", 4), ("uncompressed", 0)])
def test_other_codec_is_recompressed(tmp_path, topic_codec, codec_id):
    pair = Pair(tmp_path, **{"compression.type": topic_codec})
    batches = [hbatch([NOW] * 3, codec=2), hbatch([NOW, NOW + 1], codec=codec_id)]  # snappy, then the topic's
    if codec_id != 0:
        batches.append(hbatch([NOW] * 4))  # uncompressed: compressed to the topic's codec
    infos = [pair.append(b) for b in batches]
    # Only the batch already in the topic's codec goes the plain way.
    assert pair.plain_spy.results == [False, True] + ([False] if codec_id != 0 else [])
    stored = list(iter_batches(_read_all(pair.plain)))
    assert [b.header.attributes & 7 for b in stored] == [codec_id] * len(batches)
    got = list(iter_records(_read_all(pair.plain)))
    assert [(r.offset, r.value) for r in got] == [(i, b"abc") for i in range(infos[-1].last_offset + 1)]
    # The recompressed batch is not the raw input; the matching one is.
    data = _read_all(pair.plain)
    first_size = struct.unpack_from(">i", data, 8)[0] + 12
    assert data[16:first_size] != batches[0][16:]
    second = data[first_size : first_size + len(batches[1])]
    assert second[16:] == batches[1][16:]
    pair.assert_same_files()


# ---- idempotent producers ---------------------------------------------------------------------------


def test_idempotent_batches_keep_sequence_checks(tmp_path):
    pair = Pair(tmp_path)
    pair.append(kbatch(2, ts=NOW))
    b0 = kbatch(3, ts=NOW, pid=7, epoch=0, seq=0)
    b1 = kbatch(2, ts=NOW, pid=7, epoch=0, seq=3)
    first = pair.append(b0)
    pair.append(kbatch(1, ts=NOW))  # a plain batch in between
    second = pair.append(b1)
    assert (first.first_offset, first.last_offset, second.first_offset, second.last_offset) == (2, 4, 6, 7)
    assert pair.plain_spy.results == [True, False, True, False]
    leo = pair.plain.log_end_offset
    dup = pair.append(b0)  # a retry: the original offsets, nothing written
    assert dup.duplicate and (dup.first_offset, dup.last_offset, dup.record_count) == (2, 4, 3)
    dup = pair.append(b1)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (6, 7)
    assert pair.plain.log_end_offset == pair.general.log_end_offset == leo
    pair.fails(kbatch(1, ts=NOW, pid=7, epoch=0, seq=9), errors.OutOfOrderSequenceNumberError)
    pair.fails(kbatch(1, ts=NOW, pid=8, epoch=0, seq=-1), errors.InvalidRecordError)
    assert pair.plain.producer_state.producers[7].epoch == 0
    assert pair.append(kbatch(1, ts=NOW, pid=7, epoch=0, seq=5)).first_offset == leo
    assert pair.plain_spy.results[-1] is False
    pair.assert_same_files()


# ---- leader epochs --------------------------------------------------------------------------------


def test_plain_path_records_leader_epochs(tmp_path):
    log = Log(str(tmp_path / "epochs-0"), LogConfig())
    spy = Spy(log)
    assert log._plain_appends is True
    plan = [(0, 1), (0, 2), (3, 1), (3, 3), (-1, 1), (7, 2), (7, 1)]
    for epoch, n in plan:
        log.append_as_leader(kbatch(n, ts=NOW), epoch, now_ms=NOW)
    assert spy.results == [True] * len(plan)
    assert log.leader_epoch_cache.entries() == [(0, 0), (3, 3), (7, 8)]
    assert log.latest_epoch == 7
    assert log.end_offset_for_epoch(3) == (3, 8)
    assert log.leader_epoch_for_offset(5) == 3
    data = _read_all(log)
    assert [b.partition_leader_epoch for b in _headers(data)] == [0, 0, 3, 3, -1, 7, 7]
    log.close()
    # The cache was written through to leader-epoch-checkpoint.
    reopened = Log(str(tmp_path / "epochs-0"), LogConfig())
    assert reopened.leader_epoch_cache.entries() == [(0, 0), (3, 3), (7, 8)]
    reopened.close()


# ---- what turns the plain path off -----------------------------------------------------------------


def test_config_changes_switch_the_plain_path(tmp_path):
    log = Log(str(tmp_path / "cfg-0"), LogConfig())
    spy = Spy(log)
    log.append_as_leader(kbatch(1, ts=NOW), 0, now_ms=NOW)
    assert spy.results == [True]

    log.update_config(LogConfig.from_dict({"cleanup.policy": "compact"}))
    assert log._plain_appends is False
    null_key = hbatch([NOW])  # hbatch's records have null keys
    with pytest.raises(errors.InvalidRecordError):
        log.append_as_leader(null_key, 0, now_ms=NOW)

    log.update_config(LogConfig.from_dict({"message.timestamp.type": "LogAppendTime"}))
    assert log._plain_appends is False
    info = log.append_as_leader(kbatch(1, ts=5), 0, now_ms=NOW)
    assert info.log_append_time == NOW

    log.update_config(LogConfig.from_dict({"message.timestamp.after.max.ms": "1000"}))
    assert log._plain_appends is False
    with pytest.raises(errors.InvalidTimestampError):
        log.append_as_leader(kbatch(1, ts=NOW + 5000), 0, now_ms=NOW)

    log.update_config(LogConfig.from_dict({"message.timestamp.difference.max.ms": "1000"}))
    assert log._plain_appends is False
    with pytest.raises(errors.InvalidTimestampError):
        log.append_as_leader(kbatch(1, ts=NOW - 5000), 0, now_ms=NOW)

    log.update_config(LogConfig())
    assert log._plain_appends is True
    assert log.append_as_leader(kbatch(1, ts=NOW - 5000), 0, now_ms=NOW).first_offset == 2
    assert spy.results == [True, True]  # the switched-off appends did not try the plain path
    log.close()


def test_per_call_overrides_bypass_the_plain_path(tmp_path):
    log = Log(str(tmp_path / "over-0"), LogConfig())
    spy = Spy(log)
    batch = kbatch(2, ts=NOW, value=b"o" * 200)
    with pytest.raises(errors.MessageTooLargeError):
        log.append_as_leader(batch, 0, now_ms=NOW, max_message_bytes=100)
    info = log.append_as_leader(batch, 0, now_ms=NOW, timestamp_type="LogAppendTime")
    assert info.log_append_time == NOW
    log.append_as_leader(batch, 0, now_ms=NOW, compression_type="gzip")
    with pytest.raises(errors.InvalidRecordError):
        log.append_as_leader(hbatch([NOW], attributes=batch_format.CONTROL_BIT), 0, now_ms=NOW)
    marker = hbatch([NOW], attributes=batch_format.CONTROL_BIT | batch_format.TRANSACTIONAL_BIT)  # not a valid marker
    with pytest.raises(errors.KafkaError):
        log.append_as_leader(marker, 0, now_ms=NOW, origin="coordinator")
    assert spy.results == [False]  # only the control batch from a client was offered, and declined
    stored = parse(_read_all(log))
    assert [b.compression_type for b in stored] == [0, 1]
    assert stored[0].timestamp_type == 1
    log.close()


# ---- helpers ------------------------------------------------------------------------------------


def _headers(buf) -> list:
    return [h for _, h in batch_format.iter_headers(bytes(buf))]


def _read_all(log: Log, start: int = 0) -> bytes:
    out = b""
    offset = start
    while True:
        r = log.read(offset, 1 << 30)
        if r.records is None:
            return out
        data = r.records.read()
        out += data
        offset = parse(data)[-1].next_offset
