"""Many connections at once, in-order answers per connection, stalled clients that cannot
block others, connections.max.idle.ms and max.connections."""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time

import pytest
from broker_e2e import (
    RawClient,
    assert_serving,
    consumer,
    create_topic,
    fetch_body,
    log_mentions,
    produce_and_flush,
    producer,
)
from confluent_kafka import TopicPartition
from kio.schema.errors import ErrorCode
from support import wait_until

from odradek.protocol.messages import build_request, encode_request

FETCH, METADATA, API_VERSIONS = 1, 3, 18
API_VERSIONS_BODY = {"client_software_name": "e2e", "client_software_version": "1"}


def open_idle(broker, n: int) -> list[RawClient]:
    """n connections that each completed an ApiVersions exchange and then went quiet."""
    raws = []
    try:
        for _ in range(n):
            raws.append(RawClient(broker, timeout=30))
        for raw in raws:
            raw.send(API_VERSIONS, 3, API_VERSIONS_BODY)
        for raw in raws:
            _, response = raw.receive(API_VERSIONS, 3)
            assert response.error_code == ErrorCode.none
    except BaseException:
        for raw in raws:
            raw.close()
        raise
    return raws


def test_thousand_idle_connections_while_busy_clients_work(broker, topic_name):
    partitions, producers, per_producer, consumers = 6, 24, 600, 12
    create_topic(broker, topic_name, partitions)
    idle = open_idle(broker, 1000)
    try:
        errors: list = []
        seen: dict[int, list] = {}

        def produce(n: int):
            try:
                items = [
                    {"partition": i % partitions, "value": f"p{n}-{i}".encode() + b"." * 150}
                    for i in range(per_producer)
                ]
                produce_and_flush(producer(broker, linger_ms=2), topic_name, items, timeout=90)
            except Exception as exc:  # surfaced below
                errors.append(exc)

        def consume(n: int):
            partition = n % partitions
            want = producers * per_producer // partitions
            cons = consumer(broker, enable_partition_eof=False)
            try:
                cons.assign([TopicPartition(topic_name, partition, 0)])
                got = []
                deadline = time.monotonic() + 60
                while len(got) < want and time.monotonic() < deadline:
                    for msg in cons.consume(500, 0.2):
                        if msg.error():
                            errors.append(msg.error())
                        else:
                            got.append(msg.value())
                seen[n] = got
            finally:
                cons.close()

        threads = [threading.Thread(target=produce, args=(n,)) for n in range(producers)]
        threads += [threading.Thread(target=consume, args=(n,)) for n in range(consumers)]
        start = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        elapsed = time.monotonic() - start
        assert not errors, errors[:3]
        assert elapsed < 60, f"busy clients took {elapsed:.1f}s next to 1000 idle connections"
        for n, got in seen.items():
            p = n % partitions
            expected = {
                f"p{k}-{i}".encode() + b"." * 150
                for k in range(producers)
                for i in range(p, per_producer, partitions)
            }
            assert len(got) == len(expected) and set(got) == expected, f"consumer {n} of partition {p}"

        # Every idle connection is still open and answers.
        for raw in idle:
            raw.send(API_VERSIONS, 3, API_VERSIONS_BODY)
        for raw in idle:
            _, response = raw.receive(API_VERSIONS, 3)
            assert response.error_code == ErrorCode.none
    finally:
        for raw in idle:
            raw.close()


def test_stalled_readers_and_half_sent_requests_do_not_block_others(broker, topic_name):
    create_topic(broker, topic_name, 1)
    chunk = b"s" * 100_000
    produce_and_flush(
        producer(broker, linger_ms=0), topic_name, [{"value": chunk, "partition": 0} for _ in range(40)]
    )

    stalled = []
    try:
        for _ in range(4):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect((broker.host, broker.port))
            # Ask for megabytes, many times over, and never read a byte of the answers.
            for correlation in range(1, 40):
                request = build_request(FETCH, 12, fetch_body(topic_name, 0, 0, max_bytes=8 << 20))
                s.sendall(encode_request(FETCH, 12, correlation, "stalled", request))
            stalled.append(s)
        half = socket.create_connection((broker.host, broker.port))
        half.sendall(b"\x00\x00\x10\x00\x00\x12")  # 4 KiB announced, 2 bytes sent
        stalled.append(half)

        start = time.monotonic()
        for _ in range(5):
            assert_serving(broker, topic_name)
        with RawClient(broker) as raw:
            assert raw.request(API_VERSIONS, 3, API_VERSIONS_BODY).error_code == ErrorCode.none
        elapsed = time.monotonic() - start
        assert elapsed < 15, f"other clients took {elapsed:.1f}s while readers stalled"
    finally:
        for s in stalled:
            s.close()


