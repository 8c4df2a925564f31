from __future__ import annotations

import os
import socket

import pytest
from storage_batches import hbatch, kbatch, now_ms, offsets_of, parse

from odradek.protocol import batch as batch_format
from odradek.protocol import control_records, errors
from odradek.storage import Log, LogConfig, UnexpectedAppendOffsetError


def make_log(tmp_path, name="topic-0", **cfg) -> Log:
    return Log(str(tmp_path / name), LogConfig.from_dict(cfg) if cfg else LogConfig())


def read_all(log: Log, start: int | None = None, max_offset: int | None = None) -> bytes:
    """Everything from ``start``: one read per segment, as a consumer fetches (Kafka reads one
    segment per fetch)."""
    offset = log.log_start_offset if start is None else start
    out = b""
    while True:
        r = log.read(offset, 1 << 30, max_offset=max_offset)
        if r.records is None:
            return out
        data = r.records.read()
        out += data
        offset = parse(data)[-1].next_offset


# ---- append and read ----------------------------------------------------------------------


def test_append_read_round_trip_with_kafka_python_oracle(tmp_path):
    log = make_log(tmp_path)
    infos = [log.append_as_leader(kbatch(n), leader_epoch=5) for n in (1, 3, 2)]
    assert [(i.first_offset, i.last_offset, i.record_count) for i in infos] == [
        (0, 0, 1),
        (1, 3, 3),
        (4, 5, 2),
    ]
    assert all(i.log_append_time == -1 and not i.duplicate for i in infos)
    assert log.log_end_offset == 6
    data = read_all(log)
    batches = parse(data)
    assert [b.base_offset for b in batches] == [0, 1, 4]
    assert all(b.validate_crc() for b in batches)
    assert offsets_of(data) == list(range(6))
    # The partition leader epoch was written into the header.
    assert {batch_format.read_header(data, 0).partition_leader_epoch} == {5}
    assert log.leader_epoch_cache.entries() == [(5, 0)]


def test_many_batches_in_one_append_use_one_buffer(tmp_path):
    log = make_log(tmp_path)
    buf = b"".join(kbatch(2) for _ in range(5))
    info = log.append_as_leader(buf, 0)
    assert (info.first_offset, info.last_offset, info.record_count, info.num_batches) == (0, 9, 10, 5)
    assert offsets_of(read_all(log)) == list(range(10))


def test_bytearray_and_memoryview_inputs(tmp_path):
    log = make_log(tmp_path)
    log.append_as_leader(bytearray(kbatch(1)), 0)
    log.append_as_leader(memoryview(kbatch(1)), 0)
    assert offsets_of(read_all(log)) == [0, 1]


def test_read_bounds(tmp_path):
    log = make_log(tmp_path)
    for _ in range(4):
        log.append_as_leader(kbatch(2), 0)
    assert log.read(8, 1000).records is None  # exactly at the LEO: empty
    with pytest.raises(errors.OffsetOutOfRangeError):
        log.read(9, 1000)
    with pytest.raises(errors.OffsetOutOfRangeError):
        log.read(-1, 1000)
    # max_offset is exclusive: the high watermark bounds what a consumer sees.
    assert offsets_of(read_all(log, max_offset=4)) == [0, 1, 2, 3]
    assert log.read(4, 1000, max_offset=4).records is None
    # Reading from the middle of a batch returns that whole batch.
    r = log.read(3, 1000)
    assert r.records.first_offset == 2
    assert offsets_of(r.records.read())[0] == 2
    assert (r.log_start_offset, r.log_end_offset) == (0, 8)


def test_min_one_message_and_max_bytes(tmp_path):
    log = make_log(tmp_path)
    big = kbatch(1, value=b"x" * 5000)
    log.append_as_leader(big, 0)
    log.append_as_leader(kbatch(1), 0)
    r = log.read(0, 100, min_one_message=True)
    assert r.records.size == len(big)
    r = log.read(0, 100, min_one_message=False)
    assert r.records.size == 100  # a partial batch, as Kafka returns it
    assert log.read(0, 0, min_one_message=False).records is None


