"""A broker restart mid-transaction (SIGTERM, kill -9, or a crash between the commit decision
and its markers) recovers the coordinator from ``__transaction_state`` and the partitions'
open transactions from their logs, then completes or aborts the transaction cleanly."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from support import wait_until
from txn_support import SMALL_INTERNAL_TOPICS, Raw, ck_producer, create_topic, read_ours

import odradek
from odradek.client.structs import TopicPartition


def settle(raw, tid: str, state: str):
    return wait_until(
        lambda: (d := raw.describe(tid).get(tid)) is not None and d.transaction_state == state and d,
        timeout=15,
        message=f"{tid} to reach {state}",
    )


def test_clean_restart_mid_transaction_then_commit(own_broker, topic_name):
    broker = own_broker(**SMALL_INTERNAL_TOPICS)
    create_topic(broker, topic_name, 2)
    tid = f"sigterm-{topic_name}"
    p = ck_producer(broker, transactional_id=tid, enable_idempotence=True)
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(6):
        p.produce(topic_name, b"before-%d" % i, partition=i % 2)
    p.flush(30)
    broker.restart(clean=True)
    with Raw(broker) as raw:
        d = settle(raw, tid, "Ongoing")  # the coordinator state came back
        assert d.topics == [(topic_name, [0, 1])]
        assert raw.list_offset(topic_name, 0, isolation=1) == 0  # the open transaction still holds the LSO
    for i in range(4):
        p.produce(topic_name, b"after-%d" % i, partition=i % 2)
    p.commit_transaction(60)
    expected = [b"before-%d" % i for i in range(6)] + [b"after-%d" % i for i in range(4)]
    assert sorted(read_ours(broker, topic_name, 2)) == sorted(expected)


def test_kill_9_mid_transaction_then_a_successor_aborts_it(own_broker, topic_name):
    broker = own_broker(**SMALL_INTERNAL_TOPICS)
    create_topic(broker, topic_name, 2)
    tid = f"kill9-{topic_name}"
    p = ck_producer(broker, transactional_id=tid)
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(6):
        p.produce(topic_name, b"lost-%d" % i, partition=i % 2)
    p.flush(30)
    broker.restart(clean=False)
    with Raw(broker) as raw:
        settle(raw, tid, "Ongoing")
        assert raw.list_offset(topic_name, 1, isolation=1) == 0  # rebuilt from the log after the crash
        with odradek.Producer(bootstrap_servers=broker.bootstrap_servers, transactional_id=tid) as successor:
            successor.init_transactions(30)  # fences the old producer and aborts its transaction
            successor.begin_transaction()
            successor.send(topic_name, b"successor", partition=0)
            successor.commit_transaction(30)
        for partition in (0, 1):
            assert raw.list_offset(topic_name, partition, 1) == raw.list_offset(topic_name, partition, 0)
    assert read_ours(broker, topic_name, 2) == [b"successor"]
    with pytest.raises(KafkaException):
        p.commit_transaction(10)


@pytest.mark.parametrize(
    "point,committed",
    [("txn-after-prepare", True), ("txn-after-prepare", False), ("txn-after-markers", True)],
)
def test_crash_between_the_decision_and_its_markers(own_broker, topic_name, monkeypatch, point, committed):
    monkeypatch.setenv("ODRADEK_STORAGE_FAULT", point)
    broker = own_broker(**SMALL_INTERNAL_TOPICS)
    monkeypatch.delenv("ODRADEK_STORAGE_FAULT")
    create_topic(broker, topic_name, 2)
    tid, group = f"crash-{topic_name}", f"g-{topic_name}"
    with Raw(broker) as raw:
        assert raw.find_txn_coordinator(tid).error_code == 0
        r = raw.init_pid(tid)
        pid, epoch = r.producer_id, r.producer_epoch
        assert raw.add_partitions(tid, pid, epoch, topic_name, [0, 1]) == {
            (topic_name, 0): 0,
            (topic_name, 1): 0,
        }
        for partition in (0, 1):
            assert (
                raw.produce_txn(
                    tid, pid, epoch, 0, topic_name, partition, [b"p%d-a" % partition, b"p%d-b" % partition]
                )
                == 0
            )
        raw.request(10, 3, {"key": group, "key_type": 0})  # creates __consumer_offsets
        assert raw.add_offsets(tid, pid, epoch, group) == 0
        assert raw.txn_offset_commit(tid, pid, epoch, group, topic_name, {0: 2, 1: 2}) == {0: 0, 1: 0}
        with pytest.raises(ConnectionError):
            raw.end_txn(tid, pid, epoch, committed)  # the broker dies at the fault point
    broker.proc.wait(10)
    broker.start()
    with Raw(broker) as raw:
        settle(raw, tid, "CompleteCommit" if committed else "CompleteAbort")
        # a retry of the decision is answered as done, the opposite one refused
        assert raw.end_txn(tid, pid, epoch, committed) == 0
        assert raw.end_txn(tid, pid, epoch, not committed) == 48
        for partition in (0, 1):
            assert raw.list_offset(topic_name, partition, 1) == raw.list_offset(topic_name, partition, 0)
        stable = raw.offset_fetch(group, topic_name, [0, 1], require_stable=True)
    expected = sorted(b"p%d-%s" % (p, x) for p in (0, 1) for x in (b"a", b"b")) if committed else []
    assert sorted(read_ours(broker, topic_name, 2)) == expected
    assert stable == ({0: (2, 0), 1: (2, 0)} if committed else {0: (-1, 0), 1: (-1, 0)})
    with odradek.Consumer(bootstrap_servers=broker.bootstrap_servers, group_id=group) as c:
        got = c.committed([TopicPartition(topic_name, 0)])[TopicPartition(topic_name, 0)]
        assert (got.offset if got else None) == (2 if committed else None)
