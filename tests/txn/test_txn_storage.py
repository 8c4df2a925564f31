"""The log side of transactions, without a broker: the last stable offset, the ``.txnindex``
(Kafka's 34-byte entries), aborted-transaction lookup for read_committed fetches, and all of
it surviving snapshots, crashes, truncation and compaction."""

from __future__ import annotations

import os
import struct

import pytest

from odradek.protocol import errors
from odradek.protocol.batch_builder import build_batch
from odradek.protocol.control_records import ABORT, COMMIT, build_control_batch
from odradek.storage.cleaner_manager import LogCleaner
from odradek.storage.log import Log
from odradek.storage.log_config import LogConfig
from odradek.storage.log_manager import LogManager
from odradek.storage.txn_index import ENTRY_SIZE, AbortedTxn, read_entries


def data(log, pid=-1, epoch=0, seq=0, n=2, value=b"v", key=b"k"):
    batch = build_batch(
        [(key, value, (), None)] * n,
        producer_id=pid,
        producer_epoch=epoch if pid >= 0 else -1,
        base_sequence=seq if pid >= 0 else -1,
        transactional=pid >= 0,
    )
    info = log.append_as_leader(batch, 0)
    log.high_watermark = log.log_end_offset
    return info.first_offset


def marker(log, pid, committed, epoch=0, coordinator_epoch=0):
    batch = build_control_batch(
        COMMIT if committed else ABORT,
        producer_id=pid,
        producer_epoch=epoch,
        coordinator_epoch=coordinator_epoch,
    )
    info = log.append_as_leader(batch, 0, origin="coordinator")
    log.high_watermark = log.log_end_offset
    return info.first_offset


def aborted(log, start=0, upper=None):
    upper = log.log_end_offset if upper is None else upper
    return [(t.producer_id, t.first_offset) for t in log.collect_aborted_transactions(start, upper)]