def test_index_lookup_across_segment_boundaries(tmp_path):
    log = make_log(tmp_path, **{"segment.bytes": "2000", "index.interval.bytes": "150"})
    expected = []
    for i in range(60):
        info = log.append_as_leader(kbatch(1 + i % 3), 0)
        expected.append((info.first_offset, info.last_offset))
    assert len(log.segments) > 5
    for seg in log.segments[:-1]:
        assert seg.offset_index.entries > 0  # sparse entries were written
        assert os.path.getsize(seg.offset_index.path) == seg.offset_index.entries * 8  # trimmed on roll
    for first, last in expected:
        for offset in range(first, last + 1):
            r = log.read(offset, 1)
            assert r.records.first_offset == first
    # Each segment's base offset is the first offset it holds.
    for seg in log.segments:
        data = seg.log.pread(0, seg.size)
        if data:
            assert parse(data)[0].base_offset == seg.base_offset
    assert offsets_of(read_all(log, 0))[:5] == [0, 1, 2, 3, 4]


def test_sparse_index_scan_finds_every_batch(tmp_path):
    log = make_log(tmp_path, **{"index.interval.bytes": "1000"})
    firsts = [log.append_as_leader(kbatch(1, value=b"z" * 90), 0).first_offset for _ in range(100)]
    seg = log.active_segment
    assert 5 < seg.offset_index.entries < 20
    for f in firsts:
        assert seg.translate_offset(f)[0] == f
    assert seg.translate_offset(100) is None


# ---- rolling ------------------------------------------------------------------------------


def test_roll_on_size(tmp_path):
    log = make_log(tmp_path, **{"segment.bytes": "1000"})
    b = kbatch(1, value=b"a" * 200)
    for _ in range(10):
        log.append_as_leader(b, 0)
    assert all(seg.size <= 1000 for seg in log.segments)
    assert len(log.segments) == 4  # 3 batches (~280 B) fit in 1000 bytes
    names = sorted(n for n in os.listdir(log.dir) if n.endswith(".log"))
    assert names[0] == "00000000000000000000.log"
    assert names[1] == f"{log.segments[1].base_offset:020d}.log"
    # A producer snapshot is written at each roll.
    assert any(n.endswith(".snapshot") for n in os.listdir(log.dir))


def test_roll_on_full_index(tmp_path):
    log = make_log(tmp_path, **{"segment.index.bytes": "40", "index.interval.bytes": "1"})
    for _ in range(30):
        log.append_as_leader(kbatch(1), 0)
    assert len(log.segments) > 3
    assert all(seg.offset_index.entries <= 5 for seg in log.segments)
    assert offsets_of(read_all(log)) == list(range(30))


def test_roll_on_time_uses_first_batch_timestamp(tmp_path):
    log = make_log(tmp_path, **{"segment.ms": "1000"})
    t0 = now_ms()
    log.append_as_leader(kbatch(1, ts=t0), 0, now_ms=t0)
    log.append_as_leader(kbatch(1, ts=t0 + 500), 0, now_ms=t0 + 500)
    assert len(log.segments) == 1
    log.append_as_leader(kbatch(1, ts=t0 + 1001), 0, now_ms=t0 + 1001)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_on_relative_offset_overflow(tmp_path):
    log = make_log(tmp_path)
    log.append_as_follower(hbatch([1000], base_offset=0))
    far = (1 << 31) + 10
    log.append_as_follower(hbatch([1000, 1001], base_offset=far))
    assert [s.base_offset for s in log.segments] == [0, far]
    assert log.log_end_offset == far + 2
    assert log.read(1, 1000).records.first_offset == far


def test_explicit_roll_and_empty_active_segment(tmp_path):
    log = make_log(tmp_path)
    log.append_as_leader(kbatch(3), 0)
    seg = log.roll()
    assert seg.base_offset == 3
    assert log.roll() is seg  # an empty active segment is not rolled again
    assert log.read(3, 100).records is None


# ---- validation (its rules: test_log_validator.py) ----------------------------------------


