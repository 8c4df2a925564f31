"""Malformed and hostile input: each bad request gets Kafka's error code, or its connection
is closed with the reason logged; meanwhile a well-behaved client on the same broker keeps
producing and consuming, and none of its acknowledged records is lost."""

from __future__ import annotations

import os
import random
import struct
import threading
import time

import pytest
from broker_e2e import (
    Deliveries,
    RawClient,
    assert_serving,
    consume,
    consumer,
    create_topic,
    fetch_body,
    log_mentions,
    produce_and_flush,
    produce_body,
    producer,
    record_batch,
)
from confluent_kafka import KafkaError, TopicPartition
from kio.schema.errors import ErrorCode
from support import wait_until

PRODUCE, FETCH, METADATA, API_VERSIONS = 0, 1, 3, 18


class Bystander:
    """A confluent producer and consumer that keep working on their own topic."""

    def __init__(self, broker, topic: str):
        self.topic = topic
        self.deliveries = Deliveries()
        self.consumed: list[bytes] = []
        self.consume_errors: list = []
        self._stop = threading.Event()
        self._prod = producer(broker, linger_ms=1)
        self._cons = consumer(broker, enable_partition_eof=False)
        self._cons.assign([TopicPartition(topic, 0, 0)])
        self._threads = [threading.Thread(target=self._produce), threading.Thread(target=self._consume)]
        for t in self._threads:
            t.start()

    def _produce(self):
        i = 0
        while not self._stop.is_set():
            self._prod.produce(
                self.topic, f"bystander-{i}".encode(), partition=0, on_delivery=self.deliveries
            )
            i += 1
            self._prod.poll(0.005)
        self._prod.flush(15)

    def _consume(self):
        while not self._stop.is_set():
            msg = self._cons.poll(0.05)
            if msg is None:
                continue
            if msg.error():
                self.consume_errors.append(msg.error())
            else:
                self.consumed.append(msg.value())

    def check(self, more: int = 20, timeout: float = 10.0) -> None:
        """Both halves make progress after whatever just happened, without errors."""
        acked, consumed = len(self.deliveries.acked), len(self.consumed)
        wait_until(
            lambda: len(self.deliveries.acked) >= acked + more and len(self.consumed) >= consumed + more,
            timeout=timeout,
            message="the bystander client to keep producing and consuming",
        )
        assert not self.deliveries.errors, self.deliveries.errors[:3]
        assert not self.consume_errors, self.consume_errors[:3]

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()
        self._cons.close()


@pytest.fixture(scope="module")
def bystander(broker):
    topic = f"bystander-{os.getpid()}-{time.monotonic_ns()}"
    create_topic(broker, topic, 1)
    b = Bystander(broker, topic)
    yield b
    b.close()
    # Not one acknowledged record went missing or was duplicated while the bad input flew.
    assert not b.deliveries.errors
    stored = [r.value for r in consume(broker, topic, [0])[0]]
    assert stored == [r.value for r in sorted(b.deliveries.acked, key=lambda r: r.offset)]


def assert_closed_with_logged_reason(broker, raw: RawClient, address: str) -> None:
    assert raw.closed_by_broker(timeout=10), "the broker kept the connection open"
    line = log_mentions(broker, f"closing connection from {address}:")
    assert "Traceback" not in line
    assert broker.proc.poll() is None, "the broker died"


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def header(api_key: int, version: int, correlation: int = 1, client_id: bytes = b"bad") -> bytes:
    return struct.pack(">hhih", api_key, version, correlation, len(client_id)) + client_id


BAD_FRAMES = {
    "http-request": b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
    "negative-size": struct.pack(">i", -2) + b"\x00" * 16,
    "zero-size": struct.pack(">i", 0),
    "truncated-header": frame(b"\x00\x12\x00\x03\x00"),
    "client-id-past-end": frame(struct.pack(">hhih", 18, 3, 1, 500) + b"abc"),
    "unknown-api-key": frame(header(31337, 0) + b"\x00"),
    "unsupported-version": frame(header(METADATA, 99) + b"\x00" * 8),
    "garbage-body": frame(header(PRODUCE, 9) + b"\x00" + b"\xff" * 64),
    "random-bytes": struct.pack(">i", 48) + random.Random(20261125).randbytes(48),
    "oversize-frame": struct.pack(">i", 104857600 + 1) + b"\x00" * 1024,
}


