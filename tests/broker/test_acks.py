"""acks=0, 1 and all: what each stores and answers, and min.insync.replicas above the ISR."""

from __future__ import annotations

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
from support import wait_until

PRODUCE = 0


def test_acks_zero_and_one_records_are_stored(broker, topic_name):
    create_topic(broker, topic_name, 1)
    for acks in (0, 1):
        prod = producer(broker, acks=acks)
        produce_and_flush(
            prod, topic_name, [{"value": f"acks{acks}-{i}".encode(), "partition": 0} for i in range(50)]
        )
    expected = [f"acks{a}-{i}".encode() for a in (0, 1) for i in range(50)]

    # acks=0 gets no response, so poll until the broker has the records.
    def all_there():
        return [r.value for r in consume(broker, topic_name, [0])[0]] == expected

    wait_until(all_there, timeout=15, message="acks=0 and acks=1 records to be readable")


def test_acks_zero_gets_no_response_but_later_requests_do(broker, topic_name):
    create_topic(broker, topic_name, 1)
    with RawClient(broker) as raw:
        raw.send(PRODUCE, 9, produce_body(topic_name, 0, record_batch([b"silent"]), acks=0))
        correlation = raw.send(PRODUCE, 9, produce_body(topic_name, 0, record_batch([b"loud"]), acks=1))
        got, response = raw.receive(PRODUCE, 9)
        assert got == correlation  # the acks=0 request has no answer in between
        (part,) = response.responses[0].partition_responses
        assert (part.error_code, part.base_offset) == (ErrorCode.none, 1)


def test_min_insync_replicas_above_the_isr_refuses_acks_all(broker, topic_name):
    create_topic(broker, topic_name, 1, {"min.insync.replicas": "2"})
    with RawClient(broker) as raw:
        response = raw.request(PRODUCE, 9, produce_body(topic_name, 0, record_batch([b"all"]), acks=-1))
        (part,) = response.responses[0].partition_responses
        assert part.error_code == ErrorCode.not_enough_replicas
        # acks=1 does not wait for the ISR and is accepted.
        response = raw.request(PRODUCE, 9, produce_body(topic_name, 0, record_batch([b"one"]), acks=1))
        (part,) = response.responses[0].partition_responses
        assert (part.error_code, part.base_offset) == (ErrorCode.none, 0)
    assert [r.value for r in consume(broker, topic_name, [0])[0]] == [b"one"]