def test_one_bad_batch_rejects_the_whole_append(tmp_path):
    log = make_log(tmp_path)
    bad = bytearray(kbatch(1))
    bad[70] ^= 1
    with pytest.raises(errors.CorruptMessageError):
        log.append_as_leader(kbatch(1) + bytes(bad), 0)
    assert log.active_segment.size == 0


def test_segment_bytes_limit_on_one_append(tmp_path):
    log = make_log(tmp_path, **{"segment.bytes": "300"})
    with pytest.raises(errors.RecordListTooLargeError):
        log.append_as_leader(kbatch(1, value=b"x" * 400), 0)


def test_log_append_time_is_what_the_log_stores_and_answers(tmp_path):
    log = make_log(tmp_path, **{"message.timestamp.type": "LogAppendTime"})
    info = log.append_as_leader(kbatch(2, ts=1000), 0, now_ms=1234567)
    assert info.log_append_time == 1234567
    (batch,) = parse(read_all(log))
    assert batch.validate_crc() and batch.timestamp_type == 1
    assert [r.timestamp for r in batch] == [1234567, 1234567]


def test_idempotent_duplicate_returns_original_offsets(tmp_path):
    log = make_log(tmp_path)
    log.append_as_leader(kbatch(1), 0)
    b0 = kbatch(3, pid=7, epoch=0, seq=0)
    b1 = kbatch(2, pid=7, epoch=0, seq=3)
    first = log.append_as_leader(b0, 0)
    second = log.append_as_leader(b1, 0)
    assert (first.first_offset, first.last_offset) == (1, 3)
    leo = log.log_end_offset
    size = log.active_segment.size
    dup = log.append_as_leader(b0, 0)  # a retry of an old batch, within the last 5
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (1, 3)
    dup = log.append_as_leader(b1, 0)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (second.first_offset, second.last_offset)
    assert log.log_end_offset == leo and log.active_segment.size == size


def test_only_the_last_five_batches_are_deduplicated(tmp_path):
    log = make_log(tmp_path)
    batches = [kbatch(1, pid=1, epoch=0, seq=i) for i in range(7)]
    for b in batches:
        log.append_as_leader(b, 0)
    assert log.append_as_leader(batches[2], 0).duplicate
    with pytest.raises(errors.OutOfOrderSequenceNumberError):
        log.append_as_leader(batches[1], 0)


def test_sequence_gaps_and_epochs(tmp_path):
    log = make_log(tmp_path)
    log.append_as_leader(kbatch(2, pid=9, epoch=3, seq=0), 0)
    with pytest.raises(errors.OutOfOrderSequenceNumberError):
        log.append_as_leader(kbatch(1, pid=9, epoch=3, seq=5), 0)  # gap
    with pytest.raises(errors.InvalidProducerEpochError):
        log.append_as_leader(kbatch(1, pid=9, epoch=2, seq=2), 0)  # fenced epoch
    with pytest.raises(errors.OutOfOrderSequenceNumberError):
        log.append_as_leader(kbatch(1, pid=9, epoch=4, seq=2), 0)  # new epoch must start at 0
    log.append_as_leader(kbatch(1, pid=9, epoch=4, seq=0), 0)
    log.append_as_leader(kbatch(1, pid=9, epoch=4, seq=1), 0)
    # An unknown producer may start anywhere (Kafka since KIP-360).
    log.append_as_leader(kbatch(1, pid=10, epoch=0, seq=42), 0)
    log.append_as_leader(kbatch(1, pid=10, epoch=0, seq=43), 0)
    assert log.log_end_offset == 6


def test_sequence_wraps_at_int32_max(tmp_path):
    log = make_log(tmp_path)
    top = (1 << 31) - 1
    log.append_as_leader(hbatch([1, 2], pid=3, epoch=0, seq=top - 1), 0)  # seqs MAX-1, MAX
    log.append_as_leader(hbatch([3], pid=3, epoch=0, seq=0), 0)
    assert log.log_end_offset == 3
    # A batch spanning the wrap: MAX-ish .. 1
    log2 = make_log(tmp_path, "wrap-0")
    info = log2.append_as_leader(hbatch([1, 2, 3], pid=4, epoch=0, seq=top), 0)  # seqs MAX, 0, 1
    assert log2.append_as_leader(hbatch([1, 2, 3], pid=4, epoch=0, seq=top), 0).duplicate
    log2.append_as_leader(hbatch([4], pid=4, epoch=0, seq=2), 0)
    assert info.last_offset == 2