@pytest.mark.parametrize("name", list(BAD_FRAMES))
def test_bad_frame_closes_only_that_connection(broker, bystander, name):
    with RawClient(broker) as raw:
        address = raw.local_address
        raw.send_raw(BAD_FRAMES[name])
        assert_closed_with_logged_reason(broker, raw, address)
    bystander.check()


def test_api_versions_too_new_gets_unsupported_version_with_the_list(broker, bystander):
    with RawClient(broker) as raw:
        raw.send_raw(frame(header(API_VERSIONS, 99, correlation=7) + b"\x00" * 16))
        correlation, response = raw.receive(API_VERSIONS, 0)  # answered in the v0 layout
        assert correlation == 7
        assert response.error_code == ErrorCode.unsupported_version
        offered = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert offered[API_VERSIONS] == (0, 4)
        assert PRODUCE in offered and FETCH in offered and METADATA in offered
        # The client picks a version it shares with the broker, on the same connection.
        current = raw.request(
            API_VERSIONS, 3, {"client_software_name": "e2e", "client_software_version": "1"}
        )
        assert current.error_code == ErrorCode.none
        assert {k.api_key: (k.min_version, k.max_version) for k in current.api_keys} == offered
    bystander.check()


def test_corrupt_crc_gets_corrupt_message_and_appends_nothing(broker, bystander, topic_name):
    create_topic(broker, topic_name, 1)
    batch = record_batch([b"one", b"two", b"three"])
    batch[-1] ^= 0xFF  # a flipped bit in the last record: the CRC no longer matches
    with RawClient(broker) as raw:
        response = raw.request(PRODUCE, 9, produce_body(topic_name, 0, batch))
        (part,) = response.responses[0].partition_responses
        assert part.error_code == ErrorCode.corrupt_message
        # The connection stays usable; the partition is still empty.
        good = raw.request(PRODUCE, 9, produce_body(topic_name, 0, record_batch([b"good"])))
        (part,) = good.responses[0].partition_responses
        assert (part.error_code, part.base_offset) == (ErrorCode.none, 0)
    assert [r.value for r in consume(broker, topic_name, [0])[0]] == [b"good"]
    bystander.check()


def test_failed_acks_0_produce_closes_the_connection(broker, bystander, topic_name):
    """An acks=0 producer gets no response, so Kafka closes the connection to signal a failure."""
    create_topic(broker, topic_name, 1)
    batch = record_batch([b"x"])
    batch[-1] ^= 0xFF
    with RawClient(broker) as raw:
        address = raw.local_address
        raw.send(PRODUCE, 9, produce_body(topic_name, 0, batch, acks=0))
        assert_closed_with_logged_reason(broker, raw, address)
    bystander.check()


def test_record_over_max_message_bytes_is_rejected(broker, bystander, topic_name):
    create_topic(broker, topic_name, 1, {"max.message.bytes": "2000"})
    with RawClient(broker) as raw:
        response = raw.request(PRODUCE, 9, produce_body(topic_name, 0, record_batch([b"v" * 3000])))
        (part,) = response.responses[0].partition_responses
        assert part.error_code == ErrorCode.message_too_large
        response = raw.request(PRODUCE, 9, produce_body(topic_name, 0, record_batch([b"v" * 1500])))
        (part,) = response.responses[0].partition_responses
        assert part.error_code == ErrorCode.none
    bystander.check()


def test_record_over_broker_message_max_bytes_from_a_real_client(broker, bystander, topic_name):
    create_topic(broker, topic_name, 1)
    prod = producer(broker, message_max_bytes=3_000_000, linger_ms=0)
    errors = []
    prod.produce(topic_name, b"z" * 1_100_000, partition=0, on_delivery=lambda err, msg: errors.append(err))
    prod.flush(15)
    assert [e.code() for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE]
    produce_and_flush(prod, topic_name, [{"value": b"small", "partition": 0}])
    assert [r.value for r in consume(broker, topic_name, [0])[0]] == [b"small"]
    bystander.check()


