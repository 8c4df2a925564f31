"""Time-driven coordinator work on a broker with short intervals: a transaction left open past
its timeout is aborted (its producer fenced), and idle transactional ids expire."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException
from support import wait_until
from txn_support import SMALL_INTERNAL_TOPICS, Raw, ck_producer, create_topic, read_ours

from odradek.testing.process import BrokerProcess


@pytest.fixture(scope="module")
def quick_broker(tmp_path_factory):
    proc = BrokerProcess(
        tmp_path_factory.mktemp("txn-timeouts") / "data",
        overrides={
            **SMALL_INTERNAL_TOPICS,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 100,
            "transaction.remove.expired.transaction.cleanup.interval.ms": 100,
            "transactional.id.expiration.ms": 2500,
        },
    )
    proc.start()
    yield proc
    proc.stop()


def test_transaction_left_open_past_its_timeout_is_aborted(quick_broker, topic_name):
    broker = quick_broker
    create_topic(broker, topic_name, 2)
    tid = f"abandoned-{topic_name}"
    p = ck_producer(broker, transactional_id=tid, transaction_timeout_ms=1000)
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic_name, b"doomed-%d" % i, partition=i % 2)
    p.flush(30)
    with Raw(broker) as raw:
        before = raw.describe(tid)[tid]
        assert before.transaction_state == "Ongoing"
        assert raw.list_offset(topic_name, 0, isolation=1) == 0
        after = wait_until(
            lambda: (d := raw.describe(tid)[tid]).transaction_state == "CompleteAbort" and d,
            timeout=10,
            message="the coordinator to abort the timed-out transaction",
        )
        assert after.producer_epoch == before.producer_epoch + 1  # the late producer is fenced
        for partition in (0, 1):
            assert raw.list_offset(topic_name, partition, 1) == raw.list_offset(topic_name, partition, 0)
    assert read_ours(broker, topic_name, 2) == []
    with pytest.raises(KafkaException):
        p.commit_transaction(10)


def test_idle_transactional_ids_expire(quick_broker, topic_name):
    broker = quick_broker
    create_topic(broker, topic_name, 1)
    tid = f"idle-{topic_name}"
    p = ck_producer(broker, transactional_id=tid)
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic_name, b"kept")
    p.commit_transaction(30)
    with Raw(broker) as raw:
        first = raw.describe(tid)[tid]
        assert first.transaction_state == "CompleteCommit"
        time.sleep(1.0)
        assert raw.describe(tid)[tid].error_code == 0  # not idle long enough yet
        wait_until(
            lambda: raw.describe(tid)[tid].error_code == 105,  # TRANSACTIONAL_ID_NOT_FOUND
            timeout=10,
            message="the idle transactional id to expire",
        )
        # the id starts over: a new producer id
        again = raw.init_pid(tid)
        assert again.error_code == 0 and again.producer_id != first.producer_id
    assert read_ours(broker, topic_name, 1) == [b"kept"]