def test_producer_state_survives_clean_reopen(tmp_path):
    log = make_log(tmp_path)
    b = kbatch(2, pid=11, epoch=1, seq=0)
    log.append_as_leader(b, 0)
    log.close()
    snaps = [n for n in os.listdir(log.dir) if n.endswith(".snapshot")]
    assert snaps == ["00000000000000000002.snapshot"]
    log = make_log(tmp_path)
    assert log.append_as_leader(b, 0).duplicate
    with pytest.raises(errors.OutOfOrderSequenceNumberError):
        log.append_as_leader(kbatch(1, pid=11, epoch=1, seq=5), 0)
    log.append_as_leader(kbatch(1, pid=11, epoch=1, seq=2), 0)


def test_producer_state_rebuilt_by_replay_after_unclean_open(tmp_path):
    log = make_log(tmp_path, **{"segment.bytes": "600"})
    batches = [kbatch(1, pid=12, epoch=0, seq=i, value=b"p" * 100) for i in range(10)]
    for b in batches:
        log.append_as_leader(b, 0)
    assert len(log.segments) > 2
    # No close: simulate a crash. The newest snapshot is from the last roll; the rest is replayed.
    log2 = Log(log.dir, log.config, had_clean_shutdown=False)
    assert log2.log_end_offset == 10
    assert log2.append_as_leader(batches[-1], 0).duplicate
    log2.append_as_leader(kbatch(1, pid=12, epoch=0, seq=10), 0)


def test_corrupt_snapshot_is_ignored_and_state_replayed(tmp_path):
    log = make_log(tmp_path)
    b = kbatch(1, pid=13, epoch=0, seq=0)
    log.append_as_leader(b, 0)
    log.close()
    snap = os.path.join(log.dir, "00000000000000000001.snapshot")
    with open(snap, "r+b") as f:
        f.seek(10)
        f.write(b"\xff\xff")
    log = make_log(tmp_path)
    assert log.append_as_leader(b, 0).duplicate


# ---- recovery -----------------------------------------------------------------------------


def _fill(log: Log, n: int = 20) -> list[int]:
    return [log.append_as_leader(kbatch(2), 0).last_offset for _ in range(n)]


def test_recovery_truncates_a_torn_tail(tmp_path):
    log = make_log(tmp_path)
    _fill(log)
    path = log.active_segment.log.path
    good = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(good - 30)  # cut the last batch in the middle
    log2 = Log(log.dir, log.config, had_clean_shutdown=False)
    assert log2.log_end_offset == 38
    assert offsets_of(read_all(log2)) == list(range(38))
    log2.append_as_leader(kbatch(1), 0)
    assert offsets_of(read_all(log2))[-1] == 38


def test_recovery_truncates_garbage_and_corrupt_crc(tmp_path):
    log = make_log(tmp_path)
    _fill(log)
    path = log.active_segment.log.path
    size = os.path.getsize(path)
    with open(path, "ab") as f:
        f.write(os.urandom(500))
    log2 = Log(log.dir, log.config, had_clean_shutdown=False)
    assert log2.log_end_offset == 40 and os.path.getsize(path) == size
    log2.close()
    # Flip a payload byte of the 15th batch: everything from it on is dropped.
    batch_size = size // 20
    with open(path, "r+b") as f:
        f.seek(batch_size * 14 + 70)
        byte = f.read(1)
        f.seek(batch_size * 14 + 70)
        f.write(bytes([byte[0] ^ 0x55]))
    log3 = Log(log.dir, log.config, had_clean_shutdown=False)
    assert log3.log_end_offset == 28
    assert os.path.getsize(path) == batch_size * 14


