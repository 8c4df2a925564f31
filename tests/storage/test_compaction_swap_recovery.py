"""Crash safety of the cleaner's swap (``.cleaned`` → ``.swap`` → ``.log``): a crash at every
step leaves files that the next load turns into a consistent log — the old segments before
the commit point, the cleaned one after it — and nothing that should remain is lost."""

from __future__ import annotations

import os

import pytest
from test_compaction_cleaner import Writer, manager, read_records

from odradek.storage import cleaner as cleaner_module
from odradek.storage import local_log as local_log_module
from odradek.storage.cleaner_manager import LogCleaner
from odradek.storage.log_manager import CLEAN_SHUTDOWN_FILE


class Crash(BaseException):
    """Stands in for SIGKILL: nothing after the fault point runs, no cleanup."""


def crash_at(monkeypatch, point: str) -> None:
    def fault(name):
        if name == point:
            raise Crash(name)

    monkeypatch.setattr(cleaner_module, "fault_point", fault)
    monkeypatch.setattr(local_log_module, "fault_point", fault)
    monkeypatch.setattr(cleaner_module._CleanedSegmentWriter, "discard", lambda self: None)


def build(tmp_path, keep_first: bool = True):
    lm = manager(tmp_path, **{"segment.bytes": "3000"})
    log = lm.get_or_create_log("t", 0)
    w = Writer(log, seed=11)
    if keep_first:  # keys written once: the first group keeps something
        w.append([(b"once-%d" % i, b"stays") for i in range(5)])
    w.random(150, keys=20, tombstones=0.1)
    log.roll()
    lm.checkpoint_all()
    return lm, log, w


def assert_consistent(log, w: Writer) -> list:
    """Offsets increase, every record is the one written at its offset, and replaying the log
    gives the latest value of every key (nothing that should remain was lost)."""
    got = read_records(log)
    offsets = [o for o, *_ in got]
    assert offsets == sorted(set(offsets))
    state = {}
    for o, k, v, _ in got:
        assert w.written[o] == (k, v)
        state[k] = v
    latest = {k: v for k, (o, v) in w.latest().items()}
    assert {k: v for k, v in state.items() if v is not None} == {
        k: v for k, v in latest.items() if v is not None
    }
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap"))]
    return got


@pytest.mark.parametrize("keep_first", [True, False], ids=["group-keeps-records", "group-emptied"])
@pytest.mark.parametrize(
    "point,committed",
    [
        ("cleaner-after-map", False),
        ("cleaner-after-cleaned", False),
        ("cleaner-after-swap", True),
        ("cleaner-after-old-deleted", True),
    ],
)
def test_crash_during_swap_recovers_on_load(tmp_path, monkeypatch, point, committed, keep_first):
    lm, log, w = build(tmp_path, keep_first)
    original = read_records(log)
    n_segments = len(log.segments)
    crash_at(monkeypatch, point)
    with pytest.raises(Crash):
        LogCleaner(lm).clean_once()
    names = os.listdir(log.dir)
    if point == "cleaner-after-cleaned":
        assert any(n.endswith(".log.cleaned") for n in names)
    if point == "cleaner-after-swap":
        assert any(n.endswith(".log.swap") for n in names)
    if point == "cleaner-after-old-deleted":
        assert any(n.endswith(".log.swap") for n in names) and any(n.endswith(".log.deleted") for n in names)
    monkeypatch.undo()
    # "Restart": no clean-shutdown marker, the old process's objects abandoned.
    assert not os.path.exists(os.path.join(lm.log_dirs[0], CLEAN_SHUTDOWN_FILE))
    lm2 = manager(tmp_path, **{"segment.bytes": "3000"})
    log2 = lm2.get_log("t", 0)
    got = assert_consistent(log2, w)
    assert not [n for n in os.listdir(log2.dir) if n.endswith(".deleted")]
    if committed and keep_first:
        assert len(got) < len(original)  # the first group's cleaning took effect
        assert len(log2.segments) <= n_segments
    elif committed:
        # An emptied first group: its swap file is empty; the old segment either survived
        # (crash before it was renamed) or went (after): either way nothing live was lost.
        assert len(got) <= len(original)
    else:
        assert got == original
        assert len(log2.segments) == n_segments
    # Indexes were rebuilt where missing (an empty segment needs none), and lookups work everywhere.
    for seg in log2.segments:
        assert seg.indexes_exist() or seg.size == 0
    for o, *_ in got:
        r = log2.read(o, 1)
        assert r.records is not None and r.records.first_offset <= o
    # And the next pass finishes the job.
    cleaner = LogCleaner(lm2)
    assert cleaner.clean_once() is not None
    assert_consistent(log2, w)


def test_index_swap_files_and_strays_are_dropped_at_load(tmp_path):
    lm, log, w = build(tmp_path)
    original = read_records(log)
    base = log.segments[0].base_offset
    prefix = os.path.join(log.dir, f"{base:020d}")
    for name in (".index.swap", ".timeindex.swap", ".log.cleaned", ".index.cleaned"):
        with open(prefix + name, "wb") as f:
            f.write(b"\x00" * 16)
    lm2 = manager(tmp_path, **{"segment.bytes": "3000"})
    log2 = lm2.get_log("t", 0)
    assert read_records(log2) == original
    assert_consistent(log2, w)


def test_reads_taken_before_a_swap_stay_valid(tmp_path):
    lm, log, w = build(tmp_path)
    before = log.read(0, 1 << 20).records
    data = before.read()
    LogCleaner(lm).clean_once()
    assert before.path.endswith(".deleted")
    assert before.read() == data  # the old file is renamed, still open, until file.delete.delay.ms
    assert_consistent(log, w)
    lm.cleanup()  # file.delete.delay.ms=0: now it is closed and gone
    assert not os.path.exists(before.path)
