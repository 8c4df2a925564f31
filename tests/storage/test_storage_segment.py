from __future__ import annotations

import os

from storage_batches import hbatch, offsets_of, parse

from odradek.protocol import batch as batch_format
from odradek.storage.file_records import FileRecords
from odradek.storage.segment import LogSegment


def _append(seg: LogSegment, base: int, timestamps: list[int]) -> tuple[int, int]:
    data = hbatch(timestamps, base_offset=base)
    last = base + len(timestamps) - 1
    seg.append(data, len(data), [(len(data), last, max(timestamps))])
    return base, last


def _segment(tmp_path, base=0, interval=100) -> LogSegment:
    return LogSegment(str(tmp_path), base, index_interval_bytes=interval, max_index_size=4096, now_ms=0)


def test_segment_files_and_sparse_index(tmp_path):
    seg = _segment(tmp_path, base=500)
    assert sorted(os.listdir(tmp_path)) == [
        "00000000000000000500.index",
        "00000000000000000500.log",
        "00000000000000000500.timeindex",
    ]
    spans = [_append(seg, 500 + i * 2, [1000 + i, 1000 + i]) for i in range(20)]
    # ~100 B batches, an entry every 100 bytes: about every other batch is indexed.
    assert 5 <= seg.offset_index.entries <= 10
    for first, last in spans:
        assert seg.translate_offset(first)[0] == first
        assert seg.translate_offset(last)[0] == first
    assert seg.translate_offset(540) is None
    assert seg.read_next_offset() == 540
    assert seg.max_timestamp_so_far == 1019 and seg.offset_of_max_timestamp_so_far == 539


def test_segment_read_bounds(tmp_path):
    seg = _segment(tmp_path)
    for i in range(10):
        _append(seg, i, [i])
    one = seg.size // 10
    s = seg.read(3, 10_000)
    assert (s.first_offset, s.position, s.size) == (3, 3 * one, 7 * one)
    s = seg.read(3, 10_000, max_offset=6)
    assert s.size == 3 * one and offsets_of(s.read()) == [3, 4, 5]
    s = seg.read(3, 10_000, max_position=5 * one)
    assert s.size == 2 * one
    assert seg.read(3, 10, min_one_message=True).size == one
    assert seg.read(3, 10).size == 10
    assert seg.read(10, 100) is None


def test_segment_truncate_to(tmp_path):
    seg = _segment(tmp_path)
    for i in range(10):
        _append(seg, i * 3, [100 + i, 200 + i, 300 + i])
    removed = seg.truncate_to(13)  # inside the batch 12..14: the whole batch goes
    assert removed > 0
    assert seg.read_next_offset() == 12
    assert offsets_of(seg.read(0, 1 << 20).read())[-1] == 11
    assert seg.offset_index.last_offset < 12
    assert seg.time_index.last_entry()[1] < 12
    assert seg.max_timestamp_so_far == 303
    assert seg.truncate_to(0) > 0 and seg.size == 0


def test_segment_recover_validates_and_rebuilds(tmp_path):
    seg = _segment(tmp_path)
    for i in range(10):
        _append(seg, i, [i])
    good = seg.size
    seg.log.append(b"\x00" * 12 + b"\x00\x00\x00\x00" + b"\x07")  # a batch with a silly length
    epochs = []
    assert seg.recover(on_batch=lambda h: epochs.append(h.base_offset)) == 17
    assert seg.size == good and epochs == list(range(10))
    assert seg.offset_index.entries > 0
    # Corrupt the CRC of batch 6: batches 6.. are cut.
    one = good // 10
    raw = bytearray(seg.log.pread(6 * one, one))
    raw[batch_format.CRC_OFFSET] ^= 0xFF
    fd = os.open(seg.log.path, os.O_WRONLY)  # not the segment's O_APPEND descriptor
    os.pwrite(fd, bytes(raw), 6 * one)
    os.close(fd)
    assert seg.recover() == 4 * one
    assert seg.read_next_offset() == 6
    # A valid batch whose offset goes backwards ends the valid part too.
    seg.log.append(hbatch([1], base_offset=2))
    assert seg.recover() > 0 and seg.read_next_offset() == 6


def test_segment_find_offset_by_timestamp_and_roll_rules(tmp_path):
    seg = _segment(tmp_path, base=0, interval=0)
    _append(seg, 0, [1000, 1100])
    _append(seg, 2, [1200, 1300])
    _append(seg, 4, [1400, 1500])
    assert seg.find_offset_by_timestamp(1250) == (3, 1300)
    assert seg.find_offset_by_timestamp(0) == (0, 1000)
    assert seg.find_offset_by_timestamp(0, starting_offset=5) == (5, 1500)
    assert seg.find_offset_by_timestamp(1501) is None
    size = seg.size
    assert seg.should_roll(10, 1500, 6, now_ms=0, segment_bytes=size + 9, segment_ms=10_000)
    assert not seg.should_roll(10, 1500, 6, now_ms=0, segment_bytes=size + 10, segment_ms=10_000)
    # Age is judged from the first batch's timestamp (1100) against the incoming max timestamp.
    assert seg.should_roll(10, 1100 + 501, 6, now_ms=0, segment_bytes=1 << 30, segment_ms=500)
    assert not seg.should_roll(10, 1100 + 500, 6, now_ms=0, segment_bytes=1 << 30, segment_ms=500)
    assert seg.should_roll(10, 0, (1 << 31), now_ms=0, segment_bytes=1 << 30, segment_ms=10_000)


def test_segment_close_trims_and_reopen_is_lazy(tmp_path):
    seg = _segment(tmp_path, base=0, interval=50)
    for i in range(10):
        _append(seg, i, [5000 + i])
    entries = seg.offset_index.entries
    assert entries > 0
    seg.close()
    assert os.path.getsize(tmp_path / "00000000000000000000.index") == entries * 8
    again = LogSegment(str(tmp_path), 0, index_interval_bytes=50, active=False)
    assert again._oi is None  # indexes open on first use
    assert again.max_timestamp_so_far == 5009  # from the time index's last entry written on close
    assert again.translate_offset(7)[0] == 7
    again.close()


def test_file_records_writev_many_parts_and_slices(tmp_path):
    fr = FileRecords(str(tmp_path / "x.log"))
    parts = [bytes([i % 256]) * 3 for i in range(3000)]  # more than IOV_MAX
    pos = fr.appendv(parts, 9000)
    assert pos == 0 and fr.size == 9000 == os.path.getsize(tmp_path / "x.log")
    assert fr.slice(3, 6).read() == b"\x01\x01\x01\x02\x02\x02"
    data = hbatch([1, 2])
    fr.truncate_to(0)
    fr.append(data)
    fr.append(data)
    assert [p for p, *_ in fr.batches()] == [0, len(data)]
    assert len(parse(fr.slice(0, fr.size).read())) == 2
    fr.close()
