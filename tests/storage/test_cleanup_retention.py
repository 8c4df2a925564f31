"""Retention (cleanup.policy=delete): by time (each segment's largest timestamp), by size (the
whole partition) and by log start offset; rolling first when everything expired; ``.deleted``
files and file.delete.delay.ms; what readers see meanwhile."""

from __future__ import annotations

import os

import pytest
from storage_batches import kbatch, now_ms

from odradek.protocol import errors
from odradek.storage import Log, LogConfig, LogManager
from odradek.storage.cleaner_manager import LogCleaner

HOUR = 3600_000


def make_log(tmp_path, **cfg) -> Log:
    return Log(str(tmp_path / "t-0"), LogConfig.from_dict({"segment.bytes": "1000", **cfg}))


def fill(log: Log, timestamps: list[int]) -> list[int]:
    """One 2-record batch per timestamp; returns the first offset of each."""
    firsts = []
    for ts in timestamps:
        firsts.append(log.append_as_leader(kbatch(2, ts=ts), 0, now_ms=now_ms()).first_offset)
    log.high_watermark = log.log_end_offset
    return firsts


def files(log: Log, suffix: str) -> list[str]:
    return sorted(n for n in os.listdir(log.dir) if n.endswith(suffix))


def test_time_retention_judges_each_segment_by_its_largest_timestamp(tmp_path):
    now = now_ms()
    log = make_log(tmp_path, **{"retention.ms": str(HOUR)})
    fill(log, [now - 3 * HOUR] * 12)  # old segments
    fill(log, [now - 3 * HOUR] * 3 + [now - 60_000])  # one fresh record keeps its segment
    fill(log, [now - 3 * HOUR] * 12)  # old again, but after a fresh segment: kept (prefix only)
    segments = log.segments
    fresh = next(s for s in segments if s.largest_timestamp >= now - 60_000)
    deleted = log.enforce_retention(now)
    assert deleted == segments.index(fresh)
    assert log.segments[0] is fresh
    assert log.log_start_offset == fresh.base_offset
    # File age is irrelevant: the kept old-timestamp segments were written just now.
    assert log.enforce_retention(now) == 0
    # retention.ms=-1 keeps everything.
    log.update_config(log.config.with_overrides({"retention.ms": "-1"}))
    assert log.enforce_retention(now + 100 * HOUR) == 0


def test_size_retention_counts_the_whole_partition(tmp_path):
    log = make_log(tmp_path, **{"retention.bytes": "3000"})
    fill(log, [now_ms()] * 40)
    sizes = [s.size for s in log.segments]
    total = sum(sizes)
    log.enforce_retention()
    # Oldest segments go while what remains stays at or above retention.bytes.
    expect, excess = 0, total - 3000
    for size in sizes:
        if excess - size < 0:
            break
        excess -= size
        expect += 1
    assert len(sizes) - len(log.segments) == expect
    assert log.size >= 3000 and log.size - log.segments[0].size < 3000


def test_log_start_offset_removes_segments_wholly_below_it_for_any_policy(tmp_path):
    log = make_log(tmp_path, **{"cleanup.policy": "compact"})
    fill(log, [now_ms()] * 30)
    second = log.segments[1].base_offset
    third = log.segments[2].base_offset
    assert log.maybe_increment_log_start_offset(third - 1)
    assert log.segments[0].base_offset == second  # the segment holding the start stays
    assert log.log_start_offset == third - 1
    with pytest.raises(errors.OffsetOutOfRangeError):
        log.read(third - 2, 100)
    assert log.fetch_offset_by_timestamp(-2) == (third - 1, -1)
    # Compacted logs get no time or size retention.
    log.update_config(log.config.with_overrides({"retention.ms": "1", "retention.bytes": "1"}))
    assert log.enforce_retention(now_ms() + HOUR) == 0


def test_everything_expired_rolls_first_then_deletes(tmp_path):
    log = make_log(tmp_path, **{"retention.ms": "1000"})
    fill(log, [now_ms() - HOUR] * 20)
    leo = log.log_end_offset
    n = len(log.segments)
    assert log.enforce_retention() == n
    assert [s.base_offset for s in log.segments] == [leo]
    assert (log.log_start_offset, log.log_end_offset, log.active_segment.size) == (leo, leo, 0)
    assert log.enforce_retention() == 0  # an empty active segment is never deleted
    assert log.append_as_leader(kbatch(1), 0).first_offset == leo
    # Survives a reopen: the new segment's base offset is the log start.
    log.close()
    log2 = make_log(tmp_path, **{"retention.ms": "1000"})
    assert (log2.log_start_offset, log2.log_end_offset) == (leo, leo + 1)


