"""Log compaction at the storage level: what a pass keeps, how logs are chosen, the checkpoint,
and that cleaning never changes offsets or order. Records are read back with kafka-python's
batch reader (an independent decoder), and every expectation is a replay of what was written."""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from storage_batches import now_ms, parse

from odradek.protocol import batch as batch_format
from odradek.protocol import errors
from odradek.protocol.batch_builder import build_batch
from odradek.protocol.control_records import COMMIT, build_control_batch
from odradek.protocol.record_batch import RecordBatch, iter_batches
from odradek.protocol.records import NewRecord
from odradek.storage import LogConfig, LogManager
from odradek.storage.checkpoint import CLEANER_OFFSET_CHECKPOINT, read_offset_checkpoint
from odradek.storage.cleaner import OffsetMap, Throttler
from odradek.storage.cleaner_manager import CleanerConfig, LogCleaner, loop_caller

COMPACT = {
    "cleanup.policy": "compact",
    "segment.bytes": "2048",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "60000",
    "file.delete.delay.ms": "0",
}


def manager(tmp_path, **overrides) -> LogManager:
    cfg = LogConfig.from_dict({**COMPACT, **overrides})
    return LogManager(str(tmp_path / "data"), cfg)


class Writer:
    """Appends keyed records to a log and remembers every (offset → key, value)."""

    def __init__(self, log, seed: int = 7):
        self.log = log
        self.written: dict[int, tuple[bytes | None, bytes | None]] = {}
        self.rng = random.Random(seed)

    def append(self, pairs, codec: int = 0, ts: int | None = None, **batch_kw) -> int:
        ts = now_ms() if ts is None else ts
        batch = build_batch([NewRecord(k, v, (), ts) for k, v in pairs], compression=codec, **batch_kw)
        info = self.log.append_as_leader(batch, 0, now_ms=max(ts, now_ms()))
        for i, (k, v) in enumerate(pairs):
            self.written[info.first_offset + i] = (k, v)
        self.log.high_watermark = self.log.log_end_offset
        return info.first_offset

    def random(self, n_batches: int, keys: int, per_batch: int = 5, tombstones: float = 0.1, codecs=(0,)):
        for i in range(n_batches):
            pairs = []
            for _ in range(per_batch):
                k = b"key-%d" % self.rng.randrange(keys)
                v = None if self.rng.random() < tombstones else b"value-%d-" % i + b"x" * 30
                pairs.append((k, v))
            self.append(pairs, codec=self.rng.choice(codecs))

    def latest(self, below: int | None = None) -> dict[bytes, tuple[int, bytes | None]]:
        out = {}
        for offset in sorted(self.written):
            if below is None or offset < below:
                k, v = self.written[offset]
                out[k] = (offset, v)
        return out


def read_batches(log) -> list[RecordBatch]:
    """Every batch from the log start, one read per segment (as a consumer fetches)."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        r = log.read(offset, 1 << 30)
        if r.records is None:
            break
        batches = list(iter_batches(r.records.read()))
        out.extend(batches)
        offset = batches[-1].next_offset
    return out


def read_records(log, oracle: bool = True) -> list:
    """(offset, key, value, timestamp) of every record from the log start, decoded by
    kafka-python (``oracle``; it has no lz4/zstd here) or by Odradek's codec."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        r = log.read(offset, 1 << 30)
        if r.records is None:
            break
        data = r.records.read()
        if oracle:
            batches = parse(data)
            records = [rec for b in batches for rec in b]
        else:
            batches = list(iter_batches(data))
            records = [rec for b in batches for rec in b.records()]
        for rec in records:
            if rec.offset >= offset:
                out.append((rec.offset, rec.key, rec.value, rec.timestamp))
        offset = batches[-1].next_offset
    return out


