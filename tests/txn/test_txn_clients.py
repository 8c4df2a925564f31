"""Transactions with real clients on one broker: confluent-kafka, aiokafka and Odradek's own
producers commit and abort; read_committed consumers (confluent-kafka, kafka-python, ours)
see every committed record once and no aborted one; offsets sent to a transaction move only
when it commits; a zombie producer is fenced."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from confluent_kafka import KafkaException
from txn_support import READERS, Raw, ck_producer, create_topic, plain_produce, read_ours

import odradek
import odradek.aio
from odradek.client import client_errors
from odradek.client.producer.transactions import ProducerFencedError
from odradek.client.structs import TopicPartition

PARTS = 3


def values(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(n)]


def assert_exactly(got: list[bytes], expected: list[bytes]) -> None:
    counts = Counter(got)
    assert not [v for v, n in counts.items() if n > 1], "a record was delivered twice"
    assert sorted(got) == sorted(expected)


def confluent_transactions(broker, topic: str, tid: str) -> list[bytes]:
    """commit, abort, commit with confluent-kafka, plain records in between; returns what must be seen."""
    p = ck_producer(broker, transactional_id=tid)
    p.init_transactions(30)
    p.begin_transaction()
    for i, v in enumerate(values("c1", 30)):
        p.produce(topic, v, partition=i % PARTS)
    p.commit_transaction(30)
    p.begin_transaction()
    for i, v in enumerate(values("a1", 30)):
        p.produce(topic, v, partition=i % PARTS)
    p.flush(30)  # the aborted records are in the log, not just in the producer
    p.abort_transaction(30)
    plain_produce(broker, topic, values("plain", 6), PARTS)
    p.begin_transaction()
    for i, v in enumerate(values("c2", 30)):
        p.produce(topic, v, partition=i % PARTS)
    p.commit_transaction(30)
    return values("c1", 30) + values("plain", 6) + values("c2", 30)


@pytest.fixture(scope="module")
def committed_topic(broker):
    topic = "txn-clients-ck"
    create_topic(broker, topic, PARTS)
    return topic, confluent_transactions(broker, topic, "txn-clients-ck")


@pytest.mark.parametrize("reader", sorted(READERS))
def test_read_committed_consumers_see_committed_records_once_and_no_aborted_one(
    broker, committed_topic, reader
):
    topic, expected = committed_topic
    assert_exactly(READERS[reader](broker, topic, PARTS), expected)


def test_read_uncommitted_sees_the_aborted_records_too(broker, committed_topic):
    topic, expected = committed_topic
    got = read_ours(broker, topic, PARTS, "read_uncommitted")
    assert sorted(got) == sorted(expected + values("a1", 30))


def test_aiokafka_transactional_producer_commits_and_aborts(broker, topic_name):
    from aiokafka import AIOKafkaProducer

    create_topic(broker, topic_name, PARTS)

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=f"aio-{topic_name}")
        await p.start()
        try:
            async with p.transaction():
                for i, v in enumerate(values("c", 20)):
                    await p.send(topic_name, v, partition=i % PARTS)
            with pytest.raises(RuntimeError):
                async with p.transaction():
                    for i, v in enumerate(values("a", 20)):
                        await p.send_and_wait(topic_name, v, partition=i % PARTS)
                    raise RuntimeError("abort this one")
            async with p.transaction():
                await p.send(topic_name, b"last", partition=0)
        finally:
            await p.stop()

    asyncio.run(run())
    assert_exactly(READERS["confluent-kafka"](broker, topic_name, PARTS), values("c", 20) + [b"last"])
    assert_exactly(read_ours(broker, topic_name, PARTS), values("c", 20) + [b"last"])


def test_our_producer_commits_and_aborts(broker, topic_name):
    create_topic(broker, topic_name, PARTS)
    with odradek.Producer(
        bootstrap_servers=broker.bootstrap_servers, transactional_id=f"ours-{topic_name}"
    ) as p:
        p.init_transactions(30)
        p.begin_transaction()
        for i, v in enumerate(values("c", 25)):
            p.send(topic_name, v, partition=i % PARTS)
        p.commit_transaction(30)
        p.begin_transaction()
        for i, v in enumerate(values("a", 25)):
            p.send(topic_name, v, partition=i % PARTS)
        p.flush(30)
        p.abort_transaction(30)
        with pytest.raises(client_errors.IllegalStateError):
            p.send(topic_name, b"outside a transaction")
        p.begin_transaction()
        p.abort_transaction(30)  # nothing sent: nothing to tell the coordinator
        p.begin_transaction()
        p.send(topic_name, b"last", partition=1)
        p.commit_transaction(30)
    for reader in ("confluent-kafka", "kafka-python"):
        assert_exactly(READERS[reader](broker, topic_name, PARTS), values("c", 25) + [b"last"])


def test_our_asyncio_producer_commits_and_aborts(broker, topic_name):
    create_topic(broker, topic_name, 1)

    async def run():
        async with odradek.aio.Producer(
            bootstrap_servers=broker.bootstrap_servers, transactional_id=f"aio-ours-{topic_name}"
        ) as p:
            await p.init_transactions()
            for n in range(3):
                p.begin_transaction()
                for v in values(f"t{n}", 10):
                    await p.send(topic_name, v)
                if n == 1:
                    await p.abort_transaction()
                else:
                    await p.commit_transaction()

    asyncio.run(run())
    assert_exactly(read_ours(broker, topic_name, 1), values("t0", 10) + values("t2", 10))


def test_open_transaction_holds_back_the_last_stable_offset(broker, topic_name):
    create_topic(broker, topic_name, 1)
    plain_produce(broker, topic_name, values("before", 3))
    p = ck_producer(broker, transactional_id=f"lso-{topic_name}")
    p.init_transactions(30)
    p.begin_transaction()
    for v in values("open", 4):
        p.produce(topic_name, v)
    p.flush(30)
    plain_produce(broker, topic_name, values("after", 2))  # non-transactional, but above the LSO
    with Raw(broker) as raw:
        assert raw.list_offset(topic_name, 0, isolation=0) == 9  # the high watermark
        assert raw.list_offset(topic_name, 0, isolation=1) == 3  # the open transaction's first offset
        assert sorted(read_ours(broker, topic_name, 1)) == sorted(values("before", 3))
        p.commit_transaction(30)
        assert raw.list_offset(topic_name, 0, isolation=1) == 10  # past the COMMIT marker
    assert sorted(read_ours(broker, topic_name, 1)) == sorted(
        values("before", 3) + values("open", 4) + values("after", 2)
    )


def test_zombie_producer_is_fenced(broker, topic_name):
    create_topic(broker, topic_name, 1)
    tid = f"zombie-{topic_name}"
    zombie = ck_producer(broker, transactional_id=tid)
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic_name, b"zombie-1")
    zombie.flush(30)
    with Raw(broker) as raw:
        old = raw.describe(tid)[tid]
        assert old.transaction_state == "Ongoing"
        # a new instance of the same application takes over: the open transaction is aborted
        successor = odradek.Producer(bootstrap_servers=broker.bootstrap_servers, transactional_id=tid)
        successor.init_transactions(30)
        new = raw.describe(tid)[tid]
        assert new.producer_id == old.producer_id and new.producer_epoch >= old.producer_epoch + 2
        assert new.transaction_state == "Empty"
        # the zombie can neither write nor commit any more
        zombie.produce(topic_name, b"zombie-2")
        with pytest.raises(KafkaException) as failed:
            zombie.commit_transaction(10)
        assert failed.value.args[0].fatal() or not failed.value.args[0].retriable()
        # and hand-made requests with the old epoch are refused, with each version's error code
        assert raw.end_txn(tid, old.producer_id, old.producer_epoch, True, version=3) == 90  # PRODUCER_FENCED
        assert (
            raw.end_txn(tid, old.producer_id, old.producer_epoch, True, version=1) == 47
        )  # INVALID_PRODUCER_EPOCH
    successor.begin_transaction()
    successor.send(topic_name, b"successor")
    successor.commit_transaction(30)
    successor.close()
    assert read_ours(broker, topic_name, 1) == [b"successor"]


def test_our_producer_is_fenced_by_a_successor(broker, topic_name):
    create_topic(broker, topic_name, 1)
    tid = f"fenced-ours-{topic_name}"
    first = odradek.Producer(bootstrap_servers=broker.bootstrap_servers, transactional_id=tid)
    first.init_transactions(30)
    first.begin_transaction()
    first.send(topic_name, b"from-the-first").result(30)
    second = odradek.Producer(bootstrap_servers=broker.bootstrap_servers, transactional_id=tid)
    second.init_transactions(30)
    with pytest.raises(client_errors.KafkaError) as refused:
        first.send(topic_name, b"late").result(30)
    assert refused.value.code == 47  # INVALID_PRODUCER_EPOCH: the partition refused the old epoch
    with pytest.raises(ProducerFencedError):
        first.commit_transaction(30)
    with pytest.raises(ProducerFencedError):
        first.begin_transaction()
    first.close()
    second.close()
    assert read_ours(broker, topic_name, 1) == []


def test_offsets_sent_to_a_transaction_move_only_when_it_commits(broker, topic_name):
    source = topic_name + "-in"
    create_topic(broker, source, 1)
    create_topic(broker, topic_name, 1)
    plain_produce(broker, source, values("in", 10))
    group = f"g-{topic_name}"
    tp = TopicPartition(source, 0)
    with (
        odradek.Consumer(
            bootstrap_servers=broker.bootstrap_servers, group_id=group, enable_auto_commit=False
        ) as consumer,
        odradek.Producer(
            bootstrap_servers=broker.bootstrap_servers, transactional_id=f"offsets-{topic_name}"
        ) as p,
        Raw(broker) as raw,
    ):
        consumer.assign([tp])
        consumer.commit({tp: 2})
        p.init_transactions(30)
        p.begin_transaction()
        p.send(topic_name, b"out")
        p.send_offsets_to_transaction({tp: 7}, consumer)
        # while undecided: the old offset for plain readers, UNSTABLE_OFFSET_COMMIT for stable ones
        assert raw.offset_fetch(group, source, [0], require_stable=False) == {0: (2, 0)}
        assert raw.offset_fetch(group, source, [0], require_stable=True)[0][1] == 88
        p.abort_transaction(30)
        assert consumer.committed([tp])[tp].offset == 2
        p.begin_transaction()
        p.send(topic_name, b"out")
        p.send_offsets_to_transaction({tp: 9}, group)
        p.commit_transaction(30)
        assert consumer.committed([tp])[tp].offset == 9
        assert raw.offset_fetch(group, source, [0], require_stable=True) == {0: (9, 0)}


def test_confluent_send_offsets_to_transaction_with_a_group_member(broker, topic_name):
    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka import TopicPartition as CKTP

    source = topic_name + "-in"
    create_topic(broker, source, 1)
    create_topic(broker, topic_name, 1)
    plain_produce(broker, source, values("in", 5))
    group = f"ckg-{topic_name}"
    c = CKConsumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "session.timeout.ms": 6000,
        }
    )
    c.subscribe([source])
    got = []
    while len(got) < 5:
        m = c.poll(1)
        if m is not None and not m.error():
            got.append(m)
    p = ck_producer(broker, transactional_id=f"ck-offsets-{topic_name}")
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic_name, b"derived")
    p.send_offsets_to_transaction([CKTP(source, 0, 5)], c.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    assert c.committed([CKTP(source, 0)], 10)[0].offset == 5
    c.close()


def test_describe_and_list_transactions(broker, topic_name):
    create_topic(broker, topic_name, 2)
    tid = f"describe-{topic_name}"
    p = ck_producer(broker, transactional_id=tid, transaction_timeout_ms=45000)
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic_name, b"x", partition=1)
    p.flush(30)
    with Raw(broker) as raw:
        d = raw.describe(tid, "no-such-id")
        assert d[tid].error_code == 0 and d[tid].transaction_state == "Ongoing"
        assert d[tid].timeout_ms == 45000 and d[tid].start_ms > 0
        assert d[tid].topics == [(topic_name, [1])]
        assert d["no-such-id"].error_code == 105  # TRANSACTIONAL_ID_NOT_FOUND
        listed = raw.list_txns(states=["Ongoing", "Bogus"], pattern=f"describe-{topic_name}")
        assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [
            (tid, "Ongoing")
        ]
        assert list(listed.unknown_state_filters) == ["Bogus"]
        p.commit_transaction(30)
        listed = raw.list_txns(pattern=f"describe-{topic_name}")
        assert [t.transaction_state for t in listed.transaction_states] == ["CompleteCommit"]


def test_coordinator_answers_protocol_errors(broker, topic_name):
    create_topic(broker, topic_name, 1)
    tid = f"errors-{topic_name}"
    with Raw(broker) as raw:
        assert raw.find_txn_coordinator(tid).error_code == 0
        assert raw.init_pid(tid, timeout_ms=900001).error_code == 50  # INVALID_TRANSACTION_TIMEOUT
        r = raw.init_pid(tid)
        assert r.error_code == 0
        pid, epoch = r.producer_id, r.producer_epoch
        assert raw.end_txn(tid, pid, epoch, True) == 48  # INVALID_TXN_STATE: nothing to commit
        assert raw.end_txn(tid, pid + 1, epoch, True) == 49  # INVALID_PRODUCER_ID_MAPPING
        codes = raw.add_partitions(tid, pid, epoch, topic_name, [0, 7])
        assert codes == {(topic_name, 0): 55, (topic_name, 7): 3}  # OPERATION_NOT_ATTEMPTED, UNKNOWN_TOPIC
        assert raw.add_partitions(tid, pid, epoch, topic_name, [0]) == {(topic_name, 0): 0}
        assert raw.add_partitions(tid, pid, epoch + 1, topic_name, [0]) == {(topic_name, 0): 90}
        assert raw.add_partitions(tid, pid, epoch + 1, topic_name, [0], version=1) == {(topic_name, 0): 47}
        assert raw.end_txn(tid, pid, epoch, False) == 0
        assert raw.end_txn(tid, pid, epoch, False) == 0  # a retry of a completed abort
        assert raw.end_txn(tid, pid, epoch, True) == 48
        # KIP-360: the current producer bumps its own epoch; an older epoch is fenced
        bumped = raw.init_pid(tid, pid=pid, epoch=epoch)
        assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (0, pid, epoch + 1)
        retry = raw.init_pid(tid, pid=pid, epoch=epoch)  # the same request again: a retry
        assert (retry.error_code, retry.producer_epoch) == (0, epoch + 1)
        assert raw.init_pid(tid, pid=pid, epoch=epoch - 5).error_code == 90
        assert raw.init_pid(tid, pid=pid, epoch=epoch - 5, version=3).error_code == 47
        assert raw.init_pid("").error_code == 42  # INVALID_REQUEST


def test_closing_our_producer_mid_transaction_aborts_it(broker, topic_name):
    create_topic(broker, topic_name, 2)
    tid = f"close-{topic_name}"
    p = odradek.Producer(bootstrap_servers=broker.bootstrap_servers, transactional_id=tid)
    p.init_transactions(30)
    p.begin_transaction()
    p.send(topic_name, b"sent", partition=0).result(30)
    p.send(topic_name, b"queued", partition=1)
    p.close(10)
    with Raw(broker) as raw:
        assert raw.describe(tid)[tid].transaction_state == "CompleteAbort"
        for partition in (0, 1):
            assert raw.list_offset(topic_name, partition, 1) == raw.list_offset(topic_name, partition, 0)
    assert read_ours(broker, topic_name, 2) == []