def test_lso_waits_for_the_oldest_open_transaction(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    data(log)  # 0-1: plain
    first_a = data(log, pid=1)  # 2-3
    data(log)  # 4-5
    first_b = data(log, pid=2)  # 6-7
    assert log.last_stable_offset == first_a
    marker(log, 1, committed=True)  # 8
    assert log.last_stable_offset == first_b
    marker(log, 2, committed=False)  # 9
    assert log.last_stable_offset == log.high_watermark == 10
    # the LSO never passes the high watermark
    data(log, pid=3)
    log.high_watermark = 10
    assert log.last_stable_offset == 10


def test_abort_marker_writes_kafkas_34_byte_entry(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    first_a = data(log, pid=5)  # 0-1
    first_b = data(log, pid=6)  # 2-3, still open when 5 aborts
    m = marker(log, 5, committed=False)  # 4
    path = os.path.join(log.dir, "00000000000000000000.txnindex")
    raw = open(path, "rb").read()
    assert len(raw) == ENTRY_SIZE == 34
    assert struct.unpack(">hqqqq", raw) == (0, 5, first_a, m, first_b)  # LSO: 6's txn is still open
    marker(log, 6, committed=True)  # commits leave no entry
    assert read_entries(path) == [AbortedTxn(5, first_a, m, first_b)]
    assert aborted(log) == [(5, first_a)]
    assert aborted(log, start=m + 1) == []  # a fetch past the marker needs no entry


def test_collect_spans_segments_and_stops_once_complete(tmp_path):
    log = Log(str(tmp_path / "t-0"), LogConfig.from_dict({"segment.bytes": "600"}))
    spans = []
    for pid in range(10, 16):
        first = data(log, pid=pid, n=3, value=b"x" * 40)
        last = marker(log, pid, committed=pid % 2 == 0)
        spans.append((pid, first, last))
    assert len(log.segments) > 2
    expected = [(pid, first) for pid, first, _ in spans if pid % 2 == 1]
    assert aborted(log) == expected
    # a fetch from the middle only sees the transactions overlapping it
    pid, first, last = spans[3]
    assert aborted(log, start=first, upper=last) == [(13, first)]


def test_snapshot_keeps_open_transaction_across_clean_restart(tmp_path):
    d = str(tmp_path / "t-0")
    log = Log(d)
    data(log)
    first = data(log, pid=9)
    log.close()
    log = Log(d, high_watermark=4)
    assert log.last_stable_offset == first
    m = marker(log, 9, committed=False)
    assert log.last_stable_offset == log.log_end_offset
    assert aborted(log) == [(9, first)]
    assert m == 4


@pytest.mark.parametrize("lose_snapshots", [False, True])
def test_unclean_restart_rebuilds_txn_state_and_index_from_the_log(tmp_path, lose_snapshots):
    d = str(tmp_path / "t-0")
    cfg = LogConfig.from_dict({"segment.bytes": "500"})
    log = Log(d, cfg)
    for pid in (21, 22, 23):
        data(log, pid=pid, value=b"y" * 60)
    marker(log, 22, committed=False)
    data(log, pid=24, value=b"y" * 60)
    marker(log, 21, committed=True)
    marker(log, 23, committed=False)
    expected_aborted = aborted(log)
    expected_lso = log.last_stable_offset
    hw = log.high_watermark
    for seg in log.segments:
        seg.flush()
    # a crash: no clean close, and perhaps every index and snapshot gone
    if lose_snapshots:
        for name in os.listdir(d):
            if name.endswith((".snapshot", ".txnindex")):
                os.unlink(os.path.join(d, name))
    log = Log(d, cfg, had_clean_shutdown=False, high_watermark=hw)
    assert aborted(log) == expected_aborted
    assert log.last_stable_offset == expected_lso
    assert sorted(log.producer_state.ongoing) == [24]


def test_truncation_drops_entries_above_the_cut(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    first = data(log, pid=31)
    m1 = marker(log, 31, committed=False)
    data(log, pid=32)
    marker(log, 32, committed=False)
    log.truncate_to(m1 + 1)
    log.high_watermark = log.log_end_offset
    assert aborted(log) == [(31, first)]
    assert log.last_stable_offset == log.log_end_offset


def test_markers_from_old_epochs_are_refused(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    data(log, pid=41, epoch=3)
    marker(log, 41, committed=False, epoch=4, coordinator_epoch=2)  # a fence: epoch bumped
    with pytest.raises(errors.InvalidProducerEpochError):
        marker(log, 41, committed=True, epoch=3, coordinator_epoch=2)
    with pytest.raises(errors.TransactionCoordinatorFencedError):
        marker(log, 41, committed=True, epoch=4, coordinator_epoch=1)
    # the zombie's data is refused too, and the new epoch starts its sequences at 0
    with pytest.raises(errors.InvalidProducerEpochError):
        data(log, pid=41, epoch=3, seq=2)
    data(log, pid=41, epoch=5, seq=0)


def test_compaction_keeps_the_aborted_index_of_cleaned_segments(tmp_path):
    cfg = {
        "cleanup.policy": "compact",
        "segment.bytes": "700",
        "min.cleanable.dirty.ratio": "0.01",
        "file.delete.delay.ms": "0",
    }
    lm = LogManager(str(tmp_path / "data"), LogConfig.from_dict(cfg))
    log = lm.get_or_create_log("t", 0)
    spans = []
    for i in range(8):
        data(log, key=b"plain-%d" % (i % 2), value=b"p" * 50)
        first = data(log, pid=50 + i, key=b"txn-%d" % i, value=b"t" * 50)
        marker(log, 50 + i, committed=i % 3 != 0)
        if i % 3 == 0:
            spans.append((50 + i, first))
    log.roll()
    log.high_watermark = log.log_end_offset
    before = aborted(log)
    assert before == spans
    size = log.size
    LogCleaner(lm).clean_once()
    assert log.size < size  # superseded plain records went: cleaned segments were swapped in
    assert aborted(log) == before  # the cleaned segments kept their aborted transactions
    lm.shutdown({("t", 0): log.high_watermark})
    reopened = LogManager(str(tmp_path / "data"), LogConfig.from_dict(cfg)).get_or_create_log("t", 0)
    reopened.high_watermark = reopened.log_end_offset
    assert aborted(reopened) == before


class Crash(BaseException):
    """Stands in for SIGKILL at a fault point."""


@pytest.mark.parametrize(
    "point", ["cleaner-after-cleaned", "cleaner-after-swap", "cleaner-after-old-deleted"]
)
def test_a_crash_during_the_swap_keeps_the_aborted_index(tmp_path, monkeypatch, point):
    from odradek.storage import cleaner as cleaner_module
    from odradek.storage import local_log as local_log_module

    cfg = {
        "cleanup.policy": "compact",
        "segment.bytes": "700",
        "min.cleanable.dirty.ratio": "0.01",
        "file.delete.delay.ms": "0",
    }
    lm = LogManager(str(tmp_path / "data"), LogConfig.from_dict(cfg))
    log = lm.get_or_create_log("t", 0)
    for i in range(6):
        data(log, key=b"plain", value=b"p" * 50)
        data(log, pid=70 + i, key=b"txn-%d" % i, value=b"t" * 50)
        marker(log, 70 + i, committed=i % 2 == 0)
    log.roll()
    log.high_watermark = log.log_end_offset
    lm.checkpoint_all()
    before = aborted(log)
    assert len(before) == 3

    def fault(name):
        if name == point:
            raise Crash(name)

    monkeypatch.setattr(cleaner_module, "fault_point", fault)
    monkeypatch.setattr(local_log_module, "fault_point", fault)
    monkeypatch.setattr(cleaner_module._CleanedSegmentWriter, "discard", lambda self: None)
    with pytest.raises(Crash):
        LogCleaner(lm).clean_once()
    monkeypatch.undo()
    reopened = LogManager(str(tmp_path / "data"), LogConfig.from_dict(cfg)).get_log("t", 0)
    reopened.high_watermark = reopened.log_end_offset
    assert aborted(reopened) == before
    assert not [n for n in os.listdir(reopened.dir) if n.endswith((".cleaned", ".swap", ".deleted"))]