def check_compacted(log, writer: Writer, *, tombstones_gone: bool, oracle: bool = True) -> list:
    """The log reads back as: original offsets and contents, in order; below the active segment
    exactly the latest record per key (no tombstones once past their horizon); replaying
    everything gives the same state as replaying what was written."""
    got = read_records(log, oracle)
    offsets = [o for o, *_ in got]
    assert offsets == sorted(set(offsets))
    for offset, key, value, _ts in got:
        assert writer.written[offset] == (key, value), offset
    active = log.active_segment.base_offset
    latest_below = writer.latest(below=active)
    cleaned = [(o, k, v) for o, k, v, _ in got if o < active]
    keys = [k for _, k, _ in cleaned]
    assert len(keys) == len(set(keys)), "a key appears twice in the cleaned segments"
    for o, k, _v in cleaned:
        assert latest_below[k][0] == o
    expected_cleaned = {k for k, (o, v) in latest_below.items() if not (tombstones_gone and v is None)}
    assert set(keys) == expected_cleaned
    state: dict = {}
    for _o, k, v, _ in got:
        state[k] = v
    expected = {k: v for k, (o, v) in writer.latest().items()}
    assert {k: v for k, v in state.items() if v is not None} == {
        k: v for k, v in expected.items() if v is not None
    }
    return got


# ---- what a pass keeps --------------------------------------------------------------------


@pytest.mark.parametrize(
    "codecs,oracle",
    [((0,), True), ((1,), True), ((2, 3, 4), False)],
    ids=["plain", "gzip", "snappy-lz4-zstd"],
)
def test_latest_value_per_key_with_original_offsets(tmp_path, codecs, oracle):
    lm = manager(tmp_path)
    log = lm.get_or_create_log("t", 0)
    w = Writer(log)
    w.random(300, keys=40, codecs=codecs)
    size_before = log.size
    cleaner = LogCleaner(lm)
    result = cleaner.clean_once()
    assert result is not None and result.end_offset == log.active_segment.base_offset
    check_compacted(log, w, tombstones_gone=False, oracle=oracle)
    assert log.size < size_before / 3
    # Rewritten batches keep their codec.
    assert {b.compression for b in read_batches(log) if b.header.record_count} <= set(codecs)
    # Reopened: the same records.
    before = read_records(log, oracle)
    lm.shutdown()
    lm2 = manager(tmp_path)
    assert read_records(lm2.get_log("t", 0), oracle) == before


def test_timestamps_and_headers_survive_rewrite(tmp_path):
    lm = manager(tmp_path)
    log = lm.get_or_create_log("t", 0)
    ts0 = now_ms() - 5000
    batch = build_batch(
        [NewRecord(b"a", b"1", (("h1", b"x"),), ts0), NewRecord(b"b", b"2", (("h2", None),), ts0 + 7)]
    )
    log.append_as_leader(batch, 0)
    log.append_as_leader(build_batch([NewRecord(b"a", b"3", (), ts0 + 9)]), 0)
    log.roll()
    log.high_watermark = log.log_end_offset
    LogCleaner(lm).clean_once()
    got = []
    for b in iter_batches(log.read(0, 1 << 20).records.read()):
        got.extend(b.records())
    assert [(r.offset, r.key, r.value, r.timestamp, tuple(r.headers)) for r in got] == [
        (1, b"b", b"2", ts0 + 7, (("h2", None),)),
        (2, b"a", b"3", ts0 + 9, ()),
    ]


def test_tombstones_stay_for_delete_retention_then_go(tmp_path):
    lm = manager(tmp_path, **{"delete.retention.ms": "1000"})
    log = lm.get_or_create_log("t", 0)
    w = Writer(log)
    w.random(200, keys=30, tombstones=0.3)
    log.roll()
    cleaner = LogCleaner(lm)
    now = now_ms()
    cleaner.clean_once(now)
    got = check_compacted(log, w, tombstones_gone=False)
    assert any(v is None for _, _, v, _ in got), "tombstones stay until their horizon"
    # The horizon is stored in the batch (KIP-534), record timestamps unchanged.
    batches = read_batches(log)
    with_tombstones = [b for b in batches if any(r.value is None for r in b.records())]
    assert with_tombstones and all(b.header.attributes & batch_format.DELETE_HORIZON_BIT for b in with_tombstones)
    assert all(b.header.base_timestamp == now + 1000 for b in with_tombstones)
    # Nothing new is dirty, yet a pass after the horizon removes the tombstones.
    assert cleaner.clean_once(now + 500) is None
    assert cleaner.clean_once(now + 1001) is not None
    check_compacted(log, w, tombstones_gone=True)


