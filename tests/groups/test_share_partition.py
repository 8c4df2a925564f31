"""A share partition's in-flight records (KIP-932) as pure state: acquisition, locks,
acknowledgements, the delivery limit, the start offset, lock timeouts, RENEW, the record
limits and aborted transactions."""

from __future__ import annotations

import struct

from odradek.broker.share.share_partition import (
    ACCEPT,
    REJECT,
    RELEASE,
    RENEW,
    SharePartition,
    aborted_batches,
    batch_ranges,
)

BATCHES = [(0, 4, 0, 100), (5, 9, 100, 100)]  # (first, last, position, size)


def test_records_go_to_one_member_at_a_time_and_come_back_after_the_lock():
    sp = SharePartition(0)
    runs, used = sp.acquire(BATCHES, "a", now_ms=0, lock_ms=1000, max_records=5, delivery_limit=5)
    assert runs == [(0, 4, 1)] and used == [0]
    runs, _ = sp.acquire(BATCHES, "b", now_ms=10, lock_ms=1000, max_records=100, delivery_limit=5)
    assert runs == [(5, 9, 1)]  # b gets only what a does not hold
    assert sp.acquire(BATCHES, "b", now_ms=20, lock_ms=1000, max_records=100, delivery_limit=5)[0] == []
    runs, _ = sp.acquire(BATCHES, "b", now_ms=1000, lock_ms=1000, max_records=100, delivery_limit=5)
    assert runs == [(0, 4, 2)]  # a's lock timed out: delivered a second time


def test_acknowledgements_move_the_start_offset_and_refuse_records_not_held():
    sp = SharePartition(0)
    sp.acquire(BATCHES, "a", now_ms=0, lock_ms=1000, max_records=100, delivery_limit=5)
    assert not sp.acknowledge("b", 0, 4, [ACCEPT])  # not b's
    assert sp.acknowledge("a", 0, 1, [ACCEPT])
    assert sp.start_offset == 2
    assert not sp.acknowledge("a", 0, 1, [ACCEPT])  # already acknowledged
    assert sp.acknowledge("a", 2, 4, [REJECT, RELEASE, ACCEPT])
    assert sp.start_offset == 3  # 2 archived; 3 released is available again
    runs, _ = sp.acquire(BATCHES, "b", now_ms=5, lock_ms=1000, max_records=100, delivery_limit=5)
    assert runs == [(3, 3, 2)]


def test_the_delivery_limit_archives_a_record():
    sp = SharePartition(0)
    batches = [(0, 0, 0, 70)]
    for attempt in range(1, 3):
        runs, _ = sp.acquire(batches, "a", now_ms=0, lock_ms=1000, max_records=10, delivery_limit=2)
        assert runs == [(0, 0, attempt)]
        assert sp.acknowledge("a", 0, 0, [RELEASE])
    assert sp.acquire(batches, "a", now_ms=0, lock_ms=1000, max_records=10, delivery_limit=2)[0] == []
    assert sp.start_offset == 1


def test_a_lock_runs_out_on_its_timer_and_a_late_acknowledgement_is_refused():
    sp = SharePartition(0)
    sp.acquire(BATCHES, "a", now_ms=0, lock_ms=1000, max_records=5, delivery_limit=5)
    assert not sp.acknowledge("a", 0, 4, [ACCEPT], now_ms=1000)  # its lock ended at 1000
    assert not sp.expire("a", 0, 4, deadline_ms=999, delivery_limit=5)  # another lock's task: nothing
    assert sp.expire("a", 0, 4, deadline_ms=1000, delivery_limit=5)
    assert sp.counts()["available"] == 5
    runs, _ = sp.acquire(BATCHES, "b", now_ms=1001, lock_ms=1000, max_records=5, delivery_limit=2)
    assert runs == [(0, 4, 2)]
    assert sp.expire("b", 0, 4, deadline_ms=2001, delivery_limit=2)  # the delivery limit: archived
    assert sp.start_offset == 5


def test_renew_restarts_a_lock():
    sp = SharePartition(0)
    sp.acquire(BATCHES, "a", now_ms=0, lock_ms=1000, max_records=5, delivery_limit=5)
    assert sp.acknowledge("a", 0, 4, [RENEW], now_ms=900, lock_ms=1000)
    assert sp.acknowledge("a", 0, 4, [ACCEPT], now_ms=1500)  # within the renewed lock
    assert sp.start_offset == 5


def test_record_limit_and_max_locks_leave_the_rest_for_later():
    sp = SharePartition(0)
    runs, _ = sp.acquire(BATCHES, "a", now_ms=0, lock_ms=1000, max_records=3, delivery_limit=5, record_limit=True)
    assert runs == [(0, 2, 1)]
    runs, _ = sp.acquire(BATCHES, "b", now_ms=0, lock_ms=1000, max_records=100, delivery_limit=5, max_locks=6)
    assert runs == [(3, 5, 1)]  # offsets 6.. wait until the window moves
    assert sp.acknowledge("a", 0, 2, [ACCEPT])
    runs, _ = sp.acquire(BATCHES, "b", now_ms=0, lock_ms=1000, max_records=100, delivery_limit=5, max_locks=6)
    assert runs == [(6, 8, 1)]


def _batch(base: int, count: int, pid: int, transactional: bool, control: bool = False) -> bytes:
    attributes = (0x10 if transactional else 0) | (0x20 if control else 0)
    body = struct.pack(">iBIhiqqqhi", 0, 2, 0, attributes, count - 1, 0, 0, pid, 0, 0) + struct.pack(">i", count)
    return struct.pack(">qi", base, len(body)) + body


def test_aborted_transactions_batches_are_found():
    data = b"".join([
        _batch(0, 2, pid=7, transactional=True),  # aborted
        _batch(2, 1, pid=8, transactional=False),
        _batch(3, 1, pid=7, transactional=True, control=True),  # the abort marker
        _batch(4, 1, pid=7, transactional=True),  # a later, committed transaction
    ])
    batches = batch_ranges(data)
    assert [(a, b) for a, b, _, _ in batches] == [(0, 1), (2, 2), (3, 3), (4, 4)]
    assert aborted_batches(data, batches, [(7, 0)]) == {0}