def test_recovery_starts_at_the_recovery_point_segment(tmp_path):
    log = make_log(tmp_path, **{"segment.bytes": "1000"})
    _fill(log, 30)
    log.flush()
    assert log.recovery_point == 60
    first = log.segments[0].log.path
    with open(first, "ab") as f:
        f.write(b"\x00" * 100)  # garbage in an old segment below the recovery point is not rescanned
    log2 = Log(log.dir, log.config, had_clean_shutdown=False, recovery_point=60)
    assert os.path.getsize(first) == log.segments[0].size + 100
    assert log2.log_end_offset == 60


def test_recovery_rebuilds_deleted_and_corrupt_indexes(tmp_path):
    log = make_log(tmp_path, **{"segment.bytes": "3000", "index.interval.bytes": "200"})
    _fill(log, 40)
    log.close()
    segs = sorted(n for n in os.listdir(log.dir) if n.endswith(".index"))
    assert len(segs) > 2
    os.unlink(os.path.join(log.dir, segs[0]))
    os.unlink(os.path.join(log.dir, segs[1].replace(".index", ".timeindex")))
    with open(os.path.join(log.dir, segs[2]), "ab") as f:
        f.write(b"\x01\x02\x03")  # not a multiple of 8
    log2 = make_log(tmp_path, **{"segment.bytes": "3000", "index.interval.bytes": "200"})
    for seg in log2.segments:
        assert seg.offset_index.entries > 0
        assert os.path.getsize(seg.offset_index.path) % 8 == 0
    for off in range(0, 80, 7):
        assert log2.read(off, 1).records.first_offset == off - off % 2
    assert log2.log_end_offset == 80


def test_unclean_open_with_preallocated_zero_index(tmp_path):
    log = make_log(tmp_path, **{"index.interval.bytes": "100"})
    _fill(log, 10)
    # Crash without trimming: the index file keeps its preallocated size.
    assert os.path.getsize(log.active_segment.offset_index.path) == 10 * 1024 * 1024
    log2 = Log(log.dir, log.config, had_clean_shutdown=False)
    assert log2.log_end_offset == 20
    assert log2.active_segment.offset_index.entries > 0


# ---- truncation, start offset, retention ---------------------------------------------------


def test_truncate_to_and_continue(tmp_path):
    log = make_log(tmp_path, **{"segment.bytes": "1000"})
    for epoch in (1, 1, 2, 2, 3, 3, 3, 3, 3, 3):
        log.append_as_leader(kbatch(2), epoch)
    log.high_watermark = 20
    assert log.truncate_to(8)
    assert log.log_end_offset == 8 and log.high_watermark == 8
    assert offsets_of(read_all(log)) == list(range(8))
    assert log.leader_epoch_cache.entries() == [(1, 0), (2, 4)]
    assert not log.truncate_to(100)
    assert log.append_as_leader(kbatch(1), 4).first_offset == 8
    assert any(n.endswith(".deleted") for n in os.listdir(log.dir))
    assert log.delete_expired_files(now_ms() + 10**6) > 0
    assert not any(n.endswith(".deleted") for n in os.listdir(log.dir))


def test_truncate_fully_and_start_at(tmp_path):
    log = make_log(tmp_path)
    _fill(log, 5)
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (1000, 1000, 1000)
    assert log.append_as_leader(kbatch(1), 0).first_offset == 1000
    log.close()
    log2 = make_log(tmp_path)
    assert (log2.log_start_offset, log2.log_end_offset) == (1000, 1001)