def test_records_without_key_are_rejected_on_compacted_topics(tmp_path):
    lm = manager(tmp_path)
    log = lm.get_or_create_log("t", 0)
    for codec in (0, 4):
        batch = build_batch([NewRecord(b"k", b"v"), NewRecord(None, b"v")], compression=codec)
        with pytest.raises(errors.InvalidRecordError) as exc:
            log.append_as_leader(batch, 0)
        assert exc.value.code == 87  # INVALID_RECORD, as Kafka's LogValidator
        assert "Compacted topic cannot accept message without key" in str(exc.value)
        assert [i for i, _ in exc.value.context["record_errors"]] == [1]  # KIP-467: which record
    assert log.log_end_offset == 0
    plain = lm.get_or_create_log("plain", 0, LogConfig())
    plain.append_as_leader(build_batch([NewRecord(None, b"v")]), 0)


def test_the_active_segment_is_never_cleaned(tmp_path):
    lm = manager(tmp_path, **{"segment.bytes": str(1 << 20)})
    log = lm.get_or_create_log("t", 0)
    w = Writer(log)
    w.random(100, keys=5)
    assert len(log.segments) == 1
    assert LogCleaner(lm).clean_once() is None
    assert len(read_records(log)) == 500


def test_min_compaction_lag_holds_back_young_segments(tmp_path):
    lm = manager(tmp_path, **{"min.compaction.lag.ms": "60000"})
    log = lm.get_or_create_log("t", 0)
    w = Writer(log)
    old = now_ms() - 120_000
    for i in range(60):
        w.append([(b"k%d" % (i % 3), b"old-%d" % i + b"x" * 40)], ts=old)
    young_start = log.log_end_offset
    for i in range(60):
        w.append([(b"k%d" % (i % 3), b"new-%d" % i + b"x" * 40)])
    log.roll()
    cleaner = LogCleaner(lm)
    result = cleaner.clean_once()
    assert result is not None
    assert result.end_offset <= young_start
    got = read_records(log)
    young = [o for o, *_ in got if o >= result.end_offset]
    assert young == list(range(result.end_offset, log.log_end_offset)), "young records untouched"
    assert len([o for o, *_ in got if o < result.end_offset]) <= 3


def test_max_compaction_lag_forces_cleaning_below_the_dirty_ratio(tmp_path):
    lm = manager(tmp_path, **{"min.cleanable.dirty.ratio": "0.99", "max.compaction.lag.ms": "1000"})
    log = lm.get_or_create_log("t", 0)
    w = Writer(log)
    w.random(5, keys=5)
    w.random(200, keys=500, tombstones=0)  # mostly unique keys: little to gain
    log.roll()
    cleaner = LogCleaner(lm)
    # The first pass always qualifies (nothing is clean yet); afterwards new dirty data is a
    # small share of the log and only the lag makes it cleanable.
    cleaner.clean_once()
    w.random(2, keys=5)
    log.roll()
    assert cleaner.clean_once() is None
    assert cleaner.clean_once(now_ms() + 5000) is not None
    # KIP-354: compacted logs roll by max.compaction.lag.ms too.
    assert log._segment_ms == 1000


def test_filthiest_log_is_cleaned_first(tmp_path):
    lm = manager(tmp_path)
    a = Writer(lm.get_or_create_log("a", 0))
    b = Writer(lm.get_or_create_log("b", 0))
    a.random(100, keys=500, tombstones=0)
    b.random(100, keys=3, tombstones=0)
    a.log.roll()
    b.log.roll()
    cleaner = LogCleaner(lm)
    manager_ = cleaner.manager
    sa = manager_.dirty_stats(("a", 0), a.log, now_ms())
    sb = manager_.dirty_stats(("b", 0), b.log, now_ms())
    assert sa.ratio == sb.ratio == 1.0  # nothing clean yet
    cleaner.clean_once()
    cleaner.clean_once()
    # Both clean now; new dirt in b is a larger share of b (b shrank a lot).
    a.random(10, keys=500, tombstones=0)
    b.random(10, keys=3, tombstones=0)
    a.log.roll()
    b.log.roll()
    sa = manager_.dirty_stats(("a", 0), a.log, now_ms())
    sb = manager_.dirty_stats(("b", 0), b.log, now_ms())
    assert sb.ratio > sa.ratio
    plan = manager_.grab_filthiest(now_ms())
    assert (plan.topic, plan.partition) == ("b", 0)
    manager_.done_cleaning(plan, None)