def test_nothing_above_the_high_watermark_is_deleted(tmp_path):
    log = make_log(tmp_path, **{"retention.ms": "1000"})
    fill(log, [now_ms() - HOUR] * 20)
    log.high_watermark = log.segments[2].base_offset + 1
    assert log.enforce_retention() == 2
    assert log.log_start_offset <= log.high_watermark


def test_deleted_files_wait_for_file_delete_delay(tmp_path):
    log = make_log(tmp_path, **{"retention.ms": "1000", "file.delete.delay.ms": "5000"})
    fill(log, [now_ms() - HOUR] * 12 + [now_ms()] * 4)
    slice_ = log.read(0, 1 << 20).records
    data = slice_.read()
    now = now_ms()
    n = log.enforce_retention(now)
    assert n >= 2
    # Renamed at once, whole segments (log and both indexes), none half-renamed.
    deleted = files(log, ".deleted")
    stems = {name.split(".")[0] for name in deleted}
    assert len(stems) == n
    for stem in stems:
        assert not [x for x in os.listdir(log.dir) if x.startswith(stem) and not x.endswith(".deleted")]
        assert f"{stem}.log.deleted" in deleted
    assert slice_.read() == data  # readers holding a slice still read it
    assert log.delete_expired_files(now + 4999) == 0
    assert files(log, ".deleted")
    assert log.delete_expired_files(now + 5000) == n
    assert files(log, ".deleted") == []


def test_leftover_deleted_files_are_removed_at_load(tmp_path):
    log = make_log(tmp_path, **{"retention.ms": "1000", "file.delete.delay.ms": "60000"})
    fill(log, [now_ms() - HOUR] * 12 + [now_ms()] * 2)
    log.enforce_retention()
    assert files(log, ".deleted")
    # A crash: the object is abandoned with its .deleted files pending.
    log2 = make_log(tmp_path, **{"retention.ms": "1000"})
    assert files(log2, ".deleted") == []
    assert log2.log_start_offset == log2.segments[0].base_offset > 0


def test_log_manager_cleanup_persists_the_new_start_and_skips_logs_being_cleaned(tmp_path):
    cfg = LogConfig.from_dict({"segment.bytes": "1000", "retention.ms": "1000", "file.delete.delay.ms": "0"})
    d = str(tmp_path / "data")
    lm = LogManager(d, cfg)
    log = lm.get_or_create_log("t", 0)
    fill(log, [now_ms() - HOUR] * 10 + [now_ms()] * 3)
    busy = lm.get_or_create_log("busy", 0)
    fill(busy, [now_ms() - HOUR] * 10 + [now_ms()] * 3)
    busy.cleaning = True
    n = lm.cleanup()
    assert n > 0 and files(log, ".deleted") == []  # delay 0: removed in the same sweep
    assert busy.log_start_offset == 0 and len(busy.segments) == 3
    busy.cleaning = False
    assert lm.cleanup() > 0 and busy.log_start_offset > 0
    start = log.log_start_offset
    lm.shutdown()
    lm2 = LogManager(d, cfg)
    assert lm2.get_log("t", 0).log_start_offset == start


def test_compact_delete_policy_gets_both(tmp_path):
    cfg = LogConfig.from_dict(
        {
            "segment.bytes": "1000",
            "cleanup.policy": "compact,delete",
            "retention.ms": str(HOUR),
            "min.cleanable.dirty.ratio": "0.01",
            "file.delete.delay.ms": "0",
        }
    )
    lm = LogManager(str(tmp_path / "data"), cfg)
    log = lm.get_or_create_log("t", 0)
    fill(log, [now_ms() - 3 * HOUR] * 10 + [now_ms()] * 20)
    lm.cleanup()
    assert log.log_start_offset > 0
    before = log.size
    assert LogCleaner(lm).clean_once() is not None  # kbatch keys repeat: k0, k1
    assert log.size < before