def test_maybe_increment_log_start_offset(tmp_path):
    log = make_log(tmp_path, **{"segment.bytes": "1000"})
    _fill(log, 30)
    log.high_watermark = 30
    with pytest.raises(errors.OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(31)
    nseg = len(log.segments)
    assert log.maybe_increment_log_start_offset(25)
    assert log.log_start_offset == 25
    assert len(log.segments) < nseg
    with pytest.raises(errors.OffsetOutOfRangeError):
        log.read(24, 100)
    assert log.read(25, 100).records is not None


def test_retention_by_bytes_and_time(tmp_path):
    log = make_log(tmp_path, **{"segment.bytes": "1000", "retention.bytes": "2500"})
    _fill(log, 30)
    log.high_watermark = log.log_end_offset
    assert log.enforce_retention() > 0
    assert log.size <= 2500 + 1000
    assert log.log_start_offset == log.segments[0].base_offset
    log.update_config(log.config.with_overrides({"retention.ms": "1", "retention.bytes": "-1"}))
    log.enforce_retention(now_ms() + 10**6)
    assert log.log_start_offset == log.log_end_offset == 60
    assert log.append_as_leader(kbatch(1), 0).first_offset == 60


# ---- timestamps ---------------------------------------------------------------------------


def test_fetch_offset_by_timestamp(tmp_path):
    log = make_log(tmp_path, **{"segment.bytes": "800", "index.interval.bytes": "100"})
    t0 = 1_700_000_000_000
    for i in range(20):
        log.append_as_leader(kbatch(3, ts=t0 + i * 100, ts_step=10), 0, now_ms=t0)
    assert log.fetch_offset_by_timestamp(t0) == (0, t0)
    assert log.fetch_offset_by_timestamp(t0 + 1) == (1, t0 + 10)
    assert log.fetch_offset_by_timestamp(t0 + 505) == (16, t0 + 510)
    assert log.fetch_offset_by_timestamp(t0 + 1921) is None
    assert log.fetch_offset_by_timestamp(-2) == (0, -1)
    assert log.fetch_offset_by_timestamp(-1) == (60, -1)
    assert log.max_timestamp_and_offset() == (59, t0 + 1920)


def test_timestamps_inside_compressed_batches(tmp_path):
    log = make_log(tmp_path)
    t0 = 1_700_000_000_000
    log.append_as_leader(kbatch(4, ts=t0 + 1000, ts_step=10, codec=1), 0, now_ms=t0)  # kafka-python gzip
    for codec, xerial in ((2, False), (2, True), (3, False), (4, False)):
        base = t0 + log.log_end_offset // 4 * 1000 + 1000
        log.append_as_leader(
            hbatch([base + i * 10 for i in range(4)], codec=codec, xerial=xerial), 0, now_ms=t0
        )
    assert log.fetch_offset_by_timestamp(t0 + 1015) == (2, t0 + 1020)
    assert log.fetch_offset_by_timestamp(t0 + 2015) == (6, t0 + 2020)
    assert log.fetch_offset_by_timestamp(t0 + 3001) == (9, t0 + 3010)
    assert log.fetch_offset_by_timestamp(t0 + 4025) == (15, t0 + 4030)
    assert log.fetch_offset_by_timestamp(t0 + 5011) == (18, t0 + 5020)
    assert log.max_timestamp_and_offset() == (19, t0 + 5030)


def test_max_timestamp_record_in_unordered_batch(tmp_path):
    log = make_log(tmp_path)
    log.append_as_leader(hbatch([5000, 9000, 7000]), 0, now_ms=10000)
    log.append_as_leader(hbatch([6000]), 0, now_ms=10000)
    assert log.max_timestamp_and_offset() == (1, 9000)
    assert log.fetch_offset_by_timestamp(8000) == (1, 9000)


# ---- followers ----------------------------------------------------------------------------


def test_append_as_follower_keeps_offsets_and_epochs(tmp_path):
    leader = make_log(tmp_path, "l-0")
    for epoch in (1, 1, 2):
        leader.append_as_leader(kbatch(2, pid=3, epoch=0, seq=leader.log_end_offset), epoch)
    data = read_all(leader)
    follower = make_log(tmp_path, "f-0")
    info = follower.append_as_follower(data + data[:20])  # a partial tail is ignored
    assert (info.first_offset, info.last_offset, info.record_count, info.num_batches) == (0, 5, 6, 3)
    assert read_all(follower) == data
    assert follower.leader_epoch_cache.entries() == [(1, 0), (2, 4)]
    assert follower.producer_state.last_entry(3).last_seq == 5
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(data)
    assert follower.append_as_follower(b"") is None
    assert follower.append_as_follower(data[:30]) is None


def _replicate(leader: Log, follower: Log, chunk: int = 300) -> None:
    """Copy ``leader`` into ``follower`` the way a replica fetcher will: size-limited reads
    from the follower's log end offset, each appended as it came (partial tails left out)."""
    while follower.log_end_offset < leader.log_end_offset:
        r = leader.read(follower.log_end_offset, chunk)
        info = follower.append_as_follower(r.records.read())
        assert info is not None


def test_a_follower_copies_the_leader_byte_for_byte_and_knows_what_it_knows(tmp_path):

    leader = make_log(tmp_path, "l-0", **{"segment.bytes": "1000"})
    now = now_ms()
    # Epoch 1: an idempotent producer and a transaction that aborts; epoch 4: one that
    # commits, and one still open.
    leader.append_as_leader(kbatch(2, pid=7, epoch=0, seq=0), 1, now_ms=now)
    leader.append_as_leader(kbatch(3, pid=8, epoch=2, seq=0, transactional=True), 1, now_ms=now)
    leader.append_as_leader(kbatch(2, pid=7, epoch=0, seq=2), 1, now_ms=now)
    abort = control_records.build_control_batch(control_records.ABORT, producer_id=8, producer_epoch=2, coordinator_epoch=5)
    leader.append_as_leader(abort, 1, now_ms=now, origin="coordinator")
    leader.append_as_leader(kbatch(2, pid=9, epoch=0, seq=0, transactional=True), 4, now_ms=now)
    commit = control_records.build_control_batch(control_records.COMMIT, producer_id=9, producer_epoch=0, coordinator_epoch=5)
    leader.append_as_leader(commit, 4, now_ms=now, origin="coordinator")
    open_txn = leader.append_as_leader(kbatch(1, pid=10, epoch=0, seq=0, transactional=True), 4, now_ms=now)
    leader.append_as_leader(kbatch(4, value=b"x" * 200), 4, now_ms=now)
    assert len(leader.segments) > 2

    follower = make_log(tmp_path, "f-0", **{"segment.bytes": "1000"})
    _replicate(leader, follower)
    assert read_all(follower) == read_all(leader)  # offsets, CRCs, leader epochs: as written
    assert follower.log_end_offset == leader.log_end_offset
    assert follower.leader_epoch_cache.entries() == leader.leader_epoch_cache.entries() == [(1, 0), (4, 8)]
    for log in (leader, follower):
        log.high_watermark = log.log_end_offset
    for pid in (7, 8, 9, 10):
        mine, theirs = follower.producer_state.last_entry(pid), leader.producer_state.last_entry(pid)
        assert (mine.epoch, mine.last_seq, mine.last_offset) == (theirs.epoch, theirs.last_seq, theirs.last_offset)
    assert follower.last_stable_offset == leader.last_stable_offset == open_txn.first_offset
    aborted = leader.collect_aborted_transactions(0, leader.log_end_offset)
    assert follower.collect_aborted_transactions(0, follower.log_end_offset) == aborted
    assert [(t.producer_id, t.first_offset) for t in aborted] == [(8, 2)]
    # What the follower learnt survives a restart (its snapshots and indexes, or a replay).
    follower.close()
    reopened = make_log(tmp_path, "f-0", **{"segment.bytes": "1000"})
    reopened.high_watermark = reopened.log_end_offset
    assert reopened.last_stable_offset == open_txn.first_offset
    assert reopened.collect_aborted_transactions(0, reopened.log_end_offset) == aborted
    assert reopened.leader_epoch_cache.entries() == [(1, 0), (4, 8)]


def test_a_follower_keeps_the_gaps_compaction_left(tmp_path):
    follower = make_log(tmp_path, "f-0")
    gapped = hbatch([1000, 1001], base_offset=10, last_offset_delta=5, leader_epoch=3)  # 2 records, offsets 10..15
    info = follower.append_as_follower(gapped + hbatch([1002], base_offset=20, leader_epoch=3))
    assert (info.first_offset, info.last_offset, info.record_count) == (10, 20, 3)
    assert follower.log_end_offset == 21
    assert read_all(follower, 10) == gapped + hbatch([1002], base_offset=20, leader_epoch=3)
    assert follower.leader_epoch_cache.entries() == [(3, 10)]


@pytest.mark.parametrize(
    ("make", "error"),
    [
        pytest.param(lambda d: d[:-1] + bytes([d[-1] ^ 1]), errors.CorruptMessageError, id="crc"),
        pytest.param(lambda d: hbatch([1, 2], base_offset=5, record_count=3), errors.InvalidRecordError, id="count"),
        pytest.param(lambda d: d + hbatch([1], base_offset=5), UnexpectedAppendOffsetError, id="overlap"),
        pytest.param(lambda d: d + b"\x00" * 7 + b"\x05" + b"\x00" * 4, errors.CorruptMessageError, id="size-5"),
        pytest.param(lambda d: hbatch([1], base_offset=2), UnexpectedAppendOffsetError, id="below-leo"),
    ],
)
def test_a_follower_refuses_what_no_leader_writes_and_writes_nothing(tmp_path, make, error):
    follower = make_log(tmp_path, "f-0")
    follower.append_as_follower(hbatch([1, 2, 3], base_offset=0))
    before = (follower.log_end_offset, follower.size)
    with pytest.raises(error):
        follower.append_as_follower(make(hbatch([5, 6], base_offset=5)))
    assert (follower.log_end_offset, follower.size) == before


# ---- file slices ---------------------------------------------------------------------------


def test_file_slice_stays_valid_after_segment_is_deleted(tmp_path):
    log = make_log(tmp_path, **{"segment.bytes": "1000"})
    _fill(log, 20)
    log.high_watermark = 40
    r = log.read(0, 10000)
    expected = r.records.read()
    log.maybe_increment_log_start_offset(30)
    assert log.segments[0].base_offset > 0
    assert r.records.path.endswith(".deleted")
    assert r.records.read() == expected
    a, b = socket.socketpair()
    try:
        sent = r.records.send_to(a.fileno())
        got = b.recv(1 << 20)
        assert sent == len(got) and got == expected[:sent]
    finally:
        a.close()
        b.close()


# ---- flush ---------------------------------------------------------------------------------


def test_flush_advances_recovery_point_and_flush_policies(tmp_path):
    log = make_log(tmp_path)
    _fill(log, 3)
    assert log.recovery_point == 0
    log.flush(2)
    assert log.recovery_point == 2
    log.flush()
    assert log.recovery_point == 6
    log2 = make_log(tmp_path, "every-0", **{"flush.messages": "4"})
    log2.append_as_leader(kbatch(3), 0)
    assert log2.recovery_point == 0
    log2.append_as_leader(kbatch(1), 0)
    assert log2.recovery_point == 4
    log3 = make_log(tmp_path, "timed-0", **{"flush.ms": "1000"})
    t = now_ms()
    log3.append_as_leader(kbatch(1), 0)
    assert not log3.flush_if_due(t - 10**6)
    assert log3.flush_if_due(t + 2000) and log3.recovery_point == 1
    # A roll leaves the old segment for the next flush_if_due.
    log4 = make_log(tmp_path, "rolled-0")
    log4.append_as_leader(kbatch(2), 0)
    log4.roll()
    assert log4.flush_if_due() and log4.recovery_point == 2


def test_timestamp_search_in_a_batch_past_the_decompression_limit(tmp_path, caplog):
    # Such a batch is not decompressed at all: the answer is its first offset, where a
    # reader misses nothing at or after the timestamp asked for.
    from storage_batches import zeros_batch

    log = make_log(tmp_path)
    t0 = 1_700_000_000_000
    log.append_as_leader(hbatch([t0, t0 + 10]), 0, now_ms=t0)
    log.append_as_leader(zeros_batch(65 << 20, ts=t0 + 20), 0, now_ms=t0)
    assert log.fetch_offset_by_timestamp(t0 + 5) == (1, t0 + 10)
    assert log.fetch_offset_by_timestamp(t0 + 15) == (2, t0 + 20)
    assert "answers with a whole batch" in caplog.text
    assert log.max_timestamp_and_offset() == (2, t0 + 20)