def test_small_segments_are_grouped_into_one(tmp_path):
    lm = manager(tmp_path, **{"segment.bytes": "600"})
    log = lm.get_or_create_log("t", 0)
    w = Writer(log)
    for i in range(200):
        w.append([(b"k%d" % (i % 4), b"v%d" % i + b"x" * 100)])
    log.roll()
    n_before = len(log.segments)
    cleaner = LogCleaner(lm)
    cleaner.clean_once()
    # Groups are made from the sizes before cleaning (as Kafka's): these do not fit two a group.
    assert n_before > 50 and len(log.segments) == n_before
    for _ in range(2):  # now the cleaned, tiny segments merge (each keeps its 61-byte last batch)
        w.append([(b"k0", b"new")])
        log.roll()
        cleaner.clean_once()
    assert len(log.segments) <= 4  # merged old ones, the last append's, its group's, the active
    check_compacted(log, w, tombstones_gone=False)
    for seg in log.segments:
        assert seg.size <= 600


def test_a_small_offset_map_cleans_in_several_passes(tmp_path):
    lm = manager(tmp_path)
    log = lm.get_or_create_log("t", 0)
    w = Writer(log)
    w.random(300, keys=200, tombstones=0.05)
    log.roll()
    tiny = CleanerConfig(dedupe_buffer_size=OffsetMap.ENTRY_BYTES * 60, io_buffer_load_factor=1.0)
    cleaner = LogCleaner(lm, tiny)
    ends = []
    while True:
        result = cleaner.clean_once()
        if result is None:
            break
        ends.append(result.end_offset)
        assert len(ends) < 50
    assert len(ends) > 3 and ends == sorted(ends)
    assert ends[-1] == log.active_segment.base_offset
    check_compacted(log, w, tombstones_gone=False)


def test_transactional_and_control_batches_are_kept_verbatim(tmp_path):
    lm = manager(tmp_path)
    log = lm.get_or_create_log("t", 0)
    w = Writer(log)
    w.append([(b"k", b"plain-1")])
    txn_batch = build_batch(
        [NewRecord(b"k", b"txn-1")], producer_id=7, producer_epoch=0, base_sequence=0, transactional=True
    )
    txn_offset = log.append_as_leader(txn_batch, 0).first_offset
    marker = build_control_batch(COMMIT, producer_id=7, producer_epoch=0, coordinator_epoch=1)
    marker_offset = log.append_as_leader(marker, 0, origin="coordinator").first_offset
    w.append([(b"k", b"plain-2")])
    w.append([(b"other", b"x")])
    log.roll()
    log.high_watermark = log.log_end_offset
    LogCleaner(lm).clean_once()
    batches = read_batches(log)
    offsets = {b.base_offset: b for b in batches}
    assert txn_offset in offsets and offsets[txn_offset].is_transactional
    assert marker_offset in offsets and offsets[marker_offset].is_control
    assert 0 not in offsets  # the plain record superseded by plain-2 went
    # The transactional record did not shadow anything: plain-2 (later) stays.
    values = [r.value for b in batches if not b.is_control for r in b.records()]
    assert values == [b"txn-1", b"plain-2", b"x"]


def test_idempotent_producers_last_batch_survives_as_an_empty_batch(tmp_path):
    lm = manager(tmp_path)
    log = lm.get_or_create_log("t", 0)
    batch = build_batch([NewRecord(b"k", b"v1")], producer_id=42, producer_epoch=3, base_sequence=0)
    log.append_as_leader(batch, 0)
    for i in range(30):
        log.append_as_leader(build_batch([NewRecord(b"k", b"plain-%d" % i + b"x" * 80)]), 0)
    log.roll()
    log.high_watermark = log.log_end_offset
    LogCleaner(lm).clean_once()
    batches = read_batches(log)
    first = batches[0]
    assert first.base_offset == 0 and first.header.record_count == 0
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (42, 3, 0)
    # After a reload the producer's sequence state is intact: a retry is still a duplicate.
    lm.shutdown()
    lm2 = manager(tmp_path)
    log2 = lm2.get_log("t", 0)
    info = log2.append_as_leader(batch, 0)
    assert info.duplicate and info.first_offset == 0


