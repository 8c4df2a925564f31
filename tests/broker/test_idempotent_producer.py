"""Idempotent produce: real idempotent producers write each record once, and the broker's
sequence checks answer a resent batch with its original offset, reject gaps and stale
epochs, and remember producers across a restart."""

from __future__ import annotations

import pytest
from broker_e2e import (
    RawClient,
    consume,
    create_topic,
    produce_and_flush,
    produce_body,
    producer,
    record_batch,
)
from kio.schema.errors import ErrorCode

PRODUCE, LIST_OFFSETS, INIT_PRODUCER_ID = 0, 2, 22


def init_producer_id(raw: RawClient, producer_id: int = -1, epoch: int = -1) -> tuple[int, int]:
    response = raw.request(
        INIT_PRODUCER_ID,
        4,
        {
            "transactional_id": None,
            "transaction_timeout": 60000,
            "producer_id": producer_id,
            "producer_epoch": epoch,
        },
    )
    assert response.error_code == ErrorCode.none
    return response.producer_id, response.producer_epoch


def send(raw: RawClient, topic: str, values, pid: int, epoch: int, seq: int):
    batch = record_batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    response = raw.request(PRODUCE, 9, produce_body(topic, 0, batch))
    (part,) = response.responses[0].partition_responses
    return part.error_code, part.base_offset


def log_end(raw: RawClient, topic: str) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    }
    return raw.request(LIST_OFFSETS, 7, body).topics[0].partitions[0].offset


def test_confluent_idempotent_producer_writes_each_record_once(broker, topic_name):
    create_topic(broker, topic_name, 6)
    prod = producer(broker, enable_idempotence=True, linger_ms=1, max_in_flight=5)
    items = [{"value": f"i{i}".encode(), "partition": i % 6} for i in range(6000)]
    deliveries = produce_and_flush(prod, topic_name, items)
    assert len(deliveries.acked) == 6000
    got = consume(broker, topic_name, range(6))
    for p in range(6):
        assert [r.value for r in got[p]] == [f"i{i}".encode() for i in range(p, 6000, 6)]


def test_resent_batch_gets_its_original_offset_and_is_stored_once(broker, topic_name):
    create_topic(broker, topic_name, 1)
    with RawClient(broker) as raw:
        pid, epoch = init_producer_id(raw)
        assert pid >= 0 and epoch == 0
        assert send(raw, topic_name, [b"a", b"b", b"c"], pid, epoch, 0) == (ErrorCode.none, 0)
        assert send(raw, topic_name, [b"d"], pid, epoch, 3) == (ErrorCode.none, 3)
        # The same batches again (a retry after a lost response): same offsets, nothing added.
        assert send(raw, topic_name, [b"a", b"b", b"c"], pid, epoch, 0) == (ErrorCode.none, 0)
        assert send(raw, topic_name, [b"d"], pid, epoch, 3) == (ErrorCode.none, 3)
        assert log_end(raw, topic_name) == 4
    assert [r.value for r in consume(broker, topic_name, [0])[0]] == [b"a", b"b", b"c", b"d"]


def test_sequence_gap_is_out_of_order(broker, topic_name):
    create_topic(broker, topic_name, 1)
    with RawClient(broker) as raw:
        pid, epoch = init_producer_id(raw)
        assert send(raw, topic_name, [b"a"], pid, epoch, 0) == (ErrorCode.none, 0)
        error, _ = send(raw, topic_name, [b"skip"], pid, epoch, 5)
        assert error == ErrorCode.out_of_order_sequence_number
        assert send(raw, topic_name, [b"b"], pid, epoch, 1) == (ErrorCode.none, 1)
        assert log_end(raw, topic_name) == 2


def test_bumped_epoch_fences_the_old_one(broker, topic_name):
    create_topic(broker, topic_name, 1)
    with RawClient(broker) as raw:
        pid, epoch = init_producer_id(raw)
        assert send(raw, topic_name, [b"old"], pid, epoch, 0) == (ErrorCode.none, 0)
        same_pid, new_epoch = init_producer_id(raw, pid, epoch)
        assert (same_pid, new_epoch) == (pid, epoch + 1)
        # The new epoch starts its sequences again at 0; the old epoch is now stale.
        assert send(raw, topic_name, [b"new"], pid, new_epoch, 0) == (ErrorCode.none, 1)
        error, _ = send(raw, topic_name, [b"zombie"], pid, epoch, 1)
        assert error == ErrorCode.invalid_producer_epoch
        assert log_end(raw, topic_name) == 2


@pytest.mark.parametrize("clean", [True, False], ids=["sigterm", "kill-9"])
def test_producer_state_survives_restart(own_broker, topic_name, clean):
    b = own_broker()
    create_topic(b, topic_name, 1)
    with RawClient(b) as raw:
        pid, epoch = init_producer_id(raw)
        for seq in range(0, 10, 2):
            assert send(raw, topic_name, [b"x", b"y"], pid, epoch, seq) == (ErrorCode.none, seq)
    b.restart(clean=clean)
    with RawClient(b) as raw:
        # A retry of the last batch is still recognised, and the next sequence continues.
        assert send(raw, topic_name, [b"x", b"y"], pid, epoch, 8) == (ErrorCode.none, 8)
        assert send(raw, topic_name, [b"z"], pid, epoch, 10) == (ErrorCode.none, 10)
        error, _ = send(raw, topic_name, [b"gap"], pid, epoch, 20)
        assert error == ErrorCode.out_of_order_sequence_number
        assert log_end(raw, topic_name) == 11
        # A fresh producer id is not one handed out before the restart.
        new_pid, _ = init_producer_id(raw)
        assert new_pid != pid
