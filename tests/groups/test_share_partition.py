"""A share partition's in-flight records (KIP-932) as pure state: acquisition, locks,
acknowledgements, the delivery limit and the start offset."""

from __future__ import annotations

from odradek.broker.share.share_partition import ACCEPT, REJECT, RELEASE, SharePartition

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