def test_checkpoint_is_written_and_resumed(tmp_path):
    lm = manager(tmp_path)
    log = lm.get_or_create_log("t", 0)
    w = Writer(log)
    w.random(100, keys=10)
    log.roll()
    cleaner = LogCleaner(lm)
    result = cleaner.clean_once()
    path = os.path.join(lm.log_dirs[0], CLEANER_OFFSET_CHECKPOINT)
    assert read_offset_checkpoint(path) == {("t", 0): result.end_offset}
    assert cleaner.manager.checkpoint("t", 0) == result.end_offset
    lm.shutdown()
    lm2 = manager(tmp_path)
    cleaner2 = LogCleaner(lm2)
    log2 = lm2.get_log("t", 0)
    assert cleaner2.manager.first_dirty_offset(("t", 0), log2) == result.end_offset
    assert cleaner2.clean_once() is None  # nothing new is dirty
    # A checkpoint outside the log (e.g. after truncation) falls back to the log start.
    log2.truncate_to(5)
    assert cleaner2.manager.first_dirty_offset(("t", 0), log2) == log2.log_start_offset


def test_offset_map_and_throttler():
    m = OffsetMap(OffsetMap.ENTRY_BYTES * 10, 1.0)
    assert m.capacity == 10
    long_key = b"x" * 100
    m.put(b"a", 1)
    m.put(long_key, 5)
    m.put(b"a", 9)
    assert (m.get(b"a"), m.get(long_key), m.get(b"b"), len(m), m.latest_offset) == (9, 5, None, 2, 9)
    clock = [0.0]
    slept = []
    t = Throttler(1000.0, clock=lambda: clock[0])
    stop = threading.Event()
    stop.wait = lambda s: slept.append(s)  # noqa: E731
    t.throttle(500, stop)
    t.throttle(500, stop)
    assert slept == [0.5, 1.0]
    Throttler(float("inf")).throttle(10**9)


def test_throttled_pass_takes_as_long_as_the_rate_says(tmp_path):
    lm = manager(tmp_path)
    log = lm.get_or_create_log("t", 0)
    Writer(log).random(100, keys=5, per_batch=10)
    log.roll()
    size = log.size
    cleaner = LogCleaner(lm, CleanerConfig(max_io_bytes_per_second=size * 4, io_buffer_size=4096))
    t0 = time.monotonic()
    result = cleaner.clean_once()
    elapsed = time.monotonic() - t0
    charged = result.bytes_read + result.bytes_written
    assert elapsed >= charged / (size * 4) * 0.7


# ---- consistency with concurrent changes ---------------------------------------------------


def test_swap_refused_if_the_log_is_truncated_during_the_pass(tmp_path):
    lm = manager(tmp_path)
    log = lm.get_or_create_log("t", 0)
    w = Writer(log)
    w.random(100, keys=10)
    log.roll()
    cleaner = LogCleaner(lm)
    plan = cleaner.manager.grab_filthiest(now_ms())
    assert log.cleaning
    log.truncate_to(log.segments[2].base_offset + 1)
    from odradek.storage.cleaner import CleanerAborted

    with pytest.raises(CleanerAborted):
        cleaner.cleaners[0].clean(plan)
    cleaner.manager.done_cleaning(plan, None)
    assert not log.cleaning
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap"))]
    assert [o for o, *_ in read_records(log)] == list(range(log.log_end_offset))


def test_segments_deleted_during_the_pass_abort_it(tmp_path):
    lm = manager(tmp_path)
    log = lm.get_or_create_log("t", 0)
    w = Writer(log)
    w.random(100, keys=10)
    log.roll()
    cleaner = LogCleaner(lm)
    plan = cleaner.manager.grab_filthiest(now_ms())
    doomed = log.segments[1].base_offset
    log.maybe_increment_log_start_offset(doomed)
    assert log.delete_expired_files(now_ms() + 10**6) == 0  # not while the cleaner reads
    assert any(n.endswith(".deleted") for n in os.listdir(log.dir))
    from odradek.storage.cleaner import CleanerAborted

    with pytest.raises(CleanerAborted):
        cleaner.cleaners[0].clean(plan)
    cleaner.manager.done_cleaning(plan, None)
    assert log.delete_expired_files(now_ms() + 10**6) > 0
    assert cleaner.clean_once() is not None
    assert read_records(log)[0][0] >= doomed