def test_invalid_required_acks(broker, bystander, topic_name):
    create_topic(broker, topic_name, 1)
    with RawClient(broker) as raw:
        response = raw.request(PRODUCE, 9, produce_body(topic_name, 0, record_batch([b"x"]), acks=2))
        (part,) = response.responses[0].partition_responses
        assert part.error_code == ErrorCode.invalid_required_acks
    bystander.check()


def test_invalid_topic_names(broker, bystander):
    bad = "no spaces allowed!"
    with RawClient(broker) as raw:
        meta = raw.request(
            METADATA,
            12,
            {
                "topics": [{"name": bad, "topic_id": None}],
                "allow_auto_topic_creation": True,
                "include_topic_authorized_operations": False,
            },
        )
        assert [(t.name, t.error_code) for t in meta.topics] == [(bad, ErrorCode.invalid_topic_exception)]
        # Kafka answers a Produce to a topic it does not have (whatever its name) with
        # UNKNOWN_TOPIC_OR_PARTITION.
        response = raw.request(PRODUCE, 9, produce_body(bad, 0, record_batch([b"x"])))
        (part,) = response.responses[0].partition_responses
        assert part.error_code == ErrorCode.unknown_topic_or_partition
    bystander.check()


def test_unknown_topics_and_partitions(broker, bystander, topic_name):
    create_topic(broker, topic_name, 2)
    missing = topic_name + "-missing"
    with RawClient(broker) as raw:
        for topic, partition in [(topic_name, 2), (topic_name, 99), (missing, 0)]:
            response = raw.request(PRODUCE, 9, produce_body(topic, partition, record_batch([b"x"])))
            (part,) = response.responses[0].partition_responses
            assert part.error_code == ErrorCode.unknown_topic_or_partition, (topic, partition)

            response = raw.request(FETCH, 12, fetch_body(topic, partition, 0))
            (part,) = response.responses[0].partitions
            assert part.error_code == ErrorCode.unknown_topic_or_partition, (topic, partition)
        # Produce does not auto-create topics.
        meta = raw.request(
            METADATA,
            12,
            {
                "topics": [{"name": missing, "topic_id": None}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        assert [(t.name, t.error_code) for t in meta.topics] == [
            (missing, ErrorCode.unknown_topic_or_partition)
        ]
    bystander.check()


def test_fetch_at_negative_or_future_offset_is_out_of_range(broker, bystander, topic_name):
    create_topic(broker, topic_name, 1)
    produce_and_flush(producer(broker), topic_name, [{"value": b"x", "partition": 0}])
    with RawClient(broker) as raw:
        for offset in (-5, 2, 1_000_000):
            response = raw.request(FETCH, 12, fetch_body(topic_name, 0, offset))
            (part,) = response.responses[0].partitions
            assert part.error_code == ErrorCode.offset_out_of_range, offset
        # Fetching at the end is not an error: it is simply empty.
        response = raw.request(FETCH, 12, fetch_body(topic_name, 0, 1))
        (part,) = response.responses[0].partitions
        assert part.error_code == ErrorCode.none and not part.records
    bystander.check()


def test_many_bad_connections_at_once(broker, bystander):
    raws = [RawClient(broker) for _ in range(60)]
    payloads = list(BAD_FRAMES.values())
    try:
        for i, raw in enumerate(raws):
            raw.send_raw(payloads[i % len(payloads)])
        for raw in raws:
            assert raw.closed_by_broker(timeout=10)
    finally:
        for raw in raws:
            raw.close()
    bystander.check()
    assert broker.proc.poll() is None


def test_oversize_request_at_configured_socket_request_max_bytes(own_broker, topic_name):
    b = own_broker(**{"socket.request.max.bytes": 4096})
    with RawClient(b) as raw:
        body = produce_body(topic_name, 0, record_batch([b"x" * 3000]))
        ok = raw.request(API_VERSIONS, 3, {"client_software_name": "e2e", "client_software_version": "1"})
        assert ok.error_code == ErrorCode.none
        address = raw.local_address
        body = produce_body(topic_name, 0, record_batch([b"x" * 5000]))
        raw.send(PRODUCE, 9, body)
        assert raw.closed_by_broker(timeout=10)
    line = log_mentions(b, f"closing connection from {address}:")
    assert "socket.request.max.bytes" in line
    assert_serving(b, topic_name)