def test_pipelined_requests_are_answered_in_order(broker, topic_name):
    create_topic(broker, topic_name, 1)
    meta_body = {
        "topics": None,
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    plan = []
    with RawClient(broker) as raw:
        # A Fetch parked at the log end, then quick requests queued behind it.
        parked = dict(fetch_body(topic_name, 0, 0), max_wait=5000)
        plan.append((FETCH, 12, raw.send(FETCH, 12, parked)))
        for i in range(20):
            if i % 3 == 0:
                plan.append((METADATA, 12, raw.send(METADATA, 12, meta_body)))
            elif i % 3 == 1:
                plan.append((API_VERSIONS, 3, raw.send(API_VERSIONS, 3, API_VERSIONS_BODY)))
            else:
                plan.append((FETCH, 12, raw.send(FETCH, 12, fetch_body(topic_name, 0, 0))))

        start = time.monotonic()
        produce_and_flush(producer(broker, linger_ms=0), topic_name, [{"value": b"wake", "partition": 0}])
        answers = [raw.receive(api, version) for api, version, _ in plan]
        waited = time.monotonic() - start
    assert [correlation for correlation, _ in answers] == [c for _, _, c in plan]
    # The parked Fetch woke on the append, long before its 5 s max_wait.
    assert waited < 3, waited
    (part,) = answers[0][1].responses[0].partitions
    assert part.error_code == ErrorCode.none and part.high_watermark == 1 and part.records


def test_fetch_max_wait_zero_returns_at_once(broker, topic_name):
    create_topic(broker, topic_name, 1)
    with RawClient(broker) as raw:
        start = time.monotonic()
        for _ in range(20):
            response = raw.request(FETCH, 12, dict(fetch_body(topic_name, 0, 0), max_wait=0))
            assert response.responses[0].partitions[0].error_code == ErrorCode.none
        assert time.monotonic() - start < 2


def test_idle_connections_are_closed_after_connections_max_idle_ms(own_broker, topic_name):
    b = own_broker(**{"connections.max.idle.ms": 600})
    prod = producer(b, linger_ms=0)
    produce_and_flush(prod, topic_name, [{"value": b"before", "partition": 0}])
    idle = open_idle(b, 1)[0]
    busy = open_idle(b, 1)[0]
    address = idle.local_address
    try:
        start = time.monotonic()
        closed = threading.Event()

        def watch():
            if idle.closed_by_broker(timeout=10):
                closed.set()

        watcher = threading.Thread(target=watch)
        watcher.start()
        # The busy connection keeps talking and stays open while the idle one is closed.
        while not closed.is_set() and time.monotonic() - start < 10:
            assert busy.request(API_VERSIONS, 3, API_VERSIONS_BODY).error_code == ErrorCode.none
            time.sleep(0.1)
        watcher.join()
        assert closed.is_set(), "the idle connection was not closed"
        assert time.monotonic() - start >= 0.3, "closed before connections.max.idle.ms passed"
        assert busy.request(API_VERSIONS, 3, API_VERSIONS_BODY).error_code == ErrorCode.none
        assert "connections.max.idle.ms" in log_mentions(b, f"closing connection from {address}:")
    finally:
        idle.close()
        busy.close()
    # A real client whose connection was reaped reconnects and carries on.
    produce_and_flush(prod, topic_name, [{"value": b"after", "partition": 0}])


def test_max_connections_refuses_the_extra_connection(own_broker):
    b = own_broker(**{"max.connections": 5})
    raws = open_idle(b, 5)
    try:
        with RawClient(b) as extra:
            assert extra.closed_by_broker(timeout=10)
        assert "max.connections" in log_mentions(b, "max.connections")
        raws.pop().close()

        def one_more():
            with RawClient(b) as raw:
                raw.send(API_VERSIONS, 3, API_VERSIONS_BODY)
                return raw.read_frame() is not None

        wait_until(one_more, timeout=10, message="a connection to be accepted once one is closed")
    finally:
        for raw in raws:
            raw.close()


def test_the_listen_backlog_is_socket_listen_backlog_size(own_broker, topic_name):
    if shutil.which("ss") is None:
        pytest.skip("needs ss (iproute2) to read a listening socket's backlog")
    broker = own_broker(**{"socket.listen.backlog.size": "123"})
    out = subprocess.run(
        ["ss", "-ltnH", f"sport = :{broker.port}"], capture_output=True, text=True, check=True
    ).stdout.split()
    # State, Recv-Q, Send-Q (for a listening socket: its backlog), local address, peer.
    assert out[0] == "LISTEN" and out[2] == "123", out
    create_topic(broker, topic_name, 1)
    assert_serving(broker, topic_name)