@pytest.mark.parametrize(
    "threads,processes", [(1, False), (2, False), (2, True)], ids=["1-thread", "2-threads", "2-workers"]
)
def test_cleaner_runs_while_the_loop_appends_and_reads(tmp_path, threads, processes):
    """The broker's arrangement: appends and reads on an event loop, the cleaner in its threads
    (or their worker processes), every swap scheduled onto the loop. Every read sees a
    consistent log, and each log ends up compacted up to its active segment."""
    lm = manager(tmp_path, **{"segment.bytes": "4096"})
    writers = [Writer(lm.get_or_create_log(f"t{i}", 0), seed=3 + i) for i in range(2)]

    async def main():
        cleaner = LogCleaner(
            lm,
            CleanerConfig(threads=threads, backoff_ms=5, io_buffer_size=8192),
            call_owner=loop_caller(asyncio.get_running_loop()),
            use_processes=processes,
        )
        cleaner.start()
        try:
            for round_ in range(40):
                for w in writers:
                    w.random(20, keys=25, tombstones=0.05)
                    offsets = [o for o, *_ in read_records(w.log)]
                    assert offsets == sorted(set(offsets))
                await asyncio.sleep(0.005)
                if round_ % 10 == 0:
                    lm.cleanup(now_ms())
            deadline = time.monotonic() + 20
            for i, w in enumerate(writers):
                while cleaner.manager.checkpoint(f"t{i}", 0) != w.log.active_segment.base_offset:
                    assert time.monotonic() < deadline, "cleaner did not catch up"
                    await asyncio.sleep(0.02)
        finally:
            await asyncio.to_thread(cleaner.shutdown)
        return cleaner

    cleaner = asyncio.run(main())
    assert cleaner.passes >= 2
    for w in writers:
        check_compacted(w.log, w, tombstones_gone=False)
        assert not [n for n in os.listdir(w.log.dir) if n.endswith((".cleaned", ".swap"))]


def test_log_deleted_while_cleaning_keeps_files_open_until_released(tmp_path):
    lm = manager(tmp_path)
    log = lm.get_or_create_log("t", 0)
    Writer(log).random(50, keys=5)
    log.roll()
    cleaner = LogCleaner(lm)
    plan = cleaner.manager.grab_filthiest(now_ms())
    assert lm.delete_log("t", 0)
    lm.cleanup(now_ms() + 10**6)
    assert not plan.segments[0].log.closed  # deferred while the cleaner holds the log
    from odradek.storage.cleaner import CleanerAborted

    with pytest.raises(CleanerAborted):
        cleaner.cleaners[0].clean(plan)
    cleaner.manager.done_cleaning(plan, None)
    lm.cleanup(now_ms() + 10**6)
    assert plan.segments[0].log.closed
    assert os.listdir(lm.log_dirs[0]) == [] or all(
        not n.startswith("t-0") for n in os.listdir(lm.log_dirs[0])
    )


def test_kafka_python_batches_are_cleaned_too(tmp_path):
    lm = manager(tmp_path)
    log = lm.get_or_create_log("t", 0)
    for i in range(40):
        b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
        b.append(0, now_ms(), b"k%d" % (i % 4), b"v%d" % i, [("h", b"1")])
        log.append_as_leader(bytes(b.build()), 0)
    log.roll()
    log.high_watermark = log.log_end_offset
    LogCleaner(lm).clean_once()
    got = read_records(log)
    assert [(o, k, v) for o, k, v, _ in got] == [(36 + i, b"k%d" % i, b"v%d" % (36 + i)) for i in range(4)]


def test_a_batch_past_the_decompression_limit_is_kept_as_it_is(tmp_path, caplog):
    # The produce path refuses such batches for compacted topics; one can still be in a log
    # (a topic made compacted later, or replicated). The cleaner keeps it byte for byte and
    # leaves its keys out of the map, so nothing it would supersede goes either.
    from storage_batches import zeros_batch

    lm = manager(tmp_path, **{"segment.bytes": str(1 << 20)})
    log = lm.get_or_create_log("t", 0)
    w = Writer(log)
    w.append([(b"k", b"old")])
    bomb = bytearray(zeros_batch(65 << 20))  # key b"k", 65 MiB of zeros in a few KB
    batch_format.set_base_offset(bomb, 0, 1)
    log.append_as_follower(bytes(bomb))
    w.append([(b"k", b"new")])
    log.roll()
    log.high_watermark = log.log_end_offset
    LogCleaner(lm).clean_once()
    batches = read_batches(log)
    assert [b.base_offset for b in batches] == [1, 2]
    assert batches[0].data == bytes(bomb)
    assert "keeps the batch at offset 1 of t-0 as it is" in caplog.text
