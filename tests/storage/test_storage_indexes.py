from __future__ import annotations

import os
import struct

import pytest

from odradek.storage._index import CorruptIndexError
from odradek.storage.offset_index import OffsetIndex
from odradek.storage.time_index import TimeIndex


def test_offset_index_append_lookup_and_kafka_layout(tmp_path):
    path = str(tmp_path / "00000000000000000100.index")
    idx = OffsetIndex(path, 100, max_index_size=1024)
    assert os.path.getsize(path) == 1024  # preallocated
    assert idx.lookup(150) == (100, 0)  # empty: base offset, position 0
    for i in range(1, 11):
        idx.append(100 + i * 10, i * 1000)
    assert idx.entries == 10
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(105) == (100, 0)
    assert idx.lookup(110) == (110, 1000)
    assert idx.lookup(119) == (110, 1000)
    assert idx.lookup(200) == (200, 10000)
    assert idx.lookup(10**9) == (200, 10000)
    with pytest.raises(ValueError):
        idx.append(200, 20000)  # not increasing
    idx.close()
    assert os.path.getsize(path) == 80  # trimmed to its entries on close
    with open(path, "rb") as f:
        assert struct.unpack(">ii", f.read(8)) == (10, 1000)  # relative offset, position

    again = OffsetIndex(path, 100, max_index_size=1024, writable=False)
    again.sanity_check()
    assert again.entries == 10 and again.last_offset == 200
    assert again.lookup(155) == (150, 5000)
    again.close()


def test_offset_index_truncate_and_full(tmp_path):
    idx = OffsetIndex(str(tmp_path / "0.index"), 0, max_index_size=8 * 4 + 5)
    assert idx.max_entries == 4
    for i in range(4):
        idx.append(i * 2 + 1, (i + 1) * 100)
    assert idx.is_full()
    with pytest.raises(ValueError):
        idx.append(100, 10000)
    idx.truncate_to(5)  # removes entries with offset >= 5
    assert idx.entries == 2 and idx.last_offset == 3
    idx.truncate_to(4)
    assert idx.entries == 2
    idx.truncate_to(0)
    assert idx.entries == 0 and idx.last_offset == 0
    idx.close()


def test_untrimmed_index_after_crash_is_trimmed_to_written_entries(tmp_path):
    path = str(tmp_path / "0.index")
    idx = OffsetIndex(path, 0, max_index_size=4096)
    idx.append(5, 100)
    idx.append(9, 300)
    idx.flush()
    idx.close_handler()  # a crash: no trim
    assert os.path.getsize(path) == 4096
    again = OffsetIndex(path, 0, max_index_size=4096)
    assert again.entries == 2 and again.last_offset == 9
    again.close()


def test_offset_index_sanity_check_spots_damage(tmp_path):
    path = str(tmp_path / "00000000000000000050.index")
    with open(path, "wb") as f:
        f.write(b"\x00\x00\x00\x05\x00\x00\x00\x10\x01")  # 9 bytes
    idx = OffsetIndex(path, 50, writable=False)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check()
    idx.close_handler()
    with open(path, "wb") as f:
        f.write(struct.pack(">ii", 5, 100) + struct.pack(">ii", -10, 50))
    idx = OffsetIndex(path, 50, writable=False)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check()
    idx.close_handler()


def test_time_index_semantics(tmp_path):
    path = str(tmp_path / "00000000000000000010.timeindex")
    ti = TimeIndex(path, 10, max_index_size=12 * 5)
    assert ti.lookup(1000) == (-1, 10)
    ti.maybe_append(1000, 12)
    ti.maybe_append(1000, 14)  # same timestamp: ignored
    ti.maybe_append(2000, 20)
    ti.maybe_append(3000, 30)
    assert ti.entries == 3
    assert ti.lookup(999) == (-1, 10)
    assert ti.lookup(1000) == (1000, 12)
    assert ti.lookup(2500) == (2000, 20)
    assert ti.lookup(10**12) == (3000, 30)
    ti.maybe_append(4000, 40)
    assert ti.is_full()  # one slot kept for the roll-time entry
    with pytest.raises(ValueError):
        ti.maybe_append(5000, 50)
    ti.maybe_append(5000, 50, skip_full_check=True)
    assert ti.entries == 5
    ti.truncate_to(30)
    assert ti.entries == 2 and ti.last_entry() == (2000, 20)
    ti.close()
    assert os.path.getsize(path) == 24
    with open(path, "rb") as f:
        assert struct.unpack(">qi", f.read(12)) == (1000, 2)
    again = TimeIndex(path, 10, writable=False)
    again.sanity_check()
    assert again.last_entry() == (2000, 20)
    again.close()
